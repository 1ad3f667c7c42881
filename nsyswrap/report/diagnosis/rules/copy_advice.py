"""Rule copy_advice: what a GPU whose copies run alone for long is told: pinned host
buffers where the copies are from or to pageable memory, else overlap or fewer bytes."""

from __future__ import annotations

from nsyswrap.report.diagnosis.evidence import Evidence
from nsyswrap.report.diagnosis.facts import Totals
from nsyswrap.report.diagnosis.rule import Limits, Rule, Threshold
from nsyswrap.report.diagnosis.words import gb

ALONE = "Copies alone occupy the GPU for {amount} ({share:.0%}), with nothing else running"
PIN = (
    ": {pageable:,} of {copies:,} host copies ({pageable_bytes} of {bytes}) are from or to "
    "pageable memory{also}, which is slower and cannot overlap; allocate those host buffers "
    "pinned (cudaHostAlloc or cudaMallocHost{torch})."
)
ALSO = " (the program allocates some pinned memory, but these copies do not use it)"
TORCH = "; pin_memory=True and non_blocking=True in PyTorch"
OVERLAP = (
    "{pinned}: overlap the copies with compute (asynchronous copies on their own stream, "
    "prefetching the next batch) or copy fewer bytes, keeping data on the GPU between steps."
)
PINNED = " (host copies are pinned already)"
MOSTLY_PINNED = " (host copies are mostly pinned already)"


def pins_pageable(e: Evidence, limits: Limits | None = None) -> bool:
    """Whether the copy advice asks for pinned host buffers: at least pageable_share of
    the host-copy bytes are pageable."""
    x = limits or RULE.limits()
    return bool(e.pageable_bytes) and e.pageable_bytes >= x.pageable_share * e.host_copy_bytes


def advice(t: Totals, e: Evidence, limits: Limits | None = None) -> dict[str, str]:
    """Topic copies, where copies alone take at least copy_only_share of the time."""
    x = limits or RULE.limits()
    if t.share(t.copy_only_ns) < x.copy_only_share:
        return {}
    alone = ALONE.format(amount=e.amount(t.copy_only_ns), share=t.share(t.copy_only_ns))
    if pins_pageable(e, x):
        return {
            "copies": alone
            + PIN.format(
                pageable=e.pageable_copies,
                copies=e.host_copies,
                pageable_bytes=gb(e.pageable_bytes),
                bytes=gb(e.host_copy_bytes),
                also=ALSO if e.host_alloc_calls else "",
                torch=TORCH if e.pytorch else "",
            )
        }
    pinned = (
        PINNED
        if e.host_copies and e.pageable_bytes == 0
        else MOSTLY_PINNED
        if e.host_copies and e.pageable_bytes is not None
        else ""
    )
    return {"copies": alone + OVERLAP.format(pinned=pinned)}


RULE = Rule(
    id="copy_advice",
    kind="advice",
    doc="""A GPU whose copies run with nothing else for at least {copy_only_share} of the
time is told to allocate its host buffers pinned when at least {pageable_share} of the
bytes copied between host and device are from or to pageable memory (the copies' own
memory kinds, whatever else the program allocates pinned); otherwise to overlap the copies
with compute or copy fewer bytes.""",
    thresholds=(
        Threshold("copy_only_share", 0.05, "copy advice when copies alone take this share"),
        Threshold(
            "pageable_share", 0.10, "pinned-memory advice when this share of the bytes is pageable"
        ),
    ),
)
