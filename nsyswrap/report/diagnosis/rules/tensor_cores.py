"""Rule tensor_cores: a compute-bound GPU that runs matrix multiplies or attention, but
spends most of its compute kernel time outside them."""

from __future__ import annotations

from nsyswrap.report.diagnosis.facts import Facts
from nsyswrap.report.diagnosis.finding import Finding, cost_and_share, no_saving
from nsyswrap.report.diagnosis.rule import Limits, Rule, Threshold
from nsyswrap.report.diagnosis.words import ms
from nsyswrap.report.figures import FRACTION, NS, basis_words, figure, value

TEXT = (
    "{who}: {outside:.0%} of compute kernel time is outside matrix multiplies and attention "
    "(elementwise, normalization, optimizer kernels: {amount} {basis}){longest}."
)
LONGEST = "; the longest: {kernel} ({share:.0%} of compute)"
ADVICE = (
    "Fuse the elementwise and normalization work around the matrix multiplies{how}; the top "
    "kernels table lists what to fuse first."
)
HOW = " (torch.compile; a fused optimizer, e.g. AdamW(fused=True))"


def who(keys: list[tuple[int, int]]) -> str:
    """`Rank 0`, `Ranks 0, 1`."""
    ranks = sorted({r for r, _ in keys})
    return ("Rank " if len(ranks) == 1 else "Ranks ") + ", ".join(map(str, ranks))


def find(facts: Facts, limits: Limits) -> list[Finding]:
    bound = [
        (r["rank"], r["device"], r)
        for r in facts.rows("compute", "tensor_cores")
        if facts.labels.get((r["rank"], r["device"]), {}).get("label") == "compute-bound"
        and 0 < value(r["tensor_core"], 1) < limits.low_tensor_core_share
    ]
    if not bound:
        return []
    keys = [(rank, device) for rank, device, _ in bound]
    other = sum(value(r["other"], 0) for *_, r in bound)
    compute = sum(value(r["compute"], 0) for *_, r in bound)
    cost, basis = facts.per_step(keys[0], other / len(keys))
    span = sum(facts.totals[k].span_ns for k in keys if k in facts.totals)
    top = next(
        (
            r
            for r in facts.rows("compute", "top_kernels")
            if (r["rank"], r["device"]) in keys and r["class"] == "other"
        ),
        None,
    )
    longest = LONGEST.format(kernel=top["kernel"], share=value(top["of_compute"], 0)) if top else ""
    text = TEXT.format(
        who=who(keys),
        outside=other / compute,
        amount=ms(cost),
        basis=basis_words(basis),
        longest=longest,
    )
    finding = Finding(
        id="tensor_cores",
        scope="device",
        label="compute outside tensor cores",
        devices=tuple(sorted(keys)),
        cost_basis=basis,
        **cost_and_share(cost, other / span if span else None),
        text=text,
        advice=ADVICE.format(how=HOW if "pytorch" in facts.frameworks else ""),
        evidence={
            "tensor_core_share": figure(1 - other / compute, FRACTION),
            "other_per_step": figure(cost, NS),
        },
        saving=no_saving(facts.replayed),
    )
    return [finding]


RULE = Rule(
    id="tensor_cores",
    kind="finding",
    order="share",
    doc="""A compute-bound GPU that runs matrix multiplies or attention (some tensor-core
kernel time: a program without any, a stencil code, has nothing to fuse around them)
whose compute kernel time is mostly outside them (the tensor-core share below
{low_tensor_core_share}): the time of the elementwise, normalization and optimizer kernels,
and the advice to fuse them.""",
    thresholds=(
        Threshold(
            "low_tensor_core_share",
            0.5,
            "a compute-bound GPU is told to fuse below this tensor-core share of compute",
        ),
    ),
    find=find,
)
