"""Rule device_bound: one finding per device verdict (communication-, copy-, host- or
compute-bound), for every GPU of that verdict, by the step time its cause takes."""

from __future__ import annotations

from nsyswrap.report.diagnosis.advice import recommendations
from nsyswrap.report.diagnosis.evidence import evidence_of
from nsyswrap.report.diagnosis.facts import Facts, Totals
from nsyswrap.report.diagnosis.finding import Finding, no_saving
from nsyswrap.report.diagnosis.rule import Limits, Rule
from nsyswrap.report.diagnosis.rules.device_label import verdict
from nsyswrap.report.diagnosis.rules.replay_causes import gain_of
from nsyswrap.report.diagnosis.words import capital, devices, ms
from nsyswrap.report.figures import FRACTION, NS, basis_words, figure, value

# Per verdict: the time behind it (the cost the finding ranks by), its sentence, and the
# advice topics it says, in order (nsyswrap.report.diagnosis.advice).
CAUSES = {
    "communication-bound": (
        "exposed_comm_ns",
        "{names} {verb} communication-bound: {share:.0%} of the GPU time is exposed "
        "communication ({amount}).",
        ("exposed", "overlap", "same_stream"),
    ),
    "copy-bound": (
        "copy_only_ns",
        "{names} {verb} copy-bound: {share:.0%} of the GPU time is copies with nothing else "
        "running ({amount}).",
        ("copies",),
    ),
    "host-bound": (
        "host_idle_ns",
        "{names} {verb} host-bound: {share:.0%} of the GPU time is idle waiting for the host "
        "({amount}).",
        ("sync", "host_work", "launch"),
    ),
    "compute-bound": (
        "compute_busy_ns",
        "{names} {verb} compute-bound: {share:.0%} of the GPU time runs compute ({amount}).",
        ("compute",),
    ),
}
HIDE = (
    " Hiding {op} (group {pg}) completely, waits included, would save {gain} per step "
    "({pct:.0f} %) at most."
)


def _hide(facts: Facts) -> dict | None:
    """The collective whose hiding the replay finds saves the most, where it saves time:
    at most that is what hiding exposed communication saves (it also removes its waits)."""
    hide = max(
        (f for f in facts.fixes if f["kind"] == "collective"),
        default=None,
        key=lambda f: value(f["gain_ns_per_step"], 0),
    )
    return hide if hide and value(hide["gain_ns_per_step"], 0) > 0 else None


def finding(facts: Facts, label: str, keys: list) -> Finding:
    """The finding of the GPUs `keys` of verdict `label`, in one GPU's figures."""
    attr, sentence, topics = CAUSES[label]
    per, factor, basis = facts.per_gpu_step(keys)  # one GPU's figures
    e = evidence_of(facts, keys, factor, basis_words(basis))
    cost = getattr(per, attr)
    advice = recommendations(per, e, label)
    said = [advice[t] for t in topics if t in advice]
    text = sentence.format(
        names=capital(devices(keys, facts.per_rank)),
        verb="is" if len(keys) == 1 else "are",
        share=per.share(cost),
        amount=e.amount(cost),
    )
    evidence = {"reason": verdict(sum((facts.totals[k] for k in keys), Totals()))["reason"]}
    hide = _hide(facts) if label == "communication-bound" else None
    if hide is not None:
        gain, pct, _ = gain_of(hide)
        evidence["hide_gain_per_step"] = figure(gain, NS)
        text += HIDE.format(op=hide["op"], pg=hide["pg"], gain=ms(gain), pct=pct)
    return Finding(
        id=label,
        scope="device",
        label=label,
        devices=tuple(sorted(keys)),
        cost=figure(cost, NS),
        cost_basis=basis,
        share=figure(per.share(cost), FRACTION),
        text=text,
        advice=" ".join(said) or None,
        evidence=evidence,
        saving=no_saving(facts.replayed),
    )


def find(facts: Facts, limits: Limits) -> list[Finding]:
    """One finding per verdict among the devices' labels, in the order of their first GPU."""
    groups: dict[str, list] = {}
    for key, v in facts.labels.items():
        if v["label"] in CAUSES:
            groups.setdefault(v["label"], []).append(key)
    return [finding(facts, label, keys) for label, keys in groups.items()]


RULE = Rule(
    id="device_bound",
    kind="finding",
    order="share",
    doc="""One finding per device verdict (rule device_label): the GPUs that are
communication-, copy-, host- or compute-bound, with the time their cause takes (exposed
communication, copies alone, idle waiting for the host, compute) per step and per GPU
(the mean of the GPUs; per rank where ranks share a physical GPU, trace.gpus), its share
of the GPU time, and the advice on it (rules communication_advice, host_idle_advice,
copy_advice, compute_advice). Ranked with the other device findings by that share. A
communication-bound finding says what hiding its costliest collective would save at most,
where the replay sizes it.""",
    find=find,
)
