"""Where the cache lives and what its entries are keyed to: the report versions (path,
size, mtime, content), the view format, nsyswrap's code and version.

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
    that cannot be created or written, or is full) a private temporary directory."""
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
        note(
            f"cache {wanted} cannot be used ({exc.strerror or exc}); caching in {fallback} for "
            "this run (set NSYSWRAP_CACHE_DIR to a writable directory to keep the cache)"
        )
        return fallback
    return wanted


def report_key(path: Path) -> str:
    """One version of a report in one view format: its resolved path, size, mtime, content
    (`content_key`) and the format digest. The cache entry of its views is named by it."""
    st = path.stat()
    return f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}|{content_key(path)}|{format_digest()}"


def content_key(path: Path) -> str:
    """Changes with the report's content even when size and mtime do not: SQLite's file
    change counter (header bytes 24-28) and a hash of the first and last pages; and, for a
    report in WAL mode, the same of its `-wal` file (rows committed there are read too)."""
    with path.open("rb") as fh:
        head = fh.read(100)
        page = int.from_bytes(head[16:18], "big") if len(head) >= 18 else 0
        page = 65536 if page == 1 else (page or 4096)
        fh.seek(0)
        first = fh.read(page)
        fh.seek(max(0, path.stat().st_size - page))
        last = fh.read(page)
    key = head[24:28].hex() + hashlib.sha256(first + last).hexdigest()[:16]
    wal = path.with_name(path.name + "-wal")
    if head[18:20] == b"\x02\x02" and wal.is_file():
        st = wal.stat()
        with wal.open("rb") as fh:
            wal_head = fh.read(32)
            fh.seek(max(0, st.st_size - page))
            tail = fh.read(page)
        digest = hashlib.sha256(wal_head + tail).hexdigest()[:16]
        key += f"-wal{st.st_size}-{st.st_mtime_ns}-{digest}"
    return key


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
