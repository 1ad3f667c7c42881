"""Steps named without a number are numbered by start order in their process (a range
named just `train_step` every iteration gives steps 0, 1, 2, ...), and PyTorch
profiler's `ProfilerStep#<i>` ranges are steps by `--step-pattern` or, where a process
has no `step:` ranges, by default: every section, the HTML page and the timeline give
the same figures as on the same run with `step:<i>` ranges (step_ranges in
sql/_macros/metrics.sql)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from nsyswrap import open_run
from nsyswrap.html_report import write_page
from nsyswrap.report import ReportOptions, answer, build_report
from nsyswrap.synth import Scenario, Straggler
from nsyswrap.timeline import chrome_trace

BASE = Scenario(
    name="numbering",
    seed=6,
    ranks=2,
    steps=4,
    kernels_per_step=12,
    modules=2,
    straggler=Straggler(rank=1, phase="backward", extra_ns=400_000),
)
NAMES = {"plain": "train_step", "profiler": "ProfilerStep#{}"}


@pytest.fixture(scope="module")
def runs(generated_run):
    return {
        key: generated_run(dataclasses.replace(BASE, step_name=name))[1]
        for key, name in {"numbered": "step:{}", **NAMES}.items()
    }


def _tables(report: dict) -> dict:
    """Every table's rows as JSON text, but the frameworks seen (ProfilerStep# ranges are
    PyTorch's mark)."""
    return {
        (s["id"], t["id"]): json.dumps(t["rows"], sort_keys=True)
        for s in report["sections"]
        for t in s["tables"]
        if (s["id"], t["id"]) != ("trace", "frameworks")
    }


@pytest.mark.parametrize(
    "key, pattern",
    [("plain", "train_step"), ("profiler", "ProfilerStep#%"), ("profiler", "step:%")],
)
def test_report_numbers_steps_alike(runs, key, pattern):
    with open_run([runs["numbered"]]) as run:
        expected = _tables(build_report(run, ReportOptions.parse("1:3")))
    with open_run([runs[key]]) as run:
        got = _tables(build_report(run, ReportOptions.parse("1:3", step_pattern=pattern)))
        phases = run.df("SELECT DISTINCT step FROM xr_member_phases ORDER BY step")["step"].tolist()
    assert sorted({r["step"] for r in json.loads(got[("single_rank", "steps")])}) == [1, 2]
    stragglers = json.loads(got[("crossrank", "stragglers")])
    assert [r["step"] for r in stragglers] == [1, 2, "all"] and stragglers[-1][
        "phase"
    ] == "backward"
    assert phases == [0, 1, 2, 3]
    assert got == expected


def test_html_and_timeline_number_plain_steps(runs, tmp_path):
    options = ReportOptions.parse("1:3", step_pattern="train_step")
    page = tmp_path / "page.html"
    write_page(answer([runs["plain"]], options, plots=True), page)
    assert "Steps 1–2 of 2" in page.read_text()
    with open_run([runs["plain"]]) as run:
        window = chrome_trace(run, options)
        whole = chrome_trace(run, ReportOptions.parse(step_pattern="train_step"))
    assert 0 < window["otherData"]["events"] < whole["otherData"]["events"]
