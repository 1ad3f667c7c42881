"""The generator's fault pairs (nsyswrap.synth.pairs, .pair_scenarios): each fault half and
its fixed half, same seed, simulated by the generator itself; their truth is consistent
and each fault is where its truth says. No analysis: the replay's tests use these."""

from __future__ import annotations

import json
import sqlite3

import numpy as np
import pytest

from nsyswrap.errors import NsysWrapError
from nsyswrap.synth import Scenario, Truth, preset
from nsyswrap.synth.catalog import API_INDEX
from nsyswrap.synth.pair_scenarios import PAIRS
from nsyswrap.synth.pairs import HALVES, pair_scenarios, simulate_pair, write_fault_pair
from nsyswrap.synth.program import AUTOGRAD_TID_OFFSET

STREAM_SYNC = API_INDEX["cudaStreamSynchronize_v3020"]


@pytest.fixture(scope="module")
def pairs():
    """name -> simulate_pair(name): both halves simulated once, nothing written."""
    return {name: simulate_pair(name) for name in PAIRS}


def _compute(tr) -> np.ndarray:
    """Indices of the trace's compute (non-NCCL) kernels."""
    return np.flatnonzero([not tr.kernel_types[t].is_nccl for t in tr.k_type])


def _durations(tr) -> np.ndarray:
    return np.subtract(tr.k_end, tr.k_start)


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_both_halves_round_trip_and_the_fault_is_a_preset(name):
    fault, fixed = pair_scenarios(name)
    assert fault == preset(name) and fault.has_plant() and fixed != fault
    for sc in (fault, fixed):
        assert Scenario.from_dict(json.loads(json.dumps(sc.to_dict()))) == sc
    assert fixed.seed == fault.seed


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_the_halves_make_the_same_calls_with_the_same_draws(name, pairs):
    """The fixed half differs from the fault half by the fault alone: the same calls and
    kernels, every drawn API call duration the same (a blocking call lasts until what it
    waits for), the compute kernels the same but where the fault slows them."""
    fault, fixed = (pairs[name][half][0] for half in HALVES)
    slowed = set()  # the ranks whose compute kernels the fault makes longer
    for p in pairs[name]["pair"]["fault"]["plants"]:
        if p.get("where") == "gpu" or p["kind"] == "slow_attention":
            slowed.add(p["rank"])
        slowed.update(p["ranks"] if p["kind"] == "slow_stage" else ())
    for a, b in zip(fault.traces, fixed.traces):
        assert list(a.r_api) == list(b.r_api) and list(a.k_type) == list(b.k_type)
        drawn = np.asarray(a.r_api) != STREAM_SYNC
        assert np.array_equal(
            np.subtract(a.r_end, a.r_start)[drawn], np.subtract(b.r_end, b.r_start)[drawn]
        )
        compute = _compute(a)
        same = np.array_equal(_durations(a)[compute], _durations(b)[compute])
        assert same is (a.rank not in slowed)


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_the_pair_truth_adds_up(name, pairs):
    """Per step, fault - fixed is the difference; the whole run is the sum of the steps;
    both halves hold the same pair truth; a fix that removes the plant is the planted gain."""
    pair = pairs[name]
    times = pair["pair"]["step_times"]
    fault_truth: Truth = pair["fault"][1]
    assert len(times["steps"]) == fault_truth.scenario["steps"]
    for row in times["steps"]:
        assert row["difference_ns"] == row["fault_ns"] - row["fixed_ns"]
    for key in ("fault", "fixed", "difference"):
        assert times[f"{key}_run_ns"] == sum(r[f"{key}_ns"] for r in times["steps"])
    assert times["difference_per_step_ns"] == times["difference_run_ns"] / len(times["steps"])
    for half in HALVES:
        assert pair[half][1].pair == {**pair["pair"], "half": half}
    fault, fixed = pair_scenarios(name)
    if fixed == fault.unplanted():
        gain = fault_truth.planted_gain["steps"]
        assert [g["gain_ns"] for g in gain] == [r["difference_ns"] for r in times["steps"]]
    json.dumps(fault_truth.to_dict())  # plain values only


