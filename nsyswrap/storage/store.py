"""The one store: every stored thing is an entry, with one key recipe and one layout.

    <cache>/<kind>/<name>-<key>/    kind: views, objects, runs or answers
        ...                         its files: <view>.parquet (views), rows.parquet (a
                                    per-report object or module's rows, a run object),
                                    answer.json (a report's answer)
        entry.json                  the index of what is stored: kind, name, what it is
                                    for (the report or reports), its size in bytes

`key = sha256(repr((kind, name, parts)))[:24]`, `parts` being everything its content
depends on (`entry`). An entry is written whole in a fresh `.build-*` directory that is
then renamed into place (`write`): a directory that exists is complete. Its last use is
its directory's modification time, set whenever it is read (`use`).

The store is bounded: `evict(spec)` removes the least recently used entries until the
store holds at most its cap, never an entry in use. What it holds is kept in a tally
(`<cache>/tally`: a line of signed bytes per entry written, added to or removed), so that
a command under the cap reads one small file, not every entry's index; a count of the
entries rewrites the tally (when it has `TALLY_LINES` lines, when it is missing, and
before anything is removed), which puts right what a killed process left uncounted.

A process holds what it uses in a lease (`<cache>/leases/<host>-<pid>-<n>`: the entries,
one a line) from opening a run to closing it, each entry from before it looks for it (a
run holds its reports' entries before it builds them); a lease of a process of this host
that is gone, or one not touched for a day, no longer counts. Removing (`evict`,
`clear`) reads the leases and moves the entries out of place under an exclusive lock
(`<cache>/.lock`) that a process takes shared to add to its lease: an entry held before
it was looked for is never removed under the process that holds it. The cap
(`--cache-max`, `$NSYSWRAP_CACHE_MAX`) is a size (`500M`, `20G`) or a share of the
cache's file system (`10%`: of its free space plus what the store holds); by default a
quarter (`DEFAULT_CAP`).

Light on purpose (the standard library only): a warm `nsyswrap report` finds, uses and
keeps its stored answer with it.
"""

from __future__ import annotations

import fcntl
import hashlib
import itertools
import json
import os
import re
import shutil
import socket
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from nsyswrap.errors import EntryGone, NsysWrapError, limit_error, note
from nsyswrap.storage import processes
from nsyswrap.storage.cache_keys import cache_root
from nsyswrap.storage.leftovers import tag

KINDS = ("views", "objects", "runs", "answers")
INDEX = "entry.json"
LEASES = "leases"
LOCK = ".lock"  # taken shared to add to a lease, exclusive to remove entries
TALLY = "tally"
TALLY_LINES = 4096  # a tally this long is replaced by a count of the entries
DEFAULT_CAP = "25%"
CAP_VARIABLE = "NSYSWRAP_CACHE_MAX"
STALE_LEASE_S = 86_400
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*$", re.I)
_PERCENT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*$")
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_SEQUENCE = itertools.count()


def key(kind: str, name: str, *parts) -> str:
    """The one key recipe of every stored thing."""
    return hashlib.sha256(repr((kind, name, parts)).encode()).hexdigest()[:24]


def entry(kind: str, name: str, *parts) -> Path:
    """Where the entry of `kind` named `name` for `parts` lives (it may not exist yet)."""
    readable = re.sub(r"[^\w.+-]", "_", name)[:64]
    return cache_root() / kind / f"{readable}-{key(kind, name, *parts)}"


def write(target: Path, build, about: str = "") -> None:
    """`build(work)` fills a fresh directory that then becomes entry `target` in one
    rename, with its index line (`entry.json`); when another process finished first, its
    entry stays."""
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".build-{tag()}", dir=target.parent))  # see leftovers
    try:
        try:
            build(work)
            size = sum(f.stat().st_size for f in work.rglob("*") if f.is_file())
            name, _, _ = target.name.rpartition("-")
            index = {"kind": target.parent.name, "name": name, "about": about, "bytes": size}
            for _ in range(2):  # its size counts the index too
                index["bytes"] = size + len(json.dumps(index).encode())
            (work / INDEX).write_text(json.dumps(index))
        except Exception as exc:  # a full disk or too many open files: one line, not a traceback
            limit = limit_error(exc, target.parent)
            if limit is None:
                raise
            raise limit from exc
        try:
            os.replace(work, target)
        except OSError:  # another process finished first
            return
        _tally(target, index["bytes"])
    finally:
        shutil.rmtree(work, ignore_errors=True)


