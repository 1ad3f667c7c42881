"""Views that normalization does not write, built on their first use (`LAZY_VIEWS`).

`launches` (each launch call joined to the GPU work it launched: the costliest view to
build and the largest to store) is read, on a report's cold pass, only by objects that
pass computes once and stores whatever the window (the device timeline, each NCCL
kernel's context, the replay's inputs, the NVTX GPU-time projection, `trace.graphs`);
afterwards only ad-hoc queries read it (`nsyswrap sql`, `gaps.launch_latency`, the NVTX
modules with new parameters). So a report's views are written without it, and it is built
where something declares it (an object's `@reads`, or a library's that the object
includes: `launch_metrics`), or ad-hoc SQL names it:

* over one report (a worker computing that report's objects, or a run of one report): a
  table in memory, built once from the report's views;
* over several reports: each report's file, built from its stored views (never from a
  second read of the SQLite export), `jobs` reports at a time in the worker pool and kept
  in the report's views entry for later runs; the view then reads the files.
"""

from __future__ import annotations

import functools
import re
import shutil

from nsyswrap.engine import sql_objects, stage_log
from nsyswrap.engine.cache import VIEW_PARQUET
from nsyswrap.engine.connection import LAZY_VIEWS, CachedReport, create_view, quote, session
from nsyswrap.engine.pool import map_reports
from nsyswrap.errors import shown
from nsyswrap.storage import store
from nsyswrap.storage.leftovers import temp_dir

BUILD_THREADS = 1
"""Threads of DuckDB building a lazy view: one, as normalization does, so its rows come in
the order they would have had in the report's views entry."""


def ensure(run, names) -> None:
    """Make each lazy view of `names` readable on `run`'s connection (over one report a
    table built once, over several its files)."""
    if not run.cached:  # hand-made tables: every view is there
        return
    for name in dict.fromkeys(names):
        if name not in LAZY_VIEWS or name in run.lazy:
            continue
        if len(run.cached) == 1:
            _in_memory(run, name)
        else:
            _over_files(run, name)


def named_in(sql: str) -> list[str]:
    """The lazy views ad-hoc SQL (which has no header) may read: those it names, or that a
    macro it names reads (one of a library whose `@reads` holds them)."""
    return [
        n
        for n in LAZY_VIEWS
        if any(re.search(rf"\b{w}\b", sql, re.IGNORECASE) for w in (n, *_macros_reading(n)))
    ]


@functools.cache
def _macros_reading(name: str) -> tuple[str, ...]:
    """The macros of the libraries whose `@reads` holds `name`."""
    return tuple(
        m
        for lib in sql_objects.of_kind("library")
        if name in lib.reads
        for m in re.findall(r"MACRO\s+(\w+)", lib.sql)
    )


def _in_memory(run, name: str) -> None:
    """`name` on a run of one report: a table built once from its views."""
    (cached,) = run.cached
    obj, con = sql_objects.get(name), run.connection
    table = f"nsyswrap_lazy_{name}"
    threads = con.execute("SELECT current_setting('threads')").fetchone()[0]
    con.execute(f"SET threads = {BUILD_THREADS}")
    try:
        with stage_log.step("views", name, str(cached.path)):
            con.execute(f'CREATE OR REPLACE TEMP TABLE "{table}" AS {obj.sql}')
    finally:
        con.execute(f"SET threads = {int(threads)}")
    keys = f"CAST({int(cached.rank)} AS INTEGER) AS rank, {quote(shown(cached.path))} AS report"
    con.execute(f'CREATE OR REPLACE VIEW "{name}" AS SELECT {keys}, * FROM "{table}"')
    run.lazy[name] = "table"


def _over_files(run, name: str) -> None:
    """`name` over several reports: each missing file built (in the pool), then the view."""
    todo = [c for c in run.cached if not (c.views_dir / f"{name}.parquet").exists()]
    limit = f"{max(64, run.memory_limit_mb // max(1, min(run.jobs, len(todo))))}MB"
    map_reports(functools.partial(build_file, name, limit), todo, run.jobs)
    files = [(c.rank, c.path, c.views_dir / f"{name}.parquet") for c in run.cached]
    create_view(run.connection, name, files)
    run.lazy[name] = "files"


def build_file(name: str, memory_limit: str, cached: CachedReport) -> None:
    """Write lazy view `name` of one report, from its stored views, into its views entry."""
    obj = sql_objects.get(name)
    spill = temp_dir("spill")
    con = session(memory_limit=memory_limit, spill_dir=spill, threads=BUILD_THREADS)
    try:
        for view in obj.reads:  # views only (a test checks it): every views entry has them
            file = quote(str(cached.views_dir / f"{view}.parquet"))
            con.execute(f'CREATE VIEW "{view}" AS SELECT * FROM read_parquet({file})')
        with stage_log.step("views", name, str(cached.path)):
            store.add_file(
                cached.views_dir,
                f"{name}.parquet",
                lambda target: con.execute(
                    f"COPY ({obj.sql}) TO {quote(str(target))} ({VIEW_PARQUET})"
                ),
            )
    finally:
        con.close()
        shutil.rmtree(spill, ignore_errors=True)
