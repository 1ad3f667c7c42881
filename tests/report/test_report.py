"""`nsyswrap report`: the single-rank section, its verdict, JSON figures and the CLI."""

from __future__ import annotations

import json

import pytest
from helpers.metric_helpers import AG, AR, load_truth, two_device_case
from helpers.paths import FIXTURES, PUBLIC
from helpers.report_builder import make_report

from nsyswrap import open_run
from nsyswrap.errors import NsysWrapError
from nsyswrap.report import ReportOptions, build_report
from nsyswrap.report.diagnosis.advice import recommendations
from nsyswrap.report.diagnosis.evidence import Evidence
from nsyswrap.report.diagnosis.facts import Totals
from nsyswrap.report.diagnosis.rules.device_label import LABELS, verdict
from nsyswrap.report.figures import is_figure
from nsyswrap.report.flow import section_of

RUN2 = FIXTURES / "run2"


def figures_and_nulls(obj, path="") -> tuple[int, list[str]]:
    """Count the figures in a JSON tree; list the paths of nulls without a reason."""
    if is_figure(obj):
        ok = obj["value"] is not None or obj.get("reason")
        return 1, [] if ok else [path]
    count, bad = 0, []
    items = (
        obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else []
    )
    for key, child in items:
        n, b = figures_and_nulls(child, f"{path}/{key}")
        count, bad = count + n, bad + b
    return count, bad


def section(report: dict, section_id: str = "single_rank") -> dict:
    return next(s for s in report["sections"] if s["id"] == section_id)


def table(sec: dict, table_id: str) -> list[dict]:
    return next((t["rows"] for t in sec["tables"] if t["id"] == table_id), [])


@pytest.mark.skipif(not PUBLIC, reason="shared/nsys-sqlite/public is not beside the repository")
@pytest.mark.parametrize("path", PUBLIC, ids=[p.stem for p in PUBLIC])
def test_every_public_export_gets_a_report_or_reasons(cli, path):
    code, out, err = cli("report", path, "--format", "json")
    assert code == 0, err
    report = json.loads(out)
    count, nulls_without_reason = figures_and_nulls(report)
    assert not nulls_without_reason
    mine = section(report)
    ledger = table(mine, "ledger")
    assert ledger or any("no GPU activity" in c["reason"] for c in mine["cannot_answer"])
    if ledger:
        assert mine["verdict"]["label"] in LABELS
        assert count > 0
    code, out, err = cli("report", path)
    assert code == 0, err
    assert out.startswith("nsyswrap report") and "DIAGNOSIS: " in out.splitlines()[1]


def test_run2_report_matches_planted_truth():
    truth = load_truth(RUN2)
    with open_run([RUN2]) as run:  # the section's verdict and advice are the diagnosis'
        report = build_report(run, ReportOptions(whole_capture=True))
    sec = section(report)
    assert sec["verdict"]["label"] == "communication-bound"
    ledger = {(r["rank"], r["device"]): r for r in table(sec, "ledger")}
    for dev in truth["devices"]:
        row = ledger[(dev["rank"], dev["device"])]
        assert row["span"] == {"value": dev["span_ns"], "unit": "ns"}
        assert row["comm_only"]["value"] == dev["comm_only_ns"]
        assert row["copy_only"]["value"] == dev["other_only_ns"]
        assert row["idle"]["value"] == dev["idle_ns"]
    causes = {(r["rank"], r["cause"]) for r in table(sec, "idle_gaps")}
    planted = {(g["rank"], g["cause"]) for g in truth["scenario"]["gaps"]}
    assert planted <= causes
    steps = table(sec, "steps")
    assert len(steps) == sum(len(d["steps"]) for d in truth["devices"])
    assert any("Overlap more" in r for r in section(report)["recommendations"])


