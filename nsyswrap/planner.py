"""The planner: given a SQL object and parameters, compute what it needs, then it.

What an object needs is what its header declares (see `nsyswrap.sql_objects`):

* macro libraries are run on the connection once;
* a per-report object is computed on each report alone, `jobs` reports at a time in
  worker processes, and stored under a key of (report, rank, the SQL of the object and of
  everything it needs, its parameter values, nsyswrap's version): `<report cache>/objects/
  <name>-<key>/rows.parquet`, written whole in a fresh directory that is then renamed (a
  directory that exists is complete). The run then reads it as a view of that name over
  every report's file, with `rank` and `report` first;
* a run object is computed over the run's views and objects into a table, and read as a
  view of its name; over cached reports it is also stored (beside the first rank's views,
  keyed to every report's entry) and read back by later calls, so a warm report does not
  solve the clocks again;
* a module (public query) runs after what it needs is bound; one of scope report over
  several reports runs per report like an object, its rows concatenated in rank order and
  sorted by its declared `@order`.

Parameters flow by name: an object gets the values of its own parameters out of those
given to what reads it. A view name is re-bound whenever an object is needed with other
parameter values, just before what reads it runs.
"""
from __future__ import annotations

import functools
import hashlib
import inspect
import os
import shutil
from contextlib import contextmanager
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from nsyswrap import sql_objects
from nsyswrap.cache import build_atomically
from nsyswrap.cache_keys import code_digest, nsyswrap_version
from nsyswrap.connection import CachedReport, create_view, quote
from nsyswrap.errors import NsysWrapError
from nsyswrap.pool import map_reports

ROW_GROUP = 16384
"""Rows per Parquet row group of a stored object: a read of part of it (a time window, the
longest N events) skips the other groups by their min/max statistics."""


def result(run, name: str, params: dict) -> pd.DataFrame:
    """Module `name` with `params` (already typed and complete) on an open run."""
    return results(run, {name: (name, params)})[name]


def results(run, wanted: dict[str, tuple[str, dict]]) -> dict[str, pd.DataFrame]:
    """Several modules, each `key: (module, params)`, on an open run; the per-report
    modules of a run of several reports are computed in one pass of the worker pool."""
    several = len(run.cached) > 1 or (bool(run.cached) and getattr(run, "store_per_report", False))
    per_report = [item for item in wanted.values() if several and sql_objects.get(item[0]).per_report]
    stored = dict(zip(map(_item_key, per_report), _stored(run, per_report)))
    out = {}
    for key, (name, params) in wanted.items():
        module = sql_objects.get(name)
        if (name, params) in per_report:
            out[key] = declared_order(_concat([pq.read_table(p) for p in stored[_item_key((name, params))]]),
                               module)
            continue
        prepare(run, name, params)
        with _ours(module):
            out[key] = run.connection.execute(module.sql, module.bound(params)).df()
    return out


def _item_key(item: tuple[str, dict]) -> str:
    return _key(item[0], sql_objects.get(item[0]).values(item[1]))


def prepare(run, name: str, params: dict) -> None:
    """Load the libraries and bind the objects that `name` needs, for `params` (the
    per-report objects missing for some report first, in one pass of the worker pool)."""
    needed_here = sql_objects.needs(name)[:-1]
    if run.cached:
        _stored(run, [(n, params) for n in needed_here if sql_objects.get(n).kind == "report"])
    for needed in needed_here:
        if sql_objects.get(needed).kind == "library":
            load_library(run, needed)
        else:
            bind(run, needed, params)


def load_library(run, name: str) -> None:
    """Run macro library `name` on the run's connection, once."""
    if name not in run.libraries:
        with _ours(sql_objects.get(name)):
            run.connection.execute(sql_objects.get(name).sql)
        run.libraries.add(name)


