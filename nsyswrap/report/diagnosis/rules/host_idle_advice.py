"""Rule host_idle_advice: what a GPU that idles is told, by the causes of its idle gaps:
host synchronizations, host work in long gaps (named by what covers them), launch
overhead in short ones, work queued behind something else."""

from __future__ import annotations

import re

from nsyswrap.report.diagnosis.evidence import Evidence
from nsyswrap.report.diagnosis.facts import Totals
from nsyswrap.report.diagnosis.rule import Limits, Rule, Threshold
from nsyswrap.report.diagnosis.rules.copy_advice import pins_pageable
from nsyswrap.report.diagnosis.words import ms

SYNC = (
    "The GPU waits for the host after synchronizations for {amount}: remove {what}, and log "
    "metrics every N steps."
)
SYNC_TORCH = (
    ".item(), .cpu(), print(tensor) and torch.cuda.synchronize() from the step loop, copy "
    "with non_blocking=True"
)
SYNC_ANY = "device and stream synchronizations and blocking copies from the loop"
QUEUED = (
    "The GPU sits idle {amount} although the next kernel was already queued: it waits for an "
    "event, another stream or another GPU; look for stream waits and peer-to-peer "
    "dependencies before these gaps (`nsyswrap query gaps.idle`)."
)
HOST_WORK = "The GPU is idle {amount} in gaps of {long_us:g} us or more while the host works{of}."
OF_IT = "; of it, {where}"
UNNAMED = (
    " (no NVTX range or traced call covers most of them: mark the loop's phases with NVTX "
    "ranges to name it)"
)
INSIDE = "{time} inside {name}"
MPI = (
    " A blocking MPI call keeps the host from launching: post the exchange with non-blocking "
    "calls (MPI_Isend/MPI_Irecv) and launch the GPU work that does not need it before "
    "waiting, or move it to the GPU (CUDA-aware MPI, NCCL)."
)
OSRT = (
    " A blocking OS call (file or console I/O, a wait) on the thread that launches the GPU's "
    "work holds back the next launch: move it to another thread or out of the loop."
)
CUDA = (
    " The host {does} inside the window: do it once before the loop (warm up, allocate once, "
    "copy asynchronously from pinned memory)."
)
JIT = (
    " Compiling kernels on the host (JIT) belongs before the loop you measure: warm up once, "
    "or cache the compiled kernels."
)
SHORTER = (
    " Make that host work shorter or run it beside the GPU work (another thread or process"
    "{loader})."
)
LOADER = ", DataLoader {what}"  # num_workers, and pin_memory on its evidence
LAUNCH = (
    "The GPU is idle {amount} in gaps under {long_us:g} us before kernel launches: launch "
    "overhead.{tiny}{then}"
)
TINY = " {tiny:,} of the {kernels:,} kernels{of_gpus} are shorter than {tiny_us:g} us{so}."
DOMINATES = ", so launch overhead dominates"
GRAPHS_ALREADY = (
    " The program replays CUDA graphs already: put more of each step into the graph (the "
    "copies and small kernels launched between replays) or launch less between them."
)
FUSE = (
    " Launch fewer, larger kernels (fuse them), or launch a whole step at once as a CUDA "
    "graph{torch}."
)
FUSE_TORCH = "; in PyTorch torch.compile fuses kernels and mode='reduce-overhead' uses CUDA graphs"
COMPILED = (
    " The program is compiled already (torch.compile's Inductor kernels, triton_*): compile "
    "it with mode='reduce-overhead' to launch each step as CUDA graphs, or launch fewer, "
    "larger kernels."
)
CUDA_HOST_WORK = {  # CUDA calls that hold the host long, and where they belong
    "loads modules": re.compile(r"^(cuModuleLoad|cuLibraryLoad|cudaLibraryLoad)"),
    "allocates": re.compile(
        r"^(cudaMalloc|cudaFree|cudaHostAlloc|cudaMallocHost|cuMemAlloc|"
        r"cuMemFree|cuMemHostAlloc|cuMemAllocHost)"
    ),
    "copies without overlap": re.compile(r"^(cudaMemcpy|cuMemcpy)(?!.*Async)"),
}
# a word of the range's name, not part of one: `fwd:DistributedDataParallel` loads no data
DATA_LOADING = re.compile(r"(?<![a-z])(data|load|batch|fetch|input)", re.IGNORECASE)
COMPILING = re.compile(r"compil|nvrtc|jit", re.IGNORECASE)


def advice(t: Totals, e: Evidence, limits: Limits | None = None) -> dict[str, str]:
    """Topics sync, host_work, launch and queued, each where its cause makes up enough of
    the idle (the rule's doc)."""
    x = limits or RULE.limits()
    out = {}
    sync, host = t.gap_ns.get("sync", 0), t.gap_ns.get("host_bound", 0)
    long_ns = min(sum(ns for _, _, ns in e.host_work), host)
    if sync and sync >= host:
        out["sync"] = SYNC.format(amount=e.amount(sync), what=SYNC_TORCH if e.pytorch else SYNC_ANY)
    topics = [("host_work", long_ns), ("launch", host - long_ns)]
    for topic, ns in sorted(topics, key=lambda x: -x[1]):
        if not ns or ns < x.advice_share * (host + sync) or (sync >= host and sync):
            continue
        if topic == "host_work":
            out[topic] = host_work(ns, e, x)
        else:
            out[topic] = launch(ns, e, x, dominates=ns >= long_ns)
    other = t.gap_ns.get("other", 0)
    if other and other > t.host_idle_ns:
        out["queued"] = QUEUED.format(amount=e.amount(other))
    return out


