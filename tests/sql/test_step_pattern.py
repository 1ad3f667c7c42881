"""One step definition: `--step-pattern` reaches the single-rank and cross-rank sections,
the HTML page and the timeline alike. A run whose steps are named `iteration <k>`,
analysed with `--step-pattern 'iteration %'`, gives the same figures as the same run
with `step:<k>` steps analysed with the default pattern."""

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
    name="iterations",
    seed=5,
    ranks=2,
    steps=4,
    kernels_per_step=12,
    modules=2,
    straggler=Straggler(rank=1, phase="data_loading", extra_ns=400_000),
)
ITERATION = "iteration %"


@pytest.fixture(scope="module")
def runs(generated_run):
    _, plain = generated_run(BASE)
    _, named = generated_run(dataclasses.replace(BASE, step_name="iteration {}"))
    return plain, named


def _tables(report: dict) -> dict:
    """Every table's rows by (section, table id), as JSON text."""
    return {
        (s["id"], t["id"]): json.dumps(t["rows"], sort_keys=True)
        for s in report["sections"]
        for t in s["tables"]
    }


def test_report_sections_find_steps_by_the_pattern(runs):
    plain, named = runs
    with open_run([plain]) as run:
        expected = build_report(run, ReportOptions.parse("1:3"))
    with open_run([named]) as run:
        got = build_report(run, ReportOptions.parse("1:3", step_pattern=ITERATION))
        default = build_report(run, ReportOptions.parse())
    tables = _tables(got)
    steps = json.loads(tables[("single_rank", "steps")])
    assert sorted({r["step"] for r in steps}) == [1, 2]
    stragglers = json.loads(tables[("crossrank", "stragglers")])
    assert [r["step"] for r in stragglers] == [1, 2, "all"]
    assert tables == _tables(expected)
    # no `step:%` range there: the report finds the `iteration <k>` steps by themselves
    assert (default["window"]["step_pattern"], default["window"]["pattern_source"]) == (
        ITERATION,
        "found",
    )
    assert sorted({r["step"] for r in json.loads(_tables(default)[("single_rank", "steps")])}) == [
        0,
        1,
        2,
        3,
    ]


def test_html_page_and_timeline_find_steps_by_the_pattern(runs, tmp_path):
    _, named = runs
    options = ReportOptions.parse("1:3", step_pattern=ITERATION)
    page = tmp_path / "page.html"
    write_page(answer([named], options, plots=True), page)
    assert "Steps 1–2 of 2" in page.read_text()
    with open_run([named]) as run:
        window = chrome_trace(run, options)
        whole = chrome_trace(run, ReportOptions.parse(step_pattern=ITERATION))
    names = {e["name"] for e in window["traceEvents"] if e.get("ph") == "X"}
    assert {"iteration 1", "iteration 2"} <= names  # (and what overlaps them on any rank)
    assert window["otherData"]["events"] < whole["otherData"]["events"]


def test_cli_timeline_takes_the_step_window_and_pattern(cli, runs, tmp_path):
    _, named = runs
    target = tmp_path / "trace.json"
    code, out, err = cli(
        "timeline", named, "-o", target, "--steps", "2:3", "--step-pattern", ITERATION
    )
    assert code == 0, err
    names = {e["name"] for e in json.loads(target.read_text())["traceEvents"] if e.get("ph") == "X"}
    assert "iteration 2" in names


@pytest.mark.parametrize(
    "step_name, pattern",
    [("step_{}", "step_%"), ("Step {}", "Step %"), ("train_step", "train_step")],
)
def test_other_step_names_are_found_by_themselves(generated_run, step_name, pattern):
    """Without a `step:<k>` range the report finds a program's own steps: a range repeated
    with a number one more each time (`step_3`, `Step 3`), or one name holding "step"
    repeated (`train_step`, numbered in order), and says it found them."""
    _, out = generated_run(dataclasses.replace(BASE, step_name=step_name))
    with open_run([out]) as run:
        report = build_report(run, ReportOptions.parse())
    window = report["window"]
    assert (window["step_pattern"], window["pattern_source"]) == (pattern, "found")
    assert window["steps"] == [0, 1, 2, 3]
    assert "found by themselves" in report["diagnosis"]["window"]
