"""Normalized Parquet copies of each report, keyed to the report's version
(`cache_keys.report_key`: its path, inode, ctime, size, mtime and a digest of its content).

A cache directory that cannot be written falls back to a private temporary one; a damaged
entry (a truncated or missing Parquet file) is found when the report is opened, removed
and built again, each with a one-line note.

The first open of a report reads its tables once (see `sqlite_source`) and
writes one Parquet file per view, an entry of the store (`nsyswrap.storage.store`: views); later
opens read the Parquet files only.
"""

from __future__ import annotations

import re
import shutil
from collections import Counter
from pathlib import Path

import duckdb
import pyarrow as pa

from nsyswrap.engine import sql_objects, stage_log
from nsyswrap.engine.connection import LAZY_VIEWS, VIEWS, quote, session
from nsyswrap.storage import store
from nsyswrap.storage.cache_keys import report_key
from nsyswrap.storage.leftovers import temp_dir
from nsyswrap.storage.raw_tables import RAW_FILTERS, RAW_TABLES
from nsyswrap.storage.sqlite_source import READ_FAILURES, read_batches, typed_select, wal_applied

STREAMED = {"kernel", "memcpy", "memset", "sync", "runtime", "nvtx", "osrt", "gpu_memory"}
WRITTEN = tuple(v for v in VIEWS if v not in LAZY_VIEWS)
"""The views a report's normalization writes (the lazy ones are built on first use)."""
VIEW_PARQUET = "FORMAT parquet, PARQUET_VERSION v2"
"""How a view is written: Parquet 2 (delta-encoded integers, dictionary-encoded strings)
writes a 1 M-kernel report's views ~15 % cheaper than Parquet 1, reads them back faster and
takes half the space."""


def cache_dir_for(path: Path) -> Path:
    """The store entry of one report version's views; a damaged one is removed first."""
    target = store.entry("views", path.stem, report_key(path))
    damaged = _damaged_file(target)
    if damaged is not None:
        store.discard(target, f"{path}: cache entry {damaged} was damaged; building it again")
    return target


def _damaged_file(entry: Path) -> Path | None:
    """A view's Parquet file of a built entry that is missing, truncated or not Parquet;
    None when the entry is sound (or absent)."""
    if not (entry / "session.parquet").exists():
        return None
    missing = [entry / f"{v}.parquet" for v in WRITTEN if not (entry / f"{v}.parquet").exists()]
    return missing[0] if missing else store.damaged(entry)


def normalize(path: Path, tables: dict[str, set[str]], target: Path) -> None:
    """Fill `target` (the report's `cache_dir_for`, found by the caller: a worker process
    may see another environment) with `<view>.parquet`, unless it is there. A report that
    cannot be read to the end (damaged, or changed while read) is one line naming it."""
    if (target / "session.parquet").exists():
        return
    try:
        with wal_applied(path), stage_log.step("views", "views", str(path)):
            store.write(target, lambda work: _build(path, tables, work), about=str(path))
    except duckdb.Error:
        failure = READ_FAILURES.pop(path, None)
        if failure is None:
            raise  # not the report's: a bug in nsyswrap
        raise failure from None


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
    readers = Counter(
        r for view in WRITTEN for r in sql_objects.get(view).reads if r.startswith("raw_")
    )
    # One thread per report: the build is paced by the single stream out of SQLite and
    # open_run already builds `jobs` reports at once; more threads only cost CPU and memory.
    spill = temp_dir("spill")
    try:
        con = session(memory_limit="1GB", spill_dir=spill, threads=1)
        try:
            con.execute(sql_objects.get("_macros").sql)
            held: dict[str, bool] = {}  # raw table -> held in a DuckDB table (else registered)
            for view in WRITTEN:
                obj = sql_objects.get(view)
                raws = [r for r in obj.reads if r.startswith("raw_")]
                for name in raws:
                    if name not in held:
                        held[name] = _load(
                            con,
                            name,
                            _raw(path, name.removeprefix("raw_"), tables),
                            readers[name] > 1,
                        )
                target = out / f"{view}.parquet"
                con.execute(f"COPY ({obj.sql}) TO {quote(str(target))} ({VIEW_PARQUET})")
                con.execute(
                    f"CREATE OR REPLACE VIEW {view} AS "
                    f"SELECT * FROM read_parquet({quote(str(target))})"
                )
                for name in raws:
                    readers[name] -= 1
                    if readers[name] == 0 and held[name]:
                        con.execute(f"DROP TABLE {name}")
                    elif readers[name] == 0:
                        con.unregister(name)
        finally:
            con.close()
    finally:
        shutil.rmtree(spill, ignore_errors=True)


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
