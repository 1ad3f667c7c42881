"""Where the cache lives and what its entries are keyed to: the report versions (path,
inode, ctime, size, mtime, content), the view format, nsyswrap's code and version.

Light on purpose (no pandas, DuckDB or pyarrow): a warm `nsyswrap report` finds its stored
answer from these alone (see `nsyswrap.report.answers`) before anything heavy loads.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import os
import shutil
import tempfile
from pathlib import Path

from nsyswrap.errors import note
from nsyswrap.storage.leftovers import temp_dir
from nsyswrap.storage.raw_tables import RAW_FILTERS, RAW_TABLES
from nsyswrap.storage.sql_files import sql_root

MIN_FREE_BYTES = 64 << 20  # a cache directory with less room than this counts as full


def cache_root() -> Path:
    """Where normalized reports live: $NSYSWRAP_CACHE_DIR or ~/.cache/nsyswrap, else (when
    that cannot be created or written, or is full) a private temporary directory, said
    once and given to the run's worker processes (as $NSYSWRAP_CACHE_DIR)."""
    return _usable(
        Path(os.environ.get("NSYSWRAP_CACHE_DIR") or Path.home() / ".cache" / "nsyswrap")
    )


@functools.cache
def _usable(wanted: Path) -> Path:
    try:
        wanted.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=wanted) as probe:
            probe.write(bytes(4096))
            probe.flush()
        free = shutil.disk_usage(wanted).free
        if free < MIN_FREE_BYTES:
            raise OSError(28, f"only {free >> 20} MB free")
    except OSError as exc:
        fallback = temp_dir("cache")
        atexit.register(shutil.rmtree, fallback, ignore_errors=True)
        os.environ["NSYSWRAP_CACHE_DIR"] = str(fallback)  # this run's workers: the same one
        note(
            f"cache {wanted} cannot be used ({exc.strerror or exc}); caching in {fallback} for "
            "this run (set NSYSWRAP_CACHE_DIR to a writable directory to keep the cache)"
        )
        return fallback
    return wanted


WHOLE_FILE_BYTES = 4 << 20
"""A report (or `-wal` file) up to this size is hashed whole (about 2 ms a MB), a larger
one by SAMPLED_PAGES pages spread evenly over it, the first and last included (0.4 ms
on a 1 M-kernel report of 132 MB, where hashing it whole takes 260 ms; see
docs/reading-offline.md)."""
SAMPLED_PAGES = 64


def report_key(path: Path) -> str:
    """One version of a report in one view format: its resolved path, inode, status change
    time (ctime), size, mtime, content (`content_key`) and the format digest. The cache
    entry of its views is named by it.

    The inode and ctime change whenever the file at that path is another one (reports
    swapped by name, a copy moved over it) or is written (even with its size and mtime
    set back, `cp -a`): nothing but the kernel sets a ctime. The device number is left
    out: a shared file system has a different one on each node, and the per-report work
    `launch --precompute` stores on the nodes must be found by the report run elsewhere
    (the resolved path stands for the file system)."""
    st = path.stat()
    return (
        f"{path.resolve()}|{st.st_ino}|{st.st_ctime_ns}|{st.st_size}|{st.st_mtime_ns}|"
        f"{content_key(path)}|{format_digest()}"
    )


def content_key(path: Path) -> str:
    """Changes with the report's content even when its size and times do not: SQLite's
    file change counter (header bytes 24-28) and a digest of the file (`_digest`); and,
    for a report in WAL mode, the same of its `-wal` file (rows committed there are read
    too), with its inode and times."""
    with path.open("rb") as fh:
        head = fh.read(100)
        page = int.from_bytes(head[16:18], "big") if len(head) >= 18 else 0
        page = 65536 if page == 1 else (page or 4096)
        key = head[24:28].hex() + _digest(fh, os.fstat(fh.fileno()).st_size, page)
    wal = path.with_name(path.name + "-wal")
    if head[18:20] == b"\x02\x02" and wal.is_file():
        with wal.open("rb") as fh:
            st = os.fstat(fh.fileno())
            digest = _digest(fh, st.st_size, page)
        key += f"-wal{st.st_ino}-{st.st_ctime_ns}-{st.st_size}-{st.st_mtime_ns}-{digest}"
    return key


def _digest(fh, size: int, page: int) -> str:
    """sha256 of the whole file up to WHOLE_FILE_BYTES, else of SAMPLED_PAGES pages of
    `page` bytes spread evenly from the first to the last."""
    h = hashlib.sha256()
    if size <= WHOLE_FILE_BYTES:
        fh.seek(0)
        h.update(fh.read())
    else:
        for i in range(SAMPLED_PAGES):
            fh.seek((size - page) * i // (SAMPLED_PAGES - 1) // page * page)
            h.update(fh.read(page))
    return h.hexdigest()[:16]


def format_digest() -> str:
    """Changes whenever the view SQL or the raw column lists or filters change."""
    h = hashlib.sha256(repr((sorted(RAW_TABLES.items()), sorted(RAW_FILTERS.items()))).encode())
    for f in sorted((sql_root() / "_views").glob("*.sql")):
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


@functools.cache
def code_digest() -> str:
    """Changes whenever nsyswrap's SQL or Python changes (the Dask engine checks that its
    workers run this code)."""
    h = hashlib.sha256()
    for path in sorted(Path(__file__).resolve().parents[1].rglob("*.py")) + sorted(
        sql_root().rglob("*.sql")
    ):
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


@functools.cache
def nsyswrap_version() -> str | None:
    """The installed nsyswrap's version (None in a source checkout)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("nsyswrap")
    except PackageNotFoundError:
        return None
