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
from bench.stages import from_log
from nsyswrap.engine.stage_log import VARIABLE as STAGE_LOG

TRIO = ("ledger.devices", "gaps.idle", "crossrank.collectives")  # what the pandas baseline computes
MIN_TASK_S = 5  # less budget than this left: skip
REPEAT_BELOW_S = 10  # repeat a measurement (median of `repeat`) only when one run is this short
MODULE_TIMEOUT_S = 25  # per-process limits, so one slow query cannot eat the whole budget
REPORT_TIMEOUT_S = 900  # a shared machine at load 15-20 stretches a cold report 5-fold
BASELINE_TIMEOUT_S = 900
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
        self.shapes: list[str] = list(dataset.SHAPES)  # part main: the shapes measured
        self.rank_shapes: list[str] = [dataset.LAUNCH_BOUND, dataset.HOST_PACED]  # part ranks
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
        stage_log: bool = False,
        **extra,
    ) -> Measurement | None:
        """Measure `task` (median wall of up to `repeat` runs, `before()` ahead of each) and
        record it under `key`; with `stage_log`, its CPU by stage too (bench.stages.from_log:
        a run with `$NSYSWRAP_STAGE_LOG` set)."""
        env = {"NSYSWRAP_CACHE_DIR": str(cache)} if cache else {}
        log = dataset.OUT / "stage-log.jsonl"
        if stage_log:
            env[STAGE_LOG] = str(log)
        runs: list[Measurement] = []
        while len(runs) < repeat:
            left = self.deadline - time.monotonic()
            if left < MIN_TASK_S:
                break
            if before:
                before()
            log.unlink(missing_ok=True)
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
        if stage_log and len(runs) == 1 and not chosen.error and log.is_file():
            self.rows[-1]["stage_log"] = from_log(log, chosen.cpu_s)
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


def main_suite(session: Session, run: Path, shape: str) -> None:
    """One shape's rows, each ratio's terms measured one after the other: the floor, the
    extraction, the report cold (with its CPU by stage), warm, assembled and with a new
    window; the pandas baseline beside nsyswrap's ledger + idle gaps + skew cold; one
    report's cold work by stage in one process."""
    j = ["-j", session.jobs]
    shaped = {"shape": shape}
    warm_page_cache(run)
    session.measure(
        "floor",
        "floor: count(*), sum(end-start) of kernels + launch calls (sqlite3)",
        ["floor", run],
        repeat=3,
        **shaped,
    )
    session.measure(
        "startup",
        "python start + import nsyswrap.cli (part of every nsyswrap row)",
        ["startup"],
        repeat=3,
        **shaped,
    )
    session.measure(
        "extract",
        "ADBC extraction of the columns nsyswrap reads (kernels, runtime, NVTX), nothing else",
        ["extract", run, *j],
        **shaped,
    )
    _report_rows(session, run, shaped)
    session.measure(
        "baseline",
        "pandas baseline: ledger + idle gaps + collective skew",
        ["baseline", run],
        timeout_s=BASELINE_TIMEOUT_S,
        **shaped,
    )
    trio = ["modules", run, *(arg for name in TRIO for arg in ("--name", name)), *j]
    session.measure(
        "trio_cold",
        "nsyswrap ledger + idle gaps + collective skew, cold (empty cache)",
        trio,
        cache=fresh_cache("cold"),
        timeout_s=REPORT_TIMEOUT_S,
        stage_log=True,
        **shaped,
    )
    session.measure(
        "stages",
        'one report\'s cold work in one process, CPU by stage (see "CPU per report, by stage")',
        ["stages", run],
        cache=fresh_cache("stages"),
        timeout_s=REPORT_TIMEOUT_S,
        **shaped,
    )
    shutil.rmtree(CACHES, ignore_errors=True)


def _report_rows(session: Session, run: Path, shaped: dict) -> None:
    """`nsyswrap report` cold, warm (its stored answer), its answer assembled from the cached
    results, and with a new window on the cached run."""
    cache = fresh_cache("main")
    report = ["report", run, "-j", session.jobs]
    cold = session.measure(
        "report_cold",
        "nsyswrap report, cold (empty cache)",
        report,
        cache=cache,
        timeout_s=REPORT_TIMEOUT_S,
        stage_log=True,
        **shaped,
    )
    if cold is None or cold.error:
        for key in ("report_warm", "report_assembled", "report_steps"):
            session.skip(key, f"nsyswrap {key}", "the cold report did not finish", **shaped)
        return
    session.measure(
        "report_warm",
        "nsyswrap report, warm (its stored answer)",
        report,
        cache=cache,
        repeat=3,
        timeout_s=REPORT_TIMEOUT_S,
        **shaped,
    )
    session.measure(
        "report_assembled",
        "nsyswrap report, warm, its answer assembled from the cached results "
        "(the stored answer removed first)",
        report,
        cache=cache,
        before=drop_answers(cache),
        repeat=3,
        timeout_s=REPORT_TIMEOUT_S,
        **shaped,
    )
    steps = f"{session.steps // 10}:{session.steps // 5}"  # never computed before this row
    session.measure(
        "report_steps",
        f"nsyswrap report --steps {steps} on the cached run (a new window)",
        [*report, "--steps", steps],
        cache=cache,
        timeout_s=REPORT_TIMEOUT_S,
        stage_log=True,
        **shaped,
    )


def modules_suite(session: Session, run: Path) -> None:
    """Each module alone on the cached views of `run`, its results computed (the first call
    of that module), rows streamed to Parquet as `nsyswrap query NAME RUN -o F` writes them."""
    from nsyswrap.engine.queries import catalog

    cache = fresh_cache("modules")
    session.measure(
        "cold_open",
        "nsyswrap open_run, cold: normalize + cache every report",
        ["open", run, "-j", session.jobs],
        cache=cache,
    )
    rows_out = dataset.OUT / "module-rows"
    for name, module in catalog().items():
        scope, state = (
            ("report", "results computed") if module.per_report else ("run", "computed on the run")
        )
        session.measure(
            f"module:{name}",
            f"module {name} (scope {scope}), views cached, {state}, rows streamed to Parquet",
            ["modules", run, "--name", name, "-j", session.jobs, "--stream", rows_out],
            cache=cache,
            before=drop_results(cache),
            timeout_s=MODULE_TIMEOUT_S,
            scope=scope,
        )
    shutil.rmtree(rows_out, ignore_errors=True)
    shutil.rmtree(CACHES, ignore_errors=True)


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


RANKS_TIMEOUT_S = 900


def ranks_suite(session: Session, steps: int, shapes: tuple[str, ...]) -> None:
    """`nsyswrap report` cold (with its CPU by stage) and warm with the local engine (`-j`
    worker processes), and cold on a Dask LocalCluster of `-j` worker processes, at
    8/32/64 ranks of `steps` steps each, in each shape."""
    for shape in shapes:
        for ranks in dataset.SWEEP_RANKS:
            run = dataset.sweep_run(ranks, steps, shape)
            size = dataset.size_of(run)
            point = {
                "shape": shape,
                "ranks": ranks,
                "steps": steps,
                "kernels_per_rank": size["kernels"] // ranks,
                "bytes": size["bytes"],
            }
            _rank_point(session, run, point)
    shutil.rmtree(CACHES, ignore_errors=True)


def _rank_point(session: Session, run: Path, point: dict) -> None:
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
        stage_log=True,
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
