"""What to generate: a small, JSON-serializable description of a multi-rank training run.

All times are integer nanoseconds. ``(lo, hi)`` pairs are inclusive ranges drawn
uniformly from the scenario's seed.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from nsyswrap.errors import NsysWrapError

PHASES = ("data_loading", "forward", "backward", "optimizer")
OVERLAPS = ("hidden", "partial", "exposed", "same_stream", "inline")
RANKS_MAX = 2**31  # ranks 0 to 2**31 - 1: a 32-bit number, as the views' rank
GAP_CAUSES = ("host_bound", "sync", "other", "stream_wait")
HYBRID_FIELDS = (
    "coll_ranges",
    "tp",
    "tp_bytes",
    "clock_drift_ppm",
    "autograd_thread",
    "ranks_per_report",
    "step_name",
    "end_jitter_ns",
    "nccl_payloads",
    "moe",
    "hot_expert",
    "pipeline",
    "slow_stage",
    "clock_jump",
    "link_bytes_per_ns",
    "link_latency_ns",
    "stalls",
    "same_work",
    "fsdp",
    "pauses",
    "optimizer_host_ns",
    "unrecorded_waits",
    "link_transfers",
    "slow_link",
    "ring",
    "slow_attention",
)
# fields of nested plants and shapes added later, left out of to_dict at their defaults
LATER_NESTED_FIELDS = {"pipeline": ("stage_major", "chunks"), "slow_stage": ("backward",)}
# process group ids of the MoE and pipeline shapes (see Scenario.group_members); a directed
# channel (point-to-point from one rank to another: rings, interleaved pipelines) is
# DIRECTED_PG + src * ranks + dst
EP_PG, STAGE_DP_PG, P2P_PG, DIRECTED_PG = 200, 100, 300, 1000


@dataclass(frozen=True)
class Straggler:
    """``rank`` spends ``extra_ns`` more per step in ``phase``.

    data_loading: extra host time; forward/backward/optimizer: the phase's compute
    kernels on each of the rank's devices run ``extra_ns`` longer in total. ``steps``
    makes it intermittent.
    """

    rank: int
    phase: str
    extra_ns: int
    steps: tuple[int, ...] | None = None  # only in these steps (None: every step)

    def slows(self, step: int) -> bool:
        return self.steps is None or step in self.steps


@dataclass(frozen=True)
class PlantedGap:
    """An idle gap of ``dur_ns`` on ``rank``'s first device in ``step``, just before the
    first kernel of module ``module`` (index in the phase's order) of ``phase``.

    host_bound: the host works on the CPU until the next launch, after the GPU drained.
    sync: the host sits in cudaStreamSynchronize that returns late, then launches.
    other: the next kernel was launched before the GPU drained but starts late.
    stream_wait: host-bound too (its truth cause is ``host_bound``), but most of the host's
    time sits in one cudaStreamWaitEvent call that the driver holds (the GPU waits for
    nothing: the event it waits on has long completed); the call's CUPTI synchronization
    row (type stream wait) covers most of the gap.
    """

    rank: int
    step: int
    cause: str
    dur_ns: int = 200_000
    phase: str = "forward"
    module: int = 1


@dataclass(frozen=True)
class HostPause:
    """``rank``'s host stops for ``dur_ns`` in ``step`` (garbage collection, a page-fault
    storm): no CUDA call, no range, just a longer gap between two launches, before the
    kernels of module ``module`` of ``phase`` (forward or backward)."""

    rank: int
    step: int
    dur_ns: int
    phase: str = "forward"
    module: int = 1


@dataclass(frozen=True)
class SlowLink:
    """The NIC of ``node`` is slow: every transfer between it and another node takes
    ``factor`` times as long (bandwidth / factor, latency x factor); no rank computes slower."""

    node: int
    factor: float = 3.0


@dataclass(frozen=True)
class Ring:
    """Context parallelism's ring attention over all ranks (one sequence split across them).

    Per step and layer, forward: the QKV projection kernels, then ``ranks`` attention
    blocks: before block j (< ranks - 1) each rank sends the key/value block it holds to
    the next rank and receives one from the previous (``kv_bytes``; a send/recv pair per
    ring hop as NCCL SendRecv kernels on one stream per direction, waiting for the compute
    before it: the buffer is reused), computes block j beside that transfer, and block
    j + 1 waits for the receive; then the output projection and MLP kernels. Backward in
    reverse: MLP and projection gradients, the ring again with key/value blocks and their
    gradients (twice the bytes, attention backward twice as long), the QKV gradients.
    After the last layer's backward the gradients are all-reduced over the ranks (the
    ring's ranks hold the same parameters)."""

    layers: int = 4
    kv_bytes: int = 8 * 2**20
    attention_kernels: int = 2  # per block, forward (backward: twice as many)
    attention_ns: tuple[int, int] = (60_000, 80_000)  # per kernel, forward (backward: x2)
    other_kernels: int = 3  # QKV and output projection + MLP, each (backward: the same)
    other_ns: tuple[int, int] = (20_000, 40_000)
    grad_bytes: int = 64 * 2**20


