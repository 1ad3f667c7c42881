"""Findings of the diagnosis from the compute, memory and host sections: each only where it
changes the answer, one function per figure. Like every finding they read the report's
tables alone (ids and columns, no SQL) and carry `id`, `scope`, `label`, `ranks` or
`devices`, `cost`, `cost_basis`, `share`, `text`, `recommendation` and `evidence`.

Ranked with the other findings (a cost of step time and its share of the GPU time):
* `tensor_cores`: a compute-bound device that runs matrix multiplies or attention (some
  tensor-core kernel time: a program without any, a stencil code, has nothing to fuse
  around them) whose compute kernel time is mostly outside them (the tensor-core share
  below TENSOR_CORE_LOW);
* `slow_kernel`: a rank whose copy of a kernel that matters is consistently slower than
  the other ranks', costing at least SLOW_NOTABLE of its step;
* `copy_bandwidth`: large copies below the order of magnitude their link gives, on a
  device where copies alone take at least COPY_NOTABLE of the time; copies from or to
  pageable memory are said to be so, and told to pin it, not to check the link (the
  driver stages them through a pinned buffer: they measure that, not the link).
A cost's basis reads "over the window" in the text when there are no steps (JSON
`cost_basis`: "over the span"), as in the device findings beside them.
Context, after the ranked findings (no cost of their own: `share` null):
* `mfu`: the MFU when FLOPs per step were given, with the tensor-core share;
* `gpu_memory`: a rank near its GPU's memory, holding much more than the others, or
  allocating inside the steps.
"""

from __future__ import annotations

import statistics

from nsyswrap.report.figures import FRACTION, NS, basis_words, figure, missing, rows, value
from nsyswrap.report.verdict import COPY_NOTABLE, ms, pins_pageable

TENSOR_CORE_LOW = 0.5
SLOW_NOTABLE = 0.02
MEMORY_FULL = 0.9  # peak share of the device's memory: near the limit
MEMORY_IMBALANCE = 0.25  # peak above the other ranks' median by this much
NO_COST = "context: where the time goes is in the findings before it"


def metric_findings(report: dict, run, labels: dict) -> tuple[list[dict], list[dict]]:
    """(findings ranked by cost, context findings) of the compute, memory and host tables;
    `run` is the diagnosis' view of the report, `labels` its per-device labels."""
    ranked = [
        _tensor_cores(report, run, labels),
        _slow_kernel(report, run),
        _copy_bandwidth(report, run, labels),
    ]
    context = [_mfu(report), _gpu_memory(report)]
    return [f for f in ranked if f], [f for f in context if f]


def _who(keys: list[tuple[int, int]]) -> str:
    ranks = sorted({r for r, _ in keys})
    return ("Rank " if len(ranks) == 1 else "Ranks ") + ", ".join(map(str, ranks))


def _finding(
    fid: str,
    label: str,
    keys: list,
    cost: float | None,
    basis: str,
    share: float | None,
    text: str,
    advice: str | None,
    evidence: dict,
) -> dict:
    return {
        "id": fid,
        "scope": "device",
        "label": label,
        "devices": [list(k) for k in sorted(keys)],
        "cost": figure(cost, NS, NO_COST),
        "cost_basis": basis,
        "share": figure(share, FRACTION) if share is not None else missing(FRACTION, NO_COST),
        "text": text,
        "recommendation": advice,
        "evidence": evidence,
    }


