"""The one error type nsyswrap raises for bad input, and the machine's limits said as one."""

from __future__ import annotations

import errno
import os
import re
import sys
from pathlib import Path

# C0 controls, DEL and C1 controls (a terminal acts on ESC sequences, BEL, CSI 0x9b, ...)
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def printable(text: str) -> str:
    """`text` safe to print on a terminal: every control character (ESC, BEL, newline, ...)
    shown escaped (`\\x1b`, `\\n`), so a crafted name can neither drive the terminal nor
    split a line; bytes that are not UTF-8 (surrogates) shown as `\\xff` (`shown`)."""
    return shown(_CONTROL.sub(lambda m: _NAMED.get(m.group(), f"\\x{ord(m.group()):02x}"), text))


def shown(path: str | Path) -> str:
    """A path as text every encoder takes: the bytes of a name that are not UTF-8 (read
    by Python as surrogates) shown as `\\xNN`; any other path unchanged."""
    try:
        return os.fsencode(path).decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate no file name holds (e.g. from JSON)
        return str(path).encode("utf-8", "backslashreplace").decode("utf-8")


class NsysWrapError(Exception):
    """A problem with the user's input: names the file, what is wrong and what to do."""

    def __init__(self, where: str | Path | None, problem: str, fix: str):
        self.where, self.problem, self.fix = where, problem, fix
        prefix = f"{where}: " if where is not None else ""
        super().__init__(printable(f"{prefix}{problem}; {fix}"))  # always one printable line

    def __reduce__(self):  # to cross from a worker process intact
        return type(self), (self.where, self.problem, self.fix)


class EntryGone(NsysWrapError):
    """A cache entry was removed while a run read it (not by nsyswrap's own `cache clear`
    or eviction, which keep what a live process holds): the command is run once more,
    building it again (`nsyswrap.cli.main`)."""


def note(text: str) -> None:
    """One line on stderr about something nsyswrap repaired or worked around (not an error)."""
    print(f"nsyswrap: note: {printable(text)}", file=sys.stderr)


_FULL = (errno.ENOSPC, errno.EDQUOT)
_FILES = (errno.EMFILE, errno.ENFILE)
_FULL_TEXT = ("No space left on device", "Disk quota exceeded")
_FILES_TEXT = ("Too many open files",)


def limit_error(
    exc: BaseException, where: str | Path | None = None, output: bool = False
) -> NsysWrapError | None:
    """The one-line error for a limit of the machine that `exc` (an OSError, or a DuckDB or
    SQLite error saying so) ran into: the disk is full where it wrote (the file the error
    names, else `where`; `output`: `where` is the output file the user chose, so the fix
    is another place for it, not the cache's), or the open files limit (`ulimit -n`) was
    reached; None for any other error."""
    code = getattr(exc, "errno", None)
    text = str(exc)
    if code in _FILES or any(t in text for t in _FILES_TEXT):
        return open_files_error()
    if code in _FULL or any(t in text for t in _FULL_TEXT):
        quota = code == errno.EDQUOT or "quota" in text
        named = re.search(r'"(/[^"\\]+)\\?"', text)  # DuckDB names the file it could not write
        file = named.group(1) if named else getattr(exc, "filename", None)
        if file is not None and (where is None or not str(file).startswith(str(where))):
            where = Path(file).parent  # not under `where`: e.g. DuckDB's spill directory
            where = where.parent if where.name.startswith(".build-") else where  # (being removed)
        return NsysWrapError(
            where or "disk",
            "cannot be written: "
            + ("the disk quota is used up" if quota else "no space is left on its device"),
            "free space there, or write the output elsewhere"
            if output and str(where) == str(file or where)
            else "free space there, or point NSYSWRAP_CACHE_DIR (the cache) or TMPDIR "
            "(temporary files) at a directory with room",
        )
    return None


def open_files_error() -> NsysWrapError:
    """The one-line error of the open files limit (`ulimit -n`) reached."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    most = "unlimited" if hard == resource.RLIM_INFINITY else f"{hard}"
    return NsysWrapError(
        "open files",
        f"the limit of {soft} open files per process (ulimit -n) was reached",
        f"raise it, e.g. ulimit -n 4096 (at most {most} here)",
    )
