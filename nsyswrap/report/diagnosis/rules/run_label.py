"""Rule run_label: the verdict of the single-rank section, over every GPU of the run."""

from __future__ import annotations

from nsyswrap.report.diagnosis.facts import Facts, Totals
from nsyswrap.report.diagnosis.rule import Limits, Rule, Threshold
from nsyswrap.report.diagnosis.rules.device_label import verdict

NO_GPU = "no device has GPU activity in the window"
WAITING = "{waiting} of {gpus} {unit}s mostly wait for slower ranks in collectives; {reason}"


def find(facts: Facts, limits: Limits) -> dict:
    """The run's verdict: every GPU's time summed (rule device_label), waiting-for-peers
    where enough of the GPUs are."""
    if not facts.totals:
        return {"label": None, "reason": NO_GPU}
    overall = sum(facts.totals.values(), Totals())
    v = verdict(overall, sum(facts.activities.values()) if facts.activities else None)
    waiting = [k for k, x in facts.labels.items() if x["label"] == "waiting-for-peers"]
    if v["label"] in ("communication-bound", "balanced") and len(
        waiting
    ) >= limits.waiting_gpus_share * len(facts.labels):
        reason = WAITING.format(
            waiting=len(waiting),
            gpus=len(facts.labels),
            unit=facts.unit(list(facts.labels)),
            reason=v["reason"],
        )
        return {"label": "waiting-for-peers", "reason": reason}
    return v


RULE = Rule(
    id="run_label",
    kind="label",
    doc="""The run's verdict (the single-rank section's), as a GPU's (rule device_label) of
the time of every GPU summed; waiting-for-peers where it would be communication-bound or
balanced and at least {waiting_gpus_share} of the GPUs are waiting-for-peers. A run judged
not enough data gets no advice.""",
    thresholds=(
        Threshold(
            "waiting_gpus_share", 0.5, "the run waits for peers when this share of its GPUs do"
        ),
    ),
    find=find,
)
