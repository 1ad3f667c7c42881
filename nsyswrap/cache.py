"""Normalized Parquet copies of each report, keyed to the report's path, size and mtime.

The first open of a report reads its tables once (see `sqlite_source`) and
writes one Parquet file per view; later opens read the Parquet files only.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from pathlib import Path

import duckdb
import pyarrow as pa

from nsyswrap.raw_tables import RAW_FILTERS, RAW_TABLES
from nsyswrap.sql_files import sql_root
from nsyswrap.sqlite_source import read_batches, typed_select

VIEWS = (
    "memcpy", "memset", "kernels", "syncs", "api_calls", "launches",
    "nvtx", "collectives", "devices", "processes", "session",
)
STREAMED = {"kernel", "memcpy", "memset", "sync", "runtime", "nvtx"}


def cache_root() -> Path:
    """Where normalized reports live: $NSYSWRAP_CACHE_DIR or ~/.cache/nsyswrap."""
    return Path(os.environ.get("NSYSWRAP_CACHE_DIR") or Path.home() / ".cache" / "nsyswrap")


def _views_dir() -> Path:
    return sql_root() / "_views"


def _format_digest() -> str:
    """Changes whenever the view SQL or the raw column lists change."""
    h = hashlib.sha256(repr(sorted(RAW_TABLES.items())).encode())
    for f in sorted(_views_dir().glob("*.sql")):
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def cache_dir_for(path: Path) -> Path:
    """The cache directory of one report version."""
    st = path.stat()
    key = f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}|{_format_digest()}"
    return cache_root() / hashlib.sha256(key.encode()).hexdigest()[:24]


def normalized(path: Path, tables: dict[str, set[str]]) -> Path:
    """The directory holding `<view>.parquet` for the report, built if needed."""
    target = cache_dir_for(path)
    if (target / "session.parquet").exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".build-", dir=target.parent))
    try:
        _build(path, tables, work)
        try:
            os.replace(work, target)
        except OSError:  # another process finished first
            shutil.rmtree(work, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target


def _raw(path: Path, key: str, tables: dict[str, set[str]]):
    """A reader (large tables) or table (small ones) of one raw export table."""
    names, columns = RAW_TABLES[key]
    table = next((t for t in names if t in tables), names[0])
    query = typed_select(table, columns, tables.get(table), RAW_FILTERS.get(key))
    reader = read_batches(path, query)
    return reader if key in STREAMED else reader.read_all()


def _build(path: Path, tables: dict[str, set[str]], out: Path) -> None:
    con = duckdb.connect()
    try:
        # One thread per report: the build is paced by the single stream out of SQLite and
        # open_run already builds `jobs` reports at once; more threads only cost CPU and memory.
        con.execute("SET threads = 1")
        con.execute((_views_dir() / "_macros.sql").read_text())
        small: dict[str, pa.Table] = {}
        for view in VIEWS:
            sql = (_views_dir() / f"{view}.sql").read_text()
            for key in sorted(set(re.findall(r"\braw_(\w+)", sql))):
                if key in STREAMED:
                    con.register(f"raw_{key}", _raw(path, key, tables))
                else:
                    if key not in small:
                        small[key] = _raw(path, key, tables)
                    con.register(f"raw_{key}", small[key])
            target = out / f"{view}.parquet"
            con.execute(f"COPY ({sql}) TO '{target}' (FORMAT parquet)")
            con.execute(f"CREATE OR REPLACE VIEW {view} AS SELECT * FROM read_parquet('{target}')")
    finally:
        con.close()