@dataclass(frozen=True)
class SlowAttention:
    """Ring plant: ``rank``'s attention kernels take ``factor`` x as long (forward, and
    backward unless ``backward`` is False)."""

    rank: int
    factor: float = 1.3
    backward: bool = True


@dataclass(frozen=True)
class ExtraCollective:
    """A collective that only ``rank`` issues, at the end of ``step`` (a planted mismatch)."""

    rank: int
    step: int
    op: str = "all_reduce"
    bytes: int = 4
    dtype: str = "float32"


@dataclass(frozen=True)
class MoE:
    """Mixture of experts with one expert per rank (expert parallel over all ranks).

    Per step and layer: attention kernels, a router kernel, the all_to_all dispatch (each
    rank sends each expert's rank the tokens routed to it, ``token_bytes`` each), the
    expert's kernels (time per token received), the all_to_all combine (the tokens back);
    backward: the combine's and the dispatch's gradients as all_to_alls in reverse, the
    expert's and attention's backward kernels and one dense all_reduce (``dense_bytes`` /
    layers) per layer on its own stream (data parallel over all ranks). The all_to_alls are
    ``ncclDevKernel_SendRecv`` kernels on the expert-parallel stream whose members end when
    their own sends and receives are done (nsyswrap.synth.lockstep). Routing: top-1; rank
    i's tokens go to expert j in proportion to a seeded log-normal weight (spread
    ``imbalance``) per (step, layer, i, j).
    """

    layers: int = 2
    tokens: int = 4096  # tokens per rank and step
    token_bytes: int = 8192  # hidden 4096 x bf16
    attention_kernels: int = 4  # per layer, forward (backward: twice as many)
    attention_ns: tuple[int, int] = (20_000, 40_000)
    expert_kernels: int = 3
    expert_ns_per_token: int = 40  # forward; backward twice
    imbalance: float = 0.25
    dense_bytes: int = 16 * 2**20


@dataclass(frozen=True)
class HotExpert:
    """MoE plant: the expert on ``rank`` draws ``factor`` x its routing weight (more tokens:
    longer dispatch/combine transfers to it and longer expert kernels on it).

    ``median_work``: the planted gain's baseline (Scenario.unplanted): the tokens still
    routed as planted, so every transfer as planted, but the experts on ``rank`` taking
    as long as for the median of the other experts' tokens in that step and layer (a
    fix of the hot rank's work, which the replay can measure). Removing the plant
    altogether (balanced routing) also shortens every all_to_all and changes the other
    experts' work: truth's ``planted_gain.balanced_routing``."""

    rank: int
    factor: float = 3.0
    median_work: bool = False


