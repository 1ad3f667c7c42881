"""The first screen of every real capture says only what its trace shows.

Real captures: the project's H100 runs (fixtures/real), every export in
shared/nsys-sqlite (the public ones, the 5 ranks of the MPI Jacobi run alone and together,
the FSDP2 + NCCL captures). For each: the window is the steps when it has steps (else
the GPU activity, and nothing is per step), the per-step figures are those of the step
ranges, and no advice contradicts the trace (CUDA graphs, launch overhead, host work,
pinned memory, frameworks, waiting ranks). Then the claims named in issue #24.
"""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

import pytest
from helpers.paths import FIXTURES
from helpers.real_captures import CAPTURES

import nsyswrap
from nsyswrap.report import ReportOptions, report
from nsyswrap.report.diagnosis.rules import host_idle_advice, noise_floor
from nsyswrap.report.figures import physical_gpus
from nsyswrap.report.render import first_screen, render_text

_reports: dict[str, dict] = {}


def _report(name: str, options: ReportOptions | None = None) -> dict:
    options = options or ReportOptions()
    key = f"{name} {options}"
    if key not in _reports:
        _reports[key] = report(CAPTURES[name], options)
    return _reports[key]


def _rows(rep: dict, section: str, table: str) -> list[dict]:
    sec = next((s for s in rep["sections"] if s["id"] == section), {})
    return next((t["rows"] for t in sec.get("tables", []) if t["id"] == table), [])


def _v(cell):
    return cell["value"] if isinstance(cell, dict) else cell


def _advice(rep: dict) -> str:
    return " ".join(rep["diagnosis"]["recommendations"])


@pytest.fixture(scope="module", params=sorted(CAPTURES))
def capture(request) -> tuple[str, dict]:
    return request.param, _report(request.param)


def test_the_window_is_the_steps_and_per_step_figures_are_theirs(capture):
    name, rep = capture
    window, d = rep["window"], rep["diagnosis"]
    screen = "\n".join(first_screen(rep, 80))
    assert max(map(len, screen.splitlines())) <= 80, name
    if not window["steps"]:
        assert window["source"] == "activity" and " per step" not in screen, name
        assert all(f["cost_basis"] != "per step" for f in d["findings"]), name
        return
    set_apart = {o["step"] for o in window["outliers"] if o["set_apart"]}
    usual = [s for s in window["steps"] if s not in set_apart]
    assert window["source"] == "steps", name
    lo, hi = window["step_from"], window["step_to"]
    selected = [s for s in window["steps"] if (lo is None or s >= lo) and (hi is None or s < hi)]
    assert selected == [s for s in window["steps"] if usual[0] <= s <= usual[-1]], name
    assert re.search(r"^Window: steps? \d", screen, re.M), name
    ranges = nsyswrap.query("steps.spans", CAPTURES[name], step_pattern=window["step_pattern"])
    envelope = ranges.groupby(["rank", "step"]).agg(
        start=("start_ns", "min"), end=("end_ns", "max")
    )
    steps = _rows(rep, "single_rank", "steps")
    for r in steps:  # the steps table holds the step ranges of the window
        start, end = envelope.loc[(r["rank"], r["step"])]
        assert _v(r["duration"]) == end - start, (name, r)
        assert usual[0] <= r["step"] < usual[-1] + 1
    for dev in d["devices"]:  # the statistics are those of the usual steps
        mine = [
            _v(r["duration"])
            for r in steps
            if (r["rank"], r["device"]) == (dev["rank"], dev["device"])
            and r["step"] not in set_apart
        ]
        if len(mine) >= 2:
            assert _v(dev["step_mean"]) == pytest.approx(statistics.fmean(mine)), name
            assert _v(dev["step_max"]) == max(mine), name
    ledger = {(r["rank"], r["device"]): r for r in _rows(rep, "single_rank", "ledger")}
    for f in d["findings"]:  # per-step costs: the window's time over its steps, per GPU
        if f["scope"] != "device" or f["cost_basis"] != "per step":
            continue
        keys = [tuple(k) for k in f["devices"]]
        n = sum(1 for r in steps if (r["rank"], r["device"]) == keys[0])
        column = {"communication-bound": "comm_only", "copy-bound": "copy_only"}.get(f["label"])
        if column:
            total = sum(_v(ledger[k][column]) for k in keys)
            assert _v(f["cost"]) == pytest.approx(total / len(keys) / n), name