def bind(run, name: str, params: dict) -> None:
    """Make view `name` hold object `name` computed with (its part of) `params`."""
    obj = sql_objects.get(name)
    values = obj.values(params)
    key = _key(name, values)
    if run.bound.get(name) == key and run.cached:
        return  # a run of hand-made tables may change: only cached reports are bound once
    if obj.kind == "report" and run.cached:
        files, = _stored(run, [(name, params)])
        create_view(run.connection, name, [(c.rank, c.path, f) for c, f in zip(_ranked(run), files)])
    else:
        table = f"nsyswrap_{name}_{key}"
        if table not in run.tables or not run.cached:
            stored = _run_stored(run, name, key)
            if stored is None or not _read_stored(run, table, stored):
                prepare(run, name, params)
                builder = python_built().get(name)
                if builder is not None:
                    builder(run, name, params, table)
                else:
                    with _ours(obj):
                        run.connection.execute(f'CREATE OR REPLACE TABLE "{table}" AS {obj.sql}',
                                               obj.bound(params))
                if stored is not None and run.unrelated is None:
                    build_atomically(stored, lambda work: run.connection.execute(
                        f'COPY "{table}" TO {quote(str(work / "rows.parquet"))} (FORMAT parquet)'))
            run.tables.add(table)
        run.connection.execute(f'CREATE OR REPLACE VIEW "{name}" AS SELECT * FROM "{table}"')
    run.bound[name] = key


def _run_stored(run, name: str, key: str) -> Path | None:
    """Where run object `name` (parameters `key`) of a run of cached reports is stored,
    beside the first rank's views; keyed to every report's cache entry, rank and rank
    source, whether unrelated reports are allowed, and nsyswrap's code (None for a run of
    hand-made tables). It is stored only while the reports are one run (`run.unrelated`
    None), so a later call that reads it skips the cross-rank solve rightly."""
    if not run.cached:
        return None
    sources = sorted((r.rank, r.rank_source) for r in run.reports)
    text = repr((sources, sorted((c.rank, str(c.views_dir)) for c in run.cached),
                 run.allow_unrelated, code_digest()))
    entry = hashlib.sha256(text.encode()).hexdigest()[:24]
    return _ranked(run)[0].views_dir / "runs" / entry / f"{name}-{key}"


def _read_stored(run, table: str, stored: Path) -> bool:
    """Table `table` from the stored rows of a run object, if they are there and sound."""
    if not stored.exists():
        return False
    try:
        run.connection.execute(f'CREATE OR REPLACE TABLE "{table}" AS '
                               f'SELECT * FROM read_parquet({quote(str(stored / "rows.parquet"))})')
    except duckdb.Error:  # damaged: computed again (and stored again)
        shutil.rmtree(stored, ignore_errors=True)
        return False
    return True


@functools.cache
def python_built() -> dict:
    """Objects computed in Python instead of by their SQL body (which only types them):
    name -> builder(run, name, params, table), which creates table `table`. The
    cross-rank solve (nsyswrap.crossrank.solve: matching, the global clock solve,
    per-collective timing) makes its six run tables once per run and parameter values;
    the per-report objects of `arrow_built` are made from their rows."""
    from nsyswrap.crossrank import solve  # (it imports nsyswrap.run, which imports this)

    return {**{name: solve.build for name in solve.RUN_SCOPE_TABLES},
            **{name: _into_table(builder) for name, builder in arrow_built().items()}}


@functools.cache
def arrow_built() -> dict:
    """Per-report objects computed in Python: name -> builder(run, name, params), which
    returns the rows as an Arrow table of the types the header declares, `rank` first: the
    device timeline and what is read off it (nsyswrap.device_timeline)."""
    from nsyswrap import device_timeline as timeline

    return {"device_timeline": timeline.build_timeline, "window_unions": timeline.build_window_unions,
            "step_unions": timeline.build_step_unions, "nccl_overlap": timeline.build_nccl_overlap,
            "idle_gap_rows": timeline.build_idle_gap_rows}


def _into_table(builder):
    def build(run, name: str, params: dict, table: str) -> None:
        with _registered(run, builder(run, name, params)) as rows:
            run.connection.execute(f'CREATE OR REPLACE TABLE "{table}" AS SELECT * FROM "{rows}"')

    return build


