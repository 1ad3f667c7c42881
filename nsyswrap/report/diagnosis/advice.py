"""What a GPU is told to do, by topic, most important first: each piece of advice only on
the evidence it needs in the trace (rules communication_advice, host_idle_advice,
copy_advice and compute_advice say when), with the figures of the totals it is given: per
GPU and per step when the caller scales them so (Evidence.basis and Evidence.gpus say
how, in every sentence). Framework advice (PyTorch, NCCL, DDP/FSDP) only for frameworks
the trace shows (Evidence.frameworks)."""

from __future__ import annotations

from nsyswrap.report.diagnosis.evidence import Evidence
from nsyswrap.report.diagnosis.facts import Totals
from nsyswrap.report.diagnosis.rules import (
    communication_advice,
    compute_advice,
    copy_advice,
    device_label,
    host_idle_advice,
)


def recommendations(t: Totals, e: Evidence, label: str | None = None) -> dict[str, str]:
    """Concrete next steps by topic (exposed, overlap, same_stream, sync, host_work,
    launch, queued, copies, compute, balanced); `label` defaults to the verdict of `t`
    (rule device_label)."""
    label = label or device_label.verdict(t)["label"]
    out = communication_advice.advice(t, e, label)
    idle = device_label.RULE.default("idle_share")
    if t.share(t.idle_ns) >= idle or label == "host-bound":
        out.update(host_idle_advice.advice(t, e))
    out.update(copy_advice.advice(t, e))
    out.update(compute_advice.advice(t, e, label, out))
    return out
