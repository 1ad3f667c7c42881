"""The measurement plans: the side-by-side comparison on the 8-rank run, and the scale sweep.

Every measured thing runs in its own process (see `measure`). A `Session` holds the
time budget: each process gets at most the time left, and once it is spent the
remaining measurements are recorded as skipped, so `python -m bench` always ends.
"""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from bench import dataset
from bench.measure import Measurement, run_task

TRIO = ("ledger.devices", "gaps.idle", "crossrank.collectives")  # what the pandas baseline computes
MIN_TASK_S = 5  # less budget than this left: skip
REPEAT_BELOW_S = 10  # repeat a measurement (median of `repeat`) only when one run is this short
MODULE_TIMEOUT_S = 25  # per-process limits, so one slow query cannot eat the whole budget
REPORT_TIMEOUT_S = 90
BASELINE_TIMEOUT_S = 180
CACHES = dataset.OUT / "cache"


class Session:
    """Runs tasks within a time budget and collects rows for the results."""

    def __init__(
        self, budget_s: float, jobs: int, steps: int = dataset.FULL_STEPS, rank_steps: int = 25
    ):
        self.deadline = time.monotonic() + budget_s
        self.jobs = jobs
        self.steps = steps
        self.rank_steps = rank_steps  # part ranks: steps per rank
        self.rows: list[dict] = []

    def measure(
        self,
        key: str,
        label: str,
        task: list,
        *,
        cache: Path | None = None,
        repeat: int = 1,
        timeout_s: float = 600,
        before: Callable[[], None] | None = None,
        **extra,
    ) -> Measurement | None:
        """Measure `task` (median wall of up to `repeat` runs, `before()` ahead of each) and
        record it under `key`."""
        env = {"NSYSWRAP_CACHE_DIR": str(cache)} if cache else None
        runs: list[Measurement] = []
        while len(runs) < repeat:
            left = self.deadline - time.monotonic()
            if left < MIN_TASK_S:
                break
            if before:
                before()
            argv = [
                str(a.resolve()) if isinstance(a, Path) else str(a) for a in task
            ]  # tasks run elsewhere
            runs.append(run_task(label, argv, env, timeout_s=min(timeout_s, left)))
            if runs[-1].error or runs[-1].wall_s > REPEAT_BELOW_S:
                break
        if not runs:
            self.skip(key, label, "time budget spent", **extra)
            return None
        chosen = sorted(runs, key=lambda m: m.wall_s)[len(runs) // 2]
        print(
            f"{label}: {chosen.wall_s:.2f} s, {chosen.peak_rss_mb:.0f} MB over "
            f"{chosen.processes} processes "
            f"({chosen.peak_rss_main_mb:.0f} MB task) {chosen.error or ''}",
            file=sys.stderr,
            flush=True,
        )
        self.rows.append(
            {
                "key": key,
                **asdict(chosen),
                "runs": len(runs),
                "wall_s_runs": [round(m.wall_s, 3) for m in runs],
                **extra,
            }
        )
        return chosen

    def skip(self, key: str, label: str, why: str, **extra) -> None:
        self.rows.append({"key": key, "label": label, "skipped": why, **extra})
        print(f"{label}: skipped, {why}", file=sys.stderr, flush=True)


def fresh_cache(name: str) -> Path:
    """An empty cache directory (a cold start for nsyswrap)."""
    path = CACHES / name
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


def drop_results(cache: Path) -> Callable[[], None]:
    """What deletes the cached per-report results (the stored objects and module rows,
    `<cache>/objects/`) and the stored report answers (`<cache>/answers`), keeping the
    normalized views, the cross-rank reductions (`objects/xr_*`) and the run objects
    (`<cache>/runs`): the next call computes its metrics again."""

    def drop() -> None:
        for results in cache.glob("objects/*"):
            if not results.name.startswith("xr_"):
                shutil.rmtree(results)
        drop_answers(cache)()

    return drop


def drop_answers(cache: Path) -> Callable[[], None]:
    """What deletes the stored report answers only: the next report assembles its answer
    from the cached results."""
    return lambda: shutil.rmtree(cache / "answers", ignore_errors=True)


def warm_page_cache(run: Path) -> None:
    """Read every report once so the floor and nsyswrap start from the same OS page cache."""
    for report in run.glob("*.sqlite"):
        with open(report, "rb") as fh:
            while fh.read(1 << 24):
                pass


def main_suite(session: Session, run: Path) -> None:
    """floor; the report and the baseline's work, each on cached views with results
    computed, with results cached, and cold; the baseline; each module alone."""
    from nsyswrap.engine.queries import catalog

    j = ["-j", session.jobs]
    warm_page_cache(run)
    session.measure(
        "floor",
        "floor: count(*), sum(end-start) of kernels + launch calls (sqlite3)",
        ["floor", run],
        repeat=3,
    )
    session.measure(
        "startup",
        "python start + import nsyswrap.cli (part of every nsyswrap row)",
        ["startup"],
        repeat=3,
    )
    cache = fresh_cache("main")
    session.measure(
        "cold_open",
        "nsyswrap open_run, cold: normalize + cache every report",
        ["open", run, *j],
        cache=cache,
    )
    report = ["report", run, *j]
    computed = _cached_views(session, "report", "report", report, cache)
    session.measure(
        "report_assembled",
        "nsyswrap report, warm, its answer assembled from the cached results "
        "(the stored answer removed first)",
        report,
        cache=cache,
        before=drop_answers(cache),
        repeat=3,
        timeout_s=REPORT_TIMEOUT_S,
    )
    steps = (
        f"{session.steps // 10}:{session.steps // 5}"  # new options: never computed before this row
    )
    session.measure(
        "report_steps",
        f"nsyswrap report --steps {steps}, views + results cached for the "
        "default options (new options on a cached run)",
        [*report, "--steps", steps],
        cache=cache,
        timeout_s=REPORT_TIMEOUT_S,
    )
    _cold(session, "report", "report", report, computed)
    trio = ["modules", run, *(arg for name in TRIO for arg in ("--name", name)), *j]
    computed = _cached_views(session, "trio", "ledger + idle gaps + collective skew", trio, cache)
    session.measure(
        "baseline",
        "pandas baseline: ledger + idle gaps + collective skew",
        ["baseline", run],
        timeout_s=BASELINE_TIMEOUT_S,
    )
    _cold(session, "trio", "ledger + idle gaps + collective skew", trio, computed)
    session.measure(
        "extract",
        "diagnostic: ADBC extraction of the kernel/runtime/NVTX columns only",
        ["extract", run, *j],
    )
    session.measure(
        "stages",
        "diagnostic: one report's cold work in one process, CPU by stage "
        '(see "CPU per report, by stage")',
        ["stages", run],
        cache=fresh_cache("stages"),
        timeout_s=REPORT_TIMEOUT_S,
    )
    rows_out = dataset.OUT / "module-rows"
    for name, module in catalog().items():  # each the first call of that module on the cached views
        scope, state = (
            ("report", "results computed") if module.per_report else ("run", "computed on the run")
        )
        session.measure(
            f"module:{name}",
            f"module {name} (scope {scope}), views cached, {state}, rows streamed to Parquet",
            ["modules", run, "--name", name, *j, "--stream", rows_out],
            cache=cache,
            before=drop_results(cache),
            timeout_s=MODULE_TIMEOUT_S,
            scope=scope,
        )
    shutil.rmtree(rows_out, ignore_errors=True)
    shutil.rmtree(CACHES, ignore_errors=True)


def _cached_views(
    session: Session, key: str, what: str, task: list, cache: Path
) -> Measurement | None:
    """`task` on the cached views: results computed (deleted before each run: the first call
    with these options), then cached (the same call again)."""
    computed = session.measure(
        f"{key}_computed",
        f"nsyswrap {what}, views cached, results computed (first call with these options)",
        task,
        cache=cache,
        before=drop_results(cache),
        repeat=3,
        timeout_s=REPORT_TIMEOUT_S,
    )
    label = f"nsyswrap {what}, warm (views + results cached)"
    if computed and computed.error:
        session.skip(
            f"{key}_warm", label, "no results cached: the call computing them did not finish"
        )
    else:
        session.measure(
            f"{key}_warm", label, task, cache=cache, repeat=3, timeout_s=REPORT_TIMEOUT_S
        )
    return computed


def _cold(session: Session, key: str, what: str, task: list, computed: Measurement | None) -> None:
    """`task` on an empty cache: at least a cold open_run plus the run with results computed,
    so skipped (and bounded from below in the results) when that one already overran."""
    label = f"nsyswrap {what}, cold (empty cache)"
    if computed and computed.timed_out:
        session.skip(f"{key}_cold", label, "the run on cached views already overran")
    else:
        session.measure(
            f"{key}_cold", label, task, cache=fresh_cache("cold"), timeout_s=REPORT_TIMEOUT_S
        )


def scale_suite(session: Session) -> None:
    """floor, cold normalization, and the baseline's work on the cached views with results
    computed, at 1/2/4/8 ranks and 0.25/0.5/1 M kernels."""
    trio = [arg for name in TRIO for arg in ("--name", name)]
    points = [(ranks, 1.0) for ranks in (1, 2, 4, 8)] + [(1, 0.25), (1, 0.5)]
    for ranks, fraction in points:
        run = (
            dataset.first_ranks(ranks, session.steps)
            if fraction == 1
            else dataset.one_rank(fraction, session.steps)
        )
        point = {
            "ranks": ranks,
            "kernels_per_rank_m": fraction * session.steps / dataset.FULL_STEPS,
        }
        warm_page_cache(run)
        session.measure("floor", "floor", ["floor", run], repeat=3, **point)
        cache = fresh_cache("scale")
        session.measure(
            "cold_open",
            "cold open_run (normalization)",
            ["open", run, "-j", session.jobs],
            cache=cache,
            **point,
        )
        session.measure(
            "trio_computed",
            "ledger + gaps + skew, views cached, results computed",
            ["modules", run, *trio, "-j", session.jobs],
            cache=cache,
            before=drop_results(cache),
            **point,
        )
    shutil.rmtree(CACHES, ignore_errors=True)


RANKS_TIMEOUT_S = 300


def ranks_suite(session: Session, steps: int) -> None:
    """`nsyswrap report` cold and warm with the local engine (`-j` worker processes), and
    cold on a Dask LocalCluster of `-j` worker processes, at 8/16/32/64 ranks of `steps`
    steps each, and at 8 ranks with 4× and 16× the steps (events per report)."""
    points = [(ranks, steps) for ranks in dataset.SWEEP_RANKS] + [(8, steps * 4), (8, steps * 16)]
    for ranks, per_rank in points:
        run = (
            dataset.sweep_run(ranks, per_rank) if per_rank == steps else dataset.main_run(per_rank)
        )
        size = dataset.size_of(run)
        point = {
            "ranks": ranks,
            "steps": per_rank,
            "kernels_per_rank": size["kernels"] // ranks,
            "bytes": size["bytes"],
        }
        warm_page_cache(run)
        session.measure("floor", "floor", ["floor", run], repeat=3, **point)
        report = ["report", run, "-j", session.jobs, "--format", "json"]
        cache = fresh_cache("ranks")
        local = session.measure(
            "local_cold",
            "report, local engine, cold",
            report,
            cache=cache,
            timeout_s=RANKS_TIMEOUT_S,
            **point,
        )
        session.measure(
            "local_warm",
            "report, local engine, warm",
            report,
            cache=cache,
            repeat=3,
            timeout_s=RANKS_TIMEOUT_S,
            **point,
        )
        dask = session.measure(
            "dask_cold",
            "report, Dask LocalCluster, cold",
            [*report, "--engine", "dask"],
            cache=fresh_cache("ranks"),
            timeout_s=RANKS_TIMEOUT_S,
            **point,
        )
        if local and dask and not (local.error or dask.error):
            session.rows[-1]["same_json_as_local"] = (
                dask.detail["output_sha256"] == local.detail["output_sha256"]
            )
    shutil.rmtree(CACHES, ignore_errors=True)


WHATIF_SIZES = ("8x1000x100", "64x1000x100")


def whatif_suite(session: Session) -> None:
    """The what-if stage (model, every candidate replayed, critical path, replay check) on
    synthetic runs of RANKS x COLLECTIVES (in all) x STEPS (bench.whatif)."""
    for size in WHATIF_SIZES:
        ranks, collectives, steps = (int(x) for x in size.split("x"))
        label = f"what-if stage, {ranks} ranks x {collectives:,} collectives x {steps} steps"
        session.measure(
            "whatif",
            label,
            ["whatif", "--size", size],
            repeat=3,
            ranks=ranks,
            collectives=collectives,
            steps=steps,
        )
