"""Named scenarios (the fixtures, a mismatch demo, the shapes of real jobs: MoE, pipeline,
clock jump, stream wait, lag, long wait; the benchmark size) and resizing."""

from __future__ import annotations

import json
from pathlib import Path

from nsyswrap.errors import NsysWrapError
from nsyswrap.synth.pair_scenarios import NODE1_LATE, PAIRS
from nsyswrap.synth.scenario import (
    ClockJump,
    ExtraCollective,
    HotExpert,
    MoE,
    Pipeline,
    PlantedGap,
    Scenario,
    SlowStage,
    Straggler,
)

MOE8 = Scenario(
    name="moe8",
    seed=23,
    ranks=8,
    ranks_per_node=4,
    steps=8,
    moe=MoE(),
    hot_expert=HotExpert(rank=6, factor=3.0),
    data_loading_ns=40_000_000,
    end_jitter_ns=0,
    clock_error_ns=tuple(37_400_000 * k for k in NODE1_LATE),
    clock_drift_ppm=tuple(25 * k for k in NODE1_LATE),
)

PIPELINE8 = Scenario(
    name="pipeline8",
    seed=31,
    ranks=8,
    ranks_per_node=4,
    steps=8,
    pipeline=Pipeline(),
    slow_stage=SlowStage(stage=2, extra_ns=60_000),
    data_loading_ns=40_000_000,
    end_jitter_ns=0,
    coll_ranges=False,
    clock_error_ns=tuple(21_000_000 * k for k in NODE1_LATE),
    clock_drift_ppm=tuple(-30 * k for k in NODE1_LATE),
)

BENCH = Scenario(
    name="bench",
    seed=8,
    ranks=8,
    steps=1000,
    kernels_per_step=1000,
    modules=46,
    collectives_per_step=3,
    clock_skew_ns=2_000_000,
    straggler=Straggler(rank=5, phase="forward", extra_ns=300_000),
)
# bench with the host setting the pace (issue #37's shapes); truth lists the idle gaps of
# 100 us or more, not every launch gap (600 k of them: a 110 MB truth.json, +1 GB to make)
BENCH_PACED = BENCH.replace(min_gap_ns=100_000)

