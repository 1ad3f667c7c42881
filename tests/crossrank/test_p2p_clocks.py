"""Clocks from point-to-point transfers (nsyswrap.crossrank.p2p_clocks): hosts that only
pipeline send/recv pairs join are aligned within the bounds those pairs set, the
uncertainty is stated, and the replay names the slow stage over every rank; the bounds'
rules on hand-made pairs."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from nsyswrap import open_run
from nsyswrap.crossrank import clock_offsets
from nsyswrap.crossrank.p2p_clocks import deepest, directed_bounds, told_apart
from nsyswrap.engine.queries import run_module
from nsyswrap.report import ReportOptions, build_report
from nsyswrap.report.data_quality import alignment_notes, crossrank_notes
from nsyswrap.synth import preset

NODE1_OFF = 21_000_000


@pytest.fixture(scope="module")
def stages_across_hosts(generated_run):
    """pipeline8's 4 stages of one replica on 2 hosts (stages 0-1 on node0, 2-3 on node1):
    only the send/recv between stages 1 and 2 crosses the hosts; NCCL kernels only; node1's
    clock 21 ms off; stage 2 slow."""
    sc = preset("pipeline8").replace(
        name="stages_across_hosts",
        ranks=4,
        ranks_per_node=2,
        clock_error_ns=(0, 0, NODE1_OFF, NODE1_OFF),
        clock_drift_ppm=None,
        data_loading_ns=2_000_000,
    )
    truth, out = generated_run(sc)
    with open_run([out]) as run:
        yield truth, run


def test_hosts_joined_by_send_recv_only_are_aligned_within_their_bounds(stages_across_hosts):
    truth, run = stages_across_hosts
    clocks = clock_offsets(run).set_index("rank")
    assert clocks["aligned"].all()
    assert clocks.loc[[2, 3], "source"].tolist() == ["p2p", "p2p"]
    # the true offset lies within the stated uncertainty (half the bounds' width)
    off = (clocks["offset_ns"] - pd.Series(truth.offset_ns)).abs()
    assert (off <= clocks["uncertainty_ns"]).all(), off
    assert clocks.loc[2, "uncertainty_ns"] > 0
    assert "bounded by 1 pair of send/recv kernel streams" in clocks.loc[2, "method"]
    groups = run_module(run, "crossrank.groups")
    pairs = groups[groups["status"] == "matched"]
    assert sorted(pairs["members"]) == ["0,1", "1,2", "2,3"] and pairs["left_out"].sum() == 0
    notes = crossrank_notes(groups, clock_offsets(run))
    assert any("host node1 is aligned by point-to-point transfers alone" in n for n in notes)


def test_the_slow_stage_is_named_with_its_saving_over_every_rank(stages_across_hosts):
    """The replay covers the second host's ranks: stage 2's gain is the planted one (the
    run simulated again without the slow stage) within 1 %, every step replayed exactly."""
    truth, run = stages_across_hosts
    check = run_module(run, "crossrank.replay_check")
    assert sorted(check["rank"].unique()) == [0, 1, 2, 3] and check["residual_ns"].max() == 0
    fixes = run_module(run, "crossrank.whatif")
    best = fixes.iloc[fixes[fixes["kind"] == "stage"]["gain_ns_per_step"].idxmax()]
    planted = truth.planted_gain["gain_ns_total"] / len(truth.planted_gain["steps"])
    assert best["stage"] == 2
    assert best["gain_ns_per_step"] == pytest.approx(planted, rel=0.01)


def _pair(pg, seq, send, recv):
    """Rows of one keyed transfer: (rank, op, start, end) of each member."""
    return [
        {"pg": pg, "seq": seq, "rank": r, "op": op, "start_ns": s, "end_ns": e}
        for r, op, s, e in (send, recv)
    ]


def test_a_receive_bounds_the_offset_from_its_send():
    """Rank 1's clock (component {1}) at delta 0: a send from rank 0 starting at 100 whose
    receive on rank 1 ends at 40 puts delta at 60 or more; a send from rank 1 starting at
    90 received on rank 0 by 200 puts it at 110 or less; a send_recv bounds both ways."""
    rows = _pair("p", 0, (0, "send", 100, 150), (1, "recv", 10, 40))
    rows += _pair("p", 1, (1, "send", 90, 120), (0, "recv", 150, 200))
    lo, hi, used = directed_bounds(pd.DataFrame(rows), {1})
    assert (lo, hi, used) == (60, 110, 2)
    both = pd.DataFrame(_pair("q", 0, (0, "send_recv", 100, 150), (1, "send_recv", 20, 80)))
    assert directed_bounds(both, {1}) == (20, 130, 1)
    one_way = pd.DataFrame(rows[:2])
    assert directed_bounds(one_way, {1})[1] == np.inf  # bounded on one side only


def test_the_offset_is_where_most_candidate_pairs_fit():
    assert deepest([(0, 10), (5, 15), (8, 20)]) == (8, 10, 3)
    assert deepest([(0, 1), (5, 6)])[0] is None  # two places fit equally well
    assert deepest([])[0] is None


def test_streams_in_lockstep_are_paired_by_their_ends():
    """Two replicas in lockstep: each stream fits both of the other host's; the true pairs
    end a constant time apart (spread 1 us), the crossed ones by the replicas' jitter."""
    fits = [
        ("a0", "b0", -550, -220, 1_000),
        ("a0", "b1", -440, -330, 40_000),
        ("a1", "b0", -490, -340, 33_000),
        ("a1", "b1", -550, -220, 1_100),
    ]
    assert [(a, b) for a, b, *_ in told_apart(fits)] == [("a0", "b0"), ("a1", "b1")]
    close = [("a0", "b0", 0, 9, 1_000), ("a1", "b0", 0, 9, 1_500)]
    assert told_apart(close) == []  # neither is the partner beyond doubt


