"""Rule crossrank_label: the cross-rank section's verdict, as the diagnosis decides it:
what the replay names first, or no significant straggler where it finds that making the
rank the others wait for as fast as them saves little."""

from __future__ import annotations

from nsyswrap.report.diagnosis.facts import Facts
from nsyswrap.report.diagnosis.finding import Finding
from nsyswrap.report.diagnosis.rule import Limits, Rule
from nsyswrap.report.diagnosis.rules import replay_causes
from nsyswrap.report.diagnosis.words import ms
from nsyswrap.report.figures import value

SAVES_LITTLE = (
    "{reason}; but the replay finds that making rank {rank} as fast as the others would save "
    "{gain} {basis} ({pct:.1f} % of {of}, under {least}): the others' waiting is not what "
    "fixing it saves"
)


def _saves_little(facts: Facts, verdict: dict) -> dict | None:
    """Where the replay ran and names no cross-rank cause, the section's straggler (the
    rank the others waited for most) is no significant straggler, with what making it as
    fast as the others saves: the waits it imposes are not what fixing it saves."""
    label = str(verdict.get("label") or "")
    if not facts.fixes or not label.startswith("straggler: rank "):
        return None
    rank = int(label.rsplit(" ", 1)[1])
    fix = next((f for f in facts.fixes if f["kind"] == "rank" and f["rank"] == rank), None)
    gain, pct = (value(fix["gain_ns_per_step"], 0), value(fix["gain_pct"], 0)) if fix else (0, 0)
    steps = bool(facts.window.get("steps"))
    basis, of = ("per step", "the step time") if steps else ("over the window", "the window")
    least = replay_causes.RULE.threshold("min_gain_share")
    reason = SAVES_LITTLE.format(
        reason=verdict.get("reason", ""),
        rank=rank,
        gain=ms(gain),
        basis=basis,
        pct=pct,
        of=of,
        least=f"{least.default:.0%}",
    )
    return {**verdict, "label": "no significant straggler", "reason": reason}


def find(facts: Facts, findings: list[Finding], limits: Limits) -> dict | None:
    """The section's verdict, or None where its own stands: it names what the diagnosis
    names first from the replay (its own kept where that is the same rank)."""
    verdict = facts.verdict("crossrank")
    if verdict is None:
        return None
    first = next(
        (
            f
            for f in findings
            if f.scope == "cross-rank"
            and f.saving["value"] is not None
            and not f.extra.get("below_noise")
        ),
        None,
    )
    if first is None:
        return _saves_little(facts, verdict)
    same_rank = first.ranks and verdict.get("label") == f"straggler: rank {first.ranks[0]}"
    if verdict.get("label") != first.label and not (len(first.ranks) == 1 and same_rank):
        return {**verdict, "label": first.label, "reason": first.text}
    return None


RULE = Rule(
    id="crossrank_label",
    kind="label",
    doc="""The cross-rank section's verdict names what the diagnosis names first from the
replay (its own kept where it names the same rank). A straggler by the waits it imposes
whose fix the replay finds not worth naming (rule replay_causes) is no significant
straggler, with what making it as fast as the others would save.""",
    find=find,
)
