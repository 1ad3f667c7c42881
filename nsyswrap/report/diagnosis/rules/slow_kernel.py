"""Rule slow_kernel: a rank whose copy of a kernel that matters is consistently slower
than the other ranks' (throttling, another process, its placement)."""

from __future__ import annotations

import statistics

from nsyswrap.report.diagnosis.facts import Facts
from nsyswrap.report.diagnosis.finding import Finding, cost_and_share, no_saving
from nsyswrap.report.diagnosis.rule import Limits, Rule, Threshold
from nsyswrap.report.diagnosis.words import ms
from nsyswrap.report.figures import NS, basis_words, figure, value

TEXT = (
    "Rank {rank} runs {kernel} consistently slower than the other ranks (median {median} "
    "against {others}, +{slower:.0%}): {amount} {basis}."
)
ADVICE = (
    "Check rank {rank}'s GPU: throttling (nvidia-smi -q -d PERFORMANCE,CLOCK,TEMPERATURE), "
    "other processes on it, and its placement (PCIe, NUMA); the same kernel runs faster on "
    "the other ranks."
)


def find(facts: Facts, limits: Limits) -> list[Finding]:
    slow = facts.rows("compute", "slow_kernels")
    if not slow:
        return []
    r = slow[0]  # longest extra first
    key = (r["rank"], r["device"])
    cost, basis = facts.per_step(key, value(r["extra"], 0))
    steps = [d for _, d in facts.steps.get(key, ())]
    totals = facts.totals.get(key)
    step = statistics.median(steps) if steps else totals.span_ns if totals else 0
    if not step or cost < limits.min_step_share * step:
        return []
    text = TEXT.format(
        rank=r["rank"],
        kernel=r["kernel"],
        median=ms(value(r["median"], 0)),
        others=ms(value(r["others"], 0)),
        slower=value(r["slower"], 0),
        amount=ms(cost),
        basis=basis_words(basis),
    )
    finding = Finding(
        id="slow_kernel",
        scope="device",
        label=f"slow kernel copy: rank {r['rank']}",
        devices=(key,),
        cost_basis=basis,
        **cost_and_share(cost, cost / step),
        text=text,
        advice=ADVICE.format(rank=r["rank"]),
        evidence={
            "kernel": r["kernel"],
            "median": r["median"],
            "others": r["others"],
            "extra_per_step": figure(cost, NS),
        },
        saving=no_saving(facts.replayed),
    )
    return [finding]


RULE = Rule(
    id="slow_kernel",
    kind="finding",
    order="share",
    doc="""A kernel that matters runs slower on one GPU than on every other: its 10th
percentile, median and 90th percentile each at least {slower_share} above every other
GPU's, each GPU with at least {min_runs} runs of it (table slow_kernels). The rank with the
longest extra time is a finding when that extra costs at least {min_step_share} of its
step; the advice is to check its GPU (throttling, other processes, placement).""",
    thresholds=(
        Threshold("slower_share", 0.10, "a GPU's copy of a kernel is slower by this much"),
        Threshold("min_runs", 5, "runs of the kernel on each GPU to compare them", "count"),
        Threshold("min_step_share", 0.02, "a slow kernel is a finding when it costs this share"),
    ),
    find=find,
)
