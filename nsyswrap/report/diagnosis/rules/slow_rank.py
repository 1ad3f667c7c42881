"""Rule slow_rank: a rank slow in every step or in some, by what the replay says making it
(or its slowest phase) as fast as the others saves; the straggler's lag and the others'
waiting are told beside it (figures, not its cost)."""

from __future__ import annotations

from nsyswrap.report.diagnosis.facts import Facts
from nsyswrap.report.diagnosis.finding import Finding, saving_finding
from nsyswrap.report.diagnosis.rule import Limits, Rule, Threshold
from nsyswrap.report.diagnosis.rules import hot_expert, straggler
from nsyswrap.report.diagnosis.rules.replay_causes import gain_evidence, gain_of, replayed
from nsyswrap.report.diagnosis.words import ms
from nsyswrap.report.figures import value

PERSISTENT = (
    "Rank {rank} is the straggler: {fixing} would save {gain} per step ({pct:.0f} % of the "
    "step time, {steps})."
)
SOME_STEPS = (
    "Rank {rank} is slow in some steps: {fixing} would save {per_affected} per affected "
    "step, {gain} per step on average ({pct:.0f} %, {steps}: {step_list})."
)
FIXING_PHASE = "fixing `{phase}` on it"
FIXING_RANK = "making it as fast as the others"
PART = (
    " Of it, `{phase}`{gloss} on rank {rank} alone saves {per_affected} per affected step, "
    "{gain} per step on average (steps {steps})."
)
LAG = " {who} {arrives}{waiting}"  # who: It, or of two ranks Rank R (the other is named)
ADVICE_PHASE = (
    "Make `{phase}` on rank {rank} as fast as on the others (it saves {gain} per step); every "
    "other rank waits for it in the next collective."
)
ADVICE_RANK = (
    "Find what makes rank {rank} slower (`nsyswrap query crossrank.whatif`): making it as "
    "fast as the others saves {gain} per step."
)
ADVICE_PART = (
    "Make `{phase}` on rank {rank} as fast as on the others: that alone saves {part_gain} per "
    "step (the whole rank made as fast, {gain}); every other rank waits for it in the next "
    "collective."
)


def _said(cause: dict) -> tuple[str, str]:
    """(text, advice) of a slow rank's cause, its largest phase's part aside."""
    fix, rank, phase = cause["fix"], cause["rank"], cause["phase"]
    gain, pct, steps = gain_of(fix)
    fixing = FIXING_PHASE.format(phase=phase) if phase else FIXING_RANK
    figures = {"rank": rank, "fixing": fixing, "gain": ms(gain), "pct": pct, "steps": steps}
    if fix["pattern"] == "persistent":
        text = PERSISTENT.format(**figures)
    else:
        per_affected = ms(value(fix["gain_ns_per_affected_step"], 0))
        text = SOME_STEPS.format(**figures, per_affected=per_affected, step_list=fix["steps"])
    if phase:
        return text, ADVICE_PHASE.format(phase=phase, rank=rank, gain=ms(gain))
    return text, ADVICE_RANK.format(rank=rank, gain=ms(gain))


def _part(rank: int, part: dict) -> str:
    """The part of its largest phase, glossed where the phase is one nsyswrap knows."""
    from nsyswrap.crossrank.lanes import PHASE_GLOSS  # numpy: off the stored answer's path

    gloss = f" ({PHASE_GLOSS[part['phase']]})" if part["phase"] in PHASE_GLOSS else ""
    return PART.format(
        phase=part["phase"],
        gloss=gloss,
        rank=rank,
        per_affected=ms(value(part["gain_ns_per_affected_step"], 0)),
        gain=ms(value(part["gain_ns_per_step"], 0)),
        steps=part["steps"],
    )


def _lag(facts: Facts, cause: dict) -> tuple[str, dict] | None:
    """The straggler's lag sentence and evidence, where the stragglers table names this
    rank too; its phase is 'the one that lags the most' where the replay names another."""
    lag = straggler.lag_of(facts)
    if lag is None or lag.rank != cause["rank"]:
        return None
    told = cause["phase"] or (cause.get("part") or {}).get("phase")
    lag_phase = straggler.LAG_MOST if told and lag.phase and lag.phase != told else None
    arrives = lag.arrives(lag_phase) if lag_phase else lag.arrives()
    who = "It" if lag.other is None else f"Rank {lag.rank}"
    said = LAG.format(who=who, arrives=arrives, waiting=lag.waiting(len(facts.per_rank)))
    return said, lag.evidence()


def finding(facts: Facts, cause: dict, limits: Limits) -> Finding:
    """The finding of one slow rank's cause (rule replay_causes)."""
    fix, rank, part = cause["fix"], cause["rank"], cause.get("part")
    gain, pct, _ = gain_of(fix)
    text, advice = _said(cause)
    evidence = {"rank": rank, "phase": cause["phase"], **gain_evidence(fix)}
    if part is not None:
        text += _part(rank, part)
        evidence["largest_phase"] = part["phase"]
        evidence["largest_phase_gain_per_step"] = part["gain_ns_per_step"]
        part_gain = value(part["gain_ns_per_step"], 0)
        if part_gain >= limits.advised_phase_share * gain:
            advice = ADVICE_PART.format(
                phase=part["phase"], rank=rank, part_gain=ms(part_gain), gain=ms(gain)
            )
    hot = hot_expert.hot_exchange(facts, rank)
    if hot is not None:
        sentence, advice = hot_expert.words(rank, gain, hot)
        text += sentence
        evidence["exchange_bytes_vs_median"] = hot["vs_median"]
    lag = _lag(facts, cause)
    if lag is not None:
        text += lag[0]
        evidence = {**lag[1], **evidence}
    kind = "straggler" if fix["pattern"] == "persistent" else "intermittent"
    return saving_finding(kind, f"{kind}: rank {rank}", (rank,), gain, pct, text, advice, evidence)


def find(facts: Facts, limits: Limits) -> list[Finding]:
    causes = [c for c in facts.causes if "rank" in c]
    return [replayed(finding(facts, c, limits), c["fix"], facts.set_apart) for c in causes]


RULE = Rule(
    id="slow_rank",
    kind="finding",
    order="saving",
    doc="""A rank the replay names (rule replay_causes): the straggler when it is slow in
most steps, else slow in some steps, with what making it as fast as the others saves, or
fixing the phase that holds most of its gain; else the part of its largest phase, which
its advice names where it holds at least {advised_phase_share} of the rank's gain. Where
the stragglers table names the same rank, its lag and the others' waiting are told after
it, as figures.""",
    thresholds=(
        Threshold(
            "advised_phase_share",
            0.5,
            "a slow rank's largest phase is advised when it holds this share of its gain",
        ),
    ),
    find=find,
)
