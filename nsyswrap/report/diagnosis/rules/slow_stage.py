"""Rule slow_stage: a pipeline stage slower than the others, by what making it as fast
saves, the bubbles it causes in the other stages included."""

from __future__ import annotations

from nsyswrap.report.diagnosis.facts import Facts
from nsyswrap.report.diagnosis.finding import Finding, saving_finding
from nsyswrap.report.diagnosis.rule import Limits, Rule
from nsyswrap.report.diagnosis.rules.replay_causes import gain_evidence, gain_of, replayed
from nsyswrap.report.diagnosis.words import ms

TEXT = (
    "Pipeline stage {stage} is slower than the others: making its work as fast as the other "
    "stages' would save {gain} per step ({pct:.0f} % of the step time, {steps}), the bubbles "
    "it causes in the other stages included; the send/recv waits around it are partly the "
    "pipeline's own structure, this is not."
)
ADVICE = (
    "Rebalance the pipeline: move layers off stage {stage} (or speed up its work); that saves "
    "{gain} per step."
)


def finding(cause: dict) -> Finding:
    """The finding of one slow-stage cause (rule replay_causes)."""
    fix, stage = cause["fix"], cause["stage"]
    gain, pct, steps = gain_of(fix)
    evidence = {"stage": stage, **gain_evidence(fix)}
    return saving_finding(
        "slow-stage",
        f"slow pipeline stage: {stage}",
        (),
        gain,
        pct,
        TEXT.format(stage=stage, gain=ms(gain), pct=pct, steps=steps),
        ADVICE.format(stage=stage, gain=ms(gain)),
        evidence,
    )


def find(facts: Facts, limits: Limits) -> list[Finding]:
    return [replayed(finding(c), c["fix"], facts.set_apart) for c in facts.causes if "stage" in c]


RULE = Rule(
    id="slow_stage",
    kind="finding",
    order="saving",
    doc="""A pipeline stage slower than the others (rule replay_causes names it): what making
its work as fast as the other stages' saves per step, the bubbles it causes in the other
stages included (the send/recv waits around it are partly the pipeline's own structure,
this is not).""",
    find=find,
)
