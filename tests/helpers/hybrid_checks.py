"""The planted-truth checks of the hybrid8 run (nsyswrap.synth): every offset and drift,
every matched collective's skew and wait, the timeline, the straggler rank, phase and
steps, groups never merged. Collected by the test modules that import them, each with its
own `hybrid` fixture (the run as `(truth, run)`): tests/crossrank/test_crossrank_hybrid.py
(with and without `coll:` ranges) and tests/crossrank/test_crossrank_payload.py (NCCL's
payloads)."""

from __future__ import annotations

from nsyswrap.crossrank import clock_offsets, matched_collectives, phase_lag, stragglers
from nsyswrap.engine import planner
from nsyswrap.report import ReportOptions
from nsyswrap.timeline import chrome_trace


def test_every_offset_and_drift_exact(hybrid):
    """Collective ends are simultaneous in true time and the clocks follow the model
    (synth trace.recorded), so the solve recovers them exactly, far within 1 µs."""
    truth, run = hybrid
    offsets = clock_offsets(run).set_index("rank")
    assert offsets["aligned"].all()
    for info in truth.ranks:
        mine = offsets.loc[info["rank"]]
        assert mine["offset_ns"] == info["offset_ns"]
        assert mine["drift_ppb"] == info.get("drift_ppb", 0)
        assert mine["max_residual_ns"] == 0


def test_groups_are_found_and_never_merged(hybrid):
    _, run = hybrid
    planner.bind(
        run, "xr_groups", {}
    )  # run objects are bound when asked for (nsyswrap.engine.planner)
    groups = run.df("SELECT members, spans_hosts FROM xr_groups ORDER BY members")
    assert sorted(groups["members"]) == ["0,1,2,3", "0,4", "1,5", "2,6", "3,7", "4,5,6,7"]
    assert groups.set_index("members")["spans_hosts"].to_dict()["0,4"]
    assert not groups.set_index("members")["spans_hosts"].to_dict()["4,5,6,7"]


def test_every_matched_collective_skew_and_wait_exact(hybrid):
    """Every member's aligned arrival and end, the wait and the skew equal the truth to
    the ns (no rounding slack: see test_every_offset_and_drift_exact)."""
    truth, run = hybrid
    coll = matched_collectives(run)
    assert len(coll) == sum(len(c["per_rank"]) for c in truth.collectives)
    utc0 = truth.ranks[0]["utc_epoch_ns"]
    mine = coll.set_index(["rank", "start_ns"])
    assert mine.index.is_unique
    for c in truth.collectives:
        starts = {p["rank"]: p["start_aligned_ns"] - utc0 for p in c["per_rank"]}
        skew = max(starts.values()) - min(starts.values())
        for p in c["per_rank"]:
            row = mine.loc[(p["rank"], starts[p["rank"]])]
            assert (row["end_ns"], row["wait_ns"], row["skew_ns"], row["last_rank"]) == (
                p["end_aligned_ns"] - utc0,
                p["wait_ns"],
                skew,
                c["last_rank"],
            )


def test_timeline_places_every_rank_by_its_drifting_clock(hybrid):
    """node1's clock drifts 40 ppm: the timeline's NCCL kernels of each matched collective
    end at one instant on all members, the truth's, to the ns, each in its own rank's
    process (a report may hold several ranks)."""
    truth, run = hybrid
    utc0 = truth.ranks[0]["utc_epoch_ns"]
    trace = chrome_trace(run, ReportOptions())
    ends = {
        (e["pid"], round((e["ts"] + e["dur"]) * 1_000))
        for e in trace["traceEvents"]
        if e["ph"] == "X" and e["name"].startswith("ncclDevKernel")
    }
    for c in truth.collectives:
        assert len({p["end_aligned_ns"] for p in c["per_rank"]}) == 1
        for p in c["per_rank"]:
            assert (p["rank"], p["end_aligned_ns"] - utc0) in ends


def test_straggler_rank_phase_and_steps(hybrid):
    truth, run = hybrid
    run_row = stragglers(run).query("step.isna()").iloc[0]
    assert (run_row["rank"], run_row["phase"]) == (
        truth.straggler["rank"],
        truth.straggler["phase"],
    )
    assert run_row["significant"]
    # slow where planted; the others wait then and in the next step (lateness carries over)
    planted = list(truth.straggler["steps"])
    assert run_row["slow_steps"] == ",".join(map(str, planted))
    affected = [int(s) for s in run_row["affected_steps"].split(",")]
    assert set(affected) <= {s + d for s in planted for d in (0, 1)} and len(affected) >= len(
        planted
    )
    lag = phase_lag(run)
    slow = lag[(lag["rank"] == truth.straggler["rank"]) & (lag["phase"] == "backward")].set_index(
        "step"
    )
    for step in planted:  # backward's GPU time counts the autograd thread's launches
        assert (
            slow.loc[step, "gpu_ns"] - slow.loc[step, "gpu_median_ns"]
            > 0.8 * truth.straggler["extra_ns"]
        )