@pytest.mark.parametrize("name", ["host_paced_tpdp", "host_paced_tpdp_kernels"])
def test_host_paced_slack_absorbs_the_slow_forward(name, pairs):
    """Rank 5's forward kernels are 2 ms longer in steps 3-6 (spread over its kernels), yet
    no step is longer: the host sets the pace, every call of every host (stream syncs
    too) starts and ends as without the fault."""
    pair = pairs[name]
    fault, fixed = (pair[half][0] for half in HALVES)
    assert pair["pair"]["fault"]["rank_steps"] == [[5, s] for s in (3, 4, 5, 6)]
    assert all(r["difference_ns"] == 0 for r in pair["pair"]["step_times"]["steps"])
    a, b = fault.traces[5], fixed.traces[5]
    compute = _compute(a)
    extra = (_durations(a) - _durations(b))[compute]
    for step, start, end in a.steps:
        inside = (np.asarray(a.k_start)[compute] >= start) & (np.asarray(a.k_start)[compute] < end)
        assert extra[inside].sum() == (2_000_000 if step in (3, 4, 5, 6) else 0)
    for a, b in zip(fault.traces, fixed.traces):
        assert np.count_nonzero(np.asarray(a.r_api) == STREAM_SYNC) == len(a.steps)
        assert a.r_start == b.r_start and a.r_end == b.r_end
    assert [h["kind"] for h in pair["pair"]["hidden"]] == ["autograd_join"]


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_hidden_autograd_joins_are_where_the_main_thread_waits(name, pairs):
    """Backward runs on the autograd thread in every pair (as in PyTorch): one join per
    backward call (a step's, or a pipeline microbatch's), where the main thread resumes
    after the autograd thread's last call with no call between; the main thread makes
    no call while backward runs."""
    sim, truth = pairs[name]["fault"]
    sc = sim.scenario
    assert sc.autograd_thread
    calls = sc.pipeline.microbatches * sc.pipeline.chunks if sc.pipeline else 1
    for tr in sim.traces:
        joins = [h for h in truth.hidden if h["rank"] == tr.rank and h["kind"] == "autograd_join"]
        assert [h["step"] for h in joins] == [s for s in range(sc.steps) for _ in range(calls)]
        starts = np.asarray(tr.r_start) - tr.session_start
        main = np.asarray(tr.r_tid) != tr.pid + AUTOGRAD_TID_OFFSET
        for h in joins:
            assert not ((starts > h["start_ns"]) & (starts < h["end_ns"])).any()
            assert h["end_ns"] - h["start_ns"] < 100_000
        backward = [(s, e) for (s, e, text, _) in tr.nvtx if text == "backward"]
        for s, e in backward:
            on_main = main & (starts > s - tr.session_start) & (starts < e - tr.session_start)
            assert not on_main.any()


def test_the_cli_writes_both_halves(tmp_path, cli):
    code, out, _ = cli("generate", "--pair", "host_paced_tpdp", tmp_path, "--steps", "3")
    assert code == 0 and "0.000 ms per step faster" in out
    for half in HALVES:
        truth = Truth.load(tmp_path / half / "truth.json")
        assert truth.pair["half"] == half and len(truth.pair["step_times"]["steps"]) == 3
        assert len(list((tmp_path / half).glob("rank*.sqlite"))) == 8
    code, _, err = cli("generate", "--pair", "run2", tmp_path / "x")
    assert code == 1 and "no fault pair named 'run2'" in err


def test_nccl_on_compute_queues_every_bucket_on_the_compute_stream(pairs):
    """Each bucket's all-reduce is an NCCL kernel on the null (compute) stream between
    backward's kernels; rank 2's backward kernels take 250 us more per step, which costs
    every step something and never more than those 250 us; the hidden joins are stream
    order and the autograd thread's."""
    pair = pairs["nccl_on_compute"]
    fault, fixed = (pair[half][0] for half in HALVES)
    for tr in fault.traces:
        nccl = [i for i, t in enumerate(tr.k_type) if tr.kernel_types[t].is_nccl]
        assert len(nccl) == 3 * len(tr.steps)
        assert {tr.streams[tr.k_stream[i]].flag for i in nccl} == {3}  # the null stream
    compute = _compute(fault.traces[2])
    extra = (_durations(fault.traces[2]) - _durations(fixed.traces[2]))[compute]
    assert extra.sum() == 250_000 * len(fault.traces[2].steps)
    steps = pair["pair"]["step_times"]["steps"]
    assert all(0 < r["difference_ns"] <= 250_000 for r in steps)
    assert [h["kind"] for h in pair["pair"]["hidden"]] == ["autograd_join", "stream_order"]


