"""Rule mfu: the model FLOPs utilisation, where FLOPs per step were given (context: it
costs nothing of its own)."""

from __future__ import annotations

import statistics

from nsyswrap.report.diagnosis.facts import Facts
from nsyswrap.report.diagnosis.finding import Finding, cost_and_share, no_saving
from nsyswrap.report.diagnosis.rule import Limits, Rule
from nsyswrap.report.figures import value

TEXT = (
    "Compute reaches {level} MFU at the median step ({achieved:,.1f} of {peak:,.1f} TFLOP/s "
    "dense {dtype}{gpu}){tensor_cores}."
)
TENSOR_CORES = (
    "; {share:.0%} of compute kernel time runs in tensor-core kernels (matrix multiplies, "
    "attention)"
)


def find(facts: Facts, limits: Limits) -> list[Finding]:
    mfu = [r for r in facts.rows("compute", "mfu") if value(r["mfu"]) is not None]
    if not mfu:
        return []
    values = sorted(value(r["mfu"]) for r in mfu)
    level = (
        f"{values[0]:.1%}"
        if values[-1] - values[0] < 0.001
        else f"{values[0]:.1%} to {values[-1]:.1%}"
    )
    first = mfu[0]
    achieved = sorted(value(r["achieved"], 0) for r in mfu)
    tc = [
        value(r["tensor_core"])
        for r in facts.rows("compute", "tensor_cores")
        if value(r["tensor_core"]) is not None
    ]
    text = TEXT.format(
        level=level,
        achieved=achieved[len(achieved) // 2],
        peak=value(first["peak"], 0),
        dtype=first["dtype"],
        gpu=f", {first['gpu']}" if first.get("gpu") else "",
        tensor_cores=TENSOR_CORES.format(share=statistics.median(tc)) if tc else "",
    )
    shown = ("rank", "device", "mfu", "achieved", "peak")
    finding = Finding(
        id="mfu",
        scope="run",
        label=f"MFU {level}",
        devices=tuple(sorted((r["rank"], r["device"]) for r in mfu)),
        cost_basis="per step",
        **cost_and_share(None, None),
        text=text,
        evidence={"mfu": [{k: r[k] for k in shown} for r in mfu]},
        saving=no_saving(facts.replayed),
    )
    return [finding]


RULE = Rule(
    id="mfu",
    kind="finding",
    order="context",
    doc="""The MFU at the median step, where FLOPs per step were given (--flops-per-step,
or --model-params and --tokens-per-step), with the share of compute kernel time in
tensor-core kernels: context after the ranked findings, with no cost of its own.""",
    find=find,
)