def test_no_advice_contradicts_the_trace(capture):
    name, rep = capture
    advice = _advice(rep)
    text = "\n".join(render_text(rep, 100, detail=True)) + json.dumps(rep)
    graphs = sum(_v(r["graph_launches"]) for r in _rows(rep, "trace", "graphs"))
    if graphs:  # never told to use what it uses
        assert "as a CUDA graph" not in advice and "reduce-overhead" not in advice, name
    if "launch overhead" in advice:  # only for idle made of short gaps before launches
        gaps = nsyswrap.query("gaps.idle", CAPTURES[name], **rep["options"])
        host = gaps[gaps.cause.isin(["host_bound", "sync"])]
        long_gap = host_idle_advice.RULE.default("long_gap_ns")
        short = host[(host.cause == "host_bound") & (host.dur_ns < long_gap)].dur_ns.sum()
        assert short >= host.dur_ns.sum() / 3, name
    work = {r["host_work"] for r in _rows(rep, "single_rank", "host_work")}
    for named in re.findall(r"ms inside `?([^`,;.]+?)`?(?:,|;|\.)", advice):
        assert named in work, (name, named)  # host work named only where it covers idle gaps
    copies = [r for r in _rows(rep, "trace", "copies") if r["kind"] in ("HtoD", "DtoH")]
    pageable = sum(_v(r["bytes"]) for r in copies if "Pageable" in (r["src"], r["dst"]))
    if "allocate those host buffers pinned" in advice:
        assert pageable >= 0.1 * sum(_v(r["bytes"]) for r in copies), name
    elif "Copies alone" in advice:
        assert pageable < 0.1 * sum(_v(r["bytes"]) for r in copies) or not copies, name
    if "around the matrix multiplies" in advice:  # only to a program that runs some
        tc = _rows(rep, "compute", "tensor_cores")
        assert any((_v(r["tensor_core"]) or 0) > 0 for r in tc), name
    for f in rep["diagnosis"]["findings"]:  # pageable copies measure staging, not the link
        ends = (f["evidence"].get("src"), f["evidence"].get("dst"))
        if f["id"] == "copy_bandwidth" and "Pageable" in ends:
            assert "Check the link" not in (f["recommendation"] or ""), name
    if not any(r["framework"] == "pytorch" for r in _rows(rep, "trace", "frameworks")):
        assert not re.search(r"PyTorch|torch\.|DataLoader|FSDP|DDP", advice), name
    waiting = {x["rank"] for x in rep["diagnosis"]["devices"] if x["label"] == "waiting-for-peers"}
    if waiting:
        assert "communication-bound" not in text, name
    if rep["window"]["source"] == "activity":  # no steps: nothing is per step
        assert " per step" not in "\n".join(first_screen(rep, 80)), name