@pytest.mark.parametrize("name", ["jit_no_sync", "jit_no_sync_removed"])
def test_jit_launches_with_a_wait_no_call_records(name, pairs):
    """No stream sync anywhere; most kernels start at their launch (+ the latency); rank 2
    arrives last at every all_reduce, the others wait about 3 ms; at the end of each step
    each host idles without a call until its GPU drained (+ sync_wake_ns), as truth's
    hidden[] says; the loader 2 ms faster saves 2 ms in every step, removed up to 3."""
    pair = pairs[name]
    sim, truth = pair["fault"]
    sc = sim.scenario
    for tr in sim.traces:
        assert STREAM_SYNC not in tr.r_api
        compute = _compute(tr)
        launch = np.asarray(tr.r_start)[np.asarray(tr.k_corr)[compute] - 1]
        assert np.mean(np.asarray(tr.k_start)[compute] - launch == sc.launch_latency_ns) > 0.85
        waits = [h for h in truth.hidden if h["rank"] == tr.rank and h["kind"] != "autograd_join"]
        assert [(h["kind"], h["step"]) for h in waits] == [
            ("unrecorded_wait", s) for s in range(sc.steps)
        ]
        starts = np.asarray(tr.r_start) - tr.session_start
        ends = np.asarray(tr.k_end) - tr.session_start
        for h in waits:
            assert not ((starts >= h["start_ns"]) & (starts < h["end_ns"])).any()
            assert h["completion_ns"] == ends[ends <= h["completion_ns"]].max()
            assert h["end_ns"] == max(h["start_ns"], h["completion_ns"] + sc.sync_wake_ns)
    for c in truth.collectives:
        assert c["last_rank"] == 2
        assert all(r["wait_ns"] > 2_700_000 for r in c["per_rank"] if r["rank"] != 2)
    diff = [r["difference_ns"] for r in pair["pair"]["step_times"]["steps"]]
    if name == "jit_no_sync":
        assert diff == [2_000_000] * sc.steps
    else:
        assert all(2_700_000 < d <= 3_000_000 for d in diff)
    assert [h["kind"] for h in pair["pair"]["hidden"]] == ["autograd_join", "unrecorded_wait"]


@pytest.mark.parametrize("name", ["moving_pauses", "moving_pauses_late"])
def test_moving_pauses_happen_exactly_where_truth_says(name, pairs):
    """Each planted pause is one stretch of its rank's host with no call, inside forward of
    its step, as long as planted; only the paused steps are longer than without them; the
    pair's rank_steps are the paused (rank, step) pairs (the last two steps in _late)."""
    pair = pairs[name]
    sim, truth = pair["fault"]
    planted = sorted((p.rank, p.step, p.dur_ns) for p in sim.scenario.pauses)
    assert sorted((p["rank"], p["step"], p["end_ns"] - p["start_ns"]) for p in truth.pauses) == (
        planted
    )
    assert 3 <= len(planted) <= 10 and len({r for r, _, _ in planted}) > 2  # it moves
    assert pair["pair"]["fault"]["rank_steps"] == sorted([r, s] for r, s, _ in planted)
    for p in truth.pauses:
        tr = sim.traces[p["rank"]]
        starts = np.asarray(tr.r_start) - tr.session_start
        assert not ((starts >= p["start_ns"]) & (starts < p["end_ns"])).any()
        forward = [
            (s - tr.session_start, e - tr.session_start)
            for s, e, text, _ in tr.nvtx
            if text == "forward"
        ][p["step"]]
        assert forward[0] < p["start_ns"] < p["end_ns"] < forward[1]
    paused = {s for _, s, _ in planted}
    for row in pair["pair"]["step_times"]["steps"]:
        if row["step"] in paused:
            assert 20_000_000 < row["difference_ns"] <= 35_000_000
        else:
            assert row["difference_ns"] == 0
    if name == "moving_pauses_late":
        assert {18, 19} <= paused


