"""`nsyswrap timeline`: an aligned multi-rank Chrome/Perfetto trace of a window of steps."""

from __future__ import annotations

import json

import pytest
from helpers.crossrank_runs import planted_run

from nsyswrap import open_run
from nsyswrap.errors import NsysWrapError
from nsyswrap.report.options import ReportOptions
from nsyswrap.timeline import chrome_trace


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("timeline")
    return out, planted_run(out, ranks=3, steps=4)


def _spans(trace: dict) -> list[dict]:
    return [e for e in trace["traceEvents"] if e["ph"] == "X"]


def test_trace_has_a_process_per_rank_and_named_tracks(run_dir):
    out, _ = run_dir
    with open_run([out]) as run:
        trace = chrome_trace(run)
    meta = [e for e in trace["traceEvents"] if e["ph"] == "M"]
    assert sorted(e["args"]["name"] for e in meta if e["name"] == "process_name") == [
        "rank 0",
        "rank 1",
        "rank 2",
    ]
    tracks = {e["args"]["name"] for e in meta if e["name"] == "thread_name"}
    assert tracks == {
        "thread 100",
        "thread 100 CUDA API",
        "GPU 0 stream 7",
        "GPU 1 stream 7",
        "GPU 2 stream 7",
        "collectives",
    }
    assert trace["otherData"]["truncated"] is False


def test_nccl_kernels_end_at_the_same_aligned_instant_on_every_rank(run_dir):
    out, truth = run_dir
    with open_run([out]) as run:
        spans = _spans(chrome_trace(run))
    ends = {}
    for e in spans:
        if e["cat"] == "nccl":
            ends.setdefault(round(e["ts"] * 1_000), set()).add(round((e["ts"] + e["dur"]) * 1_000))
    first = truth.collectives[0]
    assert {min(first.start_ns.values())} <= set(ends)
    assert all(len(v) == 1 for v in ends.values())  # one end per start: aligned within 1 ns
    waits = [e for e in spans if e["cat"] == "wait"]
    assert sum(round(e["dur"] * 1_000) for e in waits) == sum(
        sum(c.wait_ns.values()) for c in truth.collectives
    )


def test_step_window_and_event_budget_bound_the_trace(run_dir):
    out, _ = run_dir
    with open_run([out]) as run:
        window = chrome_trace(run, ReportOptions(step_from=2, step_to=3))
        small = chrome_trace(run, max_events=5)
        with pytest.raises(NsysWrapError, match="has no events"):
            chrome_trace(run, ReportOptions(step_from=50))
    step = [e for e in _spans(window) if e["name"].startswith("step:")]
    assert {e["name"] for e in step} == {"step:2"}
    lo, hi = min(e["ts"] for e in step), max(e["ts"] + e["dur"] for e in step)
    assert all(e["ts"] < hi and e["ts"] + e["dur"] > lo for e in _spans(window))
    assert len(_spans(small)) == 5 and small["otherData"]["truncated"] is True


def test_cli_writes_the_trace_and_refuses_to_overwrite(cli, run_dir, tmp_path):
    out, _ = run_dir
    target = tmp_path / "trace.json"
    code, stdout, _ = cli("timeline", out, "-o", target, "--steps", "1:3", "--max-events", "100")
    assert code == 0 and "events" in stdout
    trace = json.loads(target.read_text())
    assert 0 < len(_spans(trace)) <= 100
    code, _, err = cli("timeline", out, "-o", target)
    assert code == 1 and "already exists" in err
    assert cli("timeline", out, "-o", target, "--force")[0] == 0


def test_nvtx_window_bounds_the_trace_as_in_the_report(run_dir):
    """--window-nvtx reaches the timeline: the span of the matching ranges on any rank (with
    --steps, the intersection); `step:2` spans exactly what steps 2:3 do."""
    out, _ = run_dir
    with open_run([out]) as run:
        by_steps = chrome_trace(run, ReportOptions(step_from=2, step_to=3))
        by_nvtx = chrome_trace(run, ReportOptions(window_nvtx="step:2"))
        both = chrome_trace(run, ReportOptions(window_nvtx="step:%", step_from=2, step_to=3))
        with pytest.raises(NsysWrapError, match="has no events"):
            chrome_trace(run, ReportOptions(window_nvtx="no such range"))
        with pytest.raises(NsysWrapError, match="has no events"):
            chrome_trace(run, ReportOptions(window_nvtx="step:1", step_from=3, step_to=4))
    assert by_nvtx == by_steps == both and _spans(by_nvtx)


def test_cli_timeline_takes_the_nvtx_window(cli, run_dir, tmp_path):
    out, _ = run_dir
    by_nvtx, by_steps = tmp_path / "nvtx.json", tmp_path / "steps.json"
    code, _, err = cli("timeline", out, "-o", by_nvtx, "--window-nvtx", "step:1")
    assert code == 0, err
    assert cli("timeline", out, "-o", by_steps, "--steps", "1:2")[0] == 0
    assert by_nvtx.read_text() == by_steps.read_text()
    assert '"step:1"' in by_nvtx.read_text()
