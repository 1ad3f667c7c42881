"""The run's noise floor (#38 item 2): how much its step time varies from step to step on
its own, measured on the run itself, so that a finding saving less than that variation
is not headlined (a 0.9 ms jitter between two ranks sharing a GPU is not a straggler).

The floor is the replay's step-to-step noise (crossrank.whatif's `noise_ns`: 1.4826 x the
median absolute deviation of the window's step times with every rank idealised, a
robust standard deviation that stalls in a minority of steps do not inflate); without a
replay, the same statistic of the recorded step times (per step the slowest rank's, from
the single-rank `steps` table or the sampler's `step_times`), the steps the window set
apart (warm-up, outliers) left out. A finding is above the floor when what it saves per
step on average is at least `mean_factor` x the floor and, where it saves in only some
steps, what it saves per affected step is at least `affected_factor` x the floor (a stall
must stand out of the variation in the steps it hits). Rule noise_floor holds the two
factors and orders the findings by it.
"""

from __future__ import annotations

import statistics

from nsyswrap.report.figures import rows, value

MAD_TO_SIGMA = 1.4826
"""1.4826 x the median absolute deviation estimates a standard deviation (normal noise)."""


def noise_floor_ns(report: dict) -> float | None:
    """The run's noise floor (module doc), ns; None without steps to measure it on."""
    replayed = [value(r.get("noise_ns")) for r in rows(report, "crossrank", "whatif")]
    replayed = [v for v in replayed if v is not None]
    if replayed:
        return float(replayed[0])
    return robust_sigma(list(run_step_times(report).values()))


def run_step_times(report: dict) -> dict[int, float]:
    """Per step of the window (set-apart steps left out), the slowest rank's step time
    (ns): the single-rank steps table's, else the sampler's step_times."""
    apart = {o["step"] for o in (report.get("window") or {}).get("outliers") or []}
    found = rows(report, "single_rank", "steps") or rows(report, "samples", "step_times")
    slowest: dict[int, float] = {}
    for r in found:
        step, ns = r.get("step"), value(r.get("duration"))
        if isinstance(step, int) and step not in apart and ns is not None:
            slowest[step] = max(slowest.get(step, 0.0), float(ns))
    return slowest


def robust_sigma(values: list[float]) -> float | None:
    """1.4826 x the median absolute deviation of `values` (None for fewer than 3)."""
    if len(values) < 3:
        return None
    middle = statistics.median(values)
    return MAD_TO_SIGMA * statistics.median(abs(v - middle) for v in values)


def above_noise(
    gain_per_step: float,
    gain_per_affected_step: float | None,
    floor_ns: float | None,
    *,
    mean_factor: float,
    affected_factor: float,
) -> bool:
    """Whether a finding's saving stands above the run's noise floor (module doc); every
    finding does when the floor is unknown (no steps)."""
    if floor_ns is None:
        return True
    if gain_per_step < mean_factor * floor_ns:
        return False
    return gain_per_affected_step is None or gain_per_affected_step >= affected_factor * floor_ns
