"""Rule periodic_stall: long steps that recur every N steps on a rank (logging, a
checkpoint, an evaluation every N steps), from the single-rank table periodic_steps
(steps.periodic), with the phase that holds their extra time and what they take per step
of the window."""

from __future__ import annotations

from nsyswrap.report.diagnosis.facts import Facts
from nsyswrap.report.diagnosis.finding import Finding, no_saving
from nsyswrap.report.diagnosis.rule import Limits, Rule, Threshold
from nsyswrap.report.diagnosis.words import ms
from nsyswrap.report.figures import FRACTION, NS, figure, value

TEXT = (
    "Rank {rank}: every {period} steps a step runs {extra} longer than its median step of "
    "{median} (steps {steps}), {where}: {per_step} per step of the window ({pct:.0f} % of "
    "its mean step)."
)
IN_PHASE = "{phase_extra} of it in phase {phase!r}"
NO_PHASE = "in no phase range (waiting for another rank, or time outside every phase)"
ADVICE = (
    "Find what the program does every {period} steps in {phase!r} (logging, a checkpoint, "
    "an evaluation): make it asynchronous or less frequent; it takes {per_step} per step."
)


def _window_steps(facts: Facts, rank: int) -> tuple[int, float]:
    """The steps of the window on `rank` and their mean duration (its device with the most
    steps; (0, 0) without steps)."""
    keys = [k for k in facts.steps if k[0] == rank and facts.step_count(k)]
    if not keys:
        return 0, 0.0
    durations = [d for _, d in facts.steps[max(keys, key=facts.step_count)]]
    return len(durations), sum(durations) / len(durations)


def _waits_for_another(row: dict, rows: list[dict]) -> bool:
    """Whether a row without phase has another rank's stall with a phase in its long steps
    (it waits for that stall in the collectives)."""
    mine = set(row["steps"].split(","))
    return not row.get("phase") and any(
        o.get("phase") and o["period"] == row["period"] and set(o["steps"].split(",")) <= mine
        for o in rows
        if o["rank"] != row["rank"]
    )


def _saving(facts: Facts, rank: int, phase: str | None) -> dict:
    """What the replay says making `phase` on `rank` as fast as elsewhere saves per step."""
    fix = next((f for f in facts.fixes if (f["rank"], f["phase"]) == (rank, phase)), None)
    return fix["gain_ns_per_step"] if phase and fix else no_saving(facts.replayed)


def finding(facts: Facts, row: dict, per_step: float, mean_step: float) -> Finding:
    """The finding of one periodic_steps row taking `per_step` of a `mean_step`."""
    extra, median, phase = value(row["extra"], 0), value(row["median_step"], 0), row.get("phase")
    pct = 100 * per_step / mean_step
    where = (
        IN_PHASE.format(phase_extra=ms(value(row["phase_extra"], 0)), phase=phase)
        if phase
        else NO_PHASE
    )
    evidence = {
        "period": row["period"],
        "steps": row["steps"],
        "stalls": row["stalls"],
        "extra_per_stall": row["extra"],
        "median_step": row["median_step"],
        "noise": row["noise"],
        "phase": phase,
        "phase_extra": row["phase_extra"],
    }
    return Finding(
        id="periodic-stall",
        scope="run",
        label=f"periodic stall: rank {row['rank']} every {value(row['period'])} steps",
        ranks=(row["rank"],),
        cost=figure(per_step, NS),
        cost_basis="per step",
        share=figure(pct / 100, FRACTION),
        text=TEXT.format(
            rank=row["rank"],
            period=value(row["period"]),
            extra=ms(extra),
            median=ms(median),
            steps=row["steps"].replace(",", ", "),
            where=where,
            per_step=ms(per_step),
            pct=pct,
        ),
        advice=ADVICE.format(period=value(row["period"]), phase=phase, per_step=ms(per_step))
        if phase
        else None,
        evidence=evidence,
        saving=_saving(facts, row["rank"], phase),
    )


def find(facts: Facts, limits: Limits) -> list[Finding]:
    rows, found = facts.rows("single_rank", "periodic_steps"), []
    for row in rows:
        steps, mean_step = _window_steps(facts, row["rank"])
        if not steps or not mean_step or _waits_for_another(row, rows):
            continue
        per_step = value(row["extra"], 0) * value(row["stalls"], 0) / steps
        if per_step >= limits.min_step_share * mean_step:
            found.append(finding(facts, row, per_step, mean_step))
    return found


RULE = Rule(
    id="periodic_stall",
    kind="finding",
    order="share",
    doc="""Long steps that recur every N steps on a rank (single-rank table periodic_steps:
longer than its median step by more than 3 x its step-to-step noise, at least 3 of them,
one every N steps), such as logging or a checkpoint every N steps, are a finding when
their time above the median step, spread over the window's steps, is at least
{min_step_share} of the rank's mean step: it names the period, the steps, the extra time
per stall and the phase range holding it, with what the replay says making that phase as
fast as elsewhere saves, and tells the rank to make what runs every N steps in that phase
asynchronous or less frequent. A rank whose long steps hold no phase gets no advice, and
no finding where another rank stalls in a phase in those steps with the same period (it
waits for that stall in the collectives).""",
    thresholds=(
        Threshold(
            "min_step_share",
            0.01,
            "the least time the stalls take per step of the window, of the mean step",
        ),
    ),
    find=find,
)
