"""Rule step_figures: the key figures the diagnosis lists per GPU (its step statistics,
its shares, its wait in collectives), per rank without GPU work (its host steps), and the
longest steps."""

from __future__ import annotations

import statistics

from nsyswrap.report.diagnosis.facts import Facts, Key
from nsyswrap.report.diagnosis.rule import Limits, Rule, Threshold
from nsyswrap.report.figures import COUNT, FRACTION, NS, figure, value

EMPTY = "the window is empty"
FEW = "fewer than {least} steps"
NO_WAITS = "no cross-rank waits (one rank, or no matched collective)"


def quantile(sorted_values: list, q: float) -> float:
    """The q-quantile of sorted values by linear interpolation (as DuckDB's quantile_cont)."""
    pos = q * (len(sorted_values) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def _statistics(durations: list, limits: Limits) -> dict:
    """steps, step_mean, step_p50, step_p90, step_max of sorted step durations."""
    few = FEW.format(least=int(limits.min_steps))
    enough = len(durations) >= limits.min_steps

    def stat(f):
        return figure(f(durations), NS) if enough else figure(None, NS, few)

    return {
        "steps": figure(len(durations), COUNT),
        "step_mean": stat(statistics.fmean),
        "step_p50": stat(lambda d: quantile(d, 0.5)),
        "step_p90": stat(lambda d: quantile(d, 0.9)),
        "step_max": stat(max),
    }


def device_row(facts: Facts, key: Key, limits: Limits) -> dict:
    """One GPU's key figures: its label, step statistics, shares and wait per step."""
    t, v = facts.totals[key], facts.labels[key]
    n = len(facts.steps.get(key, ()))  # waits are in the steps' collectives, whatever the window
    waited = facts.waited.get(key[0], 0)
    waited, basis = (waited / n, "per step") if n else (waited, "over the span")

    def share(ns: int) -> dict:
        return figure(t.share(ns) if t.span_ns else None, FRACTION, EMPTY)

    return {
        "rank": key[0],
        "device": key[1],
        "label": v["label"],
        "reason": v["reason"],
        **_statistics(sorted(d for _, d in facts.usual.get(key, ())), limits),
        "compute": share(t.compute_busy_ns),
        "exposed_comm": share(t.exposed_comm_ns),
        "copy_only": share(t.copy_only_ns),
        "idle": share(t.idle_ns),
        "waited": figure(waited if key[0] in facts.waited else None, NS, NO_WAITS),
        "waited_basis": basis,
    }


def host_steps(facts: Facts, limits: Limits) -> list[dict]:
    """Per rank, its host step times and phases (NVTX ranges) when no GPU work was
    captured: the step statistics leave out the steps the window set apart."""
    if facts.totals:
        return []
    steps: dict[int, list[int]] = {}
    for r in facts.rows("single_rank", "host_steps"):
        if r["step"] not in facts.set_apart:
            steps.setdefault(r["rank"], []).append(value(r["duration"], 0))
    phases: dict[int, list[dict]] = {}
    for r in facts.rows("single_rank", "host_phases"):
        phases.setdefault(r["rank"], []).append(
            {"phase": r["phase"], "mean": r["mean"], "share": r["share_of_step"]}
        )
    return [
        {"rank": rank, **_statistics(sorted(d), limits), "phases": phases.get(rank, [])}
        for rank, d in sorted(steps.items())
    ]


def worst_steps(facts: Facts, limits: Limits) -> list[dict]:
    """The longest usual steps of any GPU, longest first."""
    every = [(d, key, step) for key, steps in facts.usual.items() for step, d in steps]
    every.sort(key=lambda x: (-x[0], x[1], x[2]))
    return [
        {"rank": key[0], "device": key[1], "step": step, "duration": figure(d, NS)}
        for d, key, step in every[: int(limits.worst_steps)]
    ]


RULE = Rule(
    id="step_figures",
    kind="figures",
    doc="""The key figures per GPU: its verdict, its step statistics (mean, median, p90,
max of the steps the window did not set apart: they need {min_steps} steps or more), its
shares of the GPU time and its rank's wait in collectives per step; per rank without GPU
work, its host step times and phases; the {worst_steps} longest steps.""",
    thresholds=(
        Threshold("min_steps", 2, "step statistics need this many steps", "count"),
        Threshold("worst_steps", 3, "the longest steps listed", "count"),
    ),
)
