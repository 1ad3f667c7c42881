"""Step breakdown from NVTX step ranges, and GPU time projected onto NVTX ranges."""

from __future__ import annotations

import pytest
from helpers.metric_helpers import LEDGER_KEYS, load_truth, truth_runs, two_device_case
from helpers.paths import FIXTURES
from helpers.report_builder import make_report

from nsyswrap import metrics, open_run

STEP_COLUMNS = [
    "device",
    "step",
    "duration_ns",
    "compute_busy_ns",
    "comm_busy_ns",
    "compute_only_ns",
    "exposed_comm_ns",
    "both_ns",
    "copy_only_ns",
    "idle_ns",
]
PARTS = ["compute_only_ns", "exposed_comm_ns", "both_ns", "copy_only_ns", "idle_ns"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    path = two_device_case(tmp_path_factory.mktemp("case") / "rank0.sqlite")
    with open_run([path]) as run:
        yield run


def test_step_ledger_is_exact_and_adds_up(run):
    steps = metrics.step_ledger(run)
    assert steps[STEP_COLUMNS].values.tolist() == [
        [0, 0, 470, 380, 300, 100, 20, 280, 0, 70],
        [0, 1, 580, 10, 200, 10, 200, 0, 50, 320],
        [1, 0, 470, 470, 100, 370, 0, 100, 0, 0],
        [1, 1, 580, 480, 0, 480, 0, 0, 0, 100],
    ]
    assert (steps[PARTS].sum(axis=1) == steps.duration_ns).all()
    assert metrics.step_ledger(run, step_from=1).step.tolist() == [1, 1]


def test_step_pattern_numbers_and_order(tmp_path):
    kernels = [(100, 200, 0, 7, "a"), (300, 350, 0, 7, "b")]
    nvtx = [
        (90, 250, "ProfilerStep#7"),
        (250, 400, "ProfilerStep#8"),
        (90, 250, "iteration"),
        (250, 400, "iteration"),
    ]
    with open_run([make_report(tmp_path / "rank0.sqlite", kernels=kernels, nvtx=nvtx)]) as run:
        profiler = metrics.step_ledger(run, step_pattern="ProfilerStep#%")
        plain = metrics.step_ledger(run, step_pattern="iteration")
        default = metrics.step_ledger(run)
        window = metrics.time_ledger(run, step_pattern="ProfilerStep#%", step_from=8)
    assert profiler[["step", "duration_ns", "compute_busy_ns", "idle_ns"]].values.tolist() == [
        [7, 160, 100, 60],
        [8, 150, 50, 100],
    ]
    assert plain.step.tolist() == [0, 1]
    assert default.equals(profiler)  # no `step:` range: the default takes ProfilerStep#<i>
    assert window[["window_start_ns", "window_end_ns", "idle_ns"]].values.tolist() == [
        [250, 400, 100]
    ]


def test_nvtx_projection_counts_work_launched_inside(run):
    by_text = metrics.gpu_time_by_text(run)
    got = {
        r.text.split(" ")[0]: [
            r.ranges,
            r.range_ns,
            r.kernels,
            r.gpu_ns,
            r.compute_ns,
            r.nccl_ns,
            r.copy_ns,
        ]
        for r in by_text.itertuples()
    }
    assert got == {
        "step:0": [1, 470, 8, 880, 480, 400, 0],
        "step:1": [1, 580, 4, 260, 10, 100, 150],
        "fwd:model": [1, 150, 2, 300, 0, 300, 0],
        "fwd:model.a": [1, 40, 0, 0, 0, 0, 0],
        "fwd:model.b": [1, 90, 1, 300, 0, 300, 0],
        "bwd:model": [1, 50, 2, 150, 0, 100, 50],
        "coll:all_gather": [1, 20, 1, 100, 0, 100, 0],
    }
    ranges = metrics.range_gpu_time(run, text_like="fwd:%")
    assert ranges[["text", "start_ns", "kernels", "gpu_ns"]].values.tolist() == [
        ["fwd:model", 150, 2, 300],
        ["fwd:model.a", 160, 0, 0],
        ["fwd:model.b", 200, 1, 300],
    ]


STEP_KEYS = {**LEDGER_KEYS, "span_ns": "duration_ns", "comm_only_ns": "exposed_comm_ns"}


@pytest.mark.parametrize("run_dir", truth_runs(FIXTURES), ids=lambda p: p.name)
def test_steps_match_planted_truth(run_dir):
    truth = load_truth(run_dir)
    with open_run([run_dir]) as run:
        steps = metrics.step_ledger(run).set_index(["rank", "device", "step"])
    expected = {
        (d["rank"], d["device"], s["step"]): s for d in truth["devices"] for s in d["steps"]
    }
    assert sorted(steps.index) == sorted(expected)
    for key, step in expected.items():
        row = steps.loc[key]
        assert (row.start_ns, row.end_ns) == (step["start_ns"], step["end_ns"])
        assert {k: row[c] for k, c in STEP_KEYS.items()} == {k: step[k] for k in STEP_KEYS}
