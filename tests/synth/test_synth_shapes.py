"""The generator's MoE, pipeline, clock-jump, stream-wait, lag and long-wait scenarios: their
physics and planted truth, by the generator's own code (nsyswrap.synth), no analysis."""

from __future__ import annotations

import dataclasses
import json
import sqlite3

import numpy as np
import pytest

from nsyswrap.synth import Scenario, preset
from nsyswrap.synth.catalog import API_INDEX
from nsyswrap.synth.lockstep import Links, exchange_ends
from nsyswrap.synth.moe import routing
from nsyswrap.synth.simulate import simulate

SHAPES = (
    "moe8",
    "moe8_kernels",
    "moe8_same_work",
    "pipeline8",
    "pipeline8_same_work",
    "clock_jump8",
    "stream_wait",
    "dp6_lag",
    "long_wait",
    "bench_launch_bound",
    "bench_host_paced",
)
STREAM_SYNC = API_INDEX["cudaStreamSynchronize_v3020"]
PLANTS = {
    "moe8": "hot_expert",
    "pipeline8": "slow_stage",
    "dp6_lag": "straggler",
    "clock_jump8": "straggler",
}


@pytest.fixture(scope="module")
def runs(generated_run):
    return {
        name: generated_run(preset(name, steps=min(preset(name).steps, 4)))[0]
        for name in ("moe8", "pipeline8")
    }


@pytest.mark.parametrize("name", SHAPES)
def test_scenario_round_trips_through_json(name):
    for sc in (preset(name), preset(name).unplanted()):
        assert Scenario.from_dict(json.loads(json.dumps(sc.to_dict()))) == sc


def test_barriers_end_together_exchanges_end_apart(runs):
    for truth in runs.values():
        for c in truth.collectives:  # all_reduce: one instant on all members (end_jitter_ns 0)
            assert len({r["end_aligned_ns"] for r in c["per_rank"]}) == 1
        for c in truth.exchanges:
            ends = [r["end_aligned_ns"] for r in c["per_rank"]]
            if c["ops"] == ["recv", "send"]:  # the receiver a link latency after the sender
                assert max(ends) - min(ends) in (3_000, 10_000)
            elif c["ops"] == ["all_to_all"]:  # each when its own transfers are done
                assert max(ends) - min(ends) > 1_000
            starts = [r["start_aligned_ns"] for r in c["per_rank"]]
            assert c["skew_ns"] == max(starts) - min(starts)
            for r in c["per_rank"]:
                assert (
                    r["wait_ns"] + r["transfer_ns"] == r["end_aligned_ns"] - r["start_aligned_ns"]
                )
                assert r["wait_ns"] == min(max(starts), r["end_aligned_ns"]) - r["start_aligned_ns"]


def test_moe_all_to_all_sizes_differ_and_the_hot_expert_gets_most():
    sc = preset("moe8")
    tokens = routing(sc, 0, 0)
    assert (tokens.sum(axis=1) == sc.moe.tokens).all()  # every token routed once
    received = tokens.sum(axis=0)
    assert received.argmax() == sc.hot_expert.rank and received[6] > 2 * np.median(received)
    assert len(set(tokens.ravel().tolist())) > 30  # unequal per-peer sizes
    cold = routing(sc.replace(hot_expert=None), 0, 0).sum(axis=0)
    assert received[6] > 2 * cold[6]


def test_moe_the_hot_expert_imposes_most_of_the_wait(runs):
    truth = runs["moe8"]
    waits = {}
    for c in truth.exchanges + truth.collectives:
        waits[c["last_rank"]] = waits.get(c["last_rank"], 0) + sum(
            r["wait_ns"] for r in c["per_rank"]
        )
    assert max(waits, key=waits.get) == 6 and waits[6] > 0.5 * sum(waits.values())


def test_pipeline_channels_pair_stages_and_dp_groups_run_once_per_step(runs):
    truth = runs["pipeline8"]
    sc = preset("pipeline8", steps=4)
    for c in truth.exchanges:
        assert sorted(r["rank"] for r in c["per_rank"]) == sc.group_members(c["pg"])
        assert abs(c["per_rank"][0]["rank"] - c["per_rank"][1]["rank"]) == 1  # neighbour stages
    dp = {}
    for c in truth.collectives:
        dp.setdefault(c["pg"], []).append(c["seq"])
    assert {pg: sc.group_members(pg) for pg in dp} == {
        100: [0, 4],  # the stage's two replicas, one on each host
        101: [1, 5],
        102: [2, 6],
        103: [3, 7],
    }
    assert all(seqs == list(range(sc.steps)) for seqs in dp.values())