def test_advice_that_fits_the_program(capture):
    """#38 item 7 on every capture: launch overhead dominates only where the short host
    gaps outweigh the long ones; the DataLoader only with a data-loading
    range named, its pin_memory only with 10 % or more of the host bytes pageable; no
    compile advice to a compiled program; the capture hint only where CUDA was not traced;
    the time before the window as wall time with the GPU's busy time."""
    name, rep = capture
    advice, screen = _advice(rep), _screen(rep)
    if "launch overhead dominates" in advice:
        gaps = nsyswrap.query("gaps.idle", CAPTURES[name], **rep["options"])
        host = gaps[gaps.cause == "host_bound"]
        long_gap = host_idle_advice.RULE.default("long_gap_ns")
        assert (
            host[host.dur_ns < long_gap].dur_ns.sum() >= host[host.dur_ns >= long_gap].dur_ns.sum()
        )
    named = " ".join(re.findall(r"inside `([^`]+)`", advice))
    if "DataLoader" in advice:
        assert host_idle_advice.DATA_LOADING.search(named), (name, named)
    copies = [r for r in _rows(rep, "trace", "copies") if r["kind"] in ("HtoD", "DtoH")]
    pageable = sum(_v(r["bytes"]) for r in copies if "Pageable" in (r["src"], r["dst"]))
    if "DataLoader" in advice and "pin_memory" in advice:
        assert pageable >= 0.1 * sum(_v(r["bytes"]) for r in copies), name
    if any(r["framework"] == "inductor" for r in _rows(rep, "trace", "frameworks")):
        assert "torch.compile fuses" not in advice and "or torch.compile" not in advice, name
    traced = _rows(rep, "trace", "capture")
    if traced and all("cuda" in (r["traced"] or "").split(",") for r in traced):
        assert "--trace=cuda" not in screen, name
    flat = " ".join(screen.split())
    said = re.search(r"([\d,.]+) ms of wall time before step \d+, the GPU busy ([\d.]+) ms", flat)
    if said:  # the rank (or GPU) with the most wall time before the window, and its busy time
        most = max(_rows(rep, "single_rank", "window"), key=lambda r: _v(r["before"]))
        assert said.groups() == (
            f"{_v(most['before']) / 1e6:,.2f}",
            f"{_v(most['busy_before']) / 1e6:.2f}",
        ), name
    assert "Not analysed: the GPU activity" not in flat, name


def test_noise_is_never_headlined_and_comes_last(capture):
    """Rule noise_floor: a cross-rank finding within the run's noise is after every other,
    advises nothing and is not the headline; every finding before it stands above it."""
    name, rep = capture
    d = rep["diagnosis"]
    floor, flags = _v(d["noise_floor"]), [bool(f.get("below_noise")) for f in d["findings"]]
    assert flags == sorted(flags), name  # those within the noise last
    limits = noise_floor.RULE.limits()
    for f, noise in zip(d["findings"], flags):
        if f["scope"] != "cross-rank" or f["cost_basis"] != "per step" or floor is None:
            assert not noise, name
            continue
        per_step = _v(f["gain"]) if _v(f["gain"]) is not None else _v(f["cost"])
        some = f["evidence"].get("pattern") == "intermittent"
        affected = _v(f["evidence"]["gain_per_affected_step"]) if some else None
        under = per_step < limits.mean_factor * floor or (
            affected is not None and affected < limits.affected_factor * floor
        )
        assert noise == under, (name, f["label"])
        if noise:
            assert f["recommendation"] is None and "within the run's noise" in f["text"], name
            assert not d["headline"].startswith(f["label"].upper()), name


def test_ranks_on_one_gpu_are_never_counted_as_gpus(capture):
    """#38 item 3: where ranks share a physical GPU (trace.gpus, by UUID), no figure is
    per GPU and no count says GPUs for ranks (every two-rank H100/H200 capture: one GPU)."""
    name, rep = capture
    keys = {(x["rank"], x["device"]) for x in rep["diagnosis"]["devices"]}
    if not keys or physical_gpus(rep) >= len(keys):
        return
    screen = _screen(rep)
    assert "per GPU" not in screen and not re.search(r"of \d+ GPUs", screen), name
    assert "per rank" in screen, name


FIRST = {  # the first finding of the two-rank H200 captures (one GPU), #38 item 2
    "real/h200_fix_clean": "host-bound",  # its 0.83 ms jitter is under the 1.41 ms floor
    "real/h200_fix_slow": "straggler: rank 1",
    "real/h200_ddp_gloo_slow": "intermittent: rank 1",
    "real/h200_ddp_gloo_slow_zero_code": "intermittent: rank 1",
}