def _tensor_cores(report: dict, run, labels: dict) -> dict | None:
    bound = [
        (r["rank"], r["device"], r)
        for r in rows(report, "compute", "tensor_cores")
        if labels.get((r["rank"], r["device"]), {}).get("label") == "compute-bound"
        and 0 < value(r["tensor_core"], 1) < TENSOR_CORE_LOW
    ]
    if not bound:
        return None
    keys = [(rank, device) for rank, device, _ in bound]
    other = sum(value(r["other"], 0) for *_, r in bound)
    compute = sum(value(r["compute"], 0) for *_, r in bound)
    cost, basis = run.per_step(keys[0], other / len(keys))
    span = sum(run.totals[k].span_ns for k in keys if k in run.totals)
    top = next(
        (
            r
            for r in rows(report, "compute", "top_kernels")
            if (r["rank"], r["device"]) in keys and r["class"] == "other"
        ),
        None,
    )
    longest = (
        f"; the longest: {top['kernel']} ({value(top['of_compute'], 0):.0%} of compute)"
        if top
        else ""
    )
    text = (
        f"{_who(keys)}: {other / compute:.0%} of compute kernel time is outside matrix "
        f"multiplies and attention (elementwise, normalization, optimizer kernels: "
        f"{ms(cost)} {basis_words(basis)}){longest}."
    )
    advice = (
        "Fuse the elementwise and normalization work around the matrix multiplies"
        + (
            " (torch.compile; a fused optimizer, e.g. AdamW(fused=True))"
            if "pytorch" in run.frameworks
            else ""
        )
        + "; the top kernels table lists what to fuse first."
    )
    return _finding(
        "tensor_cores",
        "compute outside tensor cores",
        keys,
        cost,
        basis,
        other / span if span else None,
        text,
        advice,
        {
            "tensor_core_share": figure(1 - other / compute, FRACTION),
            "other_per_step": figure(cost, NS),
        },
    )


def _slow_kernel(report: dict, run) -> dict | None:
    slow = rows(report, "compute", "slow_kernels")
    if not slow:
        return None
    r = slow[0]  # longest extra first
    key = (r["rank"], r["device"])
    cost, basis = run.per_step(key, value(r["extra"], 0))
    steps = [d for _, d in run.steps.get(key, [])]
    totals = run.totals.get(key)
    step = statistics.median(steps) if steps else totals.span_ns if totals else 0
    if not step or cost < SLOW_NOTABLE * step:
        return None
    text = (
        f"Rank {r['rank']} runs {r['kernel']} consistently slower than the other ranks "
        f"(median {ms(value(r['median'], 0))} against {ms(value(r['others'], 0))}, "
        f"+{value(r['slower'], 0):.0%}): {ms(cost)} {basis_words(basis)}."
    )
    advice = (
        f"Check rank {r['rank']}'s GPU: throttling (nvidia-smi -q -d "
        "PERFORMANCE,CLOCK,TEMPERATURE), other processes on it, and its placement (PCIe, "
        "NUMA); the same kernel runs faster on the other ranks."
    )
    return _finding(
        "slow_kernel",
        f"slow kernel copy: rank {r['rank']}",
        [key],
        cost,
        basis,
        cost / step,
        text,
        advice,
        {
            "kernel": r["kernel"],
            "median": r["median"],
            "others": r["others"],
            "extra_per_step": figure(cost, NS),
        },
    )


def _copy_bandwidth(report: dict, run, labels: dict) -> dict | None:
    """The slowest copies below their link; pageable ones on a copy-bound device whose
    advice already asks for pinned buffers get no advice of their own (said once)."""
    below = [
        r
        for r in rows(report, "memory", "copy_bandwidth")
        if r.get("vs_expected") == "below"
        and (r["rank"], r["device"]) in run.totals
        and run.totals[(r["rank"], r["device"])].share(
            run.totals[(r["rank"], r["device"])].copy_only_ns
        )
        >= COPY_NOTABLE
    ]
    if not below:
        return None
    r = max(below, key=lambda x: value(x["time"], 0))
    key = (r["rank"], r["device"])
    cost, basis = run.per_step(key, value(r["time"], 0))
    pageable = bool(r.get("pageable"))
    copy_bound = [k for k, v in labels.items() if v["label"] == "copy-bound"]
    pinned_already = pageable and key in copy_bound and pins_pageable(run.evidence(copy_bound))
    text = (
        f"{r['kind']} copies ({r['src']} to {r['dst']}) on rank {r['rank']} reach "
        f"{value(r['large_bandwidth'], 0):,.1f} GB/s, below the {r['expected']} GB/s the "
        f"{r['link']} gives ({ms(cost)} of copies {basis_words(basis)})"
        + (
            ": they are from or to pageable memory, which the driver stages through a "
            "pinned buffer, so they measure that staging, not the link"
            if pageable
            else ""
        )
        + "."
        + (
            " Pinned buffers, as advised for the copy-bound GPU, fix this too."
            if pinned_already
            else ""
        )
    )
    advice = None if pinned_already else _slow_copy_advice(r, pageable, run.frameworks)
    return _finding(
        "copy_bandwidth",
        f"slow copies: rank {r['rank']}",
        [key],
        cost,
        basis,
        run.totals[key].share(value(r["time"], 0)),
        text,
        advice,
        {
            "kind": r["kind"],
            "src": r["src"],
            "dst": r["dst"],
            "large_bandwidth": r["large_bandwidth"],
            "expected": r["expected"],
        },
    )


