"""The one error type nsyswrap raises for bad input."""
from __future__ import annotations

import sys
from pathlib import Path


class NsysWrapError(Exception):
    """A problem with the user's input: names the file, what is wrong and what to do."""

    def __init__(self, where: str | Path | None, problem: str, fix: str):
        self.where, self.problem, self.fix = where, problem, fix
        prefix = f"{where}: " if where is not None else ""
        # A file name with bytes that are not UTF-8 is shown escaped, never fails to print.
        message = f"{prefix}{problem}; {fix}".encode("utf-8", "backslashreplace").decode("utf-8")
        super().__init__(message)

    def __reduce__(self):  # to cross from a worker process intact
        return type(self), (self.where, self.problem, self.fix)


def note(text: str) -> None:
    """One line on stderr about something nsyswrap repaired or worked around (not an error)."""
    print(f"nsyswrap: note: {text}", file=sys.stderr)
