"""Rule compute_advice: what a compute-bound GPU is told, and a balanced one with
nothing else to be told."""

from __future__ import annotations

from nsyswrap.report.diagnosis.evidence import Evidence
from nsyswrap.report.diagnosis.facts import Totals
from nsyswrap.report.diagnosis.rule import Rule

COMPUTE = (
    "The GPU computes {share:.0%} of the time: make the longest kernels faster (`nsyswrap "
    "query kernels.summary` lists them){how}."
)
HOW = ", e.g. with bf16 autocast, TF32 matmuls{compile}"
COMPILE = " or torch.compile"  # not to a program compiled already (Inductor's kernels)
BALANCED = (
    "No single cause dominates; compare the steps and the longest kernels (`nsyswrap query "
    "kernels.summary`) to choose what to improve first."
)


def advice(t: Totals, e: Evidence, label: str, said: dict[str, str]) -> dict[str, str]:
    """Topic compute (a compute-bound GPU), or balanced where nothing else was `said`."""
    if label == "compute-bound":
        how = HOW.format(compile="" if e.compiled else COMPILE) if e.pytorch else ""
        return {"compute": COMPUTE.format(share=t.share(t.compute_busy_ns), how=how)}
    if label == "balanced" and not said:
        return {"balanced": BALANCED}
    return {}


RULE = Rule(
    id="compute_advice",
    kind="advice",
    doc="""A compute-bound GPU is told to make its longest kernels faster (bf16 autocast,
TF32 matmuls when the trace shows PyTorch, or torch.compile where it shows no Inductor
kernels: the program is not compiled already); a balanced one with nothing else to be
told, to compare the steps and the longest kernels.""",
)