@pytest.mark.parametrize("name", sorted(FIRST))
def test_the_stall_or_the_host_heads_the_two_rank_captures(name):
    if name not in CAPTURES:
        pytest.skip("fixtures/real missing")
    rep = _report(name)
    first = rep["diagnosis"]["findings"][0]
    assert first["label"] == FIRST[name] and not first.get("below_noise")
    assert "between 0.83 ms per step if" not in _screen(rep)  # ends that round equal: one figure


def _screen(rep: dict) -> str:
    return "\n".join(first_screen(rep, 80))


@pytest.mark.skipif("real/h100_cuda_graphs" not in CAPTURES, reason="fixtures/real missing")
def test_cuda_graphs_capture_reads_as_its_steps_without_graph_advice():
    rep, given = (
        _report("real/h100_cuda_graphs"),
        _report("real/h100_cuda_graphs", ReportOptions.parse("0:")),
    )
    assert rep["diagnosis"]["devices"] == given["diagnosis"]["devices"]
    assert [f["text"] for f in rep["diagnosis"]["findings"]] == [
        f["text"] for f in given["diagnosis"]["findings"]
    ]
    assert "CUDA graph" not in _advice(rep) and "945" not in _screen(rep)
    assert "`data_loading`" in _advice(rep)  # the host work between the graph replays


@pytest.mark.skipif(
    "fsdp/fsdp2_nccl1" not in CAPTURES, reason="shared/nsys-sqlite/real-fsdp missing"
)
def test_fsdp_steps_are_found_and_step_0_is_warm_up():
    rep = _report("fsdp/fsdp2_nccl1")
    w = rep["window"]
    assert (w["step_pattern"], w["pattern_source"]) == ("iteration %", "found")
    assert [(o["step"], o["why"], o["set_apart"]) for o in w["outliers"]] == [(0, "warm-up", True)]
    assert (w["step_from"], w["step_to"]) == (1, None)  # steps 1 to 7, the last one
    screen = _screen(rep)
    assert "Step 0 is warm-up" in screen and "found by themselves" in screen
    assert "--step-pattern" in screen
    assert all(_v(x["step_max"]) < 100e6 for x in rep["diagnosis"]["devices"])  # not 3,976 ms


@pytest.mark.skipif("sc23omp__report3" not in CAPTURES, reason="shared/nsys-sqlite/public missing")
def test_pageable_copies_are_told_to_use_pinned_memory():
    """Once: the slow pageable copies' finding points to the copy-bound GPU's advice."""
    rep = _report("sc23omp__report3")
    advice = _advice(rep)
    assert "allocate those host buffers pinned" in advice and "200 of 200 host copies" in advice
    assert "PCIE" not in advice  # its slow copies are pageable: the link is not the question
    assert "Pin those host buffers" not in advice
    (slow,) = [f for f in rep["diagnosis"]["findings"] if f["id"] == "copy_bandwidth"]
    assert slow["recommendation"] is None and "as advised for the copy-bound GPU" in slow["text"]


@pytest.mark.skipif("mpi/all" not in CAPTURES, reason="shared/nsys-sqlite/real-mpi missing")
def test_mpi_idle_time_is_put_on_its_mpi_calls():
    rep = _report("mpi/all")
    advice = _advice(rep)
    assert "inside MPI_Sendrecv" in advice and "CUDA graph" not in advice
    work = _rows(rep, "single_rank", "host_work")
    sendrecv = sum(_v(r["idle"]) for r in work if r["host_work"] == "MPI_Sendrecv")
    assert sendrecv > 0.5 * sum(_v(r["idle"]) for r in work)


