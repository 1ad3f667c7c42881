"""The one error type nsyswrap raises for bad input."""
from __future__ import annotations

import sys
from pathlib import Path


class NsysWrapError(Exception):
    """A problem with the user's input: names the file, what is wrong and what to do."""

    def __init__(self, where: str | Path | None, problem: str, fix: str):
        self.where, self.problem, self.fix = where, problem, fix
        prefix = f"{where}: " if where is not None else ""
        super().__init__(f"{prefix}{problem}; {fix}")

    def __reduce__(self):  # to cross from a worker process intact
        return type(self), (self.where, self.problem, self.fix)


def note(text: str) -> None:
    """One line on stderr about something nsyswrap repaired or worked around (not an error)."""
    print(f"nsyswrap: note: {text}", file=sys.stderr)
