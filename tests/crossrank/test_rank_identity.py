"""One rank identity in every section: a report holding several rank processes labels
each device's and process's rows with the rank the cross-rank section gives that process
(nsyswrap.crossrank.ranks), in the single-rank tables, the diagnosis, `query` (also
streamed to a file) and the timeline; the real MPI run (no steps, MPI collectives) is
worded over the run and as MPI time on the host."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from nsyswrap import open_run
from nsyswrap.api import query_to_file
from nsyswrap.crossrank import clock_offsets
from nsyswrap.crossrank.ranks import rank_map
from nsyswrap.engine.queries import run_module
from nsyswrap.report import ReportOptions, build_report
from nsyswrap.report.diagnosis import diagnose
from nsyswrap.report.render import heading
from nsyswrap.synth import preset

SHARED = Path(__file__).resolve().parents[2] / ".." / "shared" / "nsys-sqlite"
REAL_MPI = SHARED / "real-mpi"
TWO_GPU = SHARED / "public" / "nsysai__h100_2gpu_1s.sqlite"


@pytest.fixture(scope="module")
def node_captures(generated_run):
    """hybrid8 captured one report per node: 8 ranks in 2 reports, rank 6 the straggler."""
    truth, out = generated_run(preset("hybrid8").replace(ranks_per_report=4))
    with open_run([out]) as run:  # the truth is of the whole capture, not only its steps
        yield truth, run, build_report(run, ReportOptions(whole_capture=True))


def _rows(report: dict, section: str, table: str) -> list[dict]:
    tables = next(s for s in report["sections"] if s["id"] == section)["tables"]
    return next(t["rows"] for t in tables if t["id"] == table)


def test_single_rank_tables_carry_each_device_s_true_rank(node_captures):
    truth, _, report = node_captures
    planted = {(d["rank"], d["device"]): d for d in truth.devices}
    ledger = {(r["rank"], r["device"]): r for r in _rows(report, "single_rank", "ledger")}
    assert set(ledger) == set(planted) and len(ledger) == 8
    drift = dict(enumerate(truth.scenario["clock_drift_ppm"]))  # node1's session clock runs fast
    for key, d in planted.items():
        recorded = [ledger[key][c]["value"] for c in ("span", "idle", "compute_busy")]
        true = [d[c] for c in ("span_ns", "idle_ns", "compute_busy_ns")]
        if drift[key[0]] == 0:
            assert recorded == true
        else:  # both ends moved by the drift: the span to within the rounding of its two ends
            assert abs(recorded[0] - true[0] * (1 + drift[key[0]] / 1e6)) <= 1
    for table in ("shares", "collectives", "idle_gaps", "launches", "steps"):
        assert {(r["rank"], r["device"]) for r in _rows(report, "single_rank", table)} == set(
            planted
        )
    assert [(d["rank"], d["device"]) for d in report["diagnosis"]["devices"]] == sorted(planted)


def test_waited_per_step_is_each_true_rank_s_own(node_captures):
    """The diagnosis' `waited` is the rank's own wait in matched collectives (the truth's
    per-collective waits summed) per step; the straggler, rank 6, waits least."""
    truth, _, report = node_captures
    waits = {}
    for c in truth.collectives:
        for p in c["per_rank"]:
            waits[p["rank"]] = waits.get(p["rank"], 0) + p["wait_ns"]
    devices = {d["rank"]: d for d in report["diagnosis"]["devices"]}
    for rank, total in waits.items():
        d = devices[rank]
        assert d["waited_basis"] == "per step"
        assert d["waited"]["value"] == total / d["steps"]["value"]
    assert min(devices, key=lambda r: devices[r]["waited"]["value"]) == truth.straggler["rank"] == 6


def test_header_and_json_count_ranks_in_reports(node_captures):
    truth, _, report = node_captures
    assert heading(report) == "8 ranks in 2 reports"
    assert [(r["rank"], r["report_rank"], r["pid"]) for r in report["ranks"]] == [
        (i["rank"], 4 * (i["rank"] // 4), i["pid"]) for i in truth.ranks
    ]
    assert {r["rank_source"] for r in report["ranks"]} == {
        "device order (report of rank 0 holds 4 rank processes)",
        "device order (report of rank 4 holds 4 rank processes)",
    }


def test_query_labels_rows_by_pid_or_device_also_streamed(node_captures, tmp_path):
    truth, run, _ = node_captures
    latency = run_module(run, "gaps.launch_latency")  # (pids repeat across the two reports)
    assert set(zip(latency["rank"], latency["pid"], latency["device"])) == {
        (i["rank"], i["pid"], *i["devices"]) for i in truth.ranks
    }
    assert latency["rank"].is_monotonic_increasing  # the module's order, by the true rank
    out = tmp_path / "ledger.csv"
    query_to_file("ledger.devices", [run.reports[0].path.parent], out, "csv")
    streamed = pd.read_csv(out)
    assert streamed[["rank", "device"]].values.tolist() == sorted(
        [d["rank"], d["device"]] for d in truth.devices
    )
    node0 = sorted(
        (d["rank"], d["span_ns"]) for d in truth.devices if d["rank"] < 4
    )  # (node1's clock drifts)
    assert list(zip(streamed["rank"], streamed["span_ns"]))[:4] == node0


@pytest.mark.skipif(not TWO_GPU.is_file(), reason="needs ../shared/nsys-sqlite/public")
def test_two_gpu_processes_in_one_report_are_ranks_0_and_1_everywhere():
    with open_run([TWO_GPU]) as run:
        report = build_report(run, ReportOptions())
        offsets = clock_offsets(run)
        latency = run_module(run, "gaps.launch_latency")
    assert offsets[["rank", "pid"]].values.tolist() == [[0, 111], [1, 112]]
    assert heading(report) == "2 ranks in 1 report"
    assert [(r["rank"], r["device"]) for r in _rows(report, "single_rank", "ledger")] == [
        (0, 0),
        (1, 1),
    ]
    assert [(d["rank"], d["device"]) for d in report["diagnosis"]["devices"]] == [(0, 0), (1, 1)]
    assert latency.groupby("pid")["rank"].unique().map(list).to_dict() == {111: [0], 112: [1]}


@pytest.mark.skipif(not REAL_MPI.is_dir(), reason="needs ../shared/nsys-sqlite/real-mpi")
def test_real_mpi_straggler_is_worded_over_the_run_as_mpi_time():
    with open_run([REAL_MPI]) as run:
        report = build_report(run, ReportOptions())
    # the replay: making the last arriver as fast as the others saves under 1 % of the run,
    # so the diagnosis names no straggler; without a replay it is worded as MPI time
    crossrank = next(s for s in report["sections"] if s["id"] == "crossrank")
    fixes = next(t for t in crossrank["tables"] if t["id"] == "whatif")["rows"]
    assert not any(f["scope"] == "cross-rank" for f in report["diagnosis"]["findings"])
    assert max(f["gain_pct"]["value"] for f in fixes if f["kind"] == "rank") < 1
    # nor does the section: the waits rank 3 imposes are a labelled figure, not its cost
    verdict = crossrank["verdict"]
    assert verdict["label"] == "no significant straggler"
    assert "rank 3 made the others wait" in verdict["reason"]
    assert (
        "making rank 3 as fast as the others would save 12.51 ms over the window"
        in (verdict["reason"])
    )
    crossrank["tables"] = [t for t in crossrank["tables"] if t["id"] != "whatif"]
    crossrank["verdict"] = {"label": "straggler: rank 3", "reason": ""}  # as without a replay
    finding = next(f for f in diagnose(report)["findings"] if f["id"] == "straggler")
    text = finding["text"]
    assert finding["cost_basis"] == "over the run" and "per step" not in text
    assert "MPI collectives" in text and "of their MPI time" in text and "NCCL" not in text
    assert "blocks the host, not the GPU" in text
    evidence = finding["evidence"]
    assert evidence["share_of_nccl_time"]["value"] is None
    assert evidence["share_of_exposed_comm"]["value"] is None
    assert "MPI calls on the host" in evidence["share_of_nccl_time"]["reason"]
    assert heading(report) == "5 ranks"


def test_a_device_shared_by_processes_is_labelled_by_the_busiest_then_lowest_rank():
    """Report 0 holds ranks 0 and 1 on device 0 (rank 1 ran more there) and both on
    device 1 equally; report 2 is one rank: its rows keep their report's rank."""
    members = pd.DataFrame(
        {
            "report_rank": [0, 0, 0, 0, 2],
            "pid": [10, 10, 11, 11, 20],
            "rank": [0, 0, 1, 1, 2],
            "rank_source": ["device order"] * 4 + ["file name"],
            "device": [0, 1, 0, 1, 0],
            "activities": [5, 7, 9, 7, 3],
        }
    )
    rows = rank_map(members)
    by_pid = {(r.report_rank, r.pid): r.rank for r in rows.dropna(subset=["pid"]).itertuples()}
    by_device = {
        (r.report_rank, r.device): r.rank for r in rows.dropna(subset=["device"]).itertuples()
    }
    by_report = {
        r.report_rank: r.rank for r in rows[rows.pid.isna() & rows.device.isna()].itertuples()
    }
    assert by_pid == {(0, 10): 0, (0, 11): 1, (2, 20): 2}
    assert by_device == {(0, 0): 1, (0, 1): 0, (2, 0): 2}
    assert by_report == {0: 0, 2: 2}
