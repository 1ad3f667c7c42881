"""Rule noise_floor: the findings in their order, the cross-rank ones whose saving is
within the run's step-to-step noise (nsyswrap.report.diagnosis.noise) after every other
and never headlined (#38 item 2: a 0.9 ms jitter between two ranks sharing a GPU is not
a straggler, and never outranks a 14.7 ms host-bound cost)."""

from __future__ import annotations

from dataclasses import replace

from nsyswrap.report.diagnosis.facts import Facts
from nsyswrap.report.diagnosis.finding import Finding
from nsyswrap.report.diagnosis.noise import above_noise, noise_floor_ns
from nsyswrap.report.diagnosis.rule import Limits, Rule, Threshold
from nsyswrap.report.diagnosis.words import ms
from nsyswrap.report.figures import NS, figure, value

BELOW = (
    " That is within the run's noise: its step time varies by {floor} from step to step on "
    "its own (the noise floor), {why}; no cause to act on."
)
MEAN_UNDER = "more than the {gain} per step it saves on average"
AFFECTED_UNDER = "and the {per_affected} it saves in the steps it hits is under {factor:g}x that"
NO_FLOOR = "no steps to measure the run's step-to-step noise on"


def gains(f: Finding) -> tuple[float, float | None] | None:
    """(what a cross-rank finding saves per step, per affected step where it saves in only
    some steps): the replay's saving, else its cost (the straggler's lag); None where it
    is not per step."""
    per_step = value(f.saving, None)
    per_step = value(f.cost, None) if per_step is None else per_step
    if f.scope != "cross-rank" or f.cost_basis != "per step" or per_step is None:
        return None
    affected = f.evidence.get("gain_per_affected_step")
    some = f.evidence.get("pattern") == "intermittent" and affected is not None
    return per_step, value(affected) if some else None


def below(f: Finding, floor: float, limits: Limits) -> Finding:
    """`f` said to be within the noise: the reason after its text, no advice, flagged."""
    per_step, per_affected = gains(f)
    if per_step < limits.mean_factor * floor:
        why = MEAN_UNDER.format(gain=ms(per_step))
    else:
        why = AFFECTED_UNDER.format(per_affected=ms(per_affected), factor=limits.affected_factor)
    text = f.text + BELOW.format(floor=ms(floor), why=why)
    evidence = {**f.evidence, "noise_floor": figure(floor, NS)}
    extra = {**f.extra, "below_noise": True}
    return replace(f, text=text, advice=None, evidence=evidence, extra=extra)


def _is_noise(f: Finding, floor: float | None, limits: Limits) -> bool:
    said = gains(f)
    return (
        said is not None
        and floor is not None
        and not above_noise(
            *said,
            floor,
            mean_factor=limits.mean_factor,
            affected_factor=limits.affected_factor,
        )
    )


def find(facts: Facts, findings: list[Finding], limits: Limits) -> list[Finding]:
    """`findings` (in the rules' order) with those within the noise moved after the rest
    and said to be so (the rule's doc)."""
    floor = noise_floor_ns(dict(facts.report))
    noise = [f for f in findings if _is_noise(f, floor, limits)]
    kept = [f for f in findings if not _is_noise(f, floor, limits)]
    return kept + [below(f, floor, limits) for f in noise]


def floor_figure(facts: Facts) -> dict:
    """The run's noise floor as the diagnosis' JSON gives it (`noise_floor`)."""
    return figure(noise_floor_ns(dict(facts.report)), NS, NO_FLOOR)


RULE = Rule(
    id="noise_floor",
    kind="ranking",
    doc="""The run's noise floor is how much its step time varies from step to step on its
own: the replay's step noise (1.4826 x the median absolute deviation of the step times
with every rank idealised), else the same of the recorded step times (the slowest rank's
per step, the steps the window set apart left out). A cross-rank finding (a slow rank, a
straggler, moving stalls, a slow stage or link) is within the noise when what it saves per
step (the replay's saving, else the straggler's lag) is under {mean_factor} the floor,
or, where it saves in only some steps, what it saves in them is under {affected_factor}
the floor. Such a finding is never headlined and gets no advice: it comes after every
other finding, saying so (below_noise, evidence noise_floor). The others keep their
order: what the replay says fixing them saves, largest first, then the costs of the
device findings by their share, then context; every figure is in ms per step where the
window is steps. The diagnosis gives the floor (noise_floor).""",
    thresholds=(
        Threshold(
            "mean_factor",
            1.0,
            "a finding saving less per step than this x the noise floor is noise",
            "x",
        ),
        Threshold(
            "affected_factor",
            3.0,
            "a stall saving less in the steps it hits than this x the floor is noise",
            "x",
        ),
    ),
    find=find,
)
