"""Rule replay_causes: which of the replay's candidate fixes (crossrank.whatif) the
diagnosis names, as causes; rules moving_stalls, slow_stage and slow_rank word them."""

from __future__ import annotations

from dataclasses import replace

from nsyswrap.report.diagnosis.facts import Facts
from nsyswrap.report.diagnosis.finding import Finding
from nsyswrap.report.diagnosis.rule import Limits, Rule, Threshold
from nsyswrap.report.diagnosis.words import listed, ms
from nsyswrap.report.figures import FRACTION, NS, figure, value


def fix_steps(fix: dict) -> list[int]:
    """The steps a fix saves time in."""
    return [int(x) for x in (fix.get("steps") or "").split(",") if x]


def gain_of(fix: dict) -> tuple[float, float, str]:
    """(ns saved per step, % of the step time, `in 3 of 10 steps`)."""
    gain, pct = value(fix["gain_ns_per_step"], 0), value(fix["gain_pct"], 0)
    steps = f"in {value(fix['affected_steps'], 0)} of {value(fix['steps_in_window'], 0)} steps"
    return gain, pct, steps


def gain_evidence(fix: dict) -> dict:
    """What a cause's finding gives as evidence of its gain (its range where it rests on
    waits the replay assumed)."""
    gain, pct, _ = gain_of(fix)
    evidence = {
        "gain_per_step": figure(gain, NS),
        "gain_share": figure(pct / 100, FRACTION),
        "gain_per_affected_step": fix["gain_ns_per_affected_step"],
        "pattern": fix["pattern"],
        "affected_steps": fix_steps(fix),
    }
    if fix.get("assumed"):  # it rests on waits the trace does not show: a range
        evidence["gain_low_per_step"] = fix["gain_low_ns_per_step"]
        evidence["gain_high_per_step"] = fix["gain_high_ns_per_step"]
    if steady_gain(fix) is not None:  # it counts the ranks' noise too: a range
        evidence["gain_steady_per_step"] = fix["gain_steady_ns_per_step"]
    return evidence


STEADY_SHARE = 0.95
"""A fix's lesser gain (from its ranks' steady excess alone, crossrank.whatif's
gain_steady_ns_per_step; in `nsyswrap diff`, also with none of the waits the replay
assumed) below this share of its gain is the low end of a range (the replay's 5 %); else
one figure."""


def range_low(gain: float, low: float) -> float | None:
    """`low` where it is the low end of a range up to `gain` (STEADY_SHARE); None: one
    figure."""
    return low if low < STEADY_SHARE * gain else None


def steady_gain(fix: dict) -> float | None:
    """The gain of removing only a fix's ranks' steady excess where it is the low end of
    a range (range_low; None: it is not, or the fix has none)."""
    if fix.get("gain_steady_ns_per_step") is None:
        return None
    gain = value(fix["gain_ns_per_step"], 0)
    return range_low(gain, value(fix["gain_steady_ns_per_step"], gain))


ASSUMED = (
    " That rests on waits the trace does not show (a host that resumed right after a "
    "completion, no call recorded waiting: `assumed_waits`): "
)
RANGE = (
    "between {low} per step if the hosts waited for none of them and {high} if they waited "
    "for each."
)
ONE_FIGURE = "{gain} per step whether the hosts waited for none of them or for each."
OUTLIERS = " ({steps} {verb}, set apart from the step statistics; the replay counts them here.)"
NOISE = (
    " Making it as fast as the median other rank in every step also takes away its own "
    "step-to-step noise, which a fix of what is slow in it leaves: between {low} per step "
    "(its steady excess alone removed) and {high}."
)


def replayed(finding: Finding, fix: dict, set_apart: frozenset[int]) -> Finding:
    """A cause's finding as the replay qualifies it: the range of its gain where it rests on
    waits the replay assumed (one figure where its ends round alike), and the steps it
    counts that the window set apart as outliers (left out of the step statistics, or out
    of the window after it)."""
    text, evidence = finding.text, dict(finding.evidence)
    if fix.get("assumed"):
        low, high = (ms(value(fix[f"gain_{end}_ns_per_step"], 0)) for end in ("low", "high"))
        text += ASSUMED + (
            ONE_FIGURE.format(gain=low) if low == high else RANGE.format(low=low, high=high)
        )
    steady = steady_gain(fix)
    if steady is not None:
        text += NOISE.format(low=ms(steady), high=ms(value(fix["gain_ns_per_step"], 0)))
    steps = sorted(set(evidence.get("affected_steps") or []) & set_apart)
    if steps:
        verb = "is an outlier" if len(steps) == 1 else "are outliers"
        text += OUTLIERS.format(steps=listed("step", steps).capitalize(), verb=verb)
        evidence["outlier_steps"] = steps
    return replace(finding, text=text, evidence=evidence)


def _step_ns(fixes: tuple[dict, ...]) -> float:
    """The step time the fixes' percentages are of."""
    return next(
        (
            value(f["gain_ns_per_step"], 0) * 100 / value(f["gain_pct"])
            for f in fixes
            if value(f["gain_pct"], 0) > 0
        ),
        0.0,
    )


def _significant(fix: dict, step_ns: float, x: Limits) -> bool:
    """A fix worth naming: it saves time in some step (crossrank.whatif: more than the
    replay residual and the step noise), at least min_gain_share of a step where it does."""
    per_affected = value(fix["gain_ns_per_affected_step"], 0)
    return fix["pattern"] != "none" and per_affected >= x.min_gain_share * step_ns


