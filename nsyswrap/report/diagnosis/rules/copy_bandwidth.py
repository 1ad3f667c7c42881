"""Rule copy_bandwidth: large copies below the bandwidth their link gives, on a GPU where
copies alone take long."""

from __future__ import annotations

from nsyswrap.report.diagnosis.evidence import evidence_of
from nsyswrap.report.diagnosis.facts import Facts
from nsyswrap.report.diagnosis.finding import Finding, cost_and_share, no_saving
from nsyswrap.report.diagnosis.rule import Limits, Rule
from nsyswrap.report.diagnosis.rules import copy_advice
from nsyswrap.report.diagnosis.words import ms
from nsyswrap.report.figures import basis_words, value

TEXT = (
    "{kind} copies ({src} to {dst}) on rank {rank} reach {reach:,.1f} GB/s, below the "
    "{expected} GB/s the {link} gives ({amount} of copies {basis}){staged}.{pinned}"
)
STAGED = (
    ": they are from or to pageable memory, which the driver stages through a pinned "
    "buffer, so they measure that staging, not the link"
)
PINNED = " Pinned buffers, as advised for the copy-bound GPU, fix this too."
PIN = (
    "Pin those host buffers (cudaHostAlloc or cudaMallocHost{torch}) and measure again; "
    "check the link only if pinned copies stay below it."
)
TORCH = "; pin_memory=True in PyTorch"
HOST_LINK = (
    "Check the link: the GPU's PCIe generation and width (nvidia-smi -q -d PCIE), the "
    "process's NUMA placement (bind it to the GPU's socket) and pinned host buffers."
)
PEER_LINK = (
    "Check the copy's memory and link (peer access enabled, NVLink rather than PCIe between "
    "the GPUs)."
)


def _advice(r: dict, pageable: bool, frameworks) -> str:
    """Pinned buffers for pageable copies; else the link's settings."""
    if pageable:
        return PIN.format(torch=TORCH if "pytorch" in frameworks else "")
    return HOST_LINK if r["link"] == "host link" else PEER_LINK


def find(facts: Facts, limits: Limits) -> list[Finding]:
    """The slowest copies below their link; pageable ones on a copy-bound GPU whose advice
    already asks for pinned buffers get no advice of their own (said once)."""
    notable = copy_advice.RULE.default("copy_only_share")
    below = [
        r
        for r in facts.rows("memory", "copy_bandwidth")
        if r.get("vs_expected") == "below"
        and (r["rank"], r["device"]) in facts.totals
        and facts.totals[(r["rank"], r["device"])].share(
            facts.totals[(r["rank"], r["device"])].copy_only_ns
        )
        >= notable
    ]
    if not below:
        return []
    r = max(below, key=lambda x: value(x["time"], 0))
    key = (r["rank"], r["device"])
    cost, basis = facts.per_step(key, value(r["time"], 0))
    pageable = bool(r.get("pageable"))
    copy_bound = [k for k, v in facts.labels.items() if v["label"] == "copy-bound"]
    pinned = (
        pageable and key in copy_bound and copy_advice.pins_pageable(evidence_of(facts, copy_bound))
    )
    text = TEXT.format(
        kind=r["kind"],
        src=r["src"],
        dst=r["dst"],
        rank=r["rank"],
        reach=value(r["large_bandwidth"], 0),
        expected=r["expected"],
        link=r["link"],
        amount=ms(cost),
        basis=basis_words(basis),
        staged=STAGED if pageable else "",
        pinned=PINNED if pinned else "",
    )
    finding = Finding(
        id="copy_bandwidth",
        scope="device",
        label=f"slow copies: rank {r['rank']}",
        devices=(key,),
        cost_basis=basis,
        **cost_and_share(cost, facts.totals[key].share(value(r["time"], 0))),
        text=text,
        advice=None if pinned else _advice(r, pageable, facts.frameworks),
        evidence={k: r[k] for k in ("kind", "src", "dst", "large_bandwidth", "expected")},
        saving=no_saving(facts.replayed),
    )
    return [finding]


RULE = Rule(
    id="copy_bandwidth",
    kind="finding",
    order="share",
    doc="""Large copies below the order of magnitude their link gives (table
copy_bandwidth), on a GPU where copies alone take at least as long as copy advice needs
(rule copy_advice): the slowest. Copies from or to pageable memory are said to be so and
told to pin it, not to check the link (the driver stages them through a pinned buffer:
they measure that, not the link); said once where the copy-bound GPU's advice already asks
for pinned buffers.""",
    find=find,
)
