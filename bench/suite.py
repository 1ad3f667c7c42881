"""The measurement plans: the side-by-side comparison on the 8-rank run, and the scale sweep.

Every measured thing runs in its own process (see `measure`). A `Session` holds the
time budget: each process gets at most the time left, and once it is spent the
remaining measurements are recorded as skipped, so `python -m bench` always ends.
"""
from __future__ import annotations

import shutil
import sys
import time
from dataclasses import asdict
from pathlib import Path

from bench import dataset
from bench.measure import Measurement, run_task

TRIO = ("ledger.devices", "gaps.idle", "crossrank.collectives")  # what the pandas baseline computes
MIN_TASK_S = 5           # less budget than this left: skip
REPEAT_BELOW_S = 10      # repeat a measurement (median of `repeat`) only when one run is this short
MODULE_TIMEOUT_S = 25   # per-process limits, so one slow query cannot eat the whole budget
REPORT_TIMEOUT_S = 90
BASELINE_TIMEOUT_S = 180
CACHES = dataset.OUT / "cache"


class Session:
    """Runs tasks within a time budget and collects rows for the results."""

    def __init__(self, budget_s: float, jobs: int, steps: int = dataset.FULL_STEPS):
        self.deadline = time.monotonic() + budget_s
        self.jobs = jobs
        self.steps = steps
        self.rows: list[dict] = []

    def measure(self, key: str, label: str, task: list, *, cache: Path | None = None,
                repeat: int = 1, timeout_s: float = 600, **extra) -> Measurement | None:
        """Measure `task` (median wall of up to `repeat` runs) and record it under `key`."""
        env = {"NSYSWRAP_CACHE_DIR": str(cache)} if cache else None
        runs: list[Measurement] = []
        while len(runs) < repeat:
            left = self.deadline - time.monotonic()
            if left < MIN_TASK_S:
                break
            argv = [str(a.resolve()) if isinstance(a, Path) else str(a) for a in task]  # tasks run elsewhere
            runs.append(run_task(label, argv, env, timeout_s=min(timeout_s, left)))
            if runs[-1].error or runs[-1].wall_s > REPEAT_BELOW_S:
                break
        if not runs:
            self.skip(key, label, "time budget spent", **extra)
            return None
        chosen = sorted(runs, key=lambda m: m.wall_s)[len(runs) // 2]
        print(f"{label}: {chosen.wall_s:.2f} s, {chosen.peak_rss_mb:.0f} MB {chosen.error or ''}",
              file=sys.stderr, flush=True)
        self.rows.append({"key": key, **asdict(chosen), "runs": len(runs),
                          "wall_s_runs": [round(m.wall_s, 3) for m in runs], **extra})
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


def warm_page_cache(run: Path) -> None:
    """Read every report once so the floor and nsyswrap start from the same OS page cache."""
    for report in run.glob("*.sqlite"):
        with open(report, "rb") as fh:
            while fh.read(1 << 24):
                pass


def main_suite(session: Session, run: Path) -> None:
    """floor, nsyswrap cold/warm, the baseline's work both ways, each module alone.

    A cold report is about a cold open_run plus a warm report, so it is skipped (and
    bounded from below) when the warm report alone overruns its time limit.
    """
    from nsyswrap.queries import catalog

    j = ["-j", session.jobs]
    trio = [arg for name in TRIO for arg in ("--name", name)]
    warm_page_cache(run)
    session.measure("floor", "floor: count(*), sum(end-start) of kernels + launch calls (sqlite3)",
                    ["floor", run], repeat=3)
    session.measure("startup", "python start + import nsyswrap.cli (part of every nsyswrap row)", ["startup"],
                    repeat=3)
    cache = fresh_cache("main")
    session.measure("cold_open", "nsyswrap open_run, cold: normalize + cache every report", ["open", run, *j],
                    cache=cache)
    warm = session.measure("warm_report", "nsyswrap report, warm (cached)", ["report", run, *j], cache=cache,
                           repeat=3, timeout_s=REPORT_TIMEOUT_S)
    if not (warm and warm.timed_out):
        session.measure("cold_report", "nsyswrap report, cold (empty cache)", ["report", run, *j],
                        cache=fresh_cache("cold"), timeout_s=REPORT_TIMEOUT_S)
    else:
        session.skip("cold_report", "nsyswrap report, cold (empty cache)", "the warm report already overran")
    trio_warm = session.measure("trio_warm", "nsyswrap ledger + idle gaps + collective skew, warm",
                                ["modules", run, *trio, *j], cache=cache, repeat=3, timeout_s=REPORT_TIMEOUT_S)
    session.measure("baseline", "pandas baseline: ledger + idle gaps + collective skew", ["baseline", run],
                    timeout_s=BASELINE_TIMEOUT_S)
    if not (trio_warm and trio_warm.timed_out):
        session.measure("trio_cold", "nsyswrap ledger + idle gaps + collective skew, cold",
                        ["modules", run, *trio, *j], cache=fresh_cache("cold"), timeout_s=REPORT_TIMEOUT_S)
    else:
        session.skip("trio_cold", "nsyswrap ledger + idle gaps + collective skew, cold", "the warm run already overran")
    session.measure("extract", "diagnostic: ADBC extraction of the kernel/runtime/NVTX columns only",
                    ["extract", run, *j])
    for name in catalog():
        session.measure(f"module:{name}", f"module {name}, warm", ["modules", run, "--name", name, *j],
                        cache=cache, timeout_s=MODULE_TIMEOUT_S)
    shutil.rmtree(CACHES, ignore_errors=True)


def scale_suite(session: Session) -> None:
    """floor, cold normalization and the warm baseline work at 1/2/4/8 ranks and 0.25/0.5/1 M kernels."""
    trio = [arg for name in TRIO for arg in ("--name", name)]
    points = [(ranks, 1.0) for ranks in (1, 2, 4, 8)] + [(1, 0.25), (1, 0.5)]
    for ranks, fraction in points:
        run = dataset.first_ranks(ranks, session.steps) if fraction == 1 else dataset.one_rank(fraction, session.steps)
        point = {"ranks": ranks, "kernels_per_rank_m": fraction * session.steps / dataset.FULL_STEPS}
        warm_page_cache(run)
        session.measure("floor", "floor", ["floor", run], repeat=3, **point)
        cache = fresh_cache("scale")
        session.measure("cold_open", "cold open_run (normalization)", ["open", run, "-j", session.jobs],
                        cache=cache, **point)
        session.measure("trio_warm", "warm ledger + gaps + skew", ["modules", run, *trio, "-j", session.jobs],
                        cache=cache, **point)
    shutil.rmtree(CACHES, ignore_errors=True)