@pytest.mark.skipif(
    "pipit__perlmutter-cloverleaf-cuda" not in CAPTURES,
    reason="shared/nsys-sqlite/public missing",
)
def test_a_stencil_code_is_not_told_to_fuse_around_matrix_multiplies():
    """CloverLeaf runs no matrix multiply or attention kernel: compute-bound, it is told to
    make its longest kernels faster, not to fuse work around matrix multiplies."""
    rep = _report("pipit__perlmutter-cloverleaf-cuda")
    assert [_v(r["tensor_core"]) for r in _rows(rep, "compute", "tensor_cores")] == [0]
    assert [f["id"] for f in rep["diagnosis"]["findings"]] == ["compute-bound"]
    assert "matrix multiplies" not in _screen(rep)


@pytest.mark.skipif(
    "pipit__perlmutter-cloverleaf-cuda" not in CAPTURES,
    reason="shared/nsys-sqlite/public missing",
)
def test_gaps_no_range_covers_are_put_on_the_os_runtime_call_of_the_launching_thread():
    """CloverLeaf has no NVTX range; nsys traced its OS runtime: the host-caused gaps are
    put on the `write` calls of the thread that launches (its output), the rest on none."""
    rep = _report("pipit__perlmutter-cloverleaf-cuda")
    work = {
        (r["source"], r["host_work"]): _v(r["gaps"]) for r in _rows(rep, "single_rank", "host_work")
    }
    assert work == {("osrt", "write"): 19, ("none", None): 6}
    path = CAPTURES["pipit__perlmutter-cloverleaf-cuda"]
    launching = nsyswrap.sql("SELECT DISTINCT pid, tid FROM api_calls", path)
    writes = nsyswrap.sql("SELECT DISTINCT pid, tid FROM osrt_calls WHERE api = 'write'", path)
    assert set(map(tuple, writes.values)) & set(map(tuple, launching.values))


def test_the_showcase_never_calls_waiting_ranks_communication_bound(tmp_path):
    rep = report([FIXTURES / "run4_straggler"])
    labels = {x["rank"]: x["label"] for x in rep["diagnosis"]["devices"]}
    assert [labels[r] for r in (0, 1, 3)] == ["waiting-for-peers"] * 3
    from nsyswrap.html_report import write_page
    from nsyswrap.report import answer

    page = answer([FIXTURES / "run4_straggler"], ReportOptions(), plots=True)
    write_page(page, tmp_path / "page.html")
    for text in (
        "\n".join(render_text(rep, 80, detail=True)),
        json.dumps(rep),
        (tmp_path / "page.html").read_text(),
    ):
        assert "communication-bound" not in text


def test_a_window_outside_the_steps_is_refused(cli):
    code, out, err = cli("report", FIXTURES / "run2", "--steps", "5:9")
    assert code == 1 and not out
    assert "--steps 5:9" in err and "steps 0-2" in err and len(err.strip().splitlines()) == 1


def test_multi_rank_report_tables_are_per_rank():
    if "nsysai__h100_2gpu_1s" not in CAPTURES:
        pytest.skip("shared/nsys-sqlite/public missing")
    rep = _report("nsysai__h100_2gpu_1s")
    assert {r["rank"] for r in _rows(rep, "trace", "copies")} == {0, 1}
    # the data-quality row is the whole report's: it says it holds both ranks
    (dq,) = _rows(rep, "data_quality", "data_quality")
    assert (dq["rank"], dq["ranks"]) == (0, "0,1") and _v(dq["kernels"]) == 3442
    table = "\n".join(render_text(rep, 80, section="data_quality"))
    assert re.search(r"^rank +ranks +capture", table, re.M), table
    assert re.search(r"^0 +0,1 +[\d,.]+ +3,442", table, re.M), table
    single = _rows(_report("real/h100_ddp_gloo"), "data_quality", "data_quality")
    assert all("ranks" not in r for r in single)  # one rank per report: no such column
    assert Path(CAPTURES["nsysai__h100_2gpu_1s"][0]).exists()