@dataclass(frozen=True)
class Pipeline:
    """Pipeline parallel: ``stages`` stages x (ranks // stages) data-parallel replicas;
    rank = replica * stages + stage (a replica's stages on consecutive ranks, so with
    ranks_per_node = stages each node holds one replica: the stages talk over NVLink, the
    data-parallel groups, true barriers, span the nodes). One 1F1B schedule of
    ``microbatches`` per step (Megatron's: warm-up forwards, steady one-forward-one-backward
    with the send of one and the receive of the other in one NCCL group, cool-down
    backwards); activations and their gradients (``activation_bytes``) go between
    neighbouring stages of a replica as ``ncclDevKernel_SendRecv`` kernels on one NCCL
    stream per peer; after the last backward each stage's data-parallel group all-reduces
    ``grad_bytes`` once per step on its own stream."""

    stages: int = 4
    microbatches: int = 8
    forward_kernels: int = 3  # per microbatch (backward: twice as many)
    forward_ns: tuple[int, int] = (40_000, 60_000)
    activation_bytes: int = 4 * 2**20
    grad_bytes: int = 32 * 2**20
    # Megatron's default layout: rank = stage * replicas + replica (the data-parallel
    # groups on consecutive ranks, so a node holds whole stages: only send/recv cross nodes)
    stage_major: bool = False
    # interleaved 1F1B: each rank holds this many virtual stages (model chunks), see
    # nsyswrap.synth.interleaved
    chunks: int = 1


@dataclass(frozen=True)
class SlowStage:
    """Pipeline plant: every forward kernel group of ``stage`` runs ``extra_ns`` longer per
    microbatch (backward: twice that, unless ``backward`` is False)."""

    stage: int
    extra_ns: int
    backward: bool = True


@dataclass(frozen=True)
class ClockJump:
    """The clock of ``node`` steps by ``size_ns`` (a time-base resync, or captures stitched
    together) when the node's lowest rank starts step ``step``: every report of the node
    records later times ``size_ns`` later."""

    node: int
    step: int
    size_ns: int = 2_000_000