def add_file(entry_dir: Path, name: str, build) -> None:
    """File `name` added to the existing entry `entry_dir`: `build(path)` writes it aside,
    it is renamed into place (another process may add it too: the last rename stays) and
    counted in the entry's index."""
    target = entry_dir / name
    fd, aside = tempfile.mkstemp(prefix=f".build-{tag()}{name}-", suffix=".part", dir=entry_dir)
    os.close(fd)
    work = Path(aside)
    try:
        try:
            build(work)
        except Exception as exc:  # a full disk: one line, not a traceback
            limit = limit_error(exc, entry_dir)
            if limit is None:
                raise
            raise limit from exc
        added = work.stat().st_size
        os.replace(work, target)
        _tally(entry_dir, added)
    finally:
        work.unlink(missing_ok=True)
    try:
        index = json.loads((entry_dir / INDEX).read_text())
        index["bytes"] = int(index.get("bytes", 0)) + added
        fd, aside = tempfile.mkstemp(prefix=f".build-{tag()}", dir=entry_dir)
        with os.fdopen(fd, "w") as fh:
            fh.write(json.dumps(index))
        os.replace(aside, entry_dir / INDEX)
    except (OSError, ValueError):  # no index (being removed): only its size is not counted
        pass


def use(path: Path) -> None:
    """Entry `path` was used now (the least recently used go first)."""
    try:
        os.utime(path)
    except OSError:  # gone, or read-only: only its place in the eviction order is lost
        pass


def damaged(path: Path) -> Path | None:
    """A Parquet file of entry `path` that is truncated or not Parquet; None when sound."""
    for file in path.glob("*.parquet"):
        try:
            size = file.stat().st_size
            with file.open("rb") as fh:
                start = fh.read(4)
                fh.seek(max(0, size - 8))
                tail = fh.read(8)
        except OSError:
            return file
        footer = int.from_bytes(tail[:4], "little") if len(tail) == 8 else size
        if start != b"PAR1" or tail[4:] != b"PAR1" or footer + 12 > size:
            return file
    return None


def discard(path: Path, why: str) -> None:
    """Remove entry `path` (another process may be removing it too), saying why."""
    note(why)
    trash = path.with_name(f".damaged-{tag()}{path.name}")
    size = int((_index(path) or {}).get("bytes", 0))
    try:
        os.replace(path, trash)
    except OSError:  # another process moved it first
        return
    _tally(path, -size)
    shutil.rmtree(trash, ignore_errors=True)


class Lease:
    """The entries a process uses, kept from eviction while it holds them."""

    def __init__(self) -> None:
        self.path: Path | None = None
        self.held: set[str] = set()

    def hold(self, *entries: Path) -> None:
        """Keep store entries `entries` (their directories) from eviction."""
        new = [str(e) for e in dict.fromkeys(entries) if str(e) not in self.held]
        if not new:
            return
        try:
            if self.path is None:
                folder = cache_root() / LEASES
                folder.mkdir(parents=True, exist_ok=True)
                self.path = folder / f"{socket.gethostname()}-{os.getpid()}-{next(_SEQUENCE)}"
            with _leases_locked(fcntl.LOCK_SH), self.path.open("a") as fh:
                fh.write("".join(f"{p}\n" for p in new))
            self.held.update(new)
        except OSError:  # a store that cannot take a lease is not evicted by this process
            pass

    def release(self) -> None:
        if self.path is not None:
            self.path.unlink(missing_ok=True)
            self.path = None
        self.held.clear()


def cap_bytes(spec: str | None = None, held: int | None = None) -> int:
    """The store's cap in bytes for `spec` (else $NSYSWRAP_CACHE_MAX, else DEFAULT_CAP);
    `held`: what the store holds, when the caller has just read it."""
    share, size = parse_cap(spec)
    if share is None:
        return size
    held = held_bytes() if held is None else held
    return int(share * (shutil.disk_usage(cache_root()).free + held))


