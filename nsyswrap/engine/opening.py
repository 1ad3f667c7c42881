"""Opening reports as a run: validate them, give them ranks, normalize each (with the
per-report work the caller's plan will read, in the same task) and open the views over
all of them (`open_run`); or, without reading them, the plan of a request over them
(`plan_of`, for `nsyswrap plan`)."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from pathlib import Path

from nsyswrap.engine import planner
from nsyswrap.engine.cache import cache_dir_for, normalize
from nsyswrap.engine.connection import CachedReport
from nsyswrap.engine.dask_engine import DaskEngine
from nsyswrap.engine.plan import Plan, Scope
from nsyswrap.engine.plan import compile as compile_plan
from nsyswrap.engine.pool import map_reports
from nsyswrap.engine.run import MEMORY_LIMIT_MB, Run, open_cached
from nsyswrap.storage import store
from nsyswrap.storage.cache_keys import cache_root
from nsyswrap.storage.leftovers import remove_dead
from nsyswrap.storage.reports import DEFAULT_RANK_PATTERN, assign_ranks, expand, refuse_duplicates
from nsyswrap.storage.validate import inspect_tables


def open_run(
    inputs: list[str | Path],
    *,
    rank_pattern: str = DEFAULT_RANK_PATTERN,
    jobs: int = 2,
    progress: Callable[[int, int], None] | None = None,
    engine: DaskEngine | None = None,
    plan: tuple[tuple[str, dict], ...] = (),
    cache_max: str = "",
    allow_unrelated: bool = False,
) -> Run:
    """Validate the reports, normalize each (cached) and open the views over all of them.

    `jobs` reports are normalized at a time in worker processes (memory stays bounded
    by that, not by the number of ranks), or on `engine`'s workers;
    `progress(done, total)` is called after each. `plan` names the modules and objects
    `(name, params)` the caller will ask for: the per-report objects and modules they read
    are computed in the same task as the report's normalization (one pass per report,
    instead of a pass of the pool per request that opens each report again). When the run
    closes, the store is held within `cache_max` (`nsyswrap.storage.store.cap_bytes`: "" the
    default cap).
    """
    remove_dead(cache_root())  # what killed runs left behind
    paths = expand(inputs)
    tables = {p: inspect_tables(p) for p in paths}
    reports = assign_ranks(paths, rank_pattern)
    refuse_duplicates(paths)
    cached = [CachedReport(r.rank, r.path, cache_dir_for(r.path)) for r in reports]
    scope = Scope(tuple(cached), tuple(reports), allow_unrelated)
    lease = store.Lease()  # held before they are looked for: no `cache clear` removes them
    lease.hold(*(c.views_dir for c in cached))
    planned = planner.planned(scope, list(plan), lease)
    todo = [
        (c, tables[c.path], targets)
        for c, targets in zip(cached, planned)
        if targets or not (c.views_dir / "session.parquet").exists()
    ]
    workers = max(1, min(jobs, len(todo)))
    work = functools.partial(
        _normalize, f"{MEMORY_LIMIT_MB // workers}MB", max(1, (os.cpu_count() or 1) // workers)
    )
    try:
        map_reports(work, todo, jobs, progress, engine)
        run = open_cached(
            cached,
            memory_limit=f"{MEMORY_LIMIT_MB}MB",
            jobs=jobs,
            progress=progress,
            engine=engine,
            lease=lease,
        )
    except BaseException:
        lease.release()
        raise
    run.reports = reports
    run.cache_max = cache_max
    run.allow_unrelated = allow_unrelated
    return run


def plan_of(
    inputs: list[str | Path],
    wanted: list[tuple[str, dict]],
    *,
    rank_pattern: str = DEFAULT_RANK_PATTERN,
    allow_unrelated: bool = False,
) -> tuple[Plan, list[CachedReport]]:
    """The plan of `wanted` over the reports of `inputs` (validated and given their ranks,
    not read): the compiled plan, and each report's views entry (stored or not)."""
    paths = expand(inputs)
    for p in paths:
        inspect_tables(p)
    reports = assign_ranks(paths, rank_pattern)
    cached = [CachedReport(r.rank, r.path, cache_dir_for(r.path)) for r in reports]
    return compile_plan(Scope(tuple(cached), tuple(reports), allow_unrelated), wanted), cached


def _normalize(
    memory_limit: str,
    threads: int,
    item: tuple[CachedReport, dict[str, set[str]], list[tuple[str, dict, Path]]],
) -> None:
    """In a worker: a report's normalized views, then its planned per-report objects and
    modules (see `nsyswrap.engine.planner.planned`), under `memory_limit` with `threads` threads."""
    cached, tables, targets = item
    normalize(cached.path, tables, cached.views_dir)
    if targets:
        planner.compute(memory_limit, threads, (cached, targets))
