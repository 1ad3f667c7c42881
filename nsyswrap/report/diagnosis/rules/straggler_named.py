"""Rule straggler_named: whether the cross-rank section names a straggler (its own
verdict, from the stragglers table's row over all steps), before the diagnosis weighs it
against the replay (rule crossrank_label)."""

from __future__ import annotations

from nsyswrap.report.diagnosis.rule import Limits, Rule, Threshold
from nsyswrap.report.diagnosis.words import ms

UNMATCHED = (
    "no collective is matched on every rank of its group (looked for nsyswrap `coll:` "
    "ranges, NCCL's NVTX payloads, MPI ranges of nsys --trace=mpi and NCCL kernels; see the "
    "groups and mismatches tables)"
)
NOT_SIGNIFICANT = (
    "all waits in collectives add up to {waits}; the costliest rank's lag is not above the "
    "alignment uncertainty and 3 x the run's jitter ({jitter}), or the waits are under "
    "{least:.0%} of the steps' time"
)
NAMED = (
    "rank {rank} made the others wait {imposed} ({share:.0%} of all waiting), arriving last "
    "at {last} of {collectives} matched collectives, {lag} after the median rank in "
    "total{affected}{phase}"
)
AFFECTED = "; the others waited for it in steps {steps}"
PHASE = "; its lag is in `{phase}`, +{excess} per step over the median rank{slow}"
SLOW = ", slow in steps {steps}"


def find(row: dict | None, step_time_ns: int, limits: Limits | None = None) -> dict:
    """The section's verdict from crossrank.stragglers' row over all steps (None: no
    matched collective) and the steps' time (the sum of the median step)."""
    x = limits or RULE.limits()
    if row is None:
        return {"label": None, "reason": UNMATCHED}
    if row["total_wait_ns"] <= x.min_wait_share * step_time_ns or not row["significant"]:
        waits, jitter = ms(row["total_wait_ns"], 3), ms(row["jitter_ns"], 3)
        reason = NOT_SIGNIFICANT.format(waits=waits, jitter=jitter, least=x.min_wait_share)
        return {"label": "no significant straggler", "reason": reason}
    phase = row["phase"] if isinstance(row["phase"], str) else None
    slow = row["slow_steps"] if isinstance(row["slow_steps"], str) else None
    affected = row["affected_steps"] if isinstance(row["affected_steps"], str) else None
    reason = NAMED.format(
        rank=int(row["rank"]),
        imposed=ms(row["imposed_wait_ns"], 3),
        share=row["imposed_wait_ns"] / max(row["total_wait_ns"], 1),
        last=int(row["last_count"]),
        collectives=int(row["collectives"]),
        lag=ms(row["lag_ns"], 3),
        affected=AFFECTED.format(steps=affected) if affected else "",
        phase=PHASE.format(
            phase=phase,
            excess=ms(row["phase_excess_ns"] / row["phase_steps"], 3),
            slow=SLOW.format(steps=slow) if slow else "",
        )
        if phase
        else "",
    )
    return {"label": f"straggler: rank {int(row['rank'])}", "reason": reason}


RULE = Rule(
    id="straggler_named",
    kind="label",
    doc="""The cross-rank section names as straggler the rank whose lateness imposed the
most wait on the others in matched collectives, when its lag is above the clock
alignment's uncertainty and 3 x the run's jitter and all waits add up to at least
{min_wait_share} of the steps' time; else no significant straggler.""",
    thresholds=(
        Threshold(
            "min_wait_share", 0.01, "no straggler is named below this share of the steps' time"
        ),
    ),
    find=find,
)