def _slow_copy_advice(r: dict, pageable: bool, frameworks) -> str:
    """Pinned buffers for pageable copies; else the link's settings."""
    if pageable:
        return (
            "Pin those host buffers (cudaHostAlloc or cudaMallocHost"
            + ("; pin_memory=True in PyTorch" if "pytorch" in frameworks else "")
            + ") and measure again; check the link only if pinned copies stay below it."
        )
    if r["link"] == "host link":
        return (
            "Check the link: the GPU's PCIe generation and width (nvidia-smi -q -d PCIE), "
            "the process's NUMA placement (bind it to the GPU's socket) and pinned host "
            "buffers."
        )
    return (
        "Check the copy's memory and link (peer access enabled, NVLink rather than PCIe "
        "between the GPUs)."
    )


def _mfu(report: dict) -> dict | None:
    mfu = [r for r in rows(report, "compute", "mfu") if value(r["mfu"]) is not None]
    if not mfu:
        return None
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
        for r in rows(report, "compute", "tensor_cores")
        if value(r["tensor_core"]) is not None
    ]
    text = (
        f"Compute reaches {level} MFU at the median step ({achieved[len(achieved) // 2]:,.1f} "
        f"of {value(first['peak'], 0):,.1f} TFLOP/s dense {first['dtype']}"
        + (f", {first['gpu']}" if first.get("gpu") else "")
        + ")"
        + (
            f"; {statistics.median(tc):.0%} of compute kernel time runs in tensor-core "
            "kernels (matrix multiplies, attention)"
            if tc
            else ""
        )
        + "."
    )
    keys = [(r["rank"], r["device"]) for r in mfu]
    finding = _finding(
        "mfu",
        f"MFU {level}",
        keys,
        None,
        "per step",
        None,
        text,
        None,
        {
            "mfu": [
                {
                    "rank": r["rank"],
                    "device": r["device"],
                    "mfu": r["mfu"],
                    "achieved": r["achieved"],
                    "peak": r["peak"],
                }
                for r in mfu
            ]
        },
    )
    return {**finding, "scope": "run"}


def _gpu_memory(report: dict) -> dict | None:
    said, keys = [], []
    for r in rows(report, "memory", "gpu_memory"):
        key = (r["rank"], r["device"])
        if value(r["of_device"], 0) >= MEMORY_FULL:
            said.append(
                f"rank {r['rank']} holds {value(r['of_device']):.0%} of its GPU's "
                "memory at its peak (near the limit: the allocator frees and retries, "
                "or runs out)"
            )
            keys.append(key)
        if value(r["vs_others"], 0) >= MEMORY_IMBALANCE:
            said.append(
                f"rank {r['rank']} allocates {value(r['vs_others']):.0%} more than the "
                "other ranks' median (its shard, buffers or activations are larger)"
            )
            keys.append(key)
        if value(r["allocs_per_step"], 0) >= 1:
            said.append(
                f"rank {r['rank']} allocates {value(r['allocs_per_step']):,.1f} times per "
                "step (cudaMalloc/cudaFree in the loop: slow, a free synchronizes)"
            )
            keys.append(key)
    if not said:
        return None
    text = "GPU memory: " + "; ".join(said) + "."
    advice = (
        "Keep allocations out of the step loop: reuse buffers, let the caching allocator "
        "warm up before measuring, or set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
        "against fragmentation."
        if any("times per step" in s for s in said)
        else None
    )
    return _finding(
        "gpu_memory",
        "GPU memory",
        sorted(set(keys)),
        None,
        "over the window",
        None,
        text,
        advice,
        {"ranks": sorted({k[0] for k in keys})},
    )
