"""Work directories named after the process that makes them, and their removal once that
process has died.

A run killed part way (`kill -9`, a node lost) leaves what it was writing: `.build-*`
directories in the store (an entry half built; `.damaged-*`, `.evicted-*` half removed),
`nsyswrap-spill-*` (DuckDB's spill), `nsyswrap-wal-*` (a report's snapshot) and
`nsyswrap-cache-*` (a fallback cache) in the temporary directory. Each is named
`<prefix><host>-<pid>-<random>`; the next run removes those of this host whose process is
no longer alive (`remove_dead`). A directory of a live process, or of another host sharing
the cache, is never touched.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from pathlib import Path

from nsyswrap.storage.processes import alive

TEMP_PREFIXES = ("nsyswrap-spill-", "nsyswrap-wal-", "nsyswrap-cache-")


def host() -> str:
    return socket.gethostname().split(".")[0] or "localhost"


def tag() -> str:
    """`<host>-<pid>-`: what a work directory's name carries of its maker, after its prefix."""
    return f"{host()}-{os.getpid()}-"


def temp_dir(kind: str) -> Path:
    """A fresh private directory `nsyswrap-<kind>-<host>-<pid>-*` in the temporary directory."""
    return Path(tempfile.mkdtemp(prefix=f"nsyswrap-{kind}-{tag()}"))


def remove_dead(cache: Path) -> None:
    """Remove the work directories of dead processes of this host: in the temporary
    directory, and in the store and its folders of `cache` (`nsyswrap.storage.store`:
    `.build-*` of an entry or tally half written, `.damaged-*` and `.evicted-*` of an entry
    half removed)."""
    _sweep(Path(tempfile.gettempdir()), TEMP_PREFIXES)
    for folder in (cache, *_dirs(cache)):
        _sweep(folder, (".build-", ".damaged-", ".evicted-"))


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
    mine = f"{host()}-"
    for name in names:
        rest = name[len(next(p for p in prefixes if name.startswith(p))) :]
        pid = rest[len(mine) :].partition("-")[0] if rest.startswith(mine) else ""
        if not pid.isdigit() or alive(int(pid)):
            continue  # another host's, a name of an older nsyswrap, or a live process's
        if (folder / name).is_dir():
            shutil.rmtree(folder / name, ignore_errors=True)
        else:
            (folder / name).unlink(missing_ok=True)
