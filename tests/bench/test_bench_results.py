"""RESULTS.md: a part run alone rewrites its own sections and keeps every other one; the
targets are judged per shape, a miss with its measured cause."""

from __future__ import annotations

from pathlib import Path

from bench.results import GENERATED, render
from bench.stages import from_log
from bench.targets import stages_section, targets_section

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "RESULTS.md"


def test_a_part_run_alone_keeps_the_sections_it_does_not_measure():
    previous = RESULTS.read_text()
    out = render({}, previous=previous)
    for heading in GENERATED:
        if heading in previous:
            section = previous.split(heading, 1)[1].split("\n## ", 1)[0]
            assert heading + section in out, heading


LOG = [  # a stage log (nsyswrap.engine.stage_log) of two reports and their run
    {"pid": 2, "kind": "views", "name": "views", "report": "r0", "cpu_s": 2.0, "hwm_mb": 600},
    {"pid": 3, "kind": "views", "name": "views", "report": "r1", "cpu_s": 2.2, "hwm_mb": 610},
    {
        "pid": 2,
        "kind": "object",
        "name": "device_timeline",
        "report": "r0",
        "cpu_s": 0.8,
        "hwm_mb": 700,
    },
    {
        "pid": 3,
        "kind": "object",
        "name": "device_timeline",
        "report": "r1",
        "cpu_s": 0.8,
        "hwm_mb": 650,
    },
    {
        "pid": 2,
        "kind": "object",
        "name": "xr_segments",
        "report": "r0",
        "cpu_s": 2.4,
        "hwm_mb": 1300,
    },
    {
        "pid": 3,
        "kind": "object",
        "name": "xr_segments",
        "report": "r1",
        "cpu_s": 2.4,
        "hwm_mb": 1310,
    },
    {
        "pid": 2,
        "kind": "object",
        "name": "steps.ledger",
        "report": "r0",
        "cpu_s": 0.1,
        "hwm_mb": 1300,
    },
    {
        "pid": 1,
        "kind": "run",
        "name": "xr_replay_check",
        "report": "",
        "cpu_s": 9.7,
        "hwm_mb": 2160,
    },
    {"pid": 1, "kind": "run", "name": "xr_clock", "report": "", "cpu_s": 0.3, "hwm_mb": 2160},
]


def _log(tmp_path) -> dict:
    import json

    path = tmp_path / "stage-log.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in LOG))
    return from_log(path, tree_cpu_s=25.0)


def test_a_stage_log_gives_the_cpu_per_report_by_stage(tmp_path):
    log = _log(tmp_path)
    assert log["reports"] == 2
    per = log["per_report_s"]
    assert per["views"] == 2.1 and per["sort_sweep"] == 0.8 and per["replay_inputs"] == 2.4
    assert abs(per["objects"] - 0.05) < 1e-9
    assert log["run_s"] == 10.0 and abs(log["rest_s"] - (25.0 - 10.7 - 10.0)) < 1e-9
    assert log["costliest_objects"][0] == ["xr_segments", 2.4]
    assert log["worker_peak"] == [1310, "object xr_segments"]
    assert log["main_peak"] == [2160, "run xr_replay_check"]


def _rows(tmp_path, shape: str) -> list[dict]:
    base = {"shape": shape, "runs": 1, "detail": {}}
    return [
        {**base, "key": "extract", "wall_s": 4.3},
        {**base, "key": "floor", "wall_s": 0.9},
        {
            **base,
            "key": "report_cold",
            "wall_s": 82.0,
            "rss_together_mb": 8600.0,
            "processes": 5,
            "stage_log": _log(tmp_path),
        },
        {**base, "key": "report_warm", "wall_s": 0.2},
        {**base, "key": "report_assembled", "wall_s": 2.5},
        {**base, "key": "report_steps", "wall_s": 6.0},
        {**base, "key": "baseline", "wall_s": 140.0},
        {**base, "key": "trio_cold", "wall_s": 40.0},
    ]


def test_missed_targets_say_by_how_much_and_where_the_time_and_memory_go(tmp_path):
    """Issue 37: each target per shape; a miss gives its measured cause (the CPU per report
    by stage, the run objects; the step each process peaked in)."""
    main = {"rows": _rows(tmp_path, "launch-bound"), "started": "today"}
    table = targets_section(main, None, None)
    cold = next(ln for ln in table.splitlines() if ln.startswith("| cold report"))
    assert "82.00 s ÷ 4.30 s = 19.1×: **missed by 6.4×**" in cold
    assert "read + views 2.10, device sort/sweep 0.80" in cold
    assert "replay inputs 2.40" in cold and "on the run 10.00 s (xr_replay_check 9.70)" in cold
    assert "= 3.5× (the whole report cold: 1.7×): **missed by 1.4×**" in table
    assert "| warm report (its stored answer) ≤ 0.5 s | 0.20 s: met |" in table
    assert "6.00 s ÷ 2.50 s = 2.4×: met" in table
    peak = next(ln for ln in table.splitlines() if ln.startswith("| sampled peak"))
    assert "8,600 MB (report_cold, 5 processes): **missed by 4.2×**" in peak
    assert "the main process's peak 2,160 MB in run xr_replay_check" in peak
    assert "part whatif not measured" in table
    stages = stages_section(main)
    assert "| replay inputs, per report | 2.40 |" in stages
    assert "| cross-rank run objects, per run | 10.00 |" in stages


def test_on_a_loaded_machine_a_target_is_judged_on_cpu_too(tmp_path):
    """Wall times on a shared machine stretch with its load; CPU times barely: both shown."""
    rows = _rows(tmp_path, "queued")
    warm = next(r for r in rows if r["key"] == "report_warm")
    warm.update(wall_s=3.84, cpu_s=0.36)
    table = targets_section({"rows": rows, "started": "today"}, None, None)
    assert "3.84 s (CPU 0.36 s: met): **missed by 7.7×**" in table