def test_the_slow_nic_slows_only_transfers_across_the_hosts(pairs):
    """Each all-reduce whose group spans both hosts (the DP pairs) transfers 3x as long
    as without the slow NIC (ring_transfer_ns x 3, rounded up), each inside a host (the TP
    groups) exactly as long; no kernel computes slower (the same-draws test); every step
    is longer."""
    pair = pairs["slow_nic"]
    (fault, ft), (fixed, xt) = (pair[half] for half in HALVES)
    sc = fault.scenario
    across = inside = 0
    for a, b in zip(fault.collectives, fixed.collectives):
        assert (a.pg, a.seq) == (b.pg, b.seq)
        hosts = {r // sc.ranks_per_node for r in sc.group_members(a.pg)}
        if len(hosts) > 1:
            assert a.transfer == -(-b.transfer * 3 // 1) and b.transfer > 0
            across += 1
        else:
            assert a.transfer == b.transfer
            inside += 1
    assert across == 3 * sc.steps * 4  # 3 buckets of each of the 4 DP pairs a step
    assert inside == 6 * sc.steps * 2  # after each of 6 modules in each TP group
    (link,) = pair["pair"]["fault"]["plants"]
    assert link["links"] == [["node0", "node1"]] and link["ranks_behind_it"] == [4, 5, 6, 7]
    assert link["bytes_per_ns"]["slow_link"] == link["bytes_per_ns"]["across"] / 3
    assert pair["pair"]["fault"]["ranks"] == [] and pair["pair"]["fault"]["rank_steps"] == []
    assert all(r["difference_ns"] > 1_000_000 for r in pair["pair"]["step_times"]["steps"])


@pytest.mark.parametrize(
    "name, across", [("pipeline_across_hosts", "p2p"), ("pipeline_replicas_across_hosts", "dp")]
)
def test_pipeline_layouts_put_only_their_groups_across_the_hosts(name, across, pairs):
    """Megatron's layout (stage-major): each stage's DP all-reduce inside a host, only the
    stage 1 -> 2 send/recv across; the other layout: DP all-reduces across, send/recv
    inside. Stage 2's forward kernels take 300 us more per microbatch, its backward's
    none; every step is longer."""
    pair = pairs[name]
    (fault, ft), (fixed, _) = (pair[half] for half in HALVES)
    sc = fault.scenario
    host = {r: r // sc.ranks_per_node for r in range(sc.ranks)}
    crossing = {"p2p": set(), "dp": set()}
    for c in ft.collectives + ft.exchanges:
        ranks = [r["rank"] for r in c["per_rank"]]
        if len({host[r] for r in ranks}) > 1:
            crossing["dp" if c in ft.collectives else "p2p"].add(tuple(sorted(ranks)))
    if across == "p2p":
        assert crossing == {"p2p": {(2, 4), (3, 5)}, "dp": set()}  # stage 1 -> 2
    else:
        assert crossing == {"p2p": set(), "dp": {(0, 4), (1, 5), (2, 6), (3, 7)}}
    assert pair["pair"]["fault"]["ranks"] == [r for r in range(8) if sc.stage_of(r) == 2]
    for rank in range(8):
        a, b = fault.traces[rank], fixed.traces[rank]
        extra = (_durations(a) - _durations(b))[_compute(a)]
        # forward only: with backward's (twice as much) it would be three times this
        slow = 300_000 * sc.pipeline.microbatches * sc.steps if sc.stage_of(rank) == 2 else 0
        assert extra.sum() == slow and extra.min() >= 0
    assert all(r["difference_ns"] > 1_500_000 for r in pair["pair"]["step_times"]["steps"])


@pytest.mark.parametrize("name", ["ring_attention", "ring_attention_forward"])
def test_the_ring_passes_blocks_beside_the_attention_kernels(name, pairs):
    """Per step, layer and phase, 3 hops: each rank sends to the next and receives from the
    previous one (a two-member exchange per direction); each hop's kernels start after
    the compute launched before them ends (the buffer is reused); the slow rank's
    attention kernels take 1.3x as long (forward only in _forward); every step is
    longer, the forward-only fault less."""
    pair = pairs[name]
    (fault, ft), (fixed, _) = (pair[half] for half in HALVES)
    sc = fault.scenario
    hops = {}
    for c in ft.exchanges:
        assert c["ops"] == ["recv", "send"]
        sender = next(r["rank"] for r in c["per_rank"] if r["op"] == "send")
        receiver = next(r["rank"] for r in c["per_rank"] if r["op"] == "recv")
        assert receiver == (sender + 1) % sc.ranks
        hops[sender] = hops.get(sender, 0) + 1
    assert hops == {r: sc.steps * sc.ring.layers * 3 * 2 for r in range(sc.ranks)}
    assert all(len(c["per_rank"]) == 4 for c in ft.collectives)  # the gradients' all_reduce
    for rank in range(sc.ranks):
        a, b = fault.traces[rank], fixed.traces[rank]
        compute = _compute(a)
        corr, start = np.asarray(a.k_corr), np.asarray(a.k_start)
        done_before = np.maximum.accumulate(np.asarray(a.k_end)[compute])  # by launch order
        for i in np.setdiff1d(np.arange(len(corr)), compute):
            if a.kernel_types[a.k_type[i]].short == "ncclDevKernel_SendRecv":
                before = np.searchsorted(corr[compute], corr[i]) - 1
                assert start[i] >= done_before[before]
        ratio = _durations(a)[compute] / _durations(b)[compute]
        slowed = np.isclose(ratio, 1.3, atol=1e-4)
        if rank == 2:
            n_fwd = sc.steps * sc.ring.layers * 4 * sc.ring.attention_kernels
            assert slowed.sum() == (n_fwd if name.endswith("forward") else 3 * n_fwd)
        assert (slowed | (ratio == 1)).all() and (rank == 2 or not slowed.any())
    diff = [r["difference_ns"] for r in pair["pair"]["step_times"]["steps"]]
    assert all(d > 200_000 for d in diff)
    assert (max(diff) < 1_000_000) is name.endswith("forward")


def test_the_interleaved_pipeline_runs_each_chunk_and_wraps_round_the_stages(pairs):
    """Megatron's interleaved schedule: each rank computes each microbatch's forward and
    backward once per chunk; every send meets its receive (no unmatched operation); per
    step and replica the last stage sends chunk 0's 8 outputs round to stage 0, which
    sends their 8 gradients back; stage 1's kernels take 80 us more per forward and
    160 us per backward of each chunk; every step is longer."""
    pair = pairs["interleaved_pipeline"]
    (fault, ft), (fixed, _) = (pair[half] for half in HALVES)
    sc, p = fault.scenario, fault.scenario.pipeline
    assert not ft.unmatched_collectives
    for tr in fault.traces:
        texts = [text for _, _, text, _ in tr.nvtx]
        assert (
            texts.count("forward")
            == texts.count("backward")
            == (sc.steps * p.microbatches * p.chunks)
        )
    wraps = {}
    for c in ft.exchanges:
        assert len(c["per_rank"]) == 2
        src = next(r["rank"] for r in c["per_rank"] if r["op"] == "send")
        dst = next(r["rank"] for r in c["per_rank"] if r["op"] == "recv")
        key = (sc.stage_of(src), sc.stage_of(dst))
        assert sc.replica_of(src) == sc.replica_of(dst) and (key[1] - key[0]) % 4 in (1, 3)
        wraps[key] = wraps.get(key, 0) + 1
    assert wraps[(3, 0)] == wraps[(0, 3)] == sc.steps * p.microbatches * sc.replicas
    assert wraps[(0, 1)] == sc.steps * p.microbatches * p.chunks * sc.replicas
    for rank in range(sc.ranks):
        a, b = fault.traces[rank], fixed.traces[rank]
        extra = (_durations(a) - _durations(b))[_compute(a)].sum()
        per_step = p.microbatches * p.chunks * (80_000 + 160_000)
        assert extra == (sc.steps * per_step if sc.stage_of(rank) == 1 else 0)
    assert all(r["difference_ns"] > 2_000_000 for r in pair["pair"]["step_times"]["steps"])


def test_a_resized_pair_keeps_its_fault_or_is_refused(tmp_path):
    """Resized, a pair keeps the faults inside the run (and its files say where they
    are: no CUDA call in a pause); with none left it is refused in one line."""
    info = write_fault_pair("moving_pauses", tmp_path, steps=5)
    assert info["fault"]["rank_steps"] == [[4, 3], [7, 4]]
    truth = Truth.load(tmp_path / "fault" / "truth.json")
    for p in truth.pauses:
        con = sqlite3.connect(tmp_path / "fault" / f"rank{p['rank']}.sqlite")
        ((inside,),) = con.execute(
            "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE start >= ? AND start < ?",
            (p["start_ns"], p["end_ns"]),
        )
        ((before,),) = con.execute(
            "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE start < ?", (p["start_ns"],)
        )
        assert inside == 0 and before > 0
    with pytest.raises(NsysWrapError, match="has no fault left"):
        write_fault_pair("slow_nic", tmp_path / "one_host", ranks=4)
    assert not (tmp_path / "one_host").exists()
