"""Cross-rank analysis against planted truth: clock offsets, matched collectives, waits,
stragglers and their phase, mismatches, bandwidth and the report section.

Hand-built runs (`planted_run`) put every event on one run clock, so every figure is
exact; generated 8-rank runs (`nsyswrap.synth`) add end jitter, so offsets are checked
to 1 µs and waits exactly given the recovered offsets.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest
from helpers.crossrank_runs import ALPHA_NS, BYTES_PER_NS, planted_run
from helpers.report_builder import make_report

from nsyswrap import open_run
from nsyswrap.crossrank import (
    bandwidth,
    clock_offsets,
    comm_split,
    fit_alpha_beta,
    matched_collectives,
    mismatches,
    phase_lag,
    stragglers,
)
from nsyswrap.engine import sql_objects
from nsyswrap.engine.connection import VIEWS
from nsyswrap.engine.queries import catalog, run_module
from nsyswrap.report import ReportOptions, build_report
from nsyswrap.report.flow import section_of
from nsyswrap.storage.sql_files import sql_root
from nsyswrap.synth import ExtraCollective, Scenario, Straggler

MODES = {
    "gpu": {},
    "cpu_ranges_only": {"gpu": False},
    "kernels_only": {"coll_ranges": False},
}


def _open(path: Path):
    return open_run([path])


@pytest.fixture(scope="module", params=list(MODES))
def planted(request, tmp_path_factory):
    out = tmp_path_factory.mktemp(request.param)
    truth = planted_run(out, **MODES[request.param])
    with _open(out) as run:
        yield request.param, truth, run


# -- hand-built runs: exact ------------------------------------------------------------


def test_offsets_are_recovered_exactly(planted):
    mode, truth, run = planted
    offsets = clock_offsets(run).set_index("rank")
    assert offsets["offset_ns"].to_dict() == truth.offset_ns
    assert offsets["shift_ns"].to_dict() == truth.shift_ns
    assert (offsets["spread_ns"] == 0).all() and (offsets["max_residual_ns"] == 0).all()
    assert set(offsets["source"]) == {"nvtx" if mode == "cpu_ranges_only" else "kernel"}


def test_each_collective_is_timed_exactly_on_run_time(planted):
    mode, truth, run = planted
    coll = matched_collectives(run)
    assert len(coll) == sum(len(c.start_ns) for c in truth.collectives)
    for c in truth.collectives:
        # without ranges: the k-th NCCL kernel of a stream, streams grouped by agreement
        pg, seq = ("nccl:0" if mode == "kernels_only" else "0"), c.seq
        rows = coll[(coll["pg"] == pg) & (coll["seq"] == seq)]
        rows = rows.set_index("rank")
        assert rows["op"].unique().tolist() == [c.op]
        assert rows["step"].unique().tolist() == [c.step]
        assert rows["start_ns"].to_dict() == c.start_ns
        assert rows["end_ns"].to_dict() == c.end_ns
        assert rows["wait_ns"].to_dict() == c.wait_ns
        assert rows["last_rank"].unique().tolist() == [c.last_rank]
        assert rows["transfer_ns"].unique().tolist() == [c.transfer_ns]
        assert rows["skew_ns"].unique().tolist() == [
            max(c.start_ns.values()) - min(c.start_ns.values())
        ]


def test_straggler_rank_phase_and_cost_are_named(planted):
    _, truth, run = planted
    rank, phase, extra = truth.straggler
    strag = stragglers(run)
    # step 0 holds only the group's first collective (start-up skew, left out) and an
    # all_gather nobody waits for: no significant straggler there
    assert not strag.loc[strag["step"] == 0, "significant"].any()
    strag = strag[strag["step"].fillna(-1) != 0]
    assert strag["rank"].tolist() == [rank] * len(strag) and strag["significant"].all()
    assert strag["phase"].tolist() == [phase] * len(strag)
    assert strag.loc[strag["step"].isna(), "affected_steps"].tolist() == ["1,2"]
    per_step = strag.dropna(subset=["step"]).set_index("step")
    assert (per_step["phase_excess_ns"] == extra).all()
    for step, row in per_step.iterrows():
        waits = [
            sum(c.wait_ns.values())
            for c in truth.collectives
            if c.step == step and c.last_rank == rank
        ]
        assert row["imposed_wait_ns"] == sum(waits)


def test_comm_split_is_waiting_plus_transfer_exactly(planted):
    _, truth, run = planted
    split = comm_split(run).set_index(["step", "rank"])
    for (step, rank), row in split.iterrows():
        mine = [c for c in truth.collectives if c.step == step]
        assert row["wait_ns"] == sum(c.wait_ns[rank] for c in mine)
        assert row["comm_ns"] == sum(c.end_ns[rank] - c.start_ns[rank] for c in mine)
        assert row["transfer_ns"] == row["comm_ns"] - row["wait_ns"]


def test_phase_lag_measures_host_and_gpu_time(tmp_path):
    planted_run(tmp_path, straggler=(1, "backward", 120_000))
    with _open(tmp_path) as run:
        lag = phase_lag(run)
        strag = stragglers(run)
    slow = lag[(lag["rank"] == 1) & (lag["phase"] == "backward")]
    assert (slow["gpu_ns"] - slow["gpu_median_ns"] == 120_000).all()
    assert (slow["host_ns"] == slow["host_median_ns"]).all()  # the host range is not longer
    assert (slow["excess_ns"] == 120_000).all()
    named = strag[strag["significant"]]
    assert named["rank"].unique().tolist() == [1] and named["phase"].unique().tolist() == [
        "backward"
    ]


def test_a_rank_with_one_more_collective_is_a_mismatch(tmp_path):
    truth = planted_run(tmp_path, extra_collective_rank=1)
    with _open(tmp_path) as run:
        miss = mismatches(run)
        coll = matched_collectives(run)
    assert miss[["pg", "seq", "present_ranks", "missing_ranks", "reason"]].values.tolist() == [
        ["0", 6, "1", "0,2,3", "missing"]
    ]
    assert coll[["pg", "seq"]].drop_duplicates().shape[0] == len(truth.collectives)


def test_kernels_map_to_their_collective_range_through_the_launch(tmp_path):
    """Two overlapping-in-time ranges on two threads: each kernel belongs to the range of its
    launching thread, not to the range that merely contains its launch time."""
    for rank in (0, 1):
        make_report(
            tmp_path / f"rank{rank}.sqlite",
            nvtx=[
                (1_000, 9_000, "coll:all_reduce bytes=8 dtype=float32 pg=0 size=2 seq=0", 11),
                (2_000, 8_000, "coll:all_gather bytes=8 dtype=float32 pg=1 size=2 seq=0", 12),
            ],
            runtime=[
                (3_000, 3_100, "cudaLaunchKernel", 1, 12),
                (4_000, 4_100, "cudaLaunchKernel", 2, 11),
            ],
            kernels=[
                (5_000 + rank * 100, 6_000, 0, 7, "ncclDevKernel_AllGather_RING_LL", 1),
                (7_000 + rank * 300, 8_000, 0, 8, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 2),
            ],
        )
    with _open(tmp_path) as run:
        coll = matched_collectives(run).set_index(["pg", "rank"])
    assert coll.loc[("0", 1), "start_ns"] == 7_300 and coll.loc[("0", 1), "wait_ns"] == 0
    assert coll.loc[("0", 0), "wait_ns"] == 300
    assert coll.loc[("1", 0), "wait_ns"] == 100 and set(coll["source"]) == {"kernel"}


def test_differing_payloads_stop_matching_for_the_rest_of_the_group(tmp_path):
    sizes = {0: [8, 8, 8, 8], 1: [8, 4, 8, 8]}
    for rank, per_seq in sizes.items():
        make_report(
            tmp_path / f"rank{rank}.sqlite",
            nvtx=[
                (
                    1_000 * (s + 1),
                    1_000 * (s + 1) + 500,
                    f"coll:all_reduce bytes={b} dtype=float32 pg=7 size=2 seq={s}",
                )
                for s, b in enumerate(per_seq)
            ],
        )
    with _open(tmp_path) as run:
        miss = mismatches(run)
        coll = matched_collectives(run)
    assert miss[["seq", "reason"]].values.tolist() == [
        [1, "bytes differ"],
        [2, "after divergence"],
        [3, "after divergence"],
    ]
    assert coll["seq"].unique().tolist() == [0]


def test_alpha_beta_fit_recovers_latency_and_bandwidth(tmp_path):
    planted_run(tmp_path, steps=3)
    with _open(tmp_path) as run:
        coll = matched_collectives(run)
        bw = bandwidth(run)
    fit = fit_alpha_beta(coll).set_index("op")
    assert fit.loc["all_reduce", "latency_ns"] == pytest.approx(ALPHA_NS["all_reduce"], abs=1)
    assert fit.loc["all_reduce", "bandwidth_gb_per_s"] == pytest.approx(
        BYTES_PER_NS["all_reduce"], rel=1e-4
    )
    assert fit.loc["all_reduce", "sizes"] == 3
    assert pd.isna(fit.loc["all_gather", "latency_ns"])  # one size: no fit
    row = bw[bw["op"] == "all_reduce"].iloc[0]
    assert row["algbw_gb_per_s"] == pytest.approx(row["bytes"] / row["transfer_ns"])
    assert row["bus_factor"] == pytest.approx(2 * 3 / 4)
    assert bw[bw["op"] == "all_gather"]["bus_factor"].tolist() == [pytest.approx(3 / 4)]


def test_step_window_limits_collectives_and_stragglers(planted):
    _, _, run = planted
    coll = matched_collectives(run, step_from=1, step_to=2)
    assert coll["step"].unique().tolist() == [1]
    strag = stragglers(run, step_from=1, step_to=2)
    assert strag["step"].tolist()[0] == 1 and strag["collectives"].tolist() == [2, 2]


def test_no_copied_sql_blocks_and_every_cte_is_used():
    """Shared logic lives in the xr_* run objects of sql/_run and the per-report objects
    of sql/_reductions, not in copies; no CTE is named like a view or an object."""
    paths = [
        *(sql_root() / "crossrank").glob("*.sql"),
        *(sql_root() / "_reductions").glob("*.sql"),
        *(sql_root() / "_run").glob("*.sql"),
    ]
    for path in paths:
        text = path.read_text()
        assert "-- shared:" not in text, f"{path.name} still holds a copied block"
        code = re.sub(r"--[^\n]*", "", text)
        ctes = re.findall(r"^(?:WITH )?(\w+) AS (?:NOT )?(?:MATERIALIZED )?\(", code, re.M)
        unused = [c for c in ctes if len(re.findall(rf"\b{c}\b", code)) < 2]
        assert not unused, f"{path.name} defines unused CTEs {unused}"
        assert not set(ctes) & {*VIEWS, *sql_objects.objects()}, (
            f"{path.name} names a CTE like a view or object"
        )


def test_events_are_stored_longest_first_up_to_the_default_max_events():
    """xr_events keeps each rank's longest events first, as many as crossrank.trace_events
    returns by default: a trace of the whole run reads only those row groups."""
    default = next(
        p.default for p in catalog()["crossrank.trace_events"].params if p.name == "max_events"
    )
    text = (sql_root() / "_reductions" / "xr_events.sql").read_text()
    assert re.findall(r"dur_rank <= (\d+)", text) == [str(default)]


def test_every_crossrank_module_runs_on_one_report(tmp_path):
    make_report(tmp_path / "rank0.sqlite", nvtx=[(0, 100, "step:0"), (10, 20, "forward")])
    with _open(tmp_path) as run:
        for name in [n for n in catalog() if n.startswith("crossrank.")]:
            run_module(run, name)
        section = section_of(run, "crossrank", ReportOptions())
    assert section["tables"] == [] and section["cannot_answer"][0]["what"] == "cross-rank analysis"


# -- generated 8-rank runs: offsets within 1 µs, waits exact given them ----------------


SKEWED = Scenario(
    name="skewed8",
    seed=11,
    ranks=8,
    steps=5,
    kernels_per_step=30,
    modules=4,
    clock_skew_ns=4_000_000,
    straggler=Straggler(rank=5, phase="data_loading", extra_ns=600_000),
)


@pytest.fixture(scope="module")
def skewed(generated_run):
    truth, out = generated_run(SKEWED)
    with _open(out) as run:
        yield truth, run


def test_generated_offsets_within_one_microsecond(skewed):
    truth, run = skewed
    offsets = clock_offsets(run).set_index("rank")
    assert max(abs(e) for e in truth.offset_ns) > 1_000_000  # the clocks really disagree
    for rank, true in enumerate(truth.offset_ns):
        assert abs(offsets.loc[rank, "offset_ns"] - true) < 1_000
    assert offsets["spread_ns"].max() < 1_000 and set(offsets["source"]) == {"kernel"}


def test_generated_waits_are_exact_given_the_offsets(skewed):
    truth, run = skewed
    offsets = clock_offsets(run).set_index("rank")
    error = {r: offsets.loc[r, "offset_ns"] - truth.offset_ns[r] for r in offsets.index}
    utc0 = truth.ranks[0]["utc_epoch_ns"]
    coll = matched_collectives(run).set_index(["seq", "rank"])
    assert len(coll) == sum(len(c["per_rank"]) for c in truth.collectives)
    for c in truth.collectives:
        starts = {p["rank"]: p["start_aligned_ns"] - utc0 + error[p["rank"]] for p in c["per_rank"]}
        latest = max(starts.values())
        last = min(r for r, t in starts.items() if t == latest)
        for rank, start in starts.items():
            mine = coll.loc[(c["seq"], rank)]
            assert (mine["start_ns"], mine["wait_ns"], mine["last_rank"]) == (
                start,
                latest - start,
                last,
            )
        truth_waits = sorted(p["wait_ns"] for p in c["per_rank"])
        if truth_waits[1] > 2_000:  # the last rank is clear beyond the clock error
            assert last == c["last_rank"]
        assert abs(mine["transfer_ns"] - c["transfer_ns"]) < 200  # NCCL end jitter


def test_generated_straggler_and_phase_are_named(skewed):
    truth, run = skewed
    strag = stragglers(run)
    overall = strag[strag["step"].isna()].iloc[0]
    assert (overall["rank"], overall["phase"]) == (
        truth.straggler["rank"],
        truth.straggler["phase"],
    )
    per_step_excess = overall["phase_excess_ns"] / overall["phase_steps"]
    assert per_step_excess == pytest.approx(truth.straggler["extra_ns"], rel=0.05)
    later = strag[strag["step"] >= 1]  # step 0 also holds the ranks' start-up skew
    assert (later["rank"] == truth.straggler["rank"]).all()
    assert (later["phase"] == truth.straggler["phase"]).all()


@pytest.mark.parametrize("phase", ["forward", "backward", "optimizer"])
def test_generated_gpu_phase_stragglers_are_named(generated_run, phase):
    sc = SKEWED.replace(
        name=phase, seed=3, ranks=4, straggler=Straggler(rank=2, phase=phase, extra_ns=500_000)
    )
    _, out = generated_run(sc)
    with _open(out) as run:
        overall = stragglers(run).query("step.isna()").iloc[0]
    assert (overall["rank"], overall["phase"]) == (2, phase)


def test_generated_extra_collective_is_reported_not_joined(generated_run):
    planted = ExtraCollective(rank=3, step=2, bytes=8)
    sc = SKEWED.replace(name="extra", ranks=4, straggler=None, extra_collectives=(planted,))
    truth, out = generated_run(sc)
    with _open(out) as run:
        miss = mismatches(run).set_index("seq")
        coll = matched_collectives(run)
    extra = truth.mismatches[0]
    assert miss.loc[extra["seq"], "reason"] == "bytes differ"
    assert (
        miss.loc[miss.index > extra["seq"], "reason"].isin(["after divergence", "missing"])
    ).all()
    for u in truth.unmatched_collectives:
        assert miss.loc[u["seq"], "present_ranks"] == ",".join(map(str, u["ranks"]))
    joined = {c["seq"] for c in truth.collectives if c["same_content"] and c["seq"] < extra["seq"]}
    assert set(coll["seq"]) == joined


def test_report_names_straggler_phase_cost_and_offsets(skewed):
    truth, run = skewed
    report = build_report(run, ReportOptions())
    section = next(s for s in report["sections"] if s["id"] == "crossrank")
    rank, phase = truth.straggler["rank"], truth.straggler["phase"]
    assert section["verdict"]["label"] == f"straggler: rank {rank}"
    assert (
        f"`{phase}`" in section["verdict"]["reason"]
        and "made the others wait" in section["verdict"]["reason"]
    )
    tables = {t["id"]: t for t in section["tables"]}
    expected = {
        "clock_offsets",
        "clock_uncertainty",
        "stragglers",
        "rank_waits",
        "bandwidth",
        "alpha_beta",
    }
    assert expected <= set(tables)
    offsets = {row["rank"]: row["offset"]["value"] for row in tables["clock_offsets"]["rows"]}
    assert all(abs(offsets[r] - t) < 1_000 for r, t in enumerate(truth.offset_ns))
    assert all(row["uncertainty"]["unit"] == "ns" for row in tables["clock_uncertainty"]["rows"])