PRESETS: dict[str, tuple[str, Scenario]] = {
    "run2": (
        "2 ranks, partly overlapped NCCL, P2P copies, idle gaps of each cause",
        Scenario(
            name="run2",
            seed=2,
            ranks=2,
            steps=3,
            kernels_per_step=40,
            modules=4,
            comm_overlap=("partial",),
            p2p_per_step=1,
            clock_skew_ns=300_000,
            gaps=(
                PlantedGap(0, 1, "host_bound", 150_000),
                PlantedGap(1, 1, "sync", 120_000),
                PlantedGap(0, 2, "other", 90_000, phase="backward", module=2),
                PlantedGap(1, 2, "host_bound", 80_000, phase="backward", module=1),
            ),
        ),
    ),
    "run4_straggler": (
        "4 ranks on 2 nodes, clock offsets of a few ms, rank 2 slow in data_loading",
        Scenario(
            name="run4_straggler",
            seed=4,
            ranks=4,
            ranks_per_node=2,
            steps=10,
            kernels_per_step=30,
            modules=4,
            comm_overlap=("hidden",),
            clock_error_ns=(1_200_000, -2_300_000, 3_100_000, -700_000),
            straggler=Straggler(rank=2, phase="data_loading", extra_ns=400_000),
        ),
    ),
    "edge_cases": (
        "1 rank: nested kernels on side streams, back-to-back and zero-length kernels, "
        "NCCL fully hidden / fully exposed / on the compute stream",
        Scenario(
            name="edge_cases",
            seed=7,
            ranks=1,
            steps=4,
            kernels_per_step=48,
            modules=4,
            side_streams=2,
            side_kernel_every=3,
            zero_length_every=7,
            back_to_back_every=2,
            comm_overlap=("hidden", "exposed", "same_stream", "partial"),
            h2d_per_step=2,
            gaps=(PlantedGap(0, 3, "other", 60_000, module=2),),
        ),
    ),
    "mismatch": (
        "2 ranks; rank 1 issues an extra all_reduce at the end of step 1",
        Scenario(
            name="mismatch",
            seed=5,
            ranks=2,
            steps=4,
            kernels_per_step=40,
            modules=4,
            extra_collectives=(ExtraCollective(rank=1, step=1, op="all_reduce", bytes=8),),
        ),
    ),
    "hybrid8": (
        "8 ranks on 2 hosts, TP groups of 4 in each host and DP pairs across them, one clock "
        "per host (node1's 3.1 ms off, drifting 40 ppm), backward on an autograd thread, rank 6 "
        "slow in backward in steps 2, 3, 5 and 7; collectives end at one instant on all members",
        Scenario(
            name="hybrid8",
            seed=12,
            ranks=8,
            ranks_per_node=4,
            tp=4,
            steps=9,
            kernels_per_step=30,
            modules=4,
            comm_overlap=("partial",),
            data_loading_ns=30_000_000,
            clock_error_ns=(0, 0, 0, 0, 3_100_000, 3_100_000, 3_100_000, 3_100_000),
            clock_drift_ppm=(0, 0, 0, 0, 40, 40, 40, 40),
            autograd_thread=True,
            end_jitter_ns=0,
            straggler=Straggler(rank=6, phase="backward", extra_ns=1_000_000, steps=(2, 3, 5, 7)),
        ),
    ),
    "dp_straggler": (
        "4 data-parallel ranks doing the same work, rank 1 slow in data_loading in every step; "
        "collectives end at one instant on all members (the planted gain is exact: see README)",
        Scenario(
            name="dp_straggler",
            seed=21,
            ranks=4,
            ranks_per_node=2,
            steps=8,
            kernels_per_step=30,
            modules=4,
            comm_overlap=("hidden", "partial", "exposed"),
            clock_skew_ns=1_500_000,
            end_jitter_ns=0,
            same_work=True,
            straggler=Straggler(rank=1, phase="data_loading", extra_ns=500_000),
        ),
    ),
    "intermittent": (
        "8 FSDP-like ranks on 2 hosts doing the same work; data loading stalls 1.5 ms on rank 3 in "
        "step 2, rank 6 in step 4, rank 1 in step 7 and rank 4 in step 8",
        Scenario(
            name="intermittent",
            seed=22,
            ranks=8,
            ranks_per_node=4,
            steps=10,
            kernels_per_step=30,
            modules=4,
            comm_overlap=("partial",),
            clock_skew_ns=1_500_000,
            end_jitter_ns=0,
            same_work=True,
            fsdp=True,
            stalls=tuple(
                Straggler(rank=r, phase="data_loading", extra_ns=1_500_000, steps=(s,))
                for r, s in ((3, 2), (6, 4), (1, 7), (4, 8))
            ),
        ),
    ),
    "moe8": (
        "MoE: 8 ranks on 2 hosts, one expert each, all_to_all dispatch/combine (NCCL SendRecv "
        "kernels, unequal per-peer sizes), the expert on rank 6 hot (3x its routing weight), a "
        "dense all_reduce per layer on its own stream; node1's clock 37.4 ms off and drifting 25 "
        "ppm; coll: ranges",
        MOE8,
    ),
    "moe8_kernels": (
        "moe8 without nsyswrap's coll: ranges (NCCL kernels only)",
        MOE8.replace(name="moe8_kernels", coll_ranges=False),
    ),
    "moe8_same_work": (
        "moe8 with every rank drawing the same work, even routing apart from the hot expert "
        "(imbalance 0) and clocks that do not drift: the replay's assumptions hold, its gains "
        "equal the planted",
        MOE8.replace(
            name="moe8_same_work",
            same_work=True,
            moe=MoE(imbalance=0.0),
            clock_drift_ppm=(0,) * 8,
        ),
    ),
    "pipeline8": (
        "pipeline: 4 stages x 2 data-parallel replicas, one per host (ranks 0-3 on node0), 1F1B "
        "over 8 microbatches, send/recv kernels on one stream per peer, stage 2 slow (+60 us per "
        "microbatch forward, +120 us backward), each stage's DP all_reduce once per step; node1's "
        "clock 21 ms off, drifting -30 ppm; NCCL kernels only",
        PIPELINE8,
    ),
    "pipeline8_same_work": (
        "pipeline8 with every rank drawing the same work and clocks that do not drift: the "
        "replay's assumptions hold, its gains equal the planted",
        PIPELINE8.replace(name="pipeline8_same_work", same_work=True, clock_drift_ppm=(0,) * 8),
    ),
    "clock_jump8": (
        "8 data-parallel ranks on 2 hosts (node1's clock 5 ms off, drifting 20 ppm), node1's clock "
        "steps +2 ms when its first rank starts step 6 of 12; rank 2 slow in data_loading",
        Scenario(
            name="clock_jump8",
            seed=41,
            ranks=8,
            ranks_per_node=4,
            steps=12,
            kernels_per_step=24,
            modules=4,
            comm_overlap=("partial",),
            data_loading_ns=30_000_000,
            end_jitter_ns=0,
            clock_error_ns=tuple(5_000_000 * k for k in NODE1_LATE),
            clock_drift_ppm=tuple(20 * k for k in NODE1_LATE),
            clock_jump=ClockJump(node=1, step=6, size_ns=2_000_000),
            straggler=Straggler(rank=2, phase="data_loading", extra_ns=300_000),
        ),
    ),
    "stream_wait": (
        "2 ranks; rank 0 idles 150 us in step 1 behind a cudaStreamWaitEvent the driver holds "
        "(host-bound: the GPU waits for nothing), rank 1 120 us host-bound in step 2",
        Scenario(
            name="stream_wait",
            seed=51,
            ranks=2,
            steps=3,
            kernels_per_step=30,
            modules=4,
            gaps=(
                PlantedGap(0, 1, "stream_wait", 150_000),
                PlantedGap(1, 2, "host_bound", 120_000),
            ),
        ),
    ),
    "dp6_lag": (
        "6 steps of 4 data-parallel ranks on 2 nodes, one all-reduce per step after backward, "
        "every duration fixed (only the start-up differs); rank 2 spends 3.00 ms longer in "
        "data_loading every step: it arrives 3.00 ms after the others at every all-reduce",
        Scenario(
            name="dp6_lag",
            seed=61,
            ranks=4,
            ranks_per_node=2,
            steps=6,
            kernels_per_step=24,
            modules=4,
            collectives_per_step=1,
            comm_overlap=("exposed",),
            compute_ns=(30_000, 30_000),
            gpu_gap_ns=(1_000, 1_000),
            launch_api_ns=(5_000, 5_000),
            host_gap_ns=(2_000, 2_000),
            end_jitter_ns=0,
            clock_error_ns=(0, 0, 2_500_000, 2_500_000),
            straggler=Straggler(rank=2, phase="data_loading", extra_ns=3_000_000),
        ),
    ),
    "long_wait": (
        "4 data-parallel ranks; rank 3 stalls 3.2 s in data_loading of step 2 (a checkpoint "
        "write): the others wait more than 3 s in its first all-reduce",
        Scenario(
            name="long_wait",
            seed=71,
            ranks=4,
            ranks_per_node=2,
            steps=4,
            kernels_per_step=24,
            modules=4,
            straggler=Straggler(rank=3, phase="data_loading", extra_ns=3_200_000_000, steps=(2,)),
        ),
    ),
    "bench": (
        "8 ranks x 1000 steps x 1000 kernels "
        "(~1 M kernels, 1 M launches, 100 k NVTX ranges per rank)",
        BENCH,
    ),
    "bench_launch_bound": (
        "bench launch-bound, as eager PyTorch is: every kernel (2-8 us) launched just before "
        "it runs (4-7 us of launch call and a 5-9 us host gap before each), no synchronising "
        "call",
        BENCH_PACED.replace(
            name="bench_launch_bound",
            compute_ns=(2_000, 8_000),
            launch_api_ns=(4_000, 7_000),
            host_gap_ns=(5_000, 9_000),
            step_sync=False,
        ),
    ),
    "bench_host_paced": (
        "bench host-paced: 2 ms of data loading on the host each step (the GPU idle), "
        "kernels (3-12 us) about as long as their launches (3-8 us call, 2-10 us gap: some "
        "queue, most start at their launch), a synchronising call ending each step",
        BENCH_PACED.replace(
            name="bench_host_paced",
            compute_ns=(3_000, 12_000),
            launch_api_ns=(3_000, 8_000),
            host_gap_ns=(2_000, 10_000),
            data_loading_ns=2_000_000,
        ),
    ),
    # the fault halves of the fault pairs (nsyswrap.synth.pair_scenarios)
    **{name: (f"fault pair: {pair.about}", pair.fault) for name, pair in PAIRS.items()},
}


