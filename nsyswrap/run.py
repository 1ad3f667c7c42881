"""A run: several per-rank reports behind one DuckDB connection with the normalized views.

What SQL objects need (libraries, per-report and run objects) the planner binds on the
connection when asked for them (`nsyswrap.planner`); work on each report alone runs in a
pool of worker processes, its results cached per report.
"""
from __future__ import annotations

import functools
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import duckdb
import pandas as pd

from nsyswrap import planner, sql_objects
from nsyswrap.cache import cache_dir_for, normalize
from nsyswrap.cache_keys import cache_root
from nsyswrap.connection import CachedReport, connect
from nsyswrap.errors import NsysWrapError, limit_error
from nsyswrap.leftovers import remove_dead, temp_dir
from nsyswrap.dask_engine import DaskEngine
from nsyswrap.opener import DEFAULT_OPENER, Opener  # (callers import them from here too)
from nsyswrap.pool import map_reports
from nsyswrap.reports import DEFAULT_RANK_PATTERN, Report, assign_ranks, expand
from nsyswrap.validate import inspect_tables

MEMORY_LIMIT_MB = 2048
"""DuckDB's memory cap for a run, shared by the run's connection and its workers."""

@dataclass
class Run:
    connection: duckdb.DuckDBPyConnection
    reports: list[Report]
    spill_dir: Path
    cached: list[CachedReport] = field(default_factory=list)  # empty: tables made by hand
    jobs: int = 2
    progress: Callable[[int, int], None] | None = None
    memory_limit_mb: int = MEMORY_LIMIT_MB
    libraries: set[str] = field(default_factory=set)
    """Macro libraries (`sql/_macros`) run on the connection."""
    bound: dict[str, str] = field(default_factory=dict)
    """Object name -> key of the parameters its view holds now (see nsyswrap.planner)."""
    tables: set[str] = field(default_factory=set)
    """Run objects computed so far (a table per object and parameter values)."""
    allow_unrelated: bool = False
    """Analyse reports across runs even when their capture spans are far apart."""
    unrelated: NsysWrapError | None = None
    """Why the reports are not one run (set by nsyswrap.crossrank.solve), if they are not."""
    solved: dict = field(default_factory=dict)
    """step_pattern -> the frames of the cross-rank solve (nsyswrap.crossrank.solve.build)."""
    ranks: dict = field(default_factory=dict)
    """The run's ranks, once known (nsyswrap.crossrank.ranks: `members`, `one_each`)."""
    engine: DaskEngine | None = None  # None: per-report work in local worker processes
    store_per_report: bool = False
    """Store per-report module results even for one report (launch --precompute: the
    run of all reports then finds them)."""

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        """The connection, with every macro library loaded."""
        for library in sql_objects.of_kind("library"):
            if library.path.parent.name == "_macros":
                planner.load_library(self, library.name)
        return self.connection

    def df(self, sql: str, params: dict | None = None) -> pd.DataFrame:
        """Run ad-hoc SQL over the views and the macro libraries with bound parameters."""
        return self.execute(sql, params).df()

    def execute(self, sql: str, params: dict | list | None = None) -> duckdb.DuckDBPyConnection:
        """Ad-hoc SQL (the user's: its errors are the user's to fix)."""
        con = self.con
        try:
            return con.execute(sql, params or {})
        except duckdb.Error as exc:
            raise limit_error(exc, self.spill_dir) or NsysWrapError(
                "query", str(exc).splitlines()[0],
                "check the SQL against the views listed by `nsyswrap views`") from exc

    def close(self) -> None:
        self.connection.close()
        shutil.rmtree(self.spill_dir, ignore_errors=True)

    def __enter__(self) -> "Run":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open_cached(cached: list[CachedReport], *, memory_limit: str, threads: int | None = None,
                jobs: int = 2, progress: Callable[[int, int], None] | None = None,
                engine: DaskEngine | None = None) -> Run:
    """A run over reports already normalized."""
    spill = temp_dir("spill")
    con = connect(cached, memory_limit=memory_limit, spill_dir=spill, threads=threads)
    reports = [Report(c.rank, c.path, "cache") for c in cached]
    return Run(con, reports, spill, cached, jobs, progress, int(memory_limit.removesuffix("MB")),
               engine=engine)


def open_run(
    inputs: list[str | Path],
    *,
    rank_pattern: str = DEFAULT_RANK_PATTERN,
    jobs: int = 2,
    progress: Callable[[int, int], None] | None = None,
    engine: DaskEngine | None = None,
    plan: tuple[tuple[str, dict], ...] = (),
) -> Run:
    """Validate the reports, normalize each (cached) and open the views over all of them.

    `jobs` reports are normalized at a time in worker processes (memory stays bounded
    by that, not by the number of ranks), or on `engine`'s workers;
    `progress(done, total)` is called after each. `plan` names the modules and objects
    `(name, params)` the caller will ask for: the per-report objects and modules they read
    are computed in the same task as the report's normalization (one pass per report,
    instead of a pass of the pool per request that opens each report again).
    """
    remove_dead(cache_root())  # what killed runs left behind
    paths = expand(inputs)
    tables = {p: inspect_tables(p) for p in paths}
    reports = assign_ranks(paths, rank_pattern)
    cached = [CachedReport(r.rank, r.path, cache_dir_for(r.path)) for r in reports]
    todo = [(c, tables[c.path], targets) for c, targets in zip(cached, planner.planned(cached, list(plan)))
            if targets or not (c.views_dir / "session.parquet").exists()]
    workers = max(1, min(jobs, len(todo)))
    work = functools.partial(_normalize, f"{MEMORY_LIMIT_MB // workers}MB",
                             max(1, (os.cpu_count() or 1) // workers))
    map_reports(work, todo, jobs, progress, engine)
    run = open_cached(cached, memory_limit=f"{MEMORY_LIMIT_MB}MB", jobs=jobs, progress=progress,
                      engine=engine)
    run.reports = reports
    return run


def _normalize(memory_limit: str, threads: int,
               item: tuple[CachedReport, dict[str, set[str]], list[tuple[str, dict, Path]]]) -> None:
    """In a worker: a report's normalized views, then its planned per-report objects and
    modules (see `nsyswrap.planner.planned`), under `memory_limit` with `threads` threads."""
    cached, tables, targets = item
    normalize(cached.path, tables, cached.views_dir)
    if targets:
        planner._compute(memory_limit, threads, (cached, targets))
