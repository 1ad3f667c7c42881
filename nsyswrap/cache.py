"""Normalized Parquet copies of each report, keyed to the report's path, size and mtime.

The first open of a report reads its tables once (see `sqlite_source`) and
writes one Parquet file per view, then one per reduction (`sql/_reductions`:
per-report tables the cross-rank macros read instead of the large views); later
opens read the Parquet files only.
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

from nsyswrap.connection import VIEWS, CachedReport, connect, reduction_names
from nsyswrap.raw_tables import RAW_FILTERS, RAW_TABLES
from nsyswrap.sql_files import sql_root
from nsyswrap.sql_guard import SAFE_CONFIG
from nsyswrap.sqlite_source import read_batches, typed_select

STREAMED = {"kernel", "memcpy", "memset", "sync", "runtime", "nvtx"}
REDUCTION_ROW_GROUP = 16384


def cache_root() -> Path:
    """Where normalized reports live: $NSYSWRAP_CACHE_DIR or ~/.cache/nsyswrap."""
    return Path(os.environ.get("NSYSWRAP_CACHE_DIR") or Path.home() / ".cache" / "nsyswrap")


def _views_dir() -> Path:
    return sql_root() / "_views"


def sql_digest(*folders: str, extra: str = "") -> str:
    """Changes whenever a SQL file in `folders` (under sql/) or `extra` changes."""
    h = hashlib.sha256(extra.encode())
    for folder in folders:
        for f in sorted((sql_root() / folder).rglob("*.sql")):
            h.update(f.read_bytes())
    return h.hexdigest()[:16]


def _format_digest() -> str:
    """Changes whenever the view SQL or the raw column lists change."""
    return sql_digest("_views", extra=repr(sorted(RAW_TABLES.items())))


def cache_dir_for(path: Path) -> Path:
    """The cache directory of one report version."""
    st = path.stat()
    key = f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}|{_format_digest()}"
    return cache_root() / hashlib.sha256(key.encode()).hexdigest()[:24]


def normalize(path: Path, tables: dict[str, set[str]], target: Path) -> None:
    """Fill `target` (the report's `cache_dir_for`, found by the caller: a worker process
    may see another environment) with `<view>.parquet`, unless it is there."""
    if not (target / "session.parquet").exists():
        build_atomically(target, lambda work: _build(path, tables, work))


def reductions_dir_for(views_dir: Path) -> Path:
    """Where the reductions of a normalized report live (keyed to their SQL and macros)."""
    return views_dir / f"reductions-{sql_digest('_reductions', '_macros')}"


def reduce_report(path: Path, views_dir: Path, names: list[str]) -> None:
    """Build the reductions `names` of a normalized report that are not cached yet."""
    target = reductions_dir_for(views_dir)
    todo = [n for n in names if not (target / f"{n}.parquet").exists()]
    if todo:
        target.mkdir(exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=".build-", dir=target) as work:
            _reduce(path, views_dir, todo, Path(work), target)


def build_atomically(target: Path, build) -> None:
    """`build(work)` fills a fresh directory that then becomes `target` in one rename."""
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".build-", dir=target.parent))
    try:
        build(work)
        try:
            os.replace(work, target)
        except OSError:  # another process finished first
            pass
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _reduce(path: Path, views_dir: Path, names: list[str], work: Path, target: Path) -> None:
    """Each reduction over the report alone, as rank 0 (the `rank` and `report` columns
    are not stored: the run's views add them), written in `work`, then moved to `target`."""
    with tempfile.TemporaryDirectory(prefix="nsyswrap-spill-") as spill:
        con = connect([CachedReport(0, path, views_dir, None)], memory_limit="1GB",
                      spill_dir=Path(spill), threads=1)
        try:
            for name in names:
                sql = (sql_root() / "_reductions" / f"{name}.sql").read_text()
                columns = [d[0] for d in con.execute(f"SELECT * FROM ({sql}) LIMIT 0").description]
                kept = ", ".join(f'"{c}"' for c in columns if c not in ("rank", "report"))
                # Small row groups: a read of part of a reduction (a time window, the
                # longest N events) skips the others by their min/max statistics.
                con.execute(f"COPY (SELECT {kept} FROM ({sql})) TO '{work / f'{name}.parquet'}' "
                            f"(FORMAT parquet, ROW_GROUP_SIZE {REDUCTION_ROW_GROUP})")
                os.replace(work / f"{name}.parquet", target / f"{name}.parquet")
        finally:
            con.close()


def _raw(path: Path, key: str, tables: dict[str, set[str]]):
    """A reader (large tables) or table (small ones) of one raw export table."""
    names, columns = RAW_TABLES[key]
    table = next((t for t in names if t in tables), names[0])
    query = typed_select(table, columns, tables.get(table), RAW_FILTERS.get(key))
    reader = read_batches(path, query)
    return reader if key in STREAMED else reader.read_all()


def _build(path: Path, tables: dict[str, set[str]], out: Path) -> None:
    con = duckdb.connect(config=SAFE_CONFIG)
    try:
        # One thread per report: the build is paced by the single stream out of SQLite and
        # open_run already builds `jobs` reports at once; more threads only cost CPU and memory.
        con.execute("SET threads = 1")
        con.execute("SET enable_progress_bar = false")
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
