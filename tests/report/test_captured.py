"""A hint to capture something only where the capture lacks it (#38 item 8): what each
report traced comes from nsys's record (session.traced) or the launch manifest's --trace,
and a capture that traced CUDA but holds no GPU work (a CPU run under `nsyswrap launch`)
is told that, not "capture with nsys profile --trace=cuda"."""

from __future__ import annotations

import json
import sqlite3

import pytest
from helpers.real_captures import CAPTURES
from helpers.report_builder import make_report

import nsyswrap
from nsyswrap.report import report

CPU_STEPS = [(i * 1_000_000, i * 1_000_000 + 900_000, f"step:{i}") for i in range(6)]


def _reasons(rep: dict) -> list[str]:
    """Every cannot-answer line and missing figure's reason of the report's sections."""
    out = [c["reason"] for s in rep["sections"] for c in s.get("cannot_answer") or []]
    for s in rep["sections"]:
        for t in s.get("tables", []):
            for row in t["rows"]:
                out += [c["reason"] for c in row.values() if isinstance(c, dict) and "reason" in c]
    return out


def _cpu_run(tmp_path, trace: str | None):
    """Two CPU ranks' reports with steps and no GPU work, as nsys 2022 exports them (no
    META_DATA_CAPTURE), and, when `trace` is given, the launch manifest beside them."""
    for rank in (0, 1):
        make_report(tmp_path / f"vm.rank{rank}.sqlite", nvtx=CPU_STEPS, pid=100 + rank)
    if trace is not None:
        ranks = [{"rank": r, "reports": [f"{tmp_path}/vm.rank{r}.nsys-rep"]} for r in (0, 1)]
        manifest = {"ranks": ranks, "options": {"trace": trace}}
        (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    return tmp_path


def _capture_table(rep: dict) -> list[dict]:
    trace = next(s for s in rep["sections"] if s["id"] == "trace")
    return next(t["rows"] for t in trace["tables"] if t["id"] == "capture")


def test_a_cpu_run_launched_with_cuda_traced_is_not_told_to_trace_cuda(tmp_path):
    rep = report([_cpu_run(tmp_path, "cuda,nvtx,osrt")])
    assert _capture_table(rep) == [
        {"rank": r, "traced": "cuda,nvtx,osrt", "source": "launch manifest"} for r in (0, 1)
    ]
    reasons = _reasons(rep)
    assert not [r for r in reasons if "capture with nsys profile --trace=cuda" in r]
    said = [r for r in reasons if "CUDA was traced (--trace=cuda: launch manifest)" in r]
    assert len(said) >= 4  # no GPU activity per rank, no kernels per report, no CUDA API
    assert [r for r in reasons if "the OS runtime was traced" in r]


@pytest.mark.parametrize("trace", [None, "nvtx,osrt"])
def test_a_capture_without_cuda_traced_is_told_to_trace_it(tmp_path, trace):
    rep = report([_cpu_run(tmp_path, trace)])
    assert [r["traced"] for r in _capture_table(rep)] == [trace, trace]
    reasons = _reasons(rep)
    assert [r for r in reasons if "capture with nsys profile --trace=cuda" in r]
    assert not [r for r in reasons if "CUDA was traced" in r]


def test_what_nsys_records_it_traced_comes_first(tmp_path):
    """A report that records CAPTURE_EVENT_TYPE rows (nsys 2023 on) is read by them, even
    when a manifest says otherwise."""
    run = _cpu_run(tmp_path, "nvtx")
    for rank in (0, 1):
        with sqlite3.connect(run / f"vm.rank{rank}.sqlite") as con:
            con.execute("CREATE TABLE META_DATA_CAPTURE (name TEXT NOT NULL, value TEXT)")
            con.executemany(
                "INSERT INTO META_DATA_CAPTURE VALUES ('CAPTURE_EVENT_TYPE', ?)",
                [("Cuda",), ("NvtxEvents",), ("OSRuntime",), ("Cuda",)],
            )
            con.execute("INSERT INTO META_DATA_CAPTURE VALUES ('RATE_HZ', '0')")
    traced = nsyswrap.sql("SELECT rank, traced FROM session ORDER BY rank", [run])
    assert traced["traced"].tolist() == ["cuda,nvtx,osrt"] * 2
    rows = _capture_table(report([run]))
    assert {(r["traced"], r["source"]) for r in rows} == {("cuda,nvtx,osrt", "nsys")}


@pytest.mark.parametrize("name", sorted(CAPTURES))
def test_no_real_capture_is_told_to_trace_what_it_traced(name):
    """Every real capture: no section tells it to capture with --trace=X when its
    capture traced X (the trace's own record, read with sqlite3 here)."""
    rep = report(CAPTURES[name])
    rows = _capture_table(rep)
    for row, path in zip(rows, (r["path"] for r in rep["reports"])):
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
            try:
                kinds = {
                    v
                    for (v,) in con.execute(
                        "SELECT value FROM META_DATA_CAPTURE WHERE name = 'CAPTURE_EVENT_TYPE'"
                    )
                }
            except sqlite3.OperationalError:  # nsys 2022: not recorded
                kinds = None
        if kinds is not None:
            assert row["source"] == "nsys"
            assert ("cuda" in row["traced"].split(",")) == ("Cuda" in kinds)
    for what in ("cuda", "nvtx", "osrt"):
        if all(what in (r["traced"] or "").split(",") for r in rows):
            told = [r for r in _reasons(rep) if f"capture with --trace={what}" in r]
            told += [r for r in _reasons(rep) if f"nsys profile --trace={what}" in r]
            assert not told, (what, told)