def test_window_options_narrow_every_table():
    truth = load_truth(RUN2)
    step1 = {d["rank"]: d["steps"][1] for d in truth["devices"]}
    with open_run([RUN2]) as run:
        sec = section_of(run, "single_rank", ReportOptions.parse(steps="1:2"))
        nothing = ReportOptions.parse(window_nvtx="nothing like this")
        nvtx = section(build_report(run, nothing))  # its verdict is the diagnosis'
    for row in table(sec, "ledger"):
        assert row["span"]["value"] == step1[row["rank"]]["span_ns"]
        assert row["idle"]["value"] == step1[row["rank"]]["idle_ns"]
    assert {r["step"] for r in table(sec, "steps")} == {1}
    assert "steps 1:2" in sec["title"]
    assert not table(nvtx, "ledger")
    assert nvtx["verdict"]["label"] is None
    assert sum("window is empty" in c["reason"] for c in nvtx["cannot_answer"]) == 2


def test_missing_figures_say_why(tmp_path):
    """No launches, no communication, no steps: nulls with reasons and cannot-answer lines."""
    path = make_report(
        tmp_path / "rank0.sqlite", kernels=[(0, 100, 0, 7, "a"), (300, 400, 0, 7, "b")]
    )
    with open_run([path]) as run:
        sec = section_of(run, "single_rank", ReportOptions())
    shares = table(sec, "shares")[0]
    assert shares["overlap_ratio"]["value"] is None
    assert "no NCCL" in shares["overlap_ratio"]["reason"]
    launches = table(sec, "launches")[0]
    assert launches["latency_p50"]["value"] is None
    assert "--trace=cuda" in launches["latency_p50"]["reason"]
    whats = [c["what"] for c in sec["cannot_answer"]]
    assert whats == [
        "collective exposure",
        "the causes of idle gaps",
        "the step breakdown",
        "the GPU time of NVTX ranges",
    ]
    assert figures_and_nulls(sec)[1] == []


def test_report_tables_cover_the_hand_made_case(tmp_path):
    with open_run([two_device_case(tmp_path / "rank0.sqlite")]) as run:
        # the whole capture: the gaps below lie outside its steps
        report = build_report(run, ReportOptions(whole_capture=True))
    mine = section(report)
    top = table(mine, "top_exposed")
    assert [
        (r["kernel"], r["step"]["value"], r["exposed"]["value"], r["compute_stream"]) for r in top
    ] == [(AG, 1, 100, True), (AR, 0, 20, False)]
    assert [r["context"] for r in top] == [
        "coll:all_gather bytes=4096 dtype=float32 pg=0 size=2 seq=0",
        "fwd:model.b",
    ]
    hist = table(mine, "gap_histogram")
    assert [
        (r["length"], r["host_bound"]["value"], r["sync"]["value"], r["other"]["value"])
        for r in hist
    ] == [("0 ns - 1 us", 1, 1, 1)]


# -- verdict ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "totals, label",
    [
        (Totals(span_ns=10**6, compute_busy_ns=8 * 10**5, idle_ns=2 * 10**5), "compute-bound"),
        (
            Totals(
                span_ns=10**6,
                compute_busy_ns=6 * 10**5,
                comm_busy_ns=3 * 10**5,
                exposed_comm_ns=2 * 10**5,
                idle_ns=2 * 10**5,
            ),
            "communication-bound",
        ),
        (
            Totals(
                span_ns=10**6,
                compute_busy_ns=6 * 10**5,
                idle_ns=4 * 10**5,
                gap_ns={"host_bound": 3 * 10**5, "other": 10**5},
            ),
            "host-bound",
        ),
        (
            Totals(
                span_ns=10**6,
                compute_busy_ns=6 * 10**5,
                idle_ns=4 * 10**5,
                gap_ns={"other": 4 * 10**5},
            ),
            "balanced",
        ),
        (Totals(span_ns=10**6, compute_busy_ns=5 * 10**5, copy_only_ns=5 * 10**5), "copy-bound"),
        (Totals(span_ns=10**6, compute_busy_ns=8 * 10**5, copy_only_ns=2 * 10**5), "compute-bound"),
        (Totals(), None),
    ],
)
def test_verdict_labels(totals, label):
    assert verdict(totals)["label"] == label


