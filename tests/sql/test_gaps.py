"""Idle gaps with their causes, the gap histogram, launch latency and tiny kernels."""

from __future__ import annotations

import pytest
from helpers.metric_helpers import AG, load_truth, truth_runs, two_device_case
from helpers.paths import FIXTURES
from helpers.report_builder import make_report

from nsyswrap import metrics, open_run


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    path = two_device_case(tmp_path_factory.mktemp("case") / "rank0.sqlite")
    with open_run([path]) as run:
        yield run


def test_gaps_have_exact_bounds_and_causes(run):
    gaps = metrics.idle_gaps(run)
    columns = [
        "device",
        "step",
        "start_ns",
        "end_ns",
        "dur_ns",
        "sync_ns",
        "next_name",
        "next_launch_ns",
        "cause",
    ]
    assert gaps[columns].values.tolist() == [
        [0, 0, 500, 600, 100, 0, AG, 550, "host_bound"],
        [0, 1, 750, 800, 50, 0, "memcpy PtoP", 700, "other"],
        [0, 1, 900, 1000, 100, 60, "tail", 990, "sync"],
    ]
    assert metrics.idle_gaps(run, min_gap_ns=100).dur_ns.tolist() == [100, 100]
    late = metrics.idle_gaps(run, step_from=1)
    assert late[["device", "start_ns", "cause"]].values.tolist() == [
        [0, 520, "host_bound"],
        [0, 750, "other"],
        [0, 900, "sync"],
        [0, 1010, "unknown"],
        [1, 1000, "unknown"],
    ]


def test_histogram_counts_gaps_per_cause_and_decade(run):
    hist = metrics.gap_histogram(run)
    assert hist[
        ["device", "cause", "bucket_lo_ns", "bucket_hi_ns", "gaps", "total_ns"]
    ].values.tolist() == [
        [0, "host_bound", 0, 1000, 1, 100],
        [0, "other", 0, 1000, 1, 50],
        [0, "sync", 0, 1000, 1, 100],
    ]


def test_sync_records_and_missing_launches(tmp_path):
    path = make_report(
        tmp_path / "rank0.sqlite",
        kernels=[
            (100, 200, 0, 7, "a", 1),
            (400, 410, 0, 7, "b", 2),
            (30_000, 30_010, 0, 7, "c", 3),
        ],
        runtime=[(90, 92, "cudaLaunchKernel_v7000", 1), (390, 392, "cudaLaunchKernel_v7000", 2)],
        syncs=[(150, 380, 7)],
    )
    with open_run([path]) as run:
        gaps = metrics.idle_gaps(run)
        hist = metrics.gap_histogram(run)
    assert gaps[["start_ns", "end_ns", "sync_ns", "cause"]].values.tolist() == [
        [200, 400, 180, "sync"],
        [410, 30_000, 0, "unknown"],
    ]
    assert hist[["cause", "bucket_lo_ns", "bucket_hi_ns", "gaps"]].values.tolist() == [
        ["sync", 0, 1000, 1],
        ["unknown", 10_000, 100_000, 1],
    ]


def test_zero_length_kernel_splits_a_gap(tmp_path):
    path = make_report(
        tmp_path / "rank0.sqlite",
        kernels=[(0, 100, 0, 7, "a", 1), (150, 150, 0, 8, "z", 2), (300, 400, 0, 7, "b", 3)],
        runtime=[(120, 122, "cudaLaunchKernel_v7000", 2), (90, 92, "cudaLaunchKernel_v7000", 3)],
    )
    with open_run([path]) as run:
        gaps = metrics.idle_gaps(run)
        ledger = metrics.time_ledger(run)
    assert gaps[["start_ns", "end_ns", "next_name", "cause"]].values.tolist() == [
        [100, 150, "z", "host_bound"],
        [150, 300, "b", "other"],
    ]
    assert ledger.idle_ns.tolist() == [200]


def test_launch_latency_per_kernel_and_summary(run):
    latency = metrics.launch_latency(run)
    got = dict(zip(latency.correlation_id, latency.latency_ns))
    assert got == {1: 10, 2: 55, 3: 0, 4: 100, 5: 140, 6: 160, 7: 50, 10: 10, 11: 0, 12: 20, 13: 5}
    summary = metrics.launch_summary(run, tiny_kernel_ns=50)
    assert summary[
        [
            "device",
            "kernels",
            "launched",
            "latency_p50_ns",
            "latency_max_ns",
            "tiny_kernels",
            "tiny_kernel_ns",
        ]
    ].values.tolist() == [
        [0, 8, 8, 50, 160, 3, 40],
        [1, 3, 3, 5, 20, 1, 0],
    ]


@pytest.mark.parametrize("run_dir", truth_runs(FIXTURES), ids=lambda p: p.name)
def test_gaps_match_planted_truth(run_dir):
    """Every gap the truth lists (at least min_gap_ns long, or planted) with its cause."""
    truth = load_truth(run_dir)
    with open_run([run_dir]) as run:
        gaps = metrics.idle_gaps(run)
    planted = {
        (g["rank"], g["device"], g["start_ns"], g["end_ns"])
        for g in truth["idle_gaps"]
        if g["planted"]
    }
    got = {
        (r["rank"], r.device, r.start_ns, r.end_ns): r.cause
        for _, r in gaps.iterrows()
        if r.dur_ns >= truth["scenario"]["min_gap_ns"]
        or (r["rank"], r.device, r.start_ns, r.end_ns) in planted
    }
    assert got == {
        (g["rank"], g["device"], g["start_ns"], g["end_ns"]): g["cause"] for g in truth["idle_gaps"]
    }
    assert len(planted) == len(truth["scenario"]["gaps"])
