"""A run: several per-rank reports behind one DuckDB connection with the normalized views.

What SQL objects need (libraries, per-report and run objects) the planner binds on the
connection when asked for them (`nsyswrap.engine.planner`); opening reports as a run (validate,
rank, normalize) is `nsyswrap.engine.opening`.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import pandas as pd

from nsyswrap.engine import sql_objects
from nsyswrap.engine.connection import LAZY_VIEWS, CachedReport, connect
from nsyswrap.engine.dask_engine import DaskEngine
from nsyswrap.errors import NsysWrapError, limit_error
from nsyswrap.storage import store
from nsyswrap.storage.leftovers import temp_dir
from nsyswrap.storage.reports import Report

MEMORY_LIMIT_MB = 2048
"""DuckDB's memory cap for a run, shared by the run's connection and its workers."""


@dataclass(eq=False)  # a run is itself: hashable by identity
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
    """Object name -> key of the parameters its view holds now (see nsyswrap.engine.planner)."""
    tables: set[str] = field(default_factory=set)
    """Run objects computed so far (a table per object and parameter values)."""
    allow_unrelated: bool = False
    """Analyse reports across runs even when their capture spans are far apart."""
    engine: DaskEngine | None = None  # None: per-report work in local worker processes
    store_per_report: bool = False
    """Store per-report module results even for one report (launch --precompute: the
    run of all reports then finds them)."""
    lease: store.Lease = field(default_factory=store.Lease)
    """The store entries this run uses: kept from eviction until it closes."""
    cache_max: str | None = None
    """The store's cap (`--cache-max`), applied when the run closes; None: no eviction
    (a worker's run over one report)."""
    lazy: dict[str, str] = field(default_factory=dict)
    """Lazy view -> how the connection reads it now (its files, or a table in memory; absent:
    not yet readable: nsyswrap.engine.lazy_views)."""
    report_runs: dict[Path, Run] = field(default_factory=dict)
    """Views entry -> a run of that one report, kept open for this run's next passes of
    per-report work in this process (nsyswrap.engine.planner: jobs=1)."""

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        """The connection, with every macro library loaded and every view there."""
        from nsyswrap.engine import lazy_views

        lazy_views.ensure(self, LAZY_VIEWS)
        return self._with_libraries()

    def _with_libraries(self) -> duckdb.DuckDBPyConnection:
        for library in sql_objects.of_kind("library"):
            if library.path.parent.name == "_macros":
                for needed in sql_objects.needs(library.name):  # its libraries first
                    self.load_library(needed)
        return self.connection

    def load_library(self, name: str) -> None:
        """Run macro library `name` on the connection, once (the lazy views it reads made
        readable first: see nsyswrap.engine.lazy_views)."""
        if name not in self.libraries:
            from nsyswrap.engine import lazy_views

            lazy_views.ensure(self, sql_objects.get(name).reads)
            with ours(sql_objects.get(name)):
                self.connection.execute(sql_objects.get(name).sql)
            self.libraries.add(name)

    def df(self, sql: str, params: dict | None = None) -> pd.DataFrame:
        """Run ad-hoc SQL over the views and the macro libraries with bound parameters."""
        return self.execute(sql, params).df()

    def ready_for(self, sql: str) -> duckdb.DuckDBPyConnection:
        """The connection, with what ad-hoc `sql` may read made readable: the lazy views it
        names and every macro library (done before the sandbox locks the settings)."""
        from nsyswrap.engine import lazy_views

        lazy_views.ensure(self, lazy_views.named_in(sql))
        return self._with_libraries()

    def execute(self, sql: str, params: dict | list | None = None) -> duckdb.DuckDBPyConnection:
        """Ad-hoc SQL (the user's: its errors are the user's to fix)."""
        con = self.ready_for(sql)
        try:
            return con.execute(sql, params or {})
        except duckdb.Error as exc:
            raise (
                store.gone(exc)
                or limit_error(exc, self.spill_dir)
                or NsysWrapError(
                    "query",
                    str(exc).splitlines()[0],
                    "check the SQL against the views listed by `nsyswrap views`",
                )
            ) from exc

    def close(self) -> None:
        for one in self.report_runs.values():
            one.close()
        self.report_runs.clear()
        self.connection.close()
        shutil.rmtree(self.spill_dir, ignore_errors=True)
        self.lease.release()
        if self.cache_max is not None:
            store.evict(self.cache_max)

    def __enter__(self) -> Run:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@contextmanager
def ours(obj: sql_objects.SqlObject):
    """A failure of nsyswrap's own SQL is a bug: it keeps its traceback and says so."""
    try:
        yield
    except duckdb.OutOfMemoryException as exc:
        raise NsysWrapError(
            obj.name,
            f"ran out of memory ({str(exc).splitlines()[0]})",
            "free memory or pass fewer jobs (-j 1)",
        ) from exc
    except duckdb.Error as exc:
        limit = store.gone(exc) or limit_error(exc)  # a removed entry, the disk, open files
        if limit is not None:
            raise limit from exc
        raise RuntimeError(
            f"nsyswrap's packaged SQL {obj.path} failed: a bug in nsyswrap, "
            "please report it with this traceback"
        ) from exc


def open_cached(
    cached: list[CachedReport],
    *,
    memory_limit: str,
    threads: int | None = None,
    jobs: int = 2,
    progress: Callable[[int, int], None] | None = None,
    engine: DaskEngine | None = None,
    lease: store.Lease | None = None,
) -> Run:
    """A run over reports already normalized (`lease`: what holds them already)."""
    spill = temp_dir("spill")
    con = connect(cached, memory_limit=memory_limit, spill_dir=spill, threads=threads)
    reports = [Report(c.rank, c.path, "cache") for c in cached]
    run = Run(
        con,
        reports,
        spill,
        cached,
        jobs,
        progress,
        int(memory_limit.removesuffix("MB")),
        engine=engine,
        lease=lease or store.Lease(),
    )
    run.lease.hold(*(c.views_dir for c in cached))
    run.lazy = {  # (nsyswrap.engine.connection.connect made their views)
        v: "files"
        for v in LAZY_VIEWS
        if cached and all((c.views_dir / f"{v}.parquet").exists() for c in cached)
    }
    return run