def host_work(ns: float, e: Evidence, x: Limits) -> str:
    """Idle in long gaps while the host works: what covers it, and what to do about it."""
    named = [
        (src, name, w) for src, name, w in e.host_work if src != "none" and w >= x.named_share * ns
    ]
    named.sort(key=lambda w: (-w[2], w[0], w[1]))
    shown = named[: int(x.named_most)]
    where = ", ".join(
        INSIDE.format(time=ms(w), name=f"`{name}`" if src == "nvtx" else name)
        for src, name, w in shown
    )
    text = HOST_WORK.format(
        amount=e.amount(ns),
        long_us=x.long_gap_ns / 1000,
        of=OF_IT.format(where=where) if where else UNNAMED,
    )
    sources = {src for src, _, _ in shown}
    text += (MPI if "mpi" in sources else "") + (OSRT if "osrt" in sources else "")
    does = [
        what
        for what, api in CUDA_HOST_WORK.items()
        if any(src == "cuda" and api.match(name) for src, name, _ in shown)
    ]
    if does:
        text += CUDA.format(does=" and ".join(does))
    ranges = [name for src, name, _ in shown if src == "nvtx"]
    if any(COMPILING.search(name) for name in ranges):
        text += JIT
        ranges = [name for name in ranges if not COMPILING.search(name)]
    if ranges or not named:
        loading = any(DATA_LOADING.search(name) for name in ranges)
        text += SHORTER.format(loader=_loader(e, loading))
    return text


def _loader(e: Evidence, loading: bool) -> str:
    """The DataLoader's settings that fit, only where a data-loading range holds the host
    work (a program may copy without a DataLoader): num_workers, and pin_memory where the
    host copies are pageable (rule copy_advice)."""
    if not (loading and e.pytorch):
        return ""
    return LOADER.format(what="num_workers and pin_memory" if pins_pageable(e) else "num_workers")


def launch(ns: float, e: Evidence, x: Limits, dominates: bool = True) -> str:
    """Idle in short gaps before launches: launch overhead, and what to do about it (it
    `dominates` where the short gaps are the larger part of the host-caused idle)."""
    tiny = ""
    if e.kernels and e.tiny_kernels / e.kernels >= x.tiny_share:
        tiny = TINY.format(
            tiny=e.tiny_kernels,
            kernels=e.kernels,
            of_gpus=f" of these {e.gpus} {e.unit}s" if e.gpus > 1 else "",
            tiny_us=x.tiny_kernel_ns / 1000,
            so=DOMINATES if dominates else "",
        )
    fuse = COMPILED if e.compiled else FUSE.format(torch=FUSE_TORCH if e.pytorch else "")
    then = GRAPHS_ALREADY if e.graph_launches else fuse
    return LAUNCH.format(amount=e.amount(ns), long_us=x.long_gap_ns / 1000, tiny=tiny, then=then)


RULE = Rule(
    id="host_idle_advice",
    kind="advice",
    doc="""A GPU idle at least as long as a host-bound verdict needs (rule device_label), or
host-bound, is told what to do by the causes of its idle gaps. Synchronizations: when the
idle after host syncs is at least the rest (remove .item(), .cpu() and synchronize calls
from the loop). Host work: when at least {advice_share} of the host-caused idle is gaps of
{long_gap_ns} or more, the advice names what covers them ("of it, 738.99 ms inside
MPI_Sendrecv": NVTX ranges, MPI, CUDA and OS runtime calls covering at least
{named_share} of it, the {named_most} largest): non-blocking MPI for MPI calls, work
before the loop for module loading, allocation, blocking copies and kernel compilation
(JIT), shorter or parallel host work for NVTX ranges (in PyTorch, where a range named for
data loading holds it, DataLoader num_workers, and pin_memory where the host copies are
pageable as rule copy_advice counts them), another thread for a blocking OS runtime call
on the launching thread. Launch overhead: when at least {advice_share} of it is shorter
gaps before launches (fuse kernels, CUDA graphs, torch.compile), tiny kernels named when
at least {tiny_share} of the kernels are shorter than {tiny_kernel_ns}, and said to
dominate only where the short gaps are the larger part of the host-caused idle; CUDA
graphs never to a program that launches them already (cudaGraphLaunch calls, table
graphs): it is told to put more of each step into its graphs; a program compiled already
(torch.compile's Inductor kernels, trace.frameworks) is told mode='reduce-overhead', never
to use torch.compile. Queued work: idle although the next kernel was already queued (an event,
another stream, another GPU).""",
    thresholds=(
        Threshold(
            "long_gap_ns",
            100_000,
            "a host-caused idle gap this long is host work, shorter: launch overhead",
            "ns",
        ),
        Threshold("advice_share", 1 / 3, "advice on a cause making up this share of host idle"),
        Threshold("named_share", 0.1, "host work named when it covers this share of the idle"),
        Threshold("named_most", 3, "host work named, at most", "count"),
        Threshold("tiny_kernel_ns", 10_000, "a kernel shorter than this is tiny", "ns"),
        Threshold("tiny_share", 0.30, "tiny kernels named when they are this share of all"),
    ),
)
