"""The planner: executes the compiled plan of a request (`nsyswrap.engine.plan`), in order.

What an object needs is what its header declares (see `nsyswrap.engine.sql_objects`); the plan
lists it, step by step, with what the store holds of it:

* macro libraries are run on the connection once;
* per-report steps (objects, and per-report modules of several reports) not stored yet
  are computed first, for every report, in one pass of the worker pool (`jobs` reports at
  a time, or on Dask): each worker computes its report's steps in order on that report
  alone and stores each as an entry of the store (`nsyswrap.storage.store`: `objects/<name>-<key>/
  rows.parquet`). The run reads one as a view of its name over every report's file, with
  `rank` and `report` first;
* a run object is computed over the run's views and objects into a table (by its SQL, or
  by its Python builder: `nsyswrap.engine.builders`), read as a view of its name; over cached
  reports it is stored too (`runs/`) and read back by later calls, so a warm report does
  not solve the clocks again;
* a module (public query) runs after what it needs is bound; one of scope report over
  several reports is a per-report step, its rows concatenated in rank order and sorted by
  its declared `@order`.

Parameters flow by name: an object gets the values of its own parameters out of those
given to what reads it. A view name is re-bound whenever an object is needed with other
parameter values, just before what reads it runs.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from nsyswrap.engine import builders, lazy_views, plan, sql_objects, stage_log
from nsyswrap.engine.connection import CachedReport, create_view, quote
from nsyswrap.engine.pool import map_reports
from nsyswrap.engine.run import open_cached, ours
from nsyswrap.storage import store

ROWS = "rows.parquet"
KEPT_OPEN = 64
"""With jobs=1, the per-report work of a run of at most this many reports is done on a
run of each report kept open (`_report_run`); more would hold as many DuckDB databases."""
ROW_GROUP = 16384
"""Rows per Parquet row group of a stored object: a read of part of it (a time window, the
longest N events) skips the other groups by their min/max statistics."""


def result(run, name: str, params: dict) -> pd.DataFrame:
    """Module `name` with `params` (already typed and complete) on an open run."""
    return results(run, {name: (name, params)})[name]


def scope(run) -> plan.Scope:
    """What a plan of `run` is compiled for."""
    return plan.Scope(
        tuple(run.cached), tuple(run.reports), run.allow_unrelated, run.store_per_report
    )


def results(run, wanted: dict[str, tuple[str, dict]]) -> dict[str, pd.DataFrame]:
    """Several modules, each `key: (module, params)`, on an open run: their plan is
    compiled, then executed in order (the per-report steps of every report first, in one
    pass of the worker pool)."""
    compiled = plan.compile(scope(run), list(wanted.values()))
    _fill(run, compiled)
    out = {}
    for key, (name, params) in wanted.items():
        module = sql_objects.get(name)
        step = compiled.step(name, params)
        if step.kind == "report":  # a per-report module of several reports: stored per report
            tables = [pq.read_table(e / ROWS) for e in step.entries]
            out[key] = declared_order(_concat(tables), module)
            continue
        _bind_needs(run, compiled, name, params)
        lazy_views.ensure(run, module.reads)
        with ours(module):
            out[key] = run.connection.execute(module.sql, module.bound(params)).df()
    return out


def fill(run, items: list[tuple[str, dict]]) -> None:
    """Compute the per-report steps of `items` (`(name, params)`, typed) not stored yet, in
    one pass of the worker pool (the run objects they need are computed when asked for)."""
    _fill(run, plan.compile(scope(run), items))


def prepare(run, name: str, params: dict) -> None:
    """Load the libraries and bind the objects that `name` needs, for `params`."""
    compiled = plan.compile(scope(run), [(name, params)], inputs=True)
    _fill(run, compiled, but=plan.step_id(name, params))
    _bind_needs(run, compiled, name, params)


def bind(run, name: str, params: dict) -> None:
    """Make view `name` hold object `name` computed with (its part of) `params`, with what
    it needs."""
    compiled = plan.compile(scope(run), [(name, params)])
    _fill(run, compiled)
    _bind_needs(run, compiled, name, params)
    _bind(run, compiled.step(name, params))


def stored_rows(run, items: list[tuple[str, dict]]) -> list[list[Path]]:
    """The stored rows of each per-report object or module `(name, params)` of `items` of
    a run of cached reports: per item, one file per report in rank order (the missing ones
    computed first, in one pass of the worker pool)."""
    compiled = plan.compile(dataclasses.replace(scope(run), store_per_report=True), items)
    _fill(run, compiled)
    return [[e / ROWS for e in compiled.step(n, p).entries] for n, p in items]


def planned(
    scope: plan.Scope, wanted: list[tuple[str, dict]], lease: store.Lease | None = None
) -> list[list[tuple[str, dict, Path]]]:
    """Per report of `scope` (in the order of `scope.cached`), the per-report steps of the
    plan of `wanted` not stored yet, in dependency order: what `compute` takes. `lease`
    holds every per-report entry the plan may read before the store is looked at."""
    if lease is not None:
        every = plan.compile(scope, wanted, inputs=True).steps
        lease.hold(*(e for s in every if s.kind == "report" for e in s.entries))
    work = dict((c.views_dir, todo) for c, todo in plan.compile(scope, wanted).per_report_work())
    return [work.get(c.views_dir, []) for c in scope.cached]


def _fill(run, compiled: plan.Plan, but: tuple | None = None) -> None:
    """Compute the per-report steps of `compiled` not stored yet, each report's in order:
    on this connection for a run of one report (as in a worker), else in one pass of the
    worker pool. A stored entry that is damaged is removed first (and computed again)."""
    for step in compiled.steps:
        if step.kind == "report":
            run.lease.hold(*step.entries)
            for entry in step.entries:
                _check(entry)
    todo = compiled.per_report_work(but)
    if len(run.cached) == 1:
        for name, params, target in todo[0][1] if todo else []:
            _store(run, name, params, target)
    elif todo and run.jobs <= 1 and run.engine is None and len(run.cached) <= KEPT_OPEN:
        for done, (cached, targets) in enumerate(todo, 1):
            one = _report_run(run, cached)
            for name, params, target in targets:
                _store(one, name, params, target)
            _release(one)
            if run.progress:
                run.progress(done, len(todo))
    elif todo:
        workers = min(run.jobs, len(todo))
        work = functools.partial(
            compute, f"{run.memory_limit_mb // workers}MB", max(1, (os.cpu_count() or 1) // workers)
        )
        map_reports(work, todo, run.jobs, run.progress, run.engine)


def _report_run(run, cached: CachedReport):
    """The run of report `cached` alone that `run` keeps open for its passes in this
    process: its connection, views, libraries and bound objects made once, not once a pass
    (a report's session and views cost ~40 ms, and a report takes a dozen passes)."""
    if cached.views_dir not in run.report_runs:
        run.report_runs[cached.views_dir] = open_cached(
            [cached], memory_limit=f"{run.memory_limit_mb}MB", threads=os.cpu_count() or 1
        )
    return run.report_runs[cached.views_dir]


def _release(one) -> None:
    """The tables a pass left on kept report run `one` (lazy views built in memory, run
    objects) dropped, so that memory stays bounded by one report, not by the run's reports:
    its session, views and other libraries stay, and what a later pass needs is made again
    (a library that reads a dropped lazy view is loaded again, which builds it first)."""
    for (table,) in one.connection.execute("SELECT table_name FROM duckdb_tables()").fetchall():
        one.connection.execute(f'DROP TABLE "{table}"')
    dropped = {view for view, how in one.lazy.items() if how == "table"}
    one.libraries -= {n for n in one.libraries if dropped & set(sql_objects.get(n).reads)}
    one.lazy = {view: how for view, how in one.lazy.items() if view not in dropped}
    one.tables.clear()
    one.bound.clear()


def _bind_needs(run, compiled: plan.Plan, name: str, params: dict) -> None:
    """Load the libraries and bind the objects of `compiled` that `name` needs, each after
    what it needs, with `params` (what only a stored step reads is not in the plan)."""
    for needed in sql_objects.needs(name)[:-1]:
        step = compiled.step(needed, params)
        if step is None:
            continue
        if step.kind == "library":
            run.load_library(needed)
        else:
            _bind(run, step)


def _bind(run, step: plan.Step) -> None:
    """Make view `step.name` hold the step's rows: a view over its per-report entries, or a
    table computed (or read from the store) once per run and parameter values."""
    name = step.name
    key = _key(name, step.values)
    if run.bound.get(name) == key and run.cached:
        return  # a run of hand-made tables may change: only cached reports are bound once
    if step.kind == "report":
        parts = [
            (c.rank, c.path, e / ROWS)
            for c, e in zip(plan.Scope(tuple(run.cached)).ranked, step.entries)
        ]
        create_view(run.connection, name, parts)
    else:
        table = _table_name(name, key)
        if table not in run.tables or not run.cached:
            with stage_log.step("run", name):
                _compute_run_object(run, step, table)
            run.tables.add(table)
        run.connection.execute(f'CREATE OR REPLACE VIEW "{name}" AS SELECT * FROM "{table}"')
    run.bound[name] = key


def _compute_run_object(run, step: plan.Step, table: str) -> None:
    """Table `table` holding run object `step.name` with `step.params`: read from the
    store, else computed (what it reads bound first) and stored."""
    name, params = step.name, step.params
    obj = sql_objects.get(name)
    stored = step.entries[0] if step.entries else None
    if stored is not None and _read_stored(run, table, stored):
        return
    if stored is not None:  # it was stored when planned: what it reads was not
        inputs = plan.compile(scope(run), [(name, params)], inputs=True)
        _fill(run, inputs, but=step.id)
        _bind_needs(run, inputs, name, params)
    lazy_views.ensure(run, obj.reads)
    if not obj.builder:
        with ours(obj):
            run.connection.execute(
                f'CREATE OR REPLACE TABLE "{table}" AS {obj.sql}', obj.bound(params)
            )
        _keep(run, name, params)
        return
    for built, rows in builders.build(run, obj, params).items():
        made = sql_objects.get(built)
        made_key = _key(built, made.values(params))
        with ours(made):
            builders.create_table(run.connection, _table_name(built, made_key), built, rows)
        _keep(run, built, params)


def _table_name(name: str, key: str) -> str:
    """The table of run object `name` computed with the parameters of `key`."""
    return f"nsyswrap_{name}_{key}"


def _keep(run, name: str, params: dict) -> None:
    """Table `name` (with `params`) is computed: note it, and store it when the run's
    reports are cached."""
    table = _table_name(name, _key(name, sql_objects.get(name).values(params)))
    run.tables.add(table)
    if run.cached:
        stored = plan.run_entry(scope(run), name, params)
        store.write(
            stored,
            lambda work: run.connection.execute(
                f'COPY "{table}" TO {quote(str(work / ROWS))} (FORMAT parquet)'
            ),
            about=", ".join(str(r.path) for r in run.reports),
        )
        run.lease.hold(stored)


def _read_stored(run, table: str, stored: Path) -> bool:
    """Table `table` from the stored rows of a run object, if they are there and sound."""
    run.lease.hold(stored)  # (before it is looked for: see nsyswrap.storage.store)
    if not stored.exists():
        return False
    try:
        run.connection.execute(
            f'CREATE OR REPLACE TABLE "{table}" AS '
            f"SELECT * FROM read_parquet({quote(str(stored / ROWS))})"
        )
    except duckdb.Error:  # damaged: computed again (and stored again)
        store.discard(stored, f"cache entry {stored} was damaged; building it again")
        return False
    store.use(stored)
    return True


def _check(entry: Path) -> None:
    """A stored entry that is damaged is removed (and computed again); a sound one is used."""
    if not entry.exists():
        return
    damaged = store.damaged(entry)
    if damaged is None and (entry / ROWS).exists():
        store.use(entry)
    else:
        store.discard(
            entry, f"cache entry {damaged or entry / ROWS} was damaged; building it again"
        )


def compute(
    memory_limit: str, threads: int, item: tuple[CachedReport, list[tuple[str, dict, Path]]]
) -> None:
    """In a worker: objects or modules over one report, each stored in its entry."""
    cached, targets = item
    with open_cached([cached], memory_limit=memory_limit, threads=threads) as one:
        for name, params, target in targets:
            _store(one, name, params, target)


def _store(run, name: str, params: dict, target: Path) -> None:
    """`name` over a one-report run, written to `target`/rows.parquet (unless a builder
    call that made another object of the plan made it too)."""
    if target.exists():
        return
    obj = sql_objects.get(name)
    values = obj.bound(params)

    def build(work: Path) -> None:
        prepare(run, name, params)
        lazy_views.ensure(run, obj.reads)
        if not obj.builder:
            with ours(obj):
                _copy(run, obj, values, work / ROWS)
            return
        for built, rows in builders.build(run, obj, params).items():
            if built == name:
                _write(run, obj, rows, work / ROWS)
            elif not (other := plan.object_entry(run.cached[0], built, params)).exists():
                store.write(
                    other,
                    lambda w, b=built, r=rows: _write(run, sql_objects.get(b), r, w / ROWS),
                    about=str(run.cached[0].path),
                )

    with stage_log.step("object", name, str(run.cached[0].path)):
        store.write(target, build, about=str(run.cached[0].path))


def _write(run, obj: sql_objects.SqlObject, rows, target: Path) -> None:
    """Rows a builder made for per-report object `obj`, typed, to Parquet file `target`
    (Parquet 2, as the views: the device timeline's million rows are written ~20 % cheaper
    and take half the space)."""
    with ours(obj):
        builders.typed(
            run.connection,
            obj,
            rows,
            f"COPY {{rows}} TO {quote(str(target))} "
            f"(FORMAT parquet, PARQUET_VERSION v2, ROW_GROUP_SIZE {ROW_GROUP})",
        )


def _copy(run, obj: sql_objects.SqlObject, values: dict, target: Path) -> None:
    """COPY the rows of `obj` to Parquet file `target` (an object without `rank`, `report`)."""
    sql = obj.sql
    if obj.kind == "report":
        columns = [
            d[0]
            for d in run.connection.execute(f"SELECT * FROM ({sql}) LIMIT 0", values).description
        ]
        if {"rank", "report"} & set(columns):
            kept = ", ".join(f'"{c}"' for c in columns if c not in ("rank", "report"))
            sql = f"SELECT {kept} FROM ({sql})"
    run.connection.execute(
        f"COPY ({sql}) TO {quote(str(target))} (FORMAT parquet, ROW_GROUP_SIZE {ROW_GROUP})", values
    )


def _key(name: str, values: dict) -> str:
    """Names the table or view binding of `name` with `values` on one connection."""
    return hashlib.sha256(repr((name, sorted(values.items()))).encode()).hexdigest()[:16]


def declared_order(
    frame: pd.DataFrame, module: sql_objects.SqlObject, *, ranks_in_order: bool = True
) -> pd.DataFrame:
    """Per-report rows in the module's declared order (a stable sort). With `ranks_in_order`
    (the reports' rows one after the other in rank order), an order led by rank holds already."""
    keys = list(module.order)
    if not keys or (ranks_in_order and keys[0] == ("rank", False)):
        return frame  # the ranks are in order, each report's rows are in order
    return frame.sort_values(
        [k for k, _ in keys], ascending=[not d for _, d in keys], kind="stable", ignore_index=True
    )


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
    the cross-rank objects of sample files, nsyswrap.sample.objects). What lies between
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
        with ours(obj):
            if obj.kind == "library":
                connection.execute(obj.sql)
            else:
                connection.execute(
                    f'CREATE OR REPLACE TABLE "{needed}" AS {obj.sql}', obj.bound(params)
                )
    module = sql_objects.get(name)
    with ours(module):
        return connection.execute(module.sql, module.bound(params)).df()