def test_verdict_needs_enough_data():
    busy = Totals(
        span_ns=10**7, compute_busy_ns=10**6, idle_ns=9 * 10**6, gap_ns={"host_bound": 9 * 10**6}
    )
    assert verdict(busy)["label"] == "host-bound"
    two = verdict(busy, activities=2)
    assert two["label"] == "not enough data" and "only 2 GPU activities" in two["reason"]
    short = verdict(Totals(span_ns=50_000, compute_busy_ns=50_000), activities=100)
    assert short["label"] == "not enough data" and "at least 100 us" in short["reason"]


def test_recommendations_are_concrete():
    comm = Totals(
        span_ns=10**7,
        compute_busy_ns=5 * 10**6,
        comm_busy_ns=4 * 10**6,
        both_ns=10**6,
        exposed_comm_ns=3 * 10**6,
        idle_ns=10**6,
        compute_sum_ns=5 * 10**6,
        comm_sum_ns=4 * 10**6,
    )
    recs = recommendations(
        comm, Evidence(top_exposed="AllReduce in bwd:x (step 2)", same_stream=["rank 0 device 0"])
    )
    assert list(recs) == ["exposed", "overlap", "same_stream"]
    assert "3.00 ms" in recs["exposed"] and "AllReduce in bwd:x" in recs["exposed"]
    assert "rank 0 device 0" in recs["same_stream"] and "own stream" in recs["same_stream"]
    host = Totals(
        span_ns=10**7,
        compute_busy_ns=6 * 10**6,
        idle_ns=4 * 10**6,
        gap_ns={"host_bound": 3 * 10**6, "other": 10**6},
    )
    recs = recommendations(host, Evidence(kernels=100, tiny_kernels=80))
    assert "CUDA graph" in recs["launch"] and "80 of the 100 kernels" in recs["launch"]
    assert "torch.compile" not in recs["launch"]
    sync = Totals(
        span_ns=10**7, compute_busy_ns=6 * 10**6, idle_ns=4 * 10**6, gap_ns={"sync": 3 * 10**6}
    )
    assert ".item()" in recommendations(sync, Evidence(frameworks=frozenset({"pytorch"})))["sync"]
    assert ".item()" not in recommendations(sync, Evidence())["sync"]


# -- options and CLI ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("2:5", (2, 5)),
        ("3:", (3, None)),
        (":4", (None, 4)),
        (" 1 : 2 ", (1, 2)),
    ],
)
def test_steps_option(text, expected):
    options = ReportOptions.parse(steps=text)
    assert (options.step_from, options.step_to) == expected


@pytest.mark.parametrize("text", ["5", "a:b", ":", "5:2", "1:2:3"])
def test_bad_steps_option(text):
    with pytest.raises(NsysWrapError, match="--steps"):
        ReportOptions.parse(steps=text)


def test_cli_report_writes_files_and_rejects_bad_input(cli, tmp_path):
    out = tmp_path / "report.json"
    code, _, err = cli("report", RUN2, "-f", "json", "-o", out)
    assert code == 0, err
    assert section(json.loads(out.read_text()))["id"] == "single_rank"
    code, _, err = cli("report", RUN2, "-f", "json", "-o", out)
    assert code == 1 and "--force" in err
    code, _, err = cli("report", RUN2, "-o", out, "--force", "--steps", "0:1")
    assert code == 0, err
    assert "DIAGNOSIS" in out.read_text() and "steps 0:1" in out.read_text()
    code, _, err = cli("report", RUN2, "--steps", "x")
    assert code == 1 and err.startswith("Error: --steps x: is not FROM:TO")