def _moving(sig: list[dict], per_rank: dict, x: Limits) -> list[dict]:
    """Phases whose stalls move between ranks: several ranks' fixes of one phase, each in
    its own steps, each saving per affected step at least moving_share x the largest."""
    causes = []
    for f in sig:
        if f["kind"] != "rank_phase" or f["rank"] is not None:
            continue
        mine = [g for (_, p), g in per_rank.items() if p == f["phase"]]
        largest = max((value(g["gain_ns_per_affected_step"], 0) for g in mine), default=0)
        mine = [
            g for g in mine if value(g["gain_ns_per_affected_step"], 0) >= x.moving_share * largest
        ]
        pairs = sorted((s, g["rank"]) for g in mine for s in fix_steps(g))
        if len(mine) >= 2 and len({s for s, _ in pairs}) == len(pairs):  # each step: one rank
            causes.append({"fix": f, "phase": f["phase"], "pairs": pairs, "ranks": mine})
    return causes


def _slow_rank(f: dict, per_rank: dict, moving: set, moved: set, x: Limits) -> dict | None:
    """A rank's cause: with the phase holding at least named_phase_share of its gain (else
    the rank's whole fix is the figure, with its largest phase's part); None where moving
    stalls already say it (its phase, or each step where it is slow and at least
    told_share of its gain)."""
    phases = [g for (r, _), g in per_rank.items() if r == f["rank"]]
    best = max(phases, key=lambda g: value(g["gain_ns_per_step"], 0), default=None)
    whole = value(f["gain_ns_per_step"], 0)
    part = 0 if best is None else value(best["gain_ns_per_step"], 0)
    named = best is not None and part >= x.named_phase_share * whole
    told = max(  # the largest gain of its moving stalls
        (value(g["gain_ns_per_step"], 0) for g in phases if (g["rank"], g["phase"]) in moving),
        default=0,
    )
    if (named and (f["rank"], best["phase"]) in moving) or (
        {(s, f["rank"]) for s in fix_steps(f)} <= moved and told >= x.told_share * whole
    ):
        return None
    return {
        "fix": best if named else f,
        "rank": f["rank"],
        "phase": best["phase"] if named else None,
        "part": None if named else best,
    }


def find(facts: Facts, limits: Limits) -> list[dict]:
    """The causes worth naming, largest gain first (at most max_causes): moving stalls
    {fix, phase, pairs}, slow stages {fix, stage}, slow ranks {fix, rank, phase, part}."""
    step_ns = _step_ns(facts.fixes)
    sig = [f for f in facts.fixes if _significant(f, step_ns, limits)]
    per_rank = {
        (f["rank"], f["phase"]): f
        for f in sig
        if f["kind"] == "rank_phase" and f["rank"] is not None
    }
    causes = _moving(sig, per_rank, limits)
    moving = {(g["rank"], c["phase"]) for c in causes for g in c.pop("ranks")}
    moved = {pair for c in causes for pair in c["pairs"]}
    causes += [{"fix": f, "stage": f["stage"]} for f in sig if f["kind"] == "stage"]
    for f in sig:
        if f["kind"] == "rank":
            cause = _slow_rank(f, per_rank, moving, moved, limits)
            causes += [cause] if cause is not None else []
    causes.sort(key=lambda c: -value(c["fix"]["gain_ns_per_step"], 0))
    return causes[: int(limits.max_causes)]


def worth_naming(fix: dict | None, step_ns: float, limits: Limits | None = None) -> bool:
    """Whether the replay finds `fix` worth naming (rule crossrank_label asks)."""
    return fix is not None and _significant(fix, step_ns, limits or RULE.limits())


RULE = Rule(
    id="replay_causes",
    kind="causes",
    doc="""The causes the diagnosis names from the what-if replay (crossrank.whatif), each
with what fixing it saves. The replay is trusted where replaying the recorded durations
misses no recorded step time by more than {max_residual}. A fix is named when it saves
time in some step (more than the replay residual and the step noise), at least
{min_gain_share} of a step where it does. Stalls of one phase that move between ranks
(several ranks' fixes of that phase, each in its own steps, each saving per affected step
at least {moving_share} of the largest) are one cause. A slow rank is named with the
phase that holds at least {named_phase_share} of its gain (the phase's saving is then the
figure), else with the part of its largest phase (the rank's whole saving the figure);
not where moving stalls already name that phase on it, or cover each step where it is
slow and at least {told_share} of its gain. At most {max_causes} causes, largest gain
first. A cause's finding gives the range of its saving where it rests on waits the
replay assumed (without them and with them: gain_low_per_step, gain_high_per_step; one
figure where both round alike), and names the steps it counts that the window set apart as outliers
(outlier_steps).""",
    thresholds=(
        Threshold(
            "max_residual",
            0.02,
            "the replay's residual, of a step time, above which it sizes no fix",
        ),
        Threshold(
            "min_gain_share", 0.01, "a fix is named when it saves this share of a step it is in"
        ),
        Threshold(
            "moving_share",
            0.25,
            "a rank's stalls of a phase move with the others' when each saves this x the largest",
        ),
        Threshold(
            "named_phase_share", 0.9, "a slow rank is named by the phase holding this of its gain"
        ),
        Threshold(
            "told_share",
            0.5,
            "moving stalls say a rank's gain when their phase on it holds this much of it",
        ),
        Threshold("max_causes", 3, "causes named, at most", "count"),
    ),
    find=find,
)