def parse_cap(spec: str | None = None) -> tuple[float | None, int]:
    """`spec` (else $NSYSWRAP_CACHE_MAX, else DEFAULT_CAP) read, the store not: (a share
    of the disk, 0) or (None, bytes)."""
    spec = spec or os.environ.get(CAP_VARIABLE) or DEFAULT_CAP
    if m := _PERCENT.match(spec):
        return float(m[1]) / 100, 0
    if m := _SIZE.match(spec):
        return None, int(float(m[1]) * _UNITS[m[2].lower()])
    raise NsysWrapError(
        f"--cache-max {spec}",
        "is not a size or a share of the disk",
        "write e.g. --cache-max 20G, 500M or 10%",
    )


def entries() -> list[dict]:
    """Every entry of the store: path, kind, name, about, bytes, last use (epoch s)."""
    out = []
    for kind in KINDS:
        folder = cache_root() / kind
        if not folder.is_dir():
            continue
        for path in folder.iterdir():
            if path.name.startswith(".") or not path.is_dir():
                continue
            index = _index(path)
            if index is None:  # being removed, or before the index
                continue
            try:
                used = path.stat().st_mtime
            except OSError:  # removed since
                continue
            out.append(
                {
                    "path": path,
                    "kind": kind,
                    "name": index.get("name", ""),
                    "about": index.get("about", ""),
                    "bytes": int(index.get("bytes", 0)),
                    "used": used,
                }
            )
    return out


def _total(found: list[dict]) -> int:
    return sum(e["bytes"] for e in found)


def held_bytes() -> int:
    """What the store holds, in bytes, by its tally (counted when it has none, or a long
    one)."""
    try:
        lines = (cache_root() / TALLY).read_text().split()
        if len(lines) < TALLY_LINES:
            return sum(int(line) for line in lines)
    except (OSError, ValueError):  # none yet, or damaged: counted
        pass
    return _total(_counted())


def _counted() -> list[dict]:
    """Every entry (`entries`), their bytes made the tally."""
    found = entries()
    try:
        fd, aside = tempfile.mkstemp(prefix=f".build-{tag()}", dir=cache_root())
        with os.fdopen(fd, "w") as fh:
            fh.write(f"{_total(found)}\n")
        os.replace(aside, cache_root() / TALLY)
    except OSError:  # a store that cannot be written keeps no tally
        pass
    return found


def _tally(entry: Path, size: int) -> None:
    """Bytes `entry` added (or took away, when negative), appended to its store's tally (one
    short line: appends of processes at once do not mix). A store without a tally gets
    one by a count (`held_bytes`), never from an append that would leave out what it held.
    The store is the entry's (a worker forked before `$NSYSWRAP_CACHE_DIR` changed is told
    its entries' paths, not the store's)."""
    try:
        fd = os.open(entry.parent.parent / TALLY, os.O_WRONLY | os.O_APPEND)
    except OSError:  # none yet, read-only or removed: the next count puts it right
        return
    with os.fdopen(fd, "w") as fh:
        fh.write(f"{size}\n")


def _index(path: Path) -> dict | None:
    """Entry `path`'s index (`entry.json`); None without a readable one."""
    try:
        index = json.loads((path / INDEX).read_text())
    except (OSError, ValueError, RecursionError):
        return None
    return index if isinstance(index, dict) else None


@contextmanager
def _leases_locked(how: int):
    """The leases locked (`fcntl.LOCK_SH` to add to one, `LOCK_EX` to remove entries); a
    file system without locks leaves them unlocked."""
    try:
        fh = open(cache_root() / LOCK, "a")
    except OSError:  # a read-only store: nothing is added or removed there
        yield
        return
    with fh:  # (closing the file releases the lock)
        try:
            fcntl.flock(fh, how)
        except OSError:
            pass
        yield


