"""Rule communication_advice: what a communication-bound GPU is told (its exposed
communication, overlap and fewer messages), and any GPU whose exposed NCCL kernels share
a stream with compute."""

from __future__ import annotations

from nsyswrap.report.diagnosis.evidence import Evidence
from nsyswrap.report.diagnosis.facts import Totals
from nsyswrap.report.diagnosis.rule import Rule

EXPOSED = (
    "Communication is exposed for {amount} ({share:.0%} of the time); only {overlap:.0%} of "
    "it overlaps compute.{most}{peers}"
)
MOST = " Most exposed: {kernel}."
PEERS = " Part of it may be waiting for a slower rank (see the cross-rank section)."
OVERLAP = (
    "Overlap more and communicate less often: start each collective as soon as its data is "
    "ready, on its own stream, and send fewer, larger messages{tuning}."
)
TUNING = (
    "; with DDP tune bucket_cap_mb so the first buckets start early in backward, with FSDP "
    "set backward_prefetch=BACKWARD_PRE and forward_prefetch=True; accumulate gradients "
    "under no_sync() to all-reduce less often; halve the bytes with a bf16 compression hook"
)
SAME_STREAM = (
    "Exposed NCCL kernels share a stream with compute on {devices}, so they cannot overlap "
    "it: issue collectives on their own stream{how} and wait for them only where the result "
    "is needed."
)
HOW = " (async_op=True, or DDP/FSDP, which do)"


def advice(t: Totals, e: Evidence, label: str) -> dict[str, str]:
    """Topics exposed and overlap (a communication-bound GPU), same_stream (any GPU)."""
    out = {}
    if label == "communication-bound":
        out["exposed"] = EXPOSED.format(
            amount=e.amount(t.exposed_comm_ns),
            share=t.share(t.exposed_comm_ns),
            overlap=t.both_ns / t.comm_busy_ns,
            most=MOST.format(kernel=e.top_exposed) if e.top_exposed else "",
            peers=PEERS if e.ranks > 1 else "",
        )
        torch = e.pytorch and "nccl" in e.frameworks
        out["overlap"] = OVERLAP.format(tuning=TUNING if torch else "")
    if e.same_stream:
        out["same_stream"] = SAME_STREAM.format(
            devices=", ".join(e.same_stream), how=HOW if e.pytorch else ""
        )
    return out


RULE = Rule(
    id="communication_advice",
    kind="advice",
    doc="""A communication-bound GPU is told how long its communication is exposed and how
little of it overlaps compute (naming the most exposed NCCL kernel, and that part of it
may be waiting for a slower rank), then to overlap more and send fewer, larger messages;
DDP and FSDP tuning only when the trace shows PyTorch and NCCL. Exposed NCCL kernels on a
stream that runs compute are told to move to their own stream.""",
)
