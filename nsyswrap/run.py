"""A run: several per-rank reports behind one DuckDB connection with the normalized views,
the reductions (built when first read) and the macros (loaded when first named); work on
each report alone runs in a pool of worker processes, its results cached per report."""
from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from nsyswrap.cache import (build_atomically, cache_dir_for, normalize, reduce_report,
                            reductions_dir_for, sql_digest)
from nsyswrap.connection import (CachedReport, connect, create_view, macro_files, macro_names,
                                 reduction_names)
from nsyswrap.errors import NsysWrapError
from nsyswrap.dask_engine import DaskEngine
from nsyswrap.pool import map_reports
from nsyswrap.reports import DEFAULT_RANK_PATTERN, Report, assign_ranks, expand
from nsyswrap.validate import inspect_tables

MEMORY_LIMIT_MB = 2048
"""DuckDB's memory cap for a run, shared by the run's connection and its workers."""

PerReport = Callable[["Run", dict], dict[str, pd.DataFrame]]
"""Work on one report alone: (one-report run, params) -> named frames."""


@dataclass
class Run:
    connection: duckdb.DuckDBPyConnection
    reports: list[Report]
    spill_dir: Path
    cached: list[CachedReport] = field(default_factory=list)  # empty: tables made by hand
    jobs: int = 2
    progress: Callable[[int, int], None] | None = None
    unloaded_macros: dict[Path, set[str]] = field(default_factory=dict)
    """Files of sql/_macros not yet run on the connection, with the macros each creates:
    each loads when SQL first names one of its macros (metrics.sql alone takes ~0.2 s)."""
    built_reductions: set[str] = field(default_factory=set)
    run_scope_built: bool = False
    """Whether the run-scope cross-rank tables (nsyswrap.crossrank.solve) exist."""
    allow_unrelated: bool = False
    """Analyse reports across runs even when their capture spans are far apart."""
    unrelated: NsysWrapError | None = None
    """Why the reports are not one run (set by nsyswrap.crossrank.solve), if they are not."""
    engine: DaskEngine | None = None  # None: per-report work in local worker processes

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        """The connection, with every reduction built and every macro loaded."""
        self._prepare_for(set(reduction_names()) | set().union(*self.unloaded_macros.values()))
        return self.connection

    def _prepare_for(self, words: set[str]) -> None:
        """Build the reductions and load the macro files SQL naming `words` reads: the
        reductions it names or that the macro files of the macros it names mention."""
        files = [path for path in macro_files() if macro_names(path) & words]
        words = words.union(*(_words(path.read_text()) for path in files))
        self._build_reductions(sorted(words & set(reduction_names()) - self.built_reductions))
        if not self.run_scope_built:
            from nsyswrap.crossrank import solve  # imports nsyswrap.run
            if words & solve.RUN_SCOPE_TABLES:
                self.run_scope_built = True  # first: preparing reads reductions through here
                solve.prepare(self)
        self._load_macros(lambda names: bool(names & words))

    def _build_reductions(self, names: list[str]) -> None:
        """Reductions are built when first read: per report in the pool, then viewed."""
        if not names or not self.cached:
            return
        todo = [(c, [n for n in names if not (c.reductions_dir / f"{n}.parquet").exists()])
                for c in self.cached]
        map_reports(_reduce, [item for item in todo if item[1]], self.jobs, self.progress, self.engine)
        for name in names:
            create_view(self.connection, name, self.cached, "reductions_dir")
        self.built_reductions.update(names)

    def _load_macros(self, needed: Callable[[set[str]], bool]) -> None:
        for path, names in list(self.unloaded_macros.items()):
            if needed(names):
                self.connection.execute(path.read_text())
                del self.unloaded_macros[path]

    def df(self, sql: str, params: dict | None = None) -> pd.DataFrame:
        """Run SQL over the views with bound parameters and return a DataFrame."""
        return self.execute(sql, params).df()

    def execute(self, sql: str, params: dict | list | None = None) -> duckdb.DuckDBPyConnection:
        """Run SQL over the views with bound parameters (the macros it names loaded)."""
        self._prepare_for(_words(sql))
        try:
            return self.connection.execute(sql, params or {})
        except duckdb.Error as exc:
            raise NsysWrapError("query", str(exc).splitlines()[0], "check the SQL against the views listed by `nsyswrap views`") from exc

    def per_report(self, fn: PerReport, params: dict) -> dict[str, pd.DataFrame]:
        """`fn` on each report alone, `jobs` reports at a time in worker processes, its
        frames concatenated in rank order. Results are cached beside each report's views,
        keyed to the rank, `fn`, `params` and every SQL file and Python module of nsyswrap."""
        files = self.per_report_files(fn, params)
        return {name: _concat([pq.read_table(f) for f in paths]) for name, paths in files.items()}

    def per_report_files(self, fn: PerReport, params: dict) -> dict[str, list[Path]]:
        """`per_report`'s results as each report's cached Parquet file of each frame, in
        rank order, for results too large to hold at once (see `nsyswrap.stream`)."""
        ranked = sorted(self.cached, key=lambda c: c.rank)
        dirs = [_results_dir(c, fn, params) for c in ranked]
        missing = [(c, d) for c, d in zip(ranked, dirs) if not (d / ".complete").exists()]
        if missing:
            workers = min(self.jobs, len(missing))
            limit = f"{MEMORY_LIMIT_MB // workers}MB"
            threads = max(1, (os.cpu_count() or 1) // workers)
            work = functools.partial(_compute_frames, fn, params, limit, threads)
            map_reports(work, missing, self.jobs, self.progress, self.engine)
        names = sorted(p.stem for p in dirs[0].glob("*.parquet")) if dirs else []
        return {name: [d / f"{name}.parquet" for d in dirs] for name in names}

    def close(self) -> None:
        self.connection.close()
        shutil.rmtree(self.spill_dir, ignore_errors=True)

    def __enter__(self) -> "Run":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _concat(tables: list[pa.Table]) -> pd.DataFrame:
    """The tables one after the other (empty ones only shape an all-empty result), as one
    DataFrame converted once, freeing the Arrow buffers as it goes (large results)."""
    kept = [t for t in tables if t.num_rows] or tables[:1]
    table = pa.concat_tables(kept, promote_options="permissive")
    del kept, tables
    return table.to_pandas(self_destruct=True, split_blocks=True)


@functools.cache
def _code_digest() -> str:
    """Changes whenever nsyswrap's SQL or Python changes: cached results follow the code."""
    here = Path(__file__).parent
    python = "".join(hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(here.rglob("*.py")))
    return sql_digest("", extra=python)


def _results_dir(cached: CachedReport, fn: PerReport, params: dict) -> Path:
    key = repr((cached.rank, fn.__module__, fn.__qualname__, sorted(params.items()), _code_digest()))
    return cached.views_dir / "results" / hashlib.sha256(key.encode()).hexdigest()[:24]


def _compute_frames(fn: PerReport, params: dict, memory_limit: str, threads: int,
                    item: tuple[CachedReport, Path]) -> None:
    """In a worker: `fn` over one report, each frame written to `<dir>/<name>.parquet`."""
    cached, target = item
    report = Report(cached.rank, cached.path, "cache")

    def build(work: Path) -> None:
        with _open([report], [cached], memory_limit=memory_limit, threads=threads) as one:
            for name, frame in fn(one, params).items():
                frame.to_parquet(work / f"{name}.parquet", index=False)
        (work / ".complete").touch()

    build_atomically(target, build)


@functools.lru_cache(maxsize=256)
def _words(sql: str) -> frozenset[str]:
    return frozenset(re.findall(r"\w+", sql))


def _reduce(item: tuple[CachedReport, list[str]]) -> None:
    """In a worker: the reductions `names` of one report."""
    cached, names = item
    reduce_report(cached.path, cached.views_dir, names)


def _open(reports: list[Report], cached: list[CachedReport], *, memory_limit: str,
          threads: int | None = None, jobs: int = 2,
          progress: Callable[[int, int], None] | None = None, engine: DaskEngine | None = None) -> Run:
    spill = Path(tempfile.mkdtemp(prefix="nsyswrap-spill-"))
    con = connect(cached, memory_limit=memory_limit, spill_dir=spill, threads=threads, macros=False)
    built = {n for n in reduction_names()
             if all((c.reductions_dir / f"{n}.parquet").exists() for c in cached)}
    return Run(con, reports, spill, cached, jobs, progress,
               {path: macro_names(path) for path in macro_files()}, built, engine=engine)


def open_run(
    inputs: list[str | Path],
    *,
    rank_pattern: str = DEFAULT_RANK_PATTERN,
    jobs: int = 2,
    progress: Callable[[int, int], None] | None = None,
    engine: DaskEngine | None = None,
) -> Run:
    """Validate the reports, normalize each (cached) and open the views over all of them.

    `jobs` reports are normalized at a time in worker processes (memory stays bounded
    by that, not by the number of ranks), or on `engine`'s workers;
    `progress(done, total)` is called after each.
    """
    paths = expand(inputs)
    tables = {p: inspect_tables(p) for p in paths}
    reports = assign_ranks(paths, rank_pattern)
    dirs = {r.path: cache_dir_for(r.path) for r in reports}
    todo = [(r.path, tables[r.path], dirs[r.path]) for r in reports
            if not (dirs[r.path] / "session.parquet").exists()]
    map_reports(_normalize, todo, jobs, progress, engine)
    cached = [CachedReport(r.rank, r.path, dirs[r.path], reductions_dir_for(dirs[r.path]))
              for r in reports]
    return _open(reports, cached, memory_limit=f"{MEMORY_LIMIT_MB}MB", jobs=jobs, progress=progress,
                 engine=engine)


def _normalize(item: tuple[Path, dict[str, set[str]], Path]) -> None:
    """In a worker: a report's normalized views."""
    normalize(*item)


@dataclass(frozen=True)
class Opener:
    """How to open reports: the options every command that reads a run shares."""

    rank_pattern: str = DEFAULT_RANK_PATTERN
    jobs: int = 2
    progress: Callable[[int, int], None] | None = None
    allow_unrelated: bool = False  # analyse reports across runs (see Run.allow_unrelated)
    engine: DaskEngine | None = None  # None: local worker processes (see nsyswrap.pool)

    def open(self, inputs: list[str | Path]) -> Run:
        run = open_run(inputs, rank_pattern=self.rank_pattern, jobs=self.jobs, progress=self.progress,
                       engine=self.engine)
        run.allow_unrelated = self.allow_unrelated
        return run


DEFAULT_OPENER = Opener()