def test_the_data_quality_section_names_unaligned_ranks():
    clocks = pd.DataFrame(
        {
            "rank": [0, 1, 2],
            "aligned": [True, False, False],
            "method": ["reference"] + ["unaligned: no matched collective joins it"] * 2,
            "source": ["reference", "utc", "utc"],
            "clock": ["host a", None, None],
            "uncertainty_ns": [0, None, None],
        }
    )
    (note,) = alignment_notes(clocks)
    assert note.startswith("ranks 1, 2 are not aligned (no matched collective joins it)")


def test_the_pipeline_across_hosts_pair_aligns_every_rank_and_names_its_slow_stage(
    fault_pair,
):
    """The generator's fault pair `pipeline_across_hosts` (Megatron's layout: DP inside a
    host, stages 0-1 on node0 and 2-3 on node1, only send/recv across; coll: ranges;
    stage 2's forward slower): every rank is aligned within its stated uncertainty, the
    data-quality section says how, and the slow stage is named with a saving within 5 %
    of what the same job without the fault measures (truth: the generator's own runs)."""
    pair, folder = fault_pair("pipeline_across_hosts")
    truth = json.loads((folder / "fault" / "truth.json").read_text())
    with open_run([folder / "fault"]) as run:
        clocks = clock_offsets(run).set_index("rank")
        report = build_report(run, ReportOptions())
    assert clocks["aligned"].all() and set(clocks.loc[4:7, "source"]) == {"p2p"}
    off = (clocks["offset_ns"] - pd.Series(truth["offset_ns"])).abs()
    assert (off <= clocks["uncertainty_ns"]).all(), off
    (first, *_) = report["diagnosis"]["findings"]
    assert first["id"] == "slow-stage" and first["evidence"]["stage"] == 2, first["text"]
    measured = pair["step_times"]["difference_per_step_ns"]
    assert first["cost"]["value"] == pytest.approx(measured, rel=0.05)
    (quality,) = [s for s in report["sections"] if s["id"] == "data_quality"]
    assert any("aligned by point-to-point transfers alone" in n for n in quality["notes"])
