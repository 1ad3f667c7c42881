"""Work directories named after the process that makes them, and their removal once that
process has died.

A run killed part way (`kill -9`, a node lost) leaves what it was writing: `.build-*`
directories in the cache (an entry half built), `nsyswrap-spill-*` (DuckDB's spill),
`nsyswrap-wal-*` (a report's snapshot) and `nsyswrap-cache-*` (a fallback cache) in the
temporary directory, `.<key>-*.json` stored answers half written. Each is named
`<prefix><host>-<pid>-<random>`; the next run removes those of this host whose process is
no longer alive (`remove_dead`). A directory of a live process, or of another host sharing
the cache, is never touched.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import tempfile
from pathlib import Path

from nsyswrap.processes import alive

TEMP_PREFIXES = ("nsyswrap-spill-", "nsyswrap-wal-", "nsyswrap-cache-")
_OWNER = re.compile(r"(?P<host>.+)-(?P<pid>[0-9]+)-[^-]*")  # (after the prefix)


def host() -> str:
    return socket.gethostname().split(".")[0] or "localhost"


def tag() -> str:
    """`<host>-<pid>-`: what a work directory's name carries of its maker, after its prefix."""
    return f"{host()}-{os.getpid()}-"


def temp_dir(kind: str) -> Path:
    """A fresh private directory `nsyswrap-<kind>-<host>-<pid>-*` in the temporary directory."""
    return Path(tempfile.mkdtemp(prefix=f"nsyswrap-{kind}-{tag()}"))


def remove_dead(cache: Path) -> None:
    """Remove the work directories and files of dead processes of this host: in the
    temporary directory, and in `cache` (its top level, each entry's `objects/` and
    `runs/*/`, and `answers/`)."""
    _sweep(Path(tempfile.gettempdir()), TEMP_PREFIXES)
    _sweep(cache, (".build-", ".damaged-"))
    _sweep(cache / "answers", (".",))
    for entry in _dirs(cache):
        _sweep(entry / "objects", (".build-",))
        for run in _dirs(entry / "runs"):
            _sweep(run, (".build-",))


def _dirs(folder: Path) -> list[Path]:
    try:
        return [
            Path(e.path) for e in os.scandir(folder) if not e.name.startswith(".") and e.is_dir()
        ]
    except OSError:
        return []


def _sweep(folder: Path, prefixes: tuple[str, ...]) -> None:
    try:
        names = [e.name for e in os.scandir(folder) if e.name.startswith(prefixes)]
    except OSError:
        return
    for name in names:
        prefix = next(p for p in prefixes if name.startswith(p))
        owner = _OWNER.fullmatch(name[len(prefix) :].removesuffix(".json"))
        if owner is None or owner["host"] != host() or alive(int(owner["pid"])):
            continue
        path = folder / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            try:
                path.unlink()
            except OSError:
                pass