def preset(
    name: str,
    *,
    ranks: int | None = None,
    steps: int | None = None,
    kernels_per_step: int | None = None,
    seed: int | None = None,
) -> Scenario:
    """The named scenario, optionally resized; planted items outside the new size are dropped."""
    if name not in PRESETS:
        raise NsysWrapError(None, f"no scenario named {name!r}", f"use one of {', '.join(PRESETS)}")
    sc = PRESETS[name][1]
    changes = {
        k: v
        for k, v in (
            ("ranks", ranks),
            ("steps", steps),
            ("kernels_per_step", kernels_per_step),
            ("seed", seed),
        )
        if v is not None
    }
    if not changes:
        return sc
    sc = sc.replace(**changes)
    errors = sc.clock_error_ns
    if errors is not None and len(errors) != sc.ranks:
        sc = sc.replace(clock_error_ns=None, clock_skew_ns=max(abs(e) for e in errors))
    nodes = (sc.ranks - 1) // sc.ranks_per_node + 1
    return sc.replace(
        gaps=tuple(g for g in sc.gaps if g.rank < sc.ranks and g.step < sc.steps),
        extra_collectives=tuple(
            x for x in sc.extra_collectives if x.rank < sc.ranks and x.step < sc.steps
        ),
        straggler=sc.straggler if sc.straggler and sc.straggler.rank < sc.ranks else None,
        stalls=tuple(x for x in sc.stalls if x.rank < sc.ranks),
        pauses=tuple(p for p in sc.pauses if p.rank < sc.ranks and p.step < sc.steps),
        slow_attention=(
            sc.slow_attention if sc.slow_attention and sc.slow_attention.rank < sc.ranks else None
        ),
        slow_link=sc.slow_link if sc.slow_link and sc.slow_link.node < nodes > 1 else None,
        hot_expert=sc.hot_expert if sc.hot_expert and sc.hot_expert.rank < sc.ranks else None,
        clock_jump=sc.clock_jump if sc.clock_jump and sc.clock_jump.step < sc.steps else None,
        clock_drift_ppm=sc.clock_drift_ppm if len(sc.clock_drift_ppm or ()) == sc.ranks else None,
    )


def load_scenario(
    name_or_file: str,
    *,
    ranks: int | None = None,
    steps: int | None = None,
    kernels_per_step: int | None = None,
    seed: int | None = None,
) -> Scenario:
    """A preset by name, or a scenario ``.json`` file (a Scenario dict or a truth.json)."""
    sizes = {"ranks": ranks, "steps": steps, "kernels_per_step": kernels_per_step, "seed": seed}
    if not name_or_file.endswith(".json"):
        return preset(name_or_file, **sizes)
    path = Path(name_or_file)
    if not path.is_file():
        raise NsysWrapError(path, "does not exist", "give a scenario JSON file or a preset name")
    fix = "give a truth.json nsyswrap generate wrote, or a scenario as a JSON object"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, RecursionError) as exc:  # (RecursionError: nested too deep)
        raise NsysWrapError(path, f"is not JSON ({exc})", fix) from None
    data = data.get("scenario", data) if isinstance(data, dict) else data
    if not isinstance(data, dict):
        raise NsysWrapError(path, "is not a scenario (a JSON object)", fix)
    sc = Scenario.from_dict(data)
    return sc.replace(**{k: v for k, v in sizes.items() if v is not None})
