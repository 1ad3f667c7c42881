"""The verdict on where GPU time goes, and what to do about it.

Shares are of the analysed span (summed over the devices judged together):
* not enough data: fewer than MIN_ACTIVITIES GPU activities (kernels, copies, sets) or a
  span shorter than MIN_SPAN_NS; no share of so little says anything;
* communication-bound: exposed communication >= COMM_BOUND and at least the idle and the
  copy-only share;
* copy-bound: copies alone (no compute or communication beside them) >= COPY_BOUND and at
  least the exposed communication and the idle share;
* host-bound: idle >= IDLE_BOUND and gaps caused by the host (host_bound or sync) make
  up at least half of the idle time;
* compute-bound: compute runs >= COMPUTE_BOUND of the span;
* balanced: none of these.
The diagnosis (nsyswrap.report.diagnosis) adds waiting-for-peers from the cross-rank
waits. Recommendations name a framework (PyTorch, NCCL, DDP/FSDP) only when the trace
shows it (Evidence.frameworks), and each piece of advice is given only on the evidence it
needs in the trace (`recommendations` lists them). Their figures are those of the totals
they are given: per GPU and per step when the caller scales them so (Evidence.basis and
Evidence.gpus say how, in every sentence).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

COMM_BOUND = 0.15
COPY_BOUND = 0.30
IDLE_BOUND = 0.15
COMPUTE_BOUND = 0.70
COPY_NOTABLE = 0.05
TINY_NOTABLE = 0.30
PAGEABLE_NOTABLE = 0.10  # pinned-memory advice when this share of host-copy bytes is pageable
LONG_GAP_NS = 100_000  # a host-caused idle gap this long is host work, shorter: launch overhead
ADVICE_SHARE = 1 / 3  # idle advice on a cause making up this share of the host-caused idle
NAIVE_MISLEADS = 0.10
HOST_CAUSES = ("host_bound", "sync")
MIN_ACTIVITIES = 10
MIN_SPAN_NS = 100_000
NOT_ENOUGH = "not enough data"
LABELS = (
    "compute-bound",
    "communication-bound",
    "copy-bound",
    "host-bound",
    "waiting-for-peers",
    "balanced",
    NOT_ENOUGH,
)


@dataclass
class Totals:
    """Ledger and gap time (ns) of one device, or summed over several."""

    span_ns: int = 0
    compute_busy_ns: int = 0
    comm_busy_ns: int = 0
    both_ns: int = 0
    exposed_comm_ns: int = 0
    copy_only_ns: int = 0
    idle_ns: int = 0
    compute_sum_ns: int = 0
    comm_sum_ns: int = 0
    gap_ns: dict[str, int] = field(default_factory=dict)

    def __add__(self, other: Totals) -> Totals:
        gaps = dict(self.gap_ns)
        for cause, ns in other.gap_ns.items():
            gaps[cause] = gaps.get(cause, 0) + ns
        numbers = {k: getattr(self, k) + getattr(other, k) for k in _NUMBERS}
        return Totals(**numbers, gap_ns=gaps)

    def share(self, ns: int) -> float:
        return ns / self.span_ns if self.span_ns else 0.0

    def scaled(self, factor: float) -> Totals:
        """Every time times `factor` (e.g. per GPU and per step); shares stay."""
        return Totals(
            **{k: getattr(self, k) * factor for k in _NUMBERS},
            gap_ns={c: ns * factor for c, ns in self.gap_ns.items()},
        )

    @property
    def host_idle_ns(self) -> int:
        return sum(self.gap_ns.get(c, 0) for c in HOST_CAUSES)


_NUMBERS = [k for k in Totals.__dataclass_fields__ if k != "gap_ns"]


def verdict(t: Totals, activities: int | None = None) -> dict:
    """{"label": one of LABELS or null, "reason"}; `activities` is the number of GPU
    activities behind `t` when known (below MIN_ACTIVITIES: not enough data)."""
    if t.span_ns <= 0:
        return {"label": None, "reason": "the analysed window is empty"}
    if activities is not None and activities < MIN_ACTIVITIES:
        return {
            "label": NOT_ENOUGH,
            "reason": f"only {activities} GPU activities (kernels, "
            f"copies, sets); a verdict needs at least {MIN_ACTIVITIES}",
        }
    if t.span_ns < MIN_SPAN_NS:
        return {
            "label": NOT_ENOUGH,
            "reason": f"the span is {t.span_ns / 1e3:,.1f} us; a "
            f"verdict needs at least {MIN_SPAN_NS / 1e3:g} us",
        }
    exposed, idle = t.share(t.exposed_comm_ns), t.share(t.idle_ns)
    compute, copies = t.share(t.compute_busy_ns), t.share(t.copy_only_ns)
    shares = (
        f"compute runs {compute:.0%}, exposed communication {exposed:.0%}, copies "
        f"alone {copies:.0%}, idle {idle:.0%} of the time"
    )
    if exposed >= COMM_BOUND and exposed >= idle and exposed >= copies:
        return {"label": "communication-bound", "reason": shares}
    if copies >= COPY_BOUND and copies >= idle and copies >= exposed:
        return {"label": "copy-bound", "reason": shares}
    if idle >= IDLE_BOUND and 2 * t.host_idle_ns >= t.idle_ns:
        return {
            "label": "host-bound",
            "reason": f"{shares}; the host caused {t.host_idle_ns / t.idle_ns:.0%} of the "
            "idle time",
        }
    if compute >= COMPUTE_BOUND:
        return {"label": "compute-bound", "reason": shares}
    return {"label": "balanced", "reason": f"{shares}; no single cause dominates"}


@dataclass
class Evidence:
    """What the recommendations cite besides the totals."""

    top_exposed: str | None = None  # "AllReduce in bwd:layers.3 (step 2), 1.2 ms exposed"
    same_stream: list[str] = field(default_factory=list)  # "rank 0 device 1": NCCL on compute
    ranks: int = 1
    kernels: int = 0
    tiny_kernels: int = 0
    tiny_threshold_ns: int = 10_000
    frameworks: frozenset[str] = frozenset()  # seen in the trace: pytorch, nccl, ddp, fsdp
    host_copies: int = 0  # copies between host and device memory
    host_copy_bytes: int = 0  # their bytes
    pageable_copies: int | None = None  # of them, from or to pageable memory (None: unknown)
    pageable_bytes: int | None = None  # their bytes (None: unknown)
    host_alloc_calls: int = 0  # cudaHostAlloc / cudaMallocHost / cudaHostRegister
    graph_launches: int = 0  # cudaGraphLaunch calls: the program replays CUDA graphs
    # the host-caused idle in gaps of LONG_GAP_NS or more, by the host work covering them:
    # (source: nvtx, mpi, cuda, osrt or none; name; ns), scaled as the totals are
    host_work: list[tuple[str, str | None, float]] = field(default_factory=list)
    basis: str = ""  # what the totals are: "per step", "over the window"
    gpus: int = 1  # how many GPUs the totals are each the mean of

    @property
    def pytorch(self) -> bool:
        return "pytorch" in self.frameworks

    def amount(self, ns: float) -> str:
        """A duration of the totals, saying what it is: `1.23 ms per step per GPU`."""
        return " ".join(filter(None, (ms(ns), self.basis, "per GPU" if self.gpus > 1 else "")))


def ms(ns: float) -> str:
    """A duration for people: `1.23 ms`."""
    return f"{ns / 1e6:,.2f} ms"


def recommendations(t: Totals, e: Evidence, label: str | None = None) -> dict[str, str]:
    """Concrete next steps by topic, most important first; `label` defaults to verdict(t).
    Each needs its evidence in the trace:

    * exposed, overlap (communication-bound): exposed communication; NCCL and DDP/FSDP
      tuning only when the trace shows PyTorch and NCCL;
    * same_stream: exposed NCCL kernels on a stream that runs compute;
    * sync: idle after host synchronizations (cause sync) at least the host-caused rest;
    * host_work: host-caused idle in gaps of LONG_GAP_NS or more (ADVICE_SHARE of it at
      least), named by the NVTX range, MPI call or CUDA call covering them, else by the
      OS runtime call on a thread that launches;
    * launch: host-caused idle in shorter gaps (ADVICE_SHARE at least): launch overhead;
      CUDA graphs only for a program that launches none;
    * queued: idle although the next work was queued;
    * copies: copies alone >= COPY_NOTABLE; pinned memory when at least PAGEABLE_NOTABLE
      of the host-copy bytes are pageable (the copies themselves, whatever else allocates
      pinned memory);
    * compute (compute-bound), balanced (nothing else to say)."""
    out: dict[str, str] = {}
    label = label or verdict(t)["label"]
    if label == "communication-bound":
        out["exposed"] = (
            f"Communication is exposed for {e.amount(t.exposed_comm_ns)} "
            f"({t.share(t.exposed_comm_ns):.0%} of the time); only "
            f"{t.both_ns / t.comm_busy_ns:.0%} of it overlaps compute."
            + (f" Most exposed: {e.top_exposed}." if e.top_exposed else "")
            + (
                " Part of it may be waiting for a slower rank (see the cross-rank section)."
                if e.ranks > 1
                else ""
            )
        )
        out["overlap"] = _overlap_advice(e)
    if e.same_stream:
        out["same_stream"] = (
            f"Exposed NCCL kernels share a stream with compute on {', '.join(e.same_stream)}, so "
            "they cannot overlap it: issue collectives on their own stream"
            + (" (async_op=True, or DDP/FSDP, which do)" if e.pytorch else "")
            + " and wait for them only where the result is needed."
        )
    if t.share(t.idle_ns) >= IDLE_BOUND or label == "host-bound":
        out.update(_idle_advice(t, e))
    if t.share(t.copy_only_ns) >= COPY_NOTABLE:
        out["copies"] = _copy_advice(t, e)
    if label == "compute-bound":
        out["compute"] = (
            f"The GPU computes {t.share(t.compute_busy_ns):.0%} of the time: make the longest "
            "kernels faster (`nsyswrap query kernels.summary` lists them)"
            + (", e.g. with bf16 autocast, TF32 matmuls or torch.compile" if e.pytorch else "")
            + "."
        )
    if label == "balanced" and not out:
        out["balanced"] = (
            "No single cause dominates; compare the steps and the longest kernels "
            "(`nsyswrap query kernels.summary`) to choose what to improve first."
        )
    return out


def _overlap_advice(e: Evidence) -> str:
    text = (
        "Overlap more and communicate less often: start each collective as soon as its "
        "data is ready, on its own stream, and send fewer, larger messages"
    )
    if e.pytorch and "nccl" in e.frameworks:
        text += (
            "; with DDP tune bucket_cap_mb so the first buckets start early in backward, "
            "with FSDP set backward_prefetch=BACKWARD_PRE and forward_prefetch=True; "
            "accumulate gradients under no_sync() to all-reduce less often; halve the "
            "bytes with a bf16 compression hook"
        )
    return text + "."


def pins_pageable(e: Evidence) -> bool:
    """Whether the copy advice asks for pinned host buffers: at least PAGEABLE_NOTABLE of
    the host-copy bytes are pageable."""
    return bool(e.pageable_bytes) and e.pageable_bytes >= PAGEABLE_NOTABLE * e.host_copy_bytes


def _copy_advice(t: Totals, e: Evidence) -> str:
    text = (
        f"Copies alone occupy the GPU for {e.amount(t.copy_only_ns)} "
        f"({t.share(t.copy_only_ns):.0%}), with nothing else running"
    )
    if pins_pageable(e):
        also = (
            " (the program allocates some pinned memory, but these copies do not use it)"
            if e.host_alloc_calls
            else ""
        )
        return (
            text + f": {e.pageable_copies:,} of {e.host_copies:,} host copies "
            f"({_gb(e.pageable_bytes)} of {_gb(e.host_copy_bytes)}) are from or to pageable "
            f"memory{also}, which is slower and cannot overlap; allocate those host buffers "
            "pinned (cudaHostAlloc or cudaMallocHost"
            + ("; pin_memory=True and non_blocking=True in PyTorch" if e.pytorch else "")
            + ")."
        )
    pinned = (
        " (host copies are pinned already)"
        if e.host_copies and e.pageable_bytes == 0
        else " (host copies are mostly pinned already)"
        if e.host_copies and e.pageable_bytes is not None
        else ""
    )
    return (
        text + f"{pinned}: overlap the copies with compute (asynchronous copies on their "
        "own stream, prefetching the next batch) or copy fewer bytes, keeping data on the "
        "GPU between steps."
    )


def _gb(n: float) -> str:
    return f"{n / 1e9:,.1f} GB" if n >= 1e8 else f"{n / 1e6:,.1f} MB"


def _idle_advice(t: Totals, e: Evidence) -> dict[str, str]:
    """What to do about idle time, by the causes that make it up (recommendations)."""
    out = {}
    sync, host = t.gap_ns.get("sync", 0), t.gap_ns.get("host_bound", 0)
    long_ns = min(sum(ns for _, _, ns in e.host_work), host)
    short_ns = host - long_ns
    if sync and sync >= host:
        out["sync"] = (
            f"The GPU waits for the host after synchronizations for {e.amount(sync)}: remove "
            + (
                ".item(), .cpu(), print(tensor) and torch.cuda.synchronize() from the step loop, "
                "copy with non_blocking=True"
                if e.pytorch
                else "device and stream synchronizations and blocking copies from the loop"
            )
            + ", and log metrics every N steps."
        )
    topics = [("host_work", long_ns), ("launch", short_ns)]
    for topic, ns in sorted(topics, key=lambda x: -x[1]):
        if not ns or ns < ADVICE_SHARE * (host + sync) or (sync >= host and sync):
            continue
        out[topic] = _host_work_advice(ns, e) if topic == "host_work" else _launch_advice(ns, e)
    other = t.gap_ns.get("other", 0)
    if other and other > t.host_idle_ns:
        out["queued"] = (
            f"The GPU sits idle {e.amount(other)} although the next kernel was already queued: "
            "it waits for an event, another stream or another GPU; look for stream waits and "
            "peer-to-peer dependencies before these gaps (`nsyswrap query gaps.idle`)."
        )
    return out


CUDA_HOST_WORK = {  # CUDA calls that hold the host long, and where they belong
    "loads modules": re.compile(r"^(cuModuleLoad|cuLibraryLoad|cudaLibraryLoad)"),
    "allocates": re.compile(
        r"^(cudaMalloc|cudaFree|cudaHostAlloc|cudaMallocHost|cuMemAlloc|"
        r"cuMemFree|cuMemHostAlloc|cuMemAllocHost)"
    ),
    "copies without overlap": re.compile(r"^(cudaMemcpy|cuMemcpy)(?!.*Async)"),
}
DATA_LOADING = re.compile(r"data|load|batch|fetch|input", re.IGNORECASE)
COMPILING = re.compile(r"compil|nvrtc|jit", re.IGNORECASE)


def _host_work_advice(ns: float, e: Evidence) -> str:
    named = [
        (src, name, x) for src, name, x in e.host_work if src != "none" and x >= 0.1 * ns
    ]  # what covers at least a tenth of it
    named.sort(key=lambda w: (-w[2], w[0], w[1]))
    where = ", ".join(
        f"{ms(x)} inside {'`' + name + '`' if src == 'nvtx' else name}"
        for src, name, x in named[:3]
    )
    text = (
        f"The GPU is idle {e.amount(ns)} in gaps of {LONG_GAP_NS / 1000:g} us or more while "
        "the host works"
        + (
            f"; of it, {where}"
            if where
            else " (no NVTX range or traced "
            "call covers most of them: mark the loop's phases with NVTX "
            "ranges to name it)"
        )
        + "."
    )
    shown = named[:3]
    if any(src == "mpi" for src, _, _ in shown):
        text += (
            " A blocking MPI call keeps the host from launching: post the exchange with "
            "non-blocking calls (MPI_Isend/MPI_Irecv) and launch the GPU work that does "
            "not need it before waiting, or move it to the GPU (CUDA-aware MPI, NCCL)."
        )
    if any(src == "osrt" for src, _, _ in shown):
        text += (
            " A blocking OS call (file or console I/O, a wait) on the thread that launches "
            "the GPU's work holds back the next launch: move it to another thread or out of "
            "the loop."
        )
    does = [
        what
        for what, api in CUDA_HOST_WORK.items()
        if any(src == "cuda" and api.match(name) for src, name, _ in shown)
    ]
    if does:
        text += (
            f" The host {' and '.join(does)} inside the window: do it once before the "
            "loop (warm up, allocate once, copy asynchronously from pinned memory)."
        )
    ranges = [name for src, name, _ in shown if src == "nvtx"]
    if any(COMPILING.search(name) for name in ranges):
        text += (
            " Compiling kernels on the host (JIT) belongs before the loop you measure: "
            "warm up once, or cache the compiled kernels."
        )
        ranges = [name for name in ranges if not COMPILING.search(name)]
    if ranges or not named:
        loading = any(DATA_LOADING.search(name) for name in ranges)
        text += (
            " Make that host work shorter or run it beside the GPU work (another thread "
            "or process"
            + (", DataLoader num_workers and pin_memory" if loading and e.pytorch else "")
            + ")."
        )
    return text


def _launch_advice(ns: float, e: Evidence) -> str:
    tiny = ""
    if e.kernels and e.tiny_kernels / e.kernels >= TINY_NOTABLE:
        tiny = (
            f" {e.tiny_kernels:,} of the {e.kernels:,} kernels"
            + (f" of these {e.gpus} GPUs" if e.gpus > 1 else "")
            + " are shorter than "
            f"{e.tiny_threshold_ns / 1000:g} us, so launch overhead dominates."
        )
    text = (
        f"The GPU is idle {e.amount(ns)} in gaps under {LONG_GAP_NS / 1000:g} us before "
        f"kernel launches: launch overhead.{tiny}"
    )
    if e.graph_launches:
        return text + (
            " The program replays CUDA graphs already: put more of each step into "
            "the graph (the copies and small kernels launched between replays) or "
            "launch less between them."
        )
    return text + (
        " Launch fewer, larger kernels (fuse them), or launch a whole step at once "
        "as a CUDA graph"
        + (
            "; in PyTorch torch.compile fuses kernels and mode='reduce-overhead' uses CUDA graphs"
            if e.pytorch
            else ""
        )
        + "."
    )


def naive_note(t: Totals) -> str | None:
    """A warning when the summed-time overlap estimate differs much from the exact one."""
    if not t.comm_sum_ns:
        return None
    naive = (t.compute_sum_ns + t.comm_sum_ns - t.span_ns) / t.comm_sum_ns
    exact = t.both_ns / t.comm_busy_ns if t.comm_busy_ns else 0.0
    if abs(naive - exact) < NAIVE_MISLEADS:
        return None
    impossible = " (an impossible value)" if not 0 <= naive <= 1 else ""
    return (
        f"Note: the usual estimate (compute + comm - span) / comm says {naive:.0%} "
        f"overlap{impossible}, the exact overlap is {exact:.0%}; summed kernel times "
        "mislead when streams run at once or the GPU idles."
    )