@dataclass(frozen=True)
class Scenario:
    """A multi-rank data-parallel training run to synthesize."""

    name: str = "custom"
    seed: int = 0
    ranks: int = 2
    ranks_per_node: int = 8  # rank r runs on node r // ranks_per_node
    devices_per_rank: int = 1  # rank r uses devices local_rank * devices_per_rank + j
    steps: int = 4
    # compute work per step and device on the compute stream (split 1/3 forward,
    # 2/3 backward, 1/20 optimizer) inside `modules` leaf-module NVTX ranges
    kernels_per_step: int = 60
    modules: int = 6
    compute_ns: tuple[int, int] = (10_000, 60_000)
    zero_length_every: int = 0  # every Nth compute kernel lasts 0 ns (0: never)
    back_to_back_every: int = 3  # every Nth op on a stream starts right at the previous end
    gpu_gap_ns: tuple[int, int] = (300, 2_000)  # otherwise this gap after the previous op
    side_streams: int = 0  # extra compute streams with kernels nested in the main ones
    side_kernel_every: int = 6
    # communication: bucket all-reduces per step; comm_overlap is cycled over the steps
    # (hidden / partial / exposed / same_stream); transfer_ns 0 = derived from the overlap
    collectives_per_step: int = 2
    comm_overlap: tuple[str, ...] = ("partial",)
    bucket_bytes: int = 25 * 2**20
    dtype: str = "float32"
    transfer_ns: int = 0
    p2p_per_step: int = 0  # peer-to-peer copies (communication) in forward
    # copies outside communication
    h2d_per_step: int = 1
    h2d_bytes: int = 4 * 2**20
    memset_per_step: int = 1
    # host side
    data_loading_ns: int = 200_000
    launch_api_ns: tuple[int, int] = (3_000, 8_000)
    host_gap_ns: tuple[int, int] = (1_000, 3_000)  # CPU time between CUDA calls
    launch_latency_ns: int = 4_000  # minimum launch call start -> GPU start
    sync_wake_ns: int = 2_000  # a stream sync returns this long after the drain
    step_sync: bool = True  # cudaStreamSynchronize at the end of each step
    startup_ns: int = 1_000_000  # session start -> first step
    # clocks: reports start at true times spread over start_stagger_ns; each report's
    # recorded utcEpochNs is off by clock_error_ns[rank] (None: seeded, |error| <= clock_skew_ns)
    start_stagger_ns: int = 2_000_000
    clock_error_ns: tuple[int, ...] | None = None
    clock_skew_ns: int = 0
    # planted problems
    straggler: Straggler | None = None
    gaps: tuple[PlantedGap, ...] = ()
    extra_collectives: tuple[ExtraCollective, ...] = ()
    min_gap_ns: int = 10_000  # truth lists idle gaps at least this long
    nccl_nvtx: bool = True  # NCCL's own ranges (domain NCCL, registered strings)
    coll_ranges: bool = True  # nsyswrap's `coll:` ranges (False: match by kernels only)
    # NCCL's ranges carry their payloads (binaryData, as exported with --include-blobs=true),
    # with ncclCommInitRank ranges for each communicator (nsyswrap.synth.nccl_nvtx)
    nccl_payloads: bool = False
    # hybrid parallelism: tensor-parallel groups of `tp` consecutive ranks (pg 1 + r // tp),
    # one all_reduce after each forward module on their own NCCL stream; the gradient
    # all-reduces then run in data-parallel groups of the ranks with one TP position
    # (pg 100 + r % tp). 0: one data-parallel group of all ranks (pg 0).
    tp: int = 0
    tp_bytes: int = 4 * 2**20
    # per-rank clock drift: the report's session clock gains this many ppm of its own
    # reading (trace.recorded; None: none)
    clock_drift_ppm: tuple[float, ...] | None = None
    autograd_thread: bool = False  # backward's CUDA calls and ranges on a second thread
    # one capture (report) holds this many consecutive ranks' processes (one session, one
    # clock: the first rank's start and clock error), e.g. all ranks of a node
    ranks_per_report: int = 1
    step_name: str = "step:{}"  # text of step i's NVTX range ({} = i)
    # an NCCL kernel's end on each member: the common true end + a seeded jitter below
    # this (0: all members end at one instant, as the last hop of a ring ends together)
    end_jitter_ns: int = 200
    # other shapes (None: data parallel / hybrid as above) and their plants; a plant set to
    # None simulates with the very same random draws (every draw is keyed, not ordered)
    moe: MoE | None = None
    hot_expert: HotExpert | None = None
    pipeline: Pipeline | None = None
    slow_stage: SlowStage | None = None
    clock_jump: ClockJump | None = None
    # transfers of all_to_all and send/recv (lockstep.exchange_ends): within a node, across nodes
    link_bytes_per_ns: tuple[int, int] = (150, 25)
    link_latency_ns: tuple[int, int] = (3_000, 10_000)
    # more planted slow-downs, each a Straggler of its own (usually with its steps): stalls
    # that move between ranks
    stalls: tuple[Straggler, ...] = ()
    # every rank draws the same kernel durations, API-call times and gaps: the ranks differ
    # only by what is planted (and their start), so "as fast as the others" is the unplanted run
    same_work: bool = False
    # FSDP-like: each forward module's parameters all_gathered first (compute waits for
    # them), each backward module's gradients reduce_scattered (instead of the buckets)
    fsdp: bool = False
    # planted host pauses (garbage collection): see HostPause
    pauses: tuple[HostPause, ...] = ()
    # CPU time of the optimizer step before its kernels (a Python loop over the parameters)
    optimizer_host_ns: int = 0
    # the host waits for its GPU to drain at the end of each step without a recorded call
    # (it spins on a flag a kernel writes to pinned memory, say): truth's `hidden`. With
    # step_sync False nothing else holds the host back
    unrecorded_waits: bool = False
    # collectives' transfer times from their bytes and the links (a ring over the group's
    # slowest link, shapes.ring_transfer_ns) instead of transfer_ns or the overlap's figure
    link_transfers: bool = False
    slow_link: SlowLink | None = None
    # context parallelism's ring attention (nsyswrap.synth.ring) and its plant
    ring: Ring | None = None
    slow_attention: SlowAttention | None = None

    def to_dict(self) -> dict:
        """The fields, without the later ones (HYBRID_FIELDS) at their defaults, so that
        scenarios written before them keep their exact truth.json."""
        data = dataclasses.asdict(self)
        for planted in [data["straggler"], *data["stalls"]]:
            if planted is not None and planted["steps"] is None:
                del planted["steps"]
        defaults = {f.name: f.default for f in dataclasses.fields(self)}
        for name in HYBRID_FIELDS:
            if data[name] == defaults[name]:
                del data[name]
        for name, later in LATER_NESTED_FIELDS.items():
            nested = data.get(name)
            for field in later if nested is not None else ():
                default = {f.name: f.default for f in dataclasses.fields(getattr(self, name))}
                if nested[field] == default[field]:
                    del nested[field]
        return data

    @classmethod
    def from_dict(cls, data: dict) -> Scenario:
        """Inverse of :meth:`to_dict` (lists become tuples, nested dicts dataclasses)."""
        nested = {
            "straggler": Straggler,
            "gaps": PlantedGap,
            "extra_collectives": ExtraCollective,
            "moe": MoE,
            "hot_expert": HotExpert,
            "pipeline": Pipeline,
            "slow_stage": SlowStage,
            "clock_jump": ClockJump,
            "stalls": Straggler,
            "pauses": HostPause,
            "slow_link": SlowLink,
            "ring": Ring,
            "slow_attention": SlowAttention,
        }
        kwargs = {}
        for f in dataclasses.fields(cls):
            if f.name not in data:
                continue
            value = data[f.name]
            kind = nested.get(f.name)
            if kind is not None and value is not None:
                value = (
                    kind(**value) if isinstance(value, dict) else tuple(kind(**v) for v in value)
                )
                if dataclasses.is_dataclass(value):  # lists inside (Straggler.steps): tuples
                    value = dataclasses.replace(
                        value,
                        **{
                            g.name: tuple(getattr(value, g.name))
                            for g in dataclasses.fields(value)
                            if isinstance(getattr(value, g.name), list)
                        },
                    )
                elif f.name == "stalls":
                    value = tuple(
                        dataclasses.replace(v, steps=None if v.steps is None else tuple(v.steps))
                        for v in value
                    )
            elif isinstance(value, list):
                value = tuple(value)
            kwargs[f.name] = value
        unknown = set(data) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise NsysWrapError(
                "scenario",
                f"unknown field(s) {sorted(unknown)}",
                "use the fields of nsyswrap.synth.Scenario",
            )
        return cls(**kwargs)

    def replace(self, **changes) -> Scenario:
        return dataclasses.replace(self, **changes)

    # -- derived quantities ------------------------------------------------------

    def dp_group(self, rank: int) -> int:
        if self.pipeline:
            return STAGE_DP_PG + self.stage_of(rank)
        return 100 + rank % self.tp if self.tp else 0

    @property
    def replicas(self) -> int:
        """Data-parallel replicas of a pipeline."""
        return self.ranks // self.pipeline.stages

    def stage_of(self, rank: int) -> int:
        if self.pipeline.stage_major:
            return rank // self.replicas
        return rank % self.pipeline.stages

    def replica_of(self, rank: int) -> int:
        if self.pipeline.stage_major:
            return rank % self.replicas
        return rank // self.pipeline.stages

    def pipe_rank(self, stage: int, replica: int) -> int:
        if self.pipeline.stage_major:
            return stage * self.replicas + replica
        return replica * self.pipeline.stages + stage

    def directed_group(self, src: int, dst: int) -> int:
        """The channel from rank ``src`` to rank ``dst`` (sends one way only)."""
        return DIRECTED_PG + src * self.ranks + dst

    def p2p_group(self, stage: int, replica: int) -> int:
        """The channel between ``stage`` and ``stage + 1`` of ``replica``."""
        return P2P_PG + self.pipe_rank(stage, replica)

    def tp_group(self, rank: int) -> int:
        return 1 + rank // self.tp

    def group_members(self, pg: int) -> list[int]:
        """Ranks of process group ``pg``."""
        if pg >= DIRECTED_PG:
            return sorted(divmod(pg - DIRECTED_PG, self.ranks))
        if self.pipeline:
            if pg >= P2P_PG:
                lower = pg - P2P_PG  # the lower stage's rank
                stage, replica = self.stage_of(lower), self.replica_of(lower)
                return sorted([lower, self.pipe_rank(stage + 1, replica)])
            return [r for r in range(self.ranks) if self.stage_of(r) == pg - STAGE_DP_PG]
        if not self.tp:
            return list(range(self.ranks))
        if pg >= 100:
            return [r for r in range(self.ranks) if r % self.tp == pg - 100]
        return [r for r in range(self.ranks) if r // self.tp == pg - 1]

    def drift_ppb(self, rank: int) -> int:
        """Session clock rate error of ``rank``'s report, ns per s of true time."""
        return round(self.clock_drift_ppm[rank] * 1000) if self.clock_drift_ppm else 0

    def phase_kernel_counts(self) -> dict[str, int]:
        """Compute kernels per step on the compute stream, split over the phases."""
        optimizer = max(1, self.kernels_per_step // 20)
        rest = max(0, self.kernels_per_step - optimizer)
        forward = rest // 3
        return {"forward": forward, "backward": rest - forward, "optimizer": optimizer}

    def planted(self) -> tuple[Straggler, ...]:
        """Every planted slow-down: the straggler and the stalls."""
        return ((self.straggler,) if self.straggler else ()) + self.stalls

    def has_plant(self) -> bool:
        """Whether anything slows the run down on purpose (the planted gain's subject)."""
        hot = self.hot_expert and not self.hot_expert.median_work
        return bool(
            self.planted()
            or hot
            or self.slow_stage
            or self.pauses
            or self.slow_link
            or self.slow_attention
        )

    def unplanted(self) -> Scenario:
        """The same run without its planted slow-downs (the planted gain's baseline; a hot
        expert's: its rank doing the median expert's work, HotExpert.median_work)."""
        hot = self.hot_expert and dataclasses.replace(self.hot_expert, median_work=True)
        return self.replace(
            straggler=None,
            stalls=(),
            hot_expert=hot,
            slow_stage=None,
            pauses=(),
            slow_link=None,
            slow_attention=None,
        )

    def work_seed(self, rank: int) -> int:
        """The rank whose seeds draw ``rank``'s work: its own, or rank 0's with same_work."""
        return 0 if self.same_work else rank

    def overlap_of_step(self, step: int) -> str:
        return self.comm_overlap[step % len(self.comm_overlap)]

    def transfer_of(self, overlap: str) -> int:
        """Transfer time of one bucket's all-reduce (``transfer_ns`` or derived from overlap)."""
        if self.transfer_ns:
            return self.transfer_ns
        mean = sum(self.compute_ns) // 2
        segment = mean * self.phase_kernel_counts()["backward"] // (self.collectives_per_step + 1)
        factor = 16 if overlap == "partial" else 4
        return max(1_000, segment * factor // 10)

    def clock_errors(self, draw) -> list[int]:
        """Per-rank clock error (ns); ``draw(lo, hi)`` gives seeded ints when not fixed."""
        if self.clock_error_ns is not None:
            return list(self.clock_error_ns)
        return [draw(-self.clock_skew_ns, self.clock_skew_ns) for _ in range(self.ranks)]

    def validate(self) -> None:
        """Raise NsysWrapError naming the first inconsistent field."""

        def bad(problem: str, fix: str) -> None:
            raise NsysWrapError(f"scenario {self.name!r}", problem, fix)

        self._validate_sizes(bad)
        self._validate_settings(bad)
        self._validate_plants(bad)
        self._validate_shapes(bad)
        self._validate_hosts_and_links(bad)

    def _validate_sizes(self, bad) -> None:
        """Non-negative numbers, positive counts and ordered (lo, hi) ranges."""
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, int) and not isinstance(value, bool) and value < 0:
                bad(f"{f.name} must be >= 0", f"set {f.name} to a non-negative number")
        if self.ranks_per_report > 1 and (
            self.ranks_per_node % self.ranks_per_report or self.ranks % self.ranks_per_report
        ):
            bad(
                "ranks_per_report must divide ranks_per_node and ranks",
                "a capture holds ranks of one node",
            )
        for name in (
            "ranks",
            "ranks_per_node",
            "devices_per_rank",
            "steps",
            "modules",
            "side_kernel_every",
            "ranks_per_report",
        ):
            if getattr(self, name) < 1:
                bad(f"{name} must be >= 1", f"set {name} to a positive number")
        if self.ranks > RANKS_MAX:
            bad(f"ranks must be at most {RANKS_MAX:,}", "ranks are 0 to 2,147,483,647 (32 bits)")
        if self.kernels_per_step < 3:
            bad("kernels_per_step must be >= 3", "give each phase at least one kernel")
        for name in ("compute_ns", "gpu_gap_ns", "launch_api_ns", "host_gap_ns"):
            lo, hi = getattr(self, name)
            if not 0 <= lo <= hi:
                bad(f"{name}={(lo, hi)} is not a range 0 <= lo <= hi", f"fix {name}")
        if self.launch_latency_ns < 1:
            bad("launch_latency_ns must be >= 1", "kernels start after their launch call")

    def _validate_settings(self, bad) -> None:
        """TP, payloads, per-rank clocks and overlap modes."""
        if self.tp and (self.ranks % self.tp or self.tp < 2):
            bad(
                f"tp={self.tp} does not divide ranks={self.ranks}",
                "use a tp of 2 or more dividing ranks",
            )
        if self.nccl_payloads and not self.nccl_nvtx:
            bad(
                "nccl_payloads needs nccl_nvtx",
                "set nccl_nvtx=True: payloads ride on NCCL's ranges",
            )
        if self.clock_drift_ppm is not None and len(self.clock_drift_ppm) != self.ranks:
            bad("clock_drift_ppm needs one value per rank", "give exactly `ranks` values or None")
        if self.clock_error_ns is not None and len(self.clock_error_ns) != self.ranks:
            bad("clock_error_ns needs one value per rank", "give exactly `ranks` values or None")
        for overlap in self.comm_overlap:
            if overlap not in OVERLAPS:
                bad(f"comm_overlap {overlap!r} is unknown", f"use one of {OVERLAPS}")
        if not self.comm_overlap:
            bad("comm_overlap is empty", f"give at least one of {OVERLAPS}")

    def _validate_plants(self, bad) -> None:
        """Stragglers, planted gaps and extra collectives inside the run."""
        for s in self.planted():
            if not 0 <= s.rank < self.ranks or s.phase not in PHASES or s.extra_ns < 0:
                bad(
                    f"straggler {s} is out of range",
                    f"rank < {self.ranks}, phase in {PHASES}, extra_ns >= 0",
                )
        min_gap = 4 * (self.launch_latency_ns + self.host_gap_ns[1] + self.gpu_gap_ns[1])
        for g in self.gaps:
            if not (0 <= g.rank < self.ranks and 0 <= g.step < self.steps):
                bad(f"gap {g} is outside the run", f"rank < {self.ranks}, step < {self.steps}")
            if g.cause not in GAP_CAUSES or g.phase not in ("forward", "backward"):
                bad(
                    f"gap {g} has an unknown cause or phase",
                    f"cause in {GAP_CAUSES}, phase forward/backward",
                )
            if g.dur_ns < min_gap:
                bad(f"gap {g} is shorter than {min_gap} ns", "plant gaps well above launch latency")
            count = self.phase_kernel_counts()[g.phase]
            if not 0 <= g.module < min(self.modules, count):
                bad(
                    f"gap {g} names module {g.module}, which has no kernels",
                    f"module < {min(self.modules, count)} (modules with {g.phase} kernels)",
                )
            if g.phase == "forward" and g.module == 0 and self.p2p_per_step:
                bad(f"gap {g} would end at the step's P2P copy", "plant it at module >= 1")
        for x in self.extra_collectives:
            if not (0 <= x.rank < self.ranks and 0 <= x.step < self.steps):
                bad(
                    f"extra collective {x} is outside the run",
                    f"rank < {self.ranks}, step < {self.steps}",
                )

    def _validate_hosts_and_links(self, bad) -> None:
        """Host pauses, the slow NIC and the ring shape."""
        for p in self.pauses:
            if not (0 <= p.rank < self.ranks and 0 <= p.step < self.steps):
                bad(f"pause {p} is outside the run", f"rank < {self.ranks}, step < {self.steps}")
            if p.phase not in ("forward", "backward") or not 0 <= p.module < self.modules:
                bad(
                    f"pause {p} names no module", f"phase forward/backward, module < {self.modules}"
                )
        nodes = (self.ranks - 1) // self.ranks_per_node + 1
        if self.slow_link and not (nodes > 1 and 0 <= self.slow_link.node < nodes):
            bad(f"slow_link {self.slow_link} needs 2 nodes or more", f"node < {nodes}")
        if self.slow_link and self.slow_link.factor < 1:
            bad(f"slow_link {self.slow_link} makes the link faster", "use a factor >= 1")
        if self.slow_attention and not (self.ring and 0 <= self.slow_attention.rank < self.ranks):
            bad(
                f"slow_attention {self.slow_attention} needs ring and a rank < {self.ranks}",
                "set ring, or drop it",
            )
        if self.ring and (self.ranks < 2 or self.ring.layers < 1):
            bad("ring needs 2 ranks or more and layers >= 1", "fix ring or ranks")

    def _validate_shapes(self, bad) -> None:
        """The MoE and pipeline shapes, their plants and the clock jump."""
        shapes = [name for name in ("moe", "pipeline", "ring") if getattr(self, name)]
        if len(shapes) > 1:
            bad(f"{' and '.join(shapes)} are set together", "pick one shape")
        plain = not (
            self.tp
            or self.devices_per_rank != 1
            or self.ranks_per_report != 1
            or self.gaps
            or self.nccl_payloads
            or self.extra_collectives
            or self.side_streams
        )
        if shapes and not (plain and not self.pauses):
            bad(
                "moe / pipeline / ring runs have one GPU per rank and report, no tp, payloads, "
                "extra collectives, planted gaps or pauses, or side streams",
                "leave those fields at their defaults",
            )
        if self.hot_expert and not (
            self.moe and 0 <= self.hot_expert.rank < self.ranks and self.hot_expert.factor > 0
        ):
            bad(
                f"hot_expert {self.hot_expert} needs moe and a rank < {self.ranks}",
                "set moe, or drop it",
            )
        if self.moe and (self.moe.layers < 1 or self.moe.tokens < self.ranks):
            bad("moe needs layers >= 1 and at least one token per rank", "fix moe")
        p = self.pipeline
        if p and (p.stages < 2 or self.ranks % p.stages or p.microbatches < p.stages):
            bad(
                f"pipeline {p} does not fit {self.ranks} ranks",
                "stages >= 2 dividing ranks, microbatches >= stages",
            )
        if p and p.chunks > 1 and (p.microbatches % p.stages or p.stages < 3):
            bad(
                f"pipeline {p} cannot interleave",
                "interleaved: stages >= 3, microbatches a multiple of stages",
            )
        if self.slow_stage and not (p and 0 <= self.slow_stage.stage < p.stages):
            bad(
                f"slow_stage {self.slow_stage} needs a pipeline with that stage",
                "set pipeline, or drop it",
            )
        if shapes and self.straggler and self.straggler.phase != "data_loading":
            bad(
                "moe / pipeline / ring stragglers are data_loading only",
                "plant hot_expert, slow_stage or slow_attention instead",
            )
        j = self.clock_jump
        nodes = (self.ranks - 1) // self.ranks_per_node + 1
        if j and not (0 <= j.node < nodes and 0 < j.step < self.steps and j.size_ns > 0):
            bad(
                f"clock_jump {j} is outside the run",
                f"node < {nodes}, 0 < step < {self.steps}, size_ns > 0",
            )