@contextmanager
def _registered(run, rows: pa.Table):
    """`rows` readable on the run's connection by the name it yields."""
    name = f"nsyswrap_rows_{id(rows)}"
    run.connection.register(name, rows)
    try:
        yield name
    finally:
        run.connection.unregister(name)


def _ranked(run) -> list[CachedReport]:
    return sorted(run.cached, key=lambda c: c.rank)


def _stored(run, items: list[tuple[str, dict]]) -> list[list[Path]]:
    """The stored rows of each per-report object or module `(name, params)` of `items`
    (in dependency order): per item, one file per report in rank order. The missing ones
    are computed first, in one pass of the worker pool (each worker computes a report's
    missing ones in order)."""
    ranked = _ranked(run)
    dirs = [[_target(c, n, p) for c in ranked] for n, p in items]
    todo = [(c, [(n, p, dirs[j][i]) for j, (n, p) in enumerate(items) if not dirs[j][i].exists()])
            for i, c in enumerate(ranked)]
    todo = [item for item in todo if item[1]]
    if len(run.cached) == 1:  # one report (as in a worker): on this connection
        for name, params, target in todo[0][1] if todo else []:
            _store(run, name, params, target)
    elif todo:
        workers = min(run.jobs, len(todo))
        work = functools.partial(_compute, f"{run.memory_limit_mb // workers}MB",
                                 max(1, (os.cpu_count() or 1) // workers))
        map_reports(work, todo, run.jobs, run.progress, getattr(run, "engine", None))
    return [[d / "rows.parquet" for d in row] for row in dirs]


def _target(cached: CachedReport, name: str, params: dict) -> Path:
    """The directory of per-report object or module `name` with `params` of one report."""
    return cached.views_dir / "objects" / f"{name}-{_key(name, sql_objects.get(name).values(params), cached.rank)}"


def planned(cached: list[CachedReport], plan: list[tuple[str, dict]]) -> list[list[tuple[str, dict, Path]]]:
    """Per report of `cached`, the per-report objects and modules that the modules or
    objects `(name, params)` of `plan` will read, missing from its cache, each with its
    directory, in dependency order: what `_compute` takes. A per-report module is stored
    whole only in a run of several reports, as `results` reads it."""
    items: dict[str, tuple[str, dict]] = {}
    for name, params in plan:
        for needed in sql_objects.needs(name):
            obj = sql_objects.get(needed)
            if obj.kind == "report" or (needed == name and obj.per_report and len(cached) > 1):
                items.setdefault(_item_key((needed, params)), (needed, params))
    return [[(n, p, target) for n, p in items.values() if not (target := _target(c, n, p)).exists()]
            for c in cached]


def _compute(memory_limit: str, threads: int,
             item: tuple[CachedReport, list[tuple[str, dict, Path]]]) -> None:
    """In a worker: objects or modules over one report, each stored in its directory."""
    from nsyswrap.run import open_cached  # (the run module imports this one)

    cached, targets = item
    with open_cached([cached], memory_limit=memory_limit, threads=threads) as one:
        for name, params, target in targets:
            _store(one, name, params, target)


def _store(run, name: str, params: dict, target: Path) -> None:
    """`name` over a one-report run, written to `target`/rows.parquet."""
    obj = sql_objects.get(name)
    values = obj.bound(params)

    def build(work: Path) -> None:
        prepare(run, name, params)
        builder = arrow_built().get(name)
        with _ours(obj):
            if builder is None:
                _copy(run, obj, obj.sql, values, work / "rows.parquet")
                return
            with _registered(run, builder(run, name, params)) as rows:
                _copy(run, obj, f'SELECT * FROM "{rows}"', {}, work / "rows.parquet")

    build_atomically(target, build)


def _copy(run, obj: sql_objects.SqlObject, sql: str, values: dict, target: Path) -> None:
    """COPY the rows of `obj` (`sql` with `values`) to Parquet file `target` (an object
    without `rank`, `report`)."""
    if obj.kind == "report":
        columns = [d[0] for d in run.connection.execute(
            f"SELECT * FROM ({sql}) LIMIT 0", values).description]
        if {"rank", "report"} & set(columns):
            kept = ", ".join(f'"{c}"' for c in columns if c not in ("rank", "report"))
            sql = f"SELECT {kept} FROM ({sql})"
    run.connection.execute(f"COPY ({sql}) TO {quote(str(target))} "
                           f"(FORMAT parquet, ROW_GROUP_SIZE {ROW_GROUP})", values)


@contextmanager
def _ours(obj: sql_objects.SqlObject):
    """A failure of nsyswrap's own SQL is a bug: it keeps its traceback and says so."""
    try:
        yield
    except duckdb.OutOfMemoryException as exc:
        raise NsysWrapError(obj.name, f"ran out of memory ({str(exc).splitlines()[0]})",
                            "free memory or pass fewer jobs (-j 1)") from exc
    except duckdb.Error as exc:
        raise RuntimeError(f"nsyswrap's packaged SQL {obj.path} failed: a bug in nsyswrap, "
                           "please report it with this traceback") from exc


def _key(name: str, values: dict, rank: int | None = None) -> str:
    text = repr((name, rank, sql_objects.digest(name), _built_digest(name), sorted(values.items()),
                 nsyswrap_version()))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@functools.cache
def _built_digest(name: str) -> str:
    """Changes whenever the Python builder of `name` or of anything it needs changes."""
    h = hashlib.sha256()
    builders = {**python_built(), **arrow_built()}
    for path in sorted({inspect.getsourcefile(builders[n]) for n in sql_objects.needs(name)
                        if n in builders}):
        h.update(Path(path).read_bytes())
    return h.hexdigest()[:16]


def declared_order(frame: pd.DataFrame, module: sql_objects.SqlObject, *,
                   ranks_in_order: bool = True) -> pd.DataFrame:
    """Per-report rows in the module's declared order (a stable sort). With `ranks_in_order`
    (the reports' rows one after the other in rank order), an order led by rank holds already."""
    keys = list(module.order)
    if not keys or (ranks_in_order and keys[0] == ("rank", False)):
        return frame  # the ranks are in order, each report's rows are in order
    return frame.sort_values([k for k, _ in keys], ascending=[not d for _, d in keys],
                             kind="stable", ignore_index=True)


def _concat(tables: list[pa.Table]) -> pd.DataFrame:
    """The tables one after the other (empty ones only shape an all-empty result), as one
    DataFrame converted once, freeing the Arrow buffers as it goes (large results)."""
    kept = [t for t in tables if t.num_rows] or tables[:1]
    table = pa.concat_tables(kept, promote_options="permissive")
    del kept, tables
    return table.to_pandas(self_destruct=True, split_blocks=True)



def result_over(connection, name: str, params: dict, given: frozenset[str]) -> pd.DataFrame:
    """Module `name` with `params` (typed and complete) over a connection that already holds
    the objects `given` as tables of their names and columns (run objects made elsewhere:
    the cross-rank objects of sample files, nsyswrap.sample.analysis). What lies between
    them and `name` is computed from its SQL, in the order of what it reads; what only
    the given objects need is not."""
    order: list[str] = []

    def visit(n: str) -> None:
        obj = sql_objects.get(n)
        for dep in obj.includes + obj.reads:
            if dep not in order and dep not in given and sql_objects.get(dep).kind != "view":
                visit(dep)
        order.append(n)

    visit(name)
    for needed in order[:-1]:
        obj = sql_objects.get(needed)
        with _ours(obj):
            if obj.kind == "library":
                connection.execute(obj.sql)
            else:
                connection.execute(f'CREATE OR REPLACE TABLE "{needed}" AS {obj.sql}',
                                   obj.bound(params))
    module = sql_objects.get(name)
    with _ours(module):
        return connection.execute(module.sql, module.bound(params)).df()
