"""Normalized Parquet copies of each report, keyed to the report's path, size, mtime and
content (SQLite's file change counter and a hash of the first and last pages).

A cache directory that cannot be written falls back to a private temporary one; a damaged
entry (a truncated or missing Parquet file) is found when the report is opened, removed
and built again, each with a one-line note.

The first open of a report reads its tables once (see `sqlite_source`) and
writes one Parquet file per view; later opens read the Parquet files only. The
per-report objects computed later live beside them (see `nsyswrap.planner`).
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from collections import Counter
from pathlib import Path

import pyarrow as pa

from nsyswrap import sql_objects
from nsyswrap.cache_keys import cache_root, report_key
from nsyswrap.connection import VIEWS, quote, session
from nsyswrap.errors import note
from nsyswrap.raw_tables import RAW_FILTERS, RAW_TABLES
from nsyswrap.sqlite_source import read_batches, typed_select

STREAMED = {"kernel", "memcpy", "memset", "sync", "runtime", "nvtx", "osrt", "gpu_memory"}
VIEW_PARQUET = "FORMAT parquet, PARQUET_VERSION v2"
"""How a view is written: Parquet 2 (delta-encoded integers, dictionary-encoded strings)
writes a 1 M-kernel report's views ~15 % cheaper than Parquet 1, reads them back faster and
takes half the space."""


def cache_dir_for(path: Path) -> Path:
    """The cache directory of one report version; a damaged entry there is removed first."""
    target = cache_root() / hashlib.sha256(report_key(path).encode()).hexdigest()[:24]
    damaged = _damaged_file(target)
    if damaged is not None:
        note(f"{path}: cache entry {damaged} was damaged; building it again")
        trash = target.with_name(f".damaged-{os.getpid()}-{target.name}")
        try:
            os.replace(target, trash)
        except OSError:  # another process moved it first
            pass
        shutil.rmtree(trash, ignore_errors=True)
    return target


def _damaged_file(entry: Path) -> Path | None:
    """A Parquet file of a cache entry that is truncated or not Parquet, or a missing view
    of a built entry; None when the entry is sound (or absent)."""
    if not (entry / "session.parquet").exists():
        return None
    missing = [entry / f"{v}.parquet" for v in VIEWS if not (entry / f"{v}.parquet").exists()]
    if missing:
        return missing[0]
    for file in entry.rglob("*.parquet"):
        if any(part.startswith(".") for part in file.relative_to(entry).parts):
            continue  # being written by another process (`.build-*`), not damaged
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


def normalize(path: Path, tables: dict[str, set[str]], target: Path) -> None:
    """Fill `target` (the report's `cache_dir_for`, found by the caller: a worker process
    may see another environment) with `<view>.parquet`, unless it is there."""
    if not (target / "session.parquet").exists():
        build_atomically(target, lambda work: _build(path, tables, work))


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


def _raw(path: Path, key: str, tables: dict[str, set[str]]):
    """A reader (large tables) or table (small ones) of one raw export table."""
    names, columns = RAW_TABLES[key]
    table = next((t for t in names if t in tables), names[0])
    present, where = tables.get(table), RAW_FILTERS.get(key)
    if present is not None and where and not set(re.findall(r'"(\w+)"', where)) <= present:
        present = None  # filtered on a column this nsys version lacks: no such rows
    query = typed_select(table, columns, present, where)
    reader = read_batches(path, query)
    return reader if key in STREAMED else reader.read_all()


def _build(path: Path, tables: dict[str, set[str]], out: Path) -> None:
    """Every view of the report into `out`, each raw table read out of SQLite once: a large
    one that several views read is held in a DuckDB table (which spills to disk past the
    memory cap), and every raw table is dropped once its last reader is written."""
    readers = Counter(r for view in VIEWS for r in sql_objects.get(view).reads if r.startswith("raw_"))
    # One thread per report: the build is paced by the single stream out of SQLite and
    # open_run already builds `jobs` reports at once; more threads only cost CPU and memory.
    with tempfile.TemporaryDirectory(prefix="nsyswrap-spill-") as spill:
        con = session(memory_limit="1GB", spill_dir=Path(spill), threads=1)
        try:
            con.execute(sql_objects.get("_macros").sql)
            held: dict[str, bool] = {}  # raw table -> held in a DuckDB table (else registered)
            for view in VIEWS:
                obj = sql_objects.get(view)
                raws = [r for r in obj.reads if r.startswith("raw_")]
                for name in raws:
                    if name not in held:
                        held[name] = _load(con, name, _raw(path, name.removeprefix("raw_"), tables),
                                           readers[name] > 1)
                target = out / f"{view}.parquet"
                con.execute(f"COPY ({obj.sql}) TO {quote(str(target))} ({VIEW_PARQUET})")
                con.execute(f"CREATE OR REPLACE VIEW {view} AS "
                            f"SELECT * FROM read_parquet({quote(str(target))})")
                for name in raws:
                    readers[name] -= 1
                    if readers[name] == 0 and held[name]:
                        con.execute(f"DROP TABLE {name}")
                    elif readers[name] == 0:
                        con.unregister(name)
        finally:
            con.close()


def _load(con, name: str, source, shared: bool) -> bool:
    """Make `source` (an Arrow table or a one-pass reader) readable as `name`: a reader
    that several views read is copied into a DuckDB table first. Whether it was."""
    if not (shared and isinstance(source, pa.RecordBatchReader)):
        con.register(name, source)
        return False
    con.register(f"{name}_stream", source)
    con.execute(f"CREATE TABLE {name} AS SELECT * FROM {name}_stream")
    con.unregister(f"{name}_stream")
    return True
