"""Rule moving_stalls: stalls of one phase that move between ranks (a data-loading stall
on rank 3 in step 2, on rank 6 in step 4): one finding naming each (step, rank)."""

from __future__ import annotations

from nsyswrap.report.diagnosis.facts import Facts
from nsyswrap.report.diagnosis.finding import Finding, saving_finding
from nsyswrap.report.diagnosis.rule import Limits, Rule
from nsyswrap.report.diagnosis.rules.replay_causes import gain_evidence, gain_of, replayed
from nsyswrap.report.diagnosis.words import and_, ms
from nsyswrap.report.figures import value

WHERE = "rank {rank} in step {step}"
TEXT = (
    "Intermittent `{phase}` stalls move between ranks: {where}. Fixing them would save "
    "{per_affected} per affected step, {gain} per step on average ({pct:.0f} % of the step "
    "time); no rank is slow in most steps."
)
ADVICE = (
    "Find what stalls `{phase}` now and then ({where}): each stall costs {per_affected} of "
    "step time, on every rank."
)


def finding(cause: dict) -> Finding:
    """The finding of one moving-stalls cause (rule replay_causes)."""
    fix, phase = cause["fix"], cause["phase"]
    gain, pct, _ = gain_of(fix)
    said = {
        "phase": phase,
        "where": and_([WHERE.format(rank=r, step=s) for s, r in cause["pairs"]]),
        "per_affected": ms(value(fix["gain_ns_per_affected_step"], 0)),
    }
    evidence = {
        "phase": phase,
        "stalls": [{"step": s, "rank": r} for s, r in cause["pairs"]],
        **gain_evidence(fix),
    }
    return saving_finding(
        "intermittent",
        f"intermittent: {phase} stalls on {said['where']}",
        tuple(sorted({r for _, r in cause["pairs"]})),
        gain,
        pct,
        TEXT.format(**said, gain=ms(gain), pct=pct),
        ADVICE.format(**said),
        evidence,
    )


def find(facts: Facts, limits: Limits) -> list[Finding]:
    return [replayed(finding(c), c["fix"], facts.set_apart) for c in facts.causes if "pairs" in c]


RULE = Rule(
    id="moving_stalls",
    kind="finding",
    order="saving",
    doc="""Stalls of one phase that move between ranks, each rank slow in its own steps and
none in most (rule replay_causes finds them): one finding naming each stall's step and
rank, with what fixing them saves per affected step and per step on average.""",
    find=find,
)
