"""Fault pairs: a job with a fault and the same job (same seed, same random draws) without
it, shapes of real jobs off the happy path (issue #36). nsyswrap.synth.pairs writes them
and their truth; each fault half is also a preset of the same name.

A pair's ``fix`` is the change that removes (or shrinks) the fault; without one the fixed
half is ``fault.unplanted()``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from nsyswrap.synth.scenario import (
    HostPause,
    Pipeline,
    Ring,
    Scenario,
    SlowAttention,
    SlowLink,
    SlowStage,
    Straggler,
)

NODE1_LATE = (0, 0, 0, 0, 1, 1, 1, 1)  # x a clock error or drift: one clock per host, node1's off


@dataclass(frozen=True)
class FaultPair:
    about: str
    fault: Scenario
    fix: dict = field(default_factory=dict)  # Scenario changes; empty: fault.unplanted()

    def fixed_of(self, fault: Scenario) -> Scenario:
        """The fixed half of ``fault`` (this pair's fault, perhaps resized)."""
        return fault.replace(**self.fix) if self.fix else fault.unplanted()


# 1. Host-paced TP x DP: the host's data loading, launches (30-50 us of Python per op) and
# optimizer loop set the step; the GPU has slack, so rank 5's slow forward costs nothing.
HOST_PACED_TPDP = Scenario(
    name="host_paced_tpdp",
    seed=101,
    ranks=8,
    ranks_per_node=4,
    tp=4,
    steps=10,
    kernels_per_step=60,
    modules=6,
    compute_ns=(8_000, 30_000),
    launch_api_ns=(4_000, 9_000),
    host_gap_ns=(25_000, 45_000),
    data_loading_ns=1_200_000,
    optimizer_host_ns=800_000,
    bucket_bytes=8 * 2**20,
    comm_overlap=("partial",),
    link_transfers=True,
    autograd_thread=True,
    clock_error_ns=tuple(2_700_000 * k for k in NODE1_LATE),
    clock_drift_ppm=tuple(15 * k for k in NODE1_LATE),
    straggler=Straggler(rank=5, phase="forward", extra_ns=2_000_000, steps=(3, 4, 5, 6)),
)

# 2. NCCL on the compute stream: buckets all-reduced during backward on the compute stream
# (no overlap possible), so every kernel after a bucket waits for the slowest rank's.
NCCL_ON_COMPUTE = Scenario(
    name="nccl_on_compute",
    seed=102,
    ranks=4,
    ranks_per_node=4,
    steps=10,
    kernels_per_step=90,
    modules=6,
    compute_ns=(20_000, 60_000),
    collectives_per_step=3,
    comm_overlap=("inline",),
    link_transfers=True,
    autograd_thread=True,
    data_loading_ns=400_000,
    clock_skew_ns=800_000,
    straggler=Straggler(rank=2, phase="backward", extra_ns=250_000),
)

# 3. Just-in-time launches with no recorded synchronisation: the host launches each kernel
# just before it runs; what holds it back at the end of a step is a wait no call records.
JIT_NO_SYNC = Scenario(
    name="jit_no_sync",
    seed=103,
    ranks=4,
    ranks_per_node=2,
    steps=10,
    kernels_per_step=60,
    modules=4,
    compute_ns=(5_000, 20_000),
    launch_api_ns=(4_000, 9_000),
    host_gap_ns=(30_000, 50_000),
    data_loading_ns=1_500_000,
    collectives_per_step=1,
    comm_overlap=("exposed",),
    bucket_bytes=16 * 2**20,
    link_transfers=True,
    step_sync=False,
    unrecorded_waits=True,
    clock_error_ns=(0, 0, 1_900_000, 1_900_000),
    straggler=Straggler(rank=2, phase="data_loading", extra_ns=3_000_000),
    autograd_thread=True,
)
JIT_ABOUT = (
    "4 ranks on 2 hosts, one all_reduce per step, each kernel launched just before it runs "
    "(30-50 us of host time per launch), no synchronising call recorded: at the end of each "
    "step the host waits for its GPU without a call; rank 2's data loading 3 ms slower in "
    "every step"
)


def moving_pauses(seed: int, ranks: int, steps: int, late: tuple[int, ...] = ()) -> tuple:
    """Host pauses of 25-35 ms in forward (before a module drawn from 1-6), each step with
    probability 1/5 (and every step of ``late``), on a rank drawn uniformly: seeded, so the
    (rank, step) pairs are fixed and in truth."""
    rng = np.random.default_rng([seed, 7])
    paused = rng.random(steps) < 0.2
    paused[list(late)] = True
    ranks_of = rng.integers(0, ranks, steps)
    durations = rng.integers(25_000_000, 35_000_001, steps)
    modules = rng.integers(1, 7, steps)
    return tuple(
        HostPause(int(ranks_of[s]), int(s), int(durations[s]), "forward", int(modules[s]))
        for s in np.flatnonzero(paused)
    )


# 7. Moving host pauses (garbage collection) on a random rank about one step in five.
MOVING_PAUSES = Scenario(
    name="moving_pauses",
    seed=107,
    ranks=8,
    ranks_per_node=4,
    steps=20,
    kernels_per_step=150,
    modules=8,
    compute_ns=(20_000, 80_000),
    collectives_per_step=3,
    comm_overlap=("partial",),
    link_transfers=True,
    data_loading_ns=2_000_000,
    autograd_thread=True,
    clock_error_ns=tuple(4_200_000 * k for k in NODE1_LATE),
    pauses=moving_pauses(107, 8, 20),
)
PAUSES_ABOUT = (
    "8 data-parallel ranks on 2 hosts (~10 ms steps, the GPU sets the pace), backward on an "
    "autograd thread; a 25-35 ms host pause (garbage collection) inside forward on a random "
    "rank about one step in five"
)

# 8. A slow NIC: every transfer to or from node1 across the hosts 3x longer.
SLOW_NIC = Scenario(
    name="slow_nic",
    seed=108,
    ranks=8,
    ranks_per_node=4,
    tp=4,
    steps=10,
    kernels_per_step=120,
    modules=6,
    compute_ns=(20_000, 60_000),
    collectives_per_step=3,
    comm_overlap=("partial",),
    bucket_bytes=32 * 2**20,
    link_transfers=True,
    data_loading_ns=1_000_000,
    autograd_thread=True,
    clock_error_ns=tuple(-3_300_000 * k for k in NODE1_LATE),
    clock_drift_ppm=tuple(-12 * k for k in NODE1_LATE),
    slow_link=SlowLink(node=1, factor=3.0),
)

# 4. Pipeline stages across hosts, data parallelism inside a host (Megatron's default
# layout): only send/recv cross the hosts. Stage 2's forward slow.
PIPELINE_ACROSS_HOSTS = Scenario(
    name="pipeline_across_hosts",
    seed=104,
    ranks=8,
    ranks_per_node=4,
    steps=8,
    pipeline=Pipeline(stage_major=True, forward_ns=(60_000, 90_000)),
    slow_stage=SlowStage(stage=2, extra_ns=300_000, backward=False),
    data_loading_ns=2_000_000,
    clock_error_ns=tuple(13_000_000 * k for k in NODE1_LATE),
    clock_drift_ppm=tuple(20 * k for k in NODE1_LATE),
    autograd_thread=True,
)
PIPELINE_ABOUT = (
    "Megatron 1F1B over 8 microbatches, 4 stages x 2 data-parallel replicas on 2 hosts "
    "(node1's clock 13 ms off, drifting 20 ppm); stage 2's forward 300 us slower per "
    "microbatch"
)

# 6. Context parallelism's ring attention: a send/recv ring per layer beside the attention
# kernels; one rank's attention slower.
RING_ATTENTION = Scenario(
    name="ring_attention",
    seed=106,
    ranks=4,
    ranks_per_node=4,
    steps=8,
    ring=Ring(),
    data_loading_ns=1_000_000,
    clock_skew_ns=600_000,
    slow_attention=SlowAttention(rank=2, factor=1.3),
    autograd_thread=True,
)
RING_ABOUT = (
    "context parallelism's ring attention: 4 ranks in a host, per layer (4) a send/recv ring "
    "of key/value blocks beside the attention kernels (3 hops, one NCCL group each)"
)

# 5. An interleaved 1F1B pipeline (two model chunks per rank), one stage slow.
INTERLEAVED = Scenario(
    name="interleaved_pipeline",
    seed=105,
    ranks=8,
    ranks_per_node=4,
    steps=8,
    pipeline=Pipeline(chunks=2, forward_ns=(40_000, 70_000)),
    slow_stage=SlowStage(stage=1, extra_ns=80_000),
    data_loading_ns=2_000_000,
    clock_error_ns=tuple(-7_500_000 * k for k in NODE1_LATE),
    clock_drift_ppm=tuple(-25 * k for k in NODE1_LATE),
    autograd_thread=True,
)

PAIRS: dict[str, FaultPair] = {
    "host_paced_tpdp": FaultPair(
        "host-paced TP x DP: TP groups of 4 in 2 hosts, DP pairs across them, backward on "
        "an autograd thread, a stream sync ending each step; data loading, launches and the "
        "optimizer's loop set the step time with GPU slack to spare; rank 5's forward kernels "
        "2 ms slower in steps 3-6 (the slack absorbs it: the true saving is 0)",
        HOST_PACED_TPDP,
    ),
    "host_paced_tpdp_kernels": FaultPair(
        "host_paced_tpdp without coll: ranges and with steps named train_step",
        HOST_PACED_TPDP.replace(
            name="host_paced_tpdp_kernels", coll_ranges=False, step_name="train_step"
        ),
    ),
    "nccl_on_compute": FaultPair(
        "4 ranks on one host, the gradient buckets' all-reduces on the compute stream during "
        "backward (no overlap possible), backward launched from the autograd thread; rank 2's "
        "backward kernels 250 us slower in every step",
        NCCL_ON_COMPUTE,
    ),
    "jit_no_sync": FaultPair(
        f"{JIT_ABOUT}; fixed: the loader 2 ms faster",
        JIT_NO_SYNC,
        {"straggler": Straggler(rank=2, phase="data_loading", extra_ns=1_000_000)},
    ),
    "jit_no_sync_removed": FaultPair(
        f"{JIT_ABOUT}; fixed: without the slowdown",
        JIT_NO_SYNC.replace(name="jit_no_sync_removed"),
    ),
    "moving_pauses": FaultPair(PAUSES_ABOUT, MOVING_PAUSES),
    "moving_pauses_late": FaultPair(
        f"{PAUSES_ABOUT}, and in both of the last two steps",
        MOVING_PAUSES.replace(
            name="moving_pauses_late", seed=108, pauses=moving_pauses(108, 8, 20, late=(18, 19))
        ),
    ),
    "slow_nic": FaultPair(
        "8 ranks on 2 hosts, TP groups of 4 inside a host (NVLink), DP pairs across them; the "
        "second host's NIC slow: every transfer across the hosts 3x longer (bandwidth / 3, "
        "latency x 3), no rank computes slower",
        SLOW_NIC,
    ),
    "pipeline_across_hosts": FaultPair(
        f"{PIPELINE_ABOUT}; stages 0-1 on node0, 2-3 on node1, each stage's replicas (its "
        "data-parallel all-reduce) inside a host: only send/recv cross the hosts",
        PIPELINE_ACROSS_HOSTS,
    ),
    "pipeline_replicas_across_hosts": FaultPair(
        f"{PIPELINE_ABOUT}; a replica's 4 stages in a host, the data-parallel all-reduces "
        "across the hosts",
        PIPELINE_ACROSS_HOSTS.replace(
            name="pipeline_replicas_across_hosts",
            pipeline=Pipeline(forward_ns=(60_000, 90_000)),
        ),
    ),
    "ring_attention": FaultPair(
        f"{RING_ABOUT}; rank 2's attention kernels 30 % slower, forward and backward",
        RING_ATTENTION,
    ),
    "ring_attention_forward": FaultPair(
        f"{RING_ABOUT}; rank 2's forward attention kernels 30 % slower",
        RING_ATTENTION.replace(
            name="ring_attention_forward",
            slow_attention=SlowAttention(rank=2, factor=1.3, backward=False),
        ),
    ),
    "interleaved_pipeline": FaultPair(
        "Megatron's interleaved 1F1B: 4 stages x 2 replicas (a replica's stages in a host, "
        "the DP all-reduces across), 2 model chunks per rank, 8 microbatches; activations "
        "and gradients on a channel per direction (the last stage sends chunk 0's output "
        "round to stage 0); stage 1 slow: +80 us per forward of each chunk, +160 us per "
        "backward",
        INTERLEAVED,
    ),
}