def in_use() -> set[str]:
    """The entries some live process holds (stale leases are removed)."""
    folder = cache_root() / LEASES
    held: set[str] = set()
    host = socket.gethostname()
    for lease in folder.glob("*") if folder.is_dir() else []:
        owner, _, rest = lease.name.rpartition("-")[0].rpartition("-")
        try:
            age = time.time() - lease.stat().st_mtime
            alive = processes.alive(int(rest)) if owner == host else age < STALE_LEASE_S
            if not alive:
                lease.unlink(missing_ok=True)
                continue
            held.update(lease.read_text().splitlines())
        except (OSError, ValueError):
            continue
    return held


def evict(spec: str = "") -> list[dict]:
    """Remove the least recently used entries until the store holds at most the cap of
    `spec` (`cap_bytes`), never one in use; the entries removed. Under the cap by the
    tally, no entry is read; else they are counted first."""
    held = held_bytes()
    if held <= cap_bytes(spec, held):
        return []
    found = sorted(_counted(), key=lambda e: e["used"])
    over = _total(found) - cap_bytes(spec, _total(found))
    if over <= 0:
        return []
    return _remove(found, lambda e, freed: freed < over)


def clear() -> tuple[int, int, int]:
    """Remove every entry not in use: (entries removed, bytes freed, entries kept)."""
    found = _counted()
    removed = _remove(found, lambda e, freed: True)
    return len(removed), _total(removed), len(found) - len(removed)


def _remove(found: list[dict], wanted) -> list[dict]:
    """Remove the entries of `found`, in order, that no live process holds, while
    `wanted(entry, bytes freed so far)`; the entries removed. Each is moved out of place
    under the leases' exclusive lock, then deleted."""
    removed, trash = [], []
    with _leases_locked(fcntl.LOCK_EX):
        held = in_use()
        for e in found:
            if not wanted(e, _total(removed)):
                break
            if str(e["path"]) in held:
                continue
            moved = e["path"].with_name(f".evicted-{tag()}{e['path'].name}")
            try:
                os.replace(e["path"], moved)
            except OSError:  # another process removed it first
                continue
            trash.append(moved)
            removed.append(e)
            _tally(e["path"], -e["bytes"])
    for moved in trash:
        shutil.rmtree(moved, ignore_errors=True)
    return removed


def gone(exc: BaseException) -> EntryGone | None:
    """The error of an entry removed under a run that read it (`exc`: DuckDB's or the
    file system's "no such file", naming a file of the store that is gone); None for any
    other error (a full disk's among them: its build folder is removed when it fails)."""
    if limit_error(exc) is not None:
        return None
    named = getattr(exc, "filename", None) or next(
        iter(re.findall(r'"(/[^"\n]+)"', str(exc))), None
    )
    if named is None or os.path.exists(named) or not str(named).startswith(str(cache_root())):
        return None
    return EntryGone(
        named,
        "was removed from the cache while this run read it",
        "nothing to do: the command runs once more and builds it again",
    )


def human(size: float) -> str:
    """Bytes in words: 1.5 GB, 320 MB, 12 kB."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if size >= scale:
            return f"{size / scale:,.1f} {unit}"
    return f"{int(size)} B"


def info(spec: str = "") -> dict:
    """What the store holds: `summary` lines (where, how much against its cap) and `kinds`,
    one row per kind: entries, bytes, last use (UTC)."""
    import pandas as pd  # (a command, not the warm path)

    found = _counted()
    cap = cap_bytes(spec, _total(found))
    held = in_use()
    rows = []
    for kind in KINDS:
        mine = [e for e in found if e["kind"] == kind]
        last = max((e["used"] for e in mine), default=None)
        rows.append(
            {
                "kind": kind,
                "entries": len(mine),
                "bytes": _total(mine),
                "in_use": sum(str(e["path"]) in held for e in mine),
                "last_used": time.strftime("%Y-%m-%d %H:%M", time.gmtime(last)) if last else "",
            }
        )
    total = _total(found)
    summary = [
        f"cache {cache_root()}:",
        f"{len(found):,} entries, {human(total)} of a cap of "
        f"{human(cap)} (--cache-max {spec or os.environ.get(CAP_VARIABLE) or DEFAULT_CAP})",
    ]
    return {"summary": summary, "kinds": pd.DataFrame(rows)}