@pytest.mark.parametrize("name", sorted(PLANTS))
def test_a_plant_removed_keeps_every_random_draw(name):
    """#22's planted gain: the same scenario without its plant differs by the plant alone
    (both baselines of a hot expert: its rank doing the median expert's work, and balanced
    routing)."""
    sc = preset(name, steps=3)
    a, b = simulate(sc), simulate(dataclasses.replace(sc, **{PLANTS[name]: None}))
    if name == "moe8":  # ranks other than the hot expert's keep their compute kernels
        c = simulate(sc.unplanted())
        for ta, tc in zip(a.traces, c.traces):
            dur = [np.subtract(t.k_end, t.k_start) for t in (ta, tc)]
            compute = [i for i, k in enumerate(ta.k_type) if not ta.kernel_types[k].is_nccl]
            assert np.array_equal(dur[0][compute], dur[1][compute]) is (ta.rank != 6)
    for ta, tb in zip(a.traces, b.traces):
        assert list(ta.r_api) == list(tb.r_api) and list(ta.k_type) == list(
            tb.k_type
        )  # the same calls
        drawn = np.array(ta.r_api) != STREAM_SYNC  # a sync call lasts until its stream drained
        assert np.array_equal(
            np.subtract(ta.r_end, ta.r_start)[drawn], np.subtract(tb.r_end, tb.r_start)[drawn]
        )
    if name == "pipeline8":  # stages other than the slow one keep their kernel durations
        dur = [np.subtract(t.k_end, t.k_start) for t in (a.traces[0], b.traces[0])]
        compute = [
            i for i, k in enumerate(a.traces[0].k_type) if not a.traces[0].kernel_types[k].is_nccl
        ]
        assert np.array_equal(dur[0][compute], dur[1][compute])


def test_exchange_ends_by_hand():
    links = Links(lambda r: r // 2, (100, 10), (1_000, 5_000))
    # rank 0 -> 1 (same node) 10_000 bytes, 1 -> 2 (across) 10_000; 2 sends nothing
    ends = exchange_ends({0: 0, 1: 50, 2: 10_000}, {0: {1: 10_000}, 1: {2: 10_000}, 2: {}}, links)
    # at least a handshake (the lower latency) after arriving; 0 -> 1 pushed by 150,
    # 1 -> 2 by 11_000
    assert ends == {0: 1_000, 1: 10_000 + 1_000, 2: 10_000 + 1_000 + 5_000}


def test_clock_jump_is_planted_on_one_host(generated_run):
    truth, out = generated_run("clock_jump8")
    (jump,) = truth.clock_jumps
    assert (jump["node"], jump["host"], jump["ranks"], jump["size_ns"]) == (
        1,
        "node1",
        [4, 5, 6, 7],
        2_000_000,
    )
    for at in jump[
        "at_session_ns"
    ]:  # NCCL kernels after the jump read 2 ms later than the truth's times
        con = sqlite3.connect(out / f"rank{at['rank']}.sqlite")
        ((before,),) = con.execute(
            "SELECT max(start) FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE start < ?", (at["session_ns"],)
        )
        ((after,),) = con.execute(
            "SELECT min(start) FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE start >= ?",
            (at["session_ns"],),
        )
        assert after - before > 2_000_000


def test_stream_wait_gap_is_host_bound_under_a_stream_wait_row(generated_run):
    truth, out = generated_run("stream_wait")
    gap = next(g for g in truth.idle_gaps if g["planted"] and g["rank"] == 0)
    assert gap["cause"] == "host_bound"
    con = sqlite3.connect(out / "rank0.sqlite")
    ((covered,),) = con.execute(
        """SELECT sum(min("end", ?) - max(start, ?)) FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION
        WHERE syncType = 2 AND "end" > ? AND start < ?""",
        (gap["end_ns"], gap["start_ns"], gap["start_ns"], gap["end_ns"]),
    )
    assert 2 * covered >= gap["dur_ns"]


def test_lag_and_long_wait_plants(generated_run):
    lag, _ = generated_run("dp6_lag")
    assert [c["last_rank"] for c in lag.collectives] == [2] * 6
    for c in lag.collectives[1:]:  # after the first (start-up skew): the others wait 3.00 ms each
        assert sorted(r["wait_ns"] for r in c["per_rank"]) == [0, 3_000_000, 3_000_000, 3_000_000]
    long, _ = generated_run("long_wait")
    assert max(r["wait_ns"] for c in long.collectives for r in c["per_rank"]) > 3 * 10**9


def _launch_to_start(sim, rank: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Per compute kernel of ``rank``: its start minus its launch call's start, and the idle
    time of its stream before it."""
    tr = sim.traces[rank]
    start, end = np.asarray(tr.k_start), np.asarray(tr.k_end)
    compute = np.flatnonzero([not tr.kernel_types[t].is_nccl for t in tr.k_type])
    launch = np.asarray(tr.r_start)[np.asarray(tr.k_corr)[compute] - 1]
    idle = start[compute][1:] - end[compute][:-1]
    return start[compute] - launch, idle


@pytest.mark.parametrize("name", ["bench_launch_bound", "bench_host_paced"])
def test_the_host_paced_bench_shapes(name):
    """#37's shapes at bench size (8 ranks x ~1 M kernels each); checked on 3 steps:
    launch-bound, almost every kernel starts at its launch (+ the launch latency) after the
    stream idled, and no call synchronises; host-paced, most do, and a stream sync ends
    each step."""
    sc = preset(name)
    assert sc.ranks == 8 and sc.kernels_per_step * sc.steps == 1_000_000
    sim = simulate(preset(name, steps=3))
    delay, idle = _launch_to_start(sim)
    at_launch = np.mean(delay == sc.launch_latency_ns)
    syncs = [np.count_nonzero(np.asarray(tr.r_api) == STREAM_SYNC) for tr in sim.traces]
    if name == "bench_launch_bound":
        assert at_launch > 0.95 and np.mean(idle > 0) > 0.95 and syncs == [0] * 8
    else:
        assert 0.5 < at_launch < 0.9 and syncs == [3] * 8
