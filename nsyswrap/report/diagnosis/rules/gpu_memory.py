"""Rule gpu_memory: a rank near its GPU's memory, holding much more than the others, or
allocating inside the steps (context: it costs nothing of its own)."""

from __future__ import annotations

from nsyswrap.report.diagnosis.facts import Facts
from nsyswrap.report.diagnosis.finding import Finding, cost_and_share, no_saving
from nsyswrap.report.diagnosis.rule import Limits, Rule, Threshold
from nsyswrap.report.figures import value

FULL = (
    "rank {rank} holds {share:.0%} of its GPU's memory at its peak (near the limit: the "
    "allocator frees and retries, or runs out)"
)
MORE = (
    "rank {rank} allocates {more:.0%} more than the other ranks' median (its shard, buffers "
    "or activations are larger)"
)
CHURN = (
    "rank {rank} allocates {times:,.1f} times per step (cudaMalloc/cudaFree in the loop: "
    "slow, a free synchronizes)"
)
TEXT = "GPU memory: {said}."
ADVICE = (
    "Keep allocations out of the step loop: reuse buffers, let the caching allocator warm up "
    "before measuring, or set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True against "
    "fragmentation."
)


def find(facts: Facts, limits: Limits) -> list[Finding]:
    said, keys, churn = [], [], False
    for r in facts.rows("memory", "gpu_memory"):
        key, rank = (r["rank"], r["device"]), r["rank"]
        if value(r["of_device"], 0) >= limits.full_share:
            said.append(FULL.format(rank=rank, share=value(r["of_device"])))
            keys.append(key)
        if value(r["vs_others"], 0) >= limits.more_than_others_share:
            said.append(MORE.format(rank=rank, more=value(r["vs_others"])))
            keys.append(key)
        if value(r["allocs_per_step"], 0) >= limits.allocs_per_step:
            said.append(CHURN.format(rank=rank, times=value(r["allocs_per_step"])))
            keys.append(key)
            churn = True
    if not said:
        return []
    finding = Finding(
        id="gpu_memory",
        scope="device",
        label="GPU memory",
        devices=tuple(sorted(set(keys))),
        cost_basis="over the window",
        **cost_and_share(None, None),
        text=TEXT.format(said="; ".join(said)),
        advice=ADVICE if churn else None,
        evidence={"ranks": sorted({k[0] for k in keys})},
        saving=no_saving(facts.replayed),
    )
    return [finding]


RULE = Rule(
    id="gpu_memory",
    kind="finding",
    order="context",
    doc="""GPU memory, as context after the ranked findings: a rank that holds at least
{full_share} of its GPU's memory at its peak (near the limit), that allocates at least
{more_than_others_share} more than the other ranks' median, or that allocates
{allocs_per_step} time or more per step (cudaMalloc/cudaFree in the loop: advised to keep
allocations out of it).""",
    thresholds=(
        Threshold("full_share", 0.9, "a rank's peak share of its GPU's memory: near the limit"),
        Threshold(
            "more_than_others_share", 0.25, "a rank's peak above the other ranks' median by this"
        ),
        Threshold("allocs_per_step", 1, "allocations per step that are told", "count"),
    ),
    find=find,
)
