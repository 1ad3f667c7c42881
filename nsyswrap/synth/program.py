"""The training loop each rank runs: steps, phases, module ranges, collectives, planted gaps.

Per step: ``step:<i>`` (the scenario's step_name) containing ``data_loading`` (host work +
H2D copy), ``forward`` (``fwd:<root>`` > ``fwd:<path>`` module ranges with compute kernels),
``backward`` (``bwd:`` ranges; gradient all-reduces issued between modules or after
backward, depending on the step's overlap mode) and ``optimizer`` (host work, wait for the
all-reduces, zero-grad memset, kernels, planted extra collectives, stream sync, a wait no
call records). Planted host pauses stop the host between two modules' launches.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from nsyswrap.synth import nccl_nvtx
from nsyswrap.synth.catalog import COVER_KERNEL, PHASE_KERNELS, nccl_kernel
from nsyswrap.synth.links import ring_transfer_ns
from nsyswrap.synth.lockstep import Collectives, Post
from nsyswrap.synth.scenario import ExtraCollective, PlantedGap, Scenario
from nsyswrap.synth.timeline import Timeline
from nsyswrap.synth.trace import NCCL_DOMAIN, NSYSWRAP_DOMAIN, RankTrace, Stream

ROOT_MODULE = "ToyTransformer"
AUTOGRAD_TID_OFFSET = 30  # pt_autograd_0, see metadata.THREADS
HTOD, PTOP = 1, 10  # ENUM_CUDA_MEMCPY_OPER
PAGEABLE, DEVICE_MEM = 0, 2  # ENUM_CUDA_MEM_KIND
ON_COMPUTE = ("same_stream", "inline")  # overlap modes with NCCL on the compute stream
NCCL_CALLS = {
    "all_reduce": "ncclAllReduce",
    "all_gather": "ncclAllGather",
    "reduce_scatter": "ncclReduceScatter",
    "broadcast": "ncclBroadcast",
    "reduce": "ncclReduce",
    "send": "ncclSend",
    "recv": "ncclRecv",
}


def module_paths(n: int) -> list[str]:
    """Leaf module paths as ``named_modules()`` gives them: embed, layers.i.attn/mlp, head."""
    if n == 1:
        return ["embed"]
    inner = [f"layers.{i // 2}.{'attn' if i % 2 == 0 else 'mlp'}" for i in range(n - 2)]
    return ["embed", *inner, "head"]


def spread(total: int, parts: int) -> list[int]:
    """``total`` split into ``parts`` near-equal ints (larger ones first)."""
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


@dataclass
class Device:
    """One GPU of a rank and its streams."""

    device: int
    compute: Stream
    sides: list[Stream]
    nccl: Stream
    tp_nccl: Stream | None = None  # the tensor-parallel group's NCCL stream
    comms: dict[int, Stream] = field(default_factory=dict)  # other shapes: pg -> its NCCL stream

    @property
    def compute_streams(self) -> list[Stream]:
        return [self.compute, *self.sides]


class RankProgram:
    """Generates one rank's timeline; a generator that yields while waiting on peers."""

    def __init__(self, tl: Timeline, sc: Scenario, devices: list[Device], colls: Collectives):
        self.tl, self.sc, self.devices, self.colls = tl, sc, devices, colls
        self.trace: RankTrace = tl.trace
        self.rank = self.trace.rank
        self.modules = module_paths(sc.modules)
        counts = sc.phase_kernel_counts()
        self.module_kernels = {p: spread(counts[p], sc.modules) for p in ("forward", "backward")}
        self.phase_offset = {
            "forward": 0,
            "backward": counts["forward"],
            "optimizer": counts["forward"] + counts["backward"],
        }
        self.types = {p: [tl.kernel_type(k) for k in ks] for p, ks in PHASE_KERNELS.items()}
        self.cover_type = tl.kernel_type(COVER_KERNEL)
        m, n = sc.modules, sc.collectives_per_step
        self.issue_after: dict[int, int] = {}
        for b in range(n):
            j = min(m - 1, max(0, (b + 1) * m // (n + 1) - 1))
            self.issue_after[j] = self.issue_after.get(j, 0) + 1
        self.gaps: dict[tuple[int, str, int], list[PlantedGap]] = {}
        for g in sc.gaps:
            if g.rank == self.rank:
                self.gaps.setdefault((g.step, g.phase, g.module), []).append(g)
        self.extras: dict[int, list[ExtraCollective]] = {}
        for x in sc.extra_collectives:
            if x.rank == self.rank:
                self.extras.setdefault(x.step, []).append(x)
        self.rng = np.random.default_rng([sc.seed, sc.work_seed(self.rank), 4])
        self.seqs: dict[int, int] = {}
        self.dp = sc.dp_group(self.rank)
        self.not_before = 0  # planted "other" gap: first device's next kernel starts late
        self.pending_gap: tuple[int, str] | None = None
        self.cover_ns = 0  # hidden overlap: next compute kernel covers the NCCL kernel

    @staticmethod
    def extra_groups(sc: Scenario, rank: int) -> list[int]:
        """Groups with an NCCL stream of their own besides the data-parallel and TP ones."""
        return []

    # -- whole run ---------------------------------------------------------------

    def run(self) -> Iterator[None]:
        self.tl.create_domain("nsyswrap", NSYSWRAP_DOMAIN)
        for step in range(self.sc.steps):
            yield from self.step(step)
        yield from self.tl.settle()

    def step(self, i: int) -> Iterator[None]:
        tl = self.tl
        start = tl.t
        tl.push(self.sc.step_name.format(i))
        self.data_loading(i)
        yield from self.forward(i)
        yield from self.backward(i)
        yield from self.optimizer(i)
        tl.pop()
        self.trace.steps.append((i, start, tl.t))

    # -- phases --------------------------------------------------------------------

    def data_loading(self, i: int) -> None:
        tl, sc = self.tl, self.sc
        tl.push("data_loading")
        tl.host(sc.data_loading_ns + self.straggle_host("data_loading", i))
        for _ in range(sc.h2d_per_step):
            for d in self.devices:
                tl.memcpy(
                    d.compute, sc.h2d_bytes, 1_000 + sc.h2d_bytes // 25, HTOD, PAGEABLE, DEVICE_MEM
                )
        tl.pop()

    def forward(self, i: int) -> Iterator[None]:
        tl = self.tl
        tl.push("forward")
        tl.push(f"fwd:{ROOT_MODULE}")
        durs = self.durations("forward", i)
        k = 0
        for m, path in enumerate(self.modules):
            yield from self.plant_gaps(i, "forward", m)
            self.pause(i, "forward", m)
            tl.push(f"fwd:{path}")
            if m == 0 and self.sc.p2p_per_step:
                yield from self.p2p(i)
            if self.sc.fsdp:
                yield from self.gather_parameters()
            for _ in range(self.module_kernels["forward"][m]):
                self.compute("forward", k, durs[k])
                k += 1
            tl.pop()
            if self.sc.tp:
                yield from self.tensor_parallel()
        tl.pop()
        tl.pop()

    def tensor_parallel(self) -> Iterator[None]:
        """The TP group's all_reduce of a module's output; compute waits for it."""
        sc = self.sc
        pg = sc.tp_group(self.rank)
        transfer = self.link_transfer(sc.tp_bytes, pg) or sc.transfer_of("exposed") // 4
        yield from self.collective("all_reduce", sc.tp_bytes, sc.dtype, "exposed", transfer, pg=pg)
        yield from self.tl.settle()
        for d in self.devices:
            self.tl.wait(d.compute, d.tp_nccl)

    def gather_parameters(self) -> Iterator[None]:
        """FSDP: the module's parameters all_gathered on the data-parallel stream; its
        compute waits for them."""
        sc = self.sc
        yield from self.collective(
            "all_gather",
            sc.bucket_bytes // sc.modules,
            sc.dtype,
            "partial",
            sc.transfer_of("exposed") // 4,
        )
        yield from self.tl.settle()
        for d in self.devices:
            self.tl.wait(d.compute, d.nccl)

    def backward(self, i: int) -> Iterator[None]:
        tl, sc = self.tl, self.sc
        overlap = sc.overlap_of_step(i)
        interleaved = overlap in ("hidden", "partial", "inline")
        transfer = self.link_transfer(sc.bucket_bytes, self.dp) or sc.transfer_of(overlap)
        tl.push("backward")
        self.to_autograd_thread()
        tl.push(f"bwd:{ROOT_MODULE}")
        durs = self.durations("backward", i)
        k = 0
        for j, path in enumerate(reversed(self.modules)):
            yield from self.plant_gaps(i, "backward", j)
            self.pause(i, "backward", j)
            tl.push(f"bwd:{path}")
            for _ in range(self.module_kernels["backward"][j]):
                self.compute("backward", k, durs[k])
                k += 1
            tl.pop()
            for _ in range(self.issue_after.get(j, 0) if interleaved and not sc.fsdp else 0):
                yield from self.collective(
                    "all_reduce", sc.bucket_bytes, sc.dtype, overlap, transfer
                )
                if overlap == "inline":  # the next kernel queues behind it on its stream
                    yield from tl.settle()
            if sc.fsdp:  # the module's gradients reduce_scattered
                yield from self.collective(
                    "reduce_scatter",
                    sc.bucket_bytes // sc.modules,
                    sc.dtype,
                    "partial",
                    transfer // 2,
                )
        tl.pop()
        for _ in range(0 if interleaved or sc.fsdp else sc.collectives_per_step):
            yield from self.collective("all_reduce", sc.bucket_bytes, sc.dtype, overlap, transfer)
        self.join_autograd_thread(i)
        tl.pop()

    def to_autograd_thread(self) -> None:
        """With ``autograd_thread``, backward's calls and ranges are the autograd thread's."""
        if self.sc.autograd_thread:
            self.tl.tid = self.trace.pid + AUTOGRAD_TID_OFFSET

    def join_autograd_thread(self, i: int) -> None:
        """The main thread resumes when the autograd thread's work is done: a join no call
        records (truth's hidden)."""
        if self.tl.tid != self.trace.pid:
            self.trace.hidden.append(("autograd_join", i, self.trace.r_end[-1], self.tl.t, None))
        self.tl.tid = self.trace.pid

    def optimizer(self, i: int) -> Iterator[None]:
        tl, sc = self.tl, self.sc
        overlap = sc.overlap_of_step(i)
        tl.push("optimizer")
        self.cover_ns = 0  # nothing left to hide an all-reduce behind
        tl.host(sc.optimizer_host_ns)
        yield from tl.settle()
        if sc.collectives_per_step and overlap not in ON_COMPUTE:
            for d in self.devices:
                tl.wait(d.compute, d.nccl)
        for _ in range(sc.memset_per_step):
            for d in self.devices:
                tl.memset(d.compute, sc.bucket_bytes, 1_000 + sc.bucket_bytes // 1_000)
        durs = self.durations("optimizer", i)
        for k, dur in enumerate(durs):
            self.compute("optimizer", k, dur)
        for x in self.extras.get(i, ()):
            mode = "same_stream" if overlap in ON_COMPUTE else "partial"
            yield from self.collective(x.op, x.bytes, x.dtype, mode, sc.transfer_of("exposed"))
            self.trace.extras.append((i, self.dp, self.seqs[self.dp] - 1, x.op, x.bytes))
        if sc.step_sync:
            yield from tl.settle()
            for d in self.devices:
                tl.sync(d.compute)
        if sc.unrecorded_waits:
            yield from self.unrecorded_wait(i)
        tl.pop()

    def unrecorded_wait(self, i: int) -> Iterator[None]:
        """The host waits until its GPUs drained, with no call: it resumes ``sync_wake_ns``
        after the last op ends (truth's ``hidden``)."""
        tl = self.tl
        yield from tl.settle()
        drained = max(tl.drain(d.device) for d in self.devices)
        start = tl.t
        tl.t = max(tl.t, drained + self.sc.sync_wake_ns)
        self.trace.hidden.append(("unrecorded_wait", i, start, tl.t, drained))

    # -- operations ----------------------------------------------------------------

    def durations(self, phase: str, step: int) -> list[int]:
        """Kernel durations of ``phase`` in ``step``: drawn, straggler extra, zero-length."""
        sc = self.sc
        n = sc.phase_kernel_counts()[phase]
        durs = self.rng.integers(sc.compute_ns[0], sc.compute_ns[1] + 1, n)
        if sc.zero_length_every:
            zero = (
                np.arange(n) + self.phase_offset[phase]
            ) % sc.zero_length_every == sc.zero_length_every - 1
        else:
            zero = np.zeros(n, dtype=bool)
        extra = self.straggle_gpu(phase, step)
        live = np.flatnonzero(~zero)
        if extra and live.size:
            durs[live] += extra // live.size
            durs[live[0]] += extra % live.size
        durs[zero] = 0
        return durs.tolist()

    def straggle_host(self, phase: str, step: int) -> int:
        return sum(
            s.extra_ns
            for s in self.sc.planted()
            if s.rank == self.rank and s.phase == phase == "data_loading" and s.slows(step)
        )

    def straggle_gpu(self, phase: str, step: int) -> int:
        return sum(
            s.extra_ns
            for s in self.sc.planted()
            if s.rank == self.rank and s.phase == phase != "data_loading" and s.slows(step)
        )

    def link_transfer(self, nbytes: int, pg: int) -> int:
        """With ``link_transfers``: a ring all-reduce of ``nbytes`` over group ``pg``'s links
        (0 without: the caller's figure)."""
        if not self.sc.link_transfers:
            return 0
        return ring_transfer_ns(self.sc, self.sc.group_members(pg), nbytes)

    def pause(self, i: int, phase: str, m: int) -> None:
        """The planted host pauses before module ``m`` of ``phase`` in step ``i``."""
        for p in self.sc.pauses:
            if (p.rank, p.step, p.phase, p.module) == (self.rank, i, phase, m):
                start = self.tl.t
                self.tl.host(p.dur_ns)
                self.trace.pauses.append((i, phase, start, self.tl.t))

    def compute(self, phase: str, k: int, dur: int) -> None:
        """The k-th compute kernel of ``phase`` on every device (+ a nested side kernel)."""
        tl, sc = self.tl, self.sc
        types = self.types[phase]
        ktype = types[k % len(types)]
        back_to_back = False
        if self.cover_ns:
            ktype, dur, back_to_back, self.cover_ns = (
                self.cover_type,
                max(dur, self.cover_ns),
                True,
                0,
            )
        every = sc.side_kernel_every
        side = bool(sc.side_streams) and phase != "optimizer" and k % every == every - 1
        for n, d in enumerate(self.devices):
            not_before = 0
            if n == 0:
                not_before, self.not_before = self.not_before, 0
            if side:
                stream = d.sides[(k // every) % len(d.sides)]
                tl.wait(stream, d.compute)
            start, end = tl.kernel(d.compute, ktype, dur, not_before, back_to_back)
            if side:  # starts with kernel k (same event), half as long: nested when on time
                sides = self.types["side"]
                tl.kernel(stream, sides[(k // every) % len(sides)], (end - start) // 2, start)
            if n == 0 and self.pending_gap:
                gap_start, cause = self.pending_gap
                self.trace.planted_gaps.append((d.device, gap_start, start, cause))
                self.pending_gap = None

    def comm_stream(self, d: Device, pg: int) -> Stream:
        """The NCCL stream of group ``pg`` on device ``d``."""
        if pg in d.comms:
            return d.comms[pg]
        return d.nccl if pg == self.dp else d.tp_nccl

    def collective(
        self,
        op: str,
        nbytes: int,
        dtype: str,
        overlap: str,
        transfer: int,
        pg: int | None = None,
        send: dict[int, int] | None = None,
        grouped: bool = False,
    ) -> Iterator[None]:
        """Issue one collective: ``coll:`` range around the NCCL kernel launch on each device
        (on the group's own NCCL stream: the TP group's or the data-parallel one). With
        ``send`` (bytes to each rank) it is an exchange: all_to_all or send/recv.
        ``grouped``: issued with the operations before it in one NCCL group (on streams
        of their own), without waiting for them to be resolved first."""
        tl, sc = self.tl, self.sc
        if not grouped:
            yield from tl.settle()
        pg = self.dp if pg is None else pg
        seq = self.seqs.get(pg, 0)
        self.seqs[pg] = seq + 1
        if sum(self.seqs.values()) == 1 and sc.nccl_nvtx:
            tl.create_domain("NCCL", NCCL_DOMAIN)
            if sc.nccl_payloads:
                nccl_nvtx.init_communicators(tl, sc, self.rank, self.devices[0].device)
        if sc.coll_ranges:
            size = len(sc.group_members(pg))
            tl.push(f"coll:{op} bytes={nbytes} dtype={dtype} pg={pg} size={size} seq={seq}")
        same = overlap in ON_COMPUTE
        for d in self.devices:
            comm = self.comm_stream(d, pg)
            if overlap == "exposed":
                for s in d.compute_streams:
                    tl.wait(comm, s)
            elif not same:
                tl.wait(comm, d.compute)
        call = NCCL_CALLS.get(op, "ncclGroupEnd")
        if sc.nccl_payloads and call in nccl_nvtx.SCHEMAS:
            nccl_nvtx.push(tl, call, nccl_nvtx.collective_values(sc, pg, nbytes))
        elif sc.nccl_nvtx:
            tl.push(call, NCCL_DOMAIN)
        ktype = tl.kernel_type(nccl_kernel(op, dtype))
        posts = []
        for d in self.devices:
            stream = d.compute if same else self.comm_stream(d, pg)
            start, index = tl.nccl_kernel(stream, ktype)
            posts.append(Post(tl, d.device, stream, index, start, transfer, send))
            self.trace.nccl.append((index, pg, seq, op, nbytes))
        if sc.nccl_nvtx:
            tl.pop()
        if sc.coll_ranges:
            tl.pop()
        self.colls.post(pg, seq, posts)
        if overlap == "hidden":
            self.cover_ns = 2 * transfer + 1_000

    def p2p(self, i: int) -> Iterator[None]:
        """Peer-to-peer copies (communication) to the neighbouring GPU."""
        tl, sc = self.tl, self.sc
        yield from tl.settle()
        same = sc.overlap_of_step(i) in ON_COMPUTE
        nbytes = sc.bucket_bytes // 4
        for _ in range(sc.p2p_per_step):
            for d in self.devices:
                peer = d.device + 1 if d.device % 2 == 0 else d.device - 1
                tl.memcpy(
                    d.compute if same else d.nccl,
                    nbytes,
                    1_000 + nbytes // 100,
                    PTOP,
                    DEVICE_MEM,
                    DEVICE_MEM,
                    d.device,
                    peer,
                )

    def plant_gaps(self, i: int, phase: str, m: int) -> Iterator[None]:
        """Make the first device idle for ``dur_ns`` before the next kernel, by ``cause``."""
        for g in self.gaps.get((i, phase, m), ()):
            tl = self.tl
            yield from tl.settle()
            d = self.devices[0]
            drain = tl.drain(d.device)
            if g.cause == "host_bound":
                tl.t = max(tl.t, drain + g.dur_ns - tl.latency)
            elif g.cause == "sync":
                tl.sync(d.compute, until=drain + g.dur_ns - tl.latency - self.sc.host_gap_ns[1])
            elif g.cause == "stream_wait":  # CPU work, then a stream wait the driver holds
                tl.t = max(tl.t, drain + g.dur_ns // 4)
                until = drain + g.dur_ns - tl.latency - self.sc.host_gap_ns[1]
                tl.held_wait(d.compute, d.nccl, until=until)
            else:
                self.not_before = drain + g.dur_ns
            self.pending_gap = (drain, g.cause)
