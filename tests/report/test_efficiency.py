"""How well the compute runs, and what the host and GPU memory do (issue #27): the kernel
classifier, the peak table, MFU, the kernels that matter and a slower rank's copy of a
kernel, copy bandwidth, GPU memory and the CUDA API / OS runtime summaries, on planted
reports (copies of the bundled fixtures with tables added) and on the real captures."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
from pathlib import Path

import pandas as pd
import pytest
from helpers.paths import FIXTURES, ROOT, SHARED

import nsyswrap
from nsyswrap.engine import sql_objects
from nsyswrap.engine.connection import session
from nsyswrap.engine.queries import run_module
from nsyswrap.launch.config import LaunchConfig
from nsyswrap.launch.nsys import nsys_argv
from nsyswrap.report import ReportOptions, build_report
from nsyswrap.report.compute import kernel_spread, slow_kernels
from nsyswrap.report.diagnosis import diagnose

RUN2 = FIXTURES / "run2"
RUN4 = FIXTURES / "run4_straggler"
GLOO = FIXTURES / "real" / "h100_ddp_gloo"
MEMORY = SHARED / "nsys-sqlite" / "real-fsdp" / "memory" / "fsdp2_nccl1_memory.sqlite"
REAL_MPI = SHARED / "nsys-sqlite" / "real-mpi" / "report1.sqlite"
H100_BF16 = 989.5


def _section(report: dict, section_id: str) -> dict:
    return next(s for s in report["sections"] if s["id"] == section_id)


def _table(report: dict, section_id: str, table_id: str) -> list[dict]:
    tables = _section(report, section_id)["tables"]
    return next((t["rows"] for t in tables if t["id"] == table_id), [])


def _planted(folder: Path, source: Path, *statements: str, params: tuple = ()) -> Path:
    """A copy of `source` with `statements` run on it (each with its parameters)."""
    report = Path(shutil.copy(source, folder / source.name))
    con = sqlite3.connect(report)
    for statement, values in zip(statements, params or [()] * len(statements)):
        con.execute(statement, values)
    con.commit()
    con.close()
    return report


# --- the kernel classifier and the peak table ---------------------------------------------


@pytest.mark.parametrize(
    "name, demangled, expected",
    [
        ("nvjet_sm90_tst_64x48_64x15_2x4_h_bz_NNT", None, "matmul"),
        ("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn", None, "matmul"),
        ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", None, "matmul"),
        (
            "Kernel2",
            "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4"
            "_tn_align8>(T1::Params)",
            "matmul",
        ),
        ("triton_tem_fused_addmm_0", None, "matmul"),
        ("matmul_kernel", None, "matmul"),
        ("splitKreduce_kernel", None, "matmul"),
        ("flash_fwd_kernel", None, "attention"),
        (
            "cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_26_64x64x64_1x4x1"
            "_cga1x1x1_kernel0_0",
            None,
            "attention",
        ),
        ("fmha_cutlassF_bf16_aligned_64x64_rf_sm80", None, "attention"),
        ("triton_tem_fused_flex_attention_0", None, "attention"),
        (
            "vectorized_elementwise_kernel",
            "void at::native::vectorized_elementwise_kernel<4, "
            "at::native::CUDAFunctor_add<float>>(int, T2, T3)",
            "other",
        ),
        ("multi_tensor_apply_kernel", None, "other"),
        ("vectorized_layer_norm_kernel", None, "other"),
        ("gemv2T_kernel_val", None, "other"),  # a matrix-vector product runs on CUDA cores
    ],
)
def test_kernel_classes(tmp_path, name, demangled, expected):
    con = session(memory_limit="256MB", spill_dir=tmp_path)
    con.execute(sql_objects.get("kernel_classes").sql)
    assert con.execute("SELECT kernel_class($1, $2)", [name, demangled]).fetchone()[0] == expected


@pytest.mark.parametrize(
    "exported, gpu",
    [
        ("NVIDIA H100 80GB HBM3", "H100 SXM"),
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("NVIDIA H100 NVL", "H100 NVL"),
        ("NVIDIA H200", "H200 SXM"),
        ("NVIDIA H200 NVL", "H200 NVL"),
        ("NVIDIA GH200 480GB", "GH200"),
        ("NVIDIA B200", "B200"),
        ("NVIDIA GB200", "GB200"),
        ("NVIDIA A100-SXM4-80GB", "A100"),
        ("NVIDIA A100 80GB PCIe", "A100"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA L40", "L40"),
        ("NVIDIA L4", "L4"),
        ("NVIDIA A10", "A10"),
        ("Tesla V100-SXM2-16GB", "V100 SXM2"),
        ("Tesla V100-PCIE-32GB", "V100 PCIe"),
        ("Tesla T4", "T4"),
        ("NVIDIA GeForce RTX 3080", None),
    ],
)
def test_the_peak_table_is_keyed_by_the_exported_name(tmp_path, exported, gpu):
    """The rule compute.mfu applies: the first row by priority whose pattern matches."""
    con = session(memory_limit="256MB", spill_dir=tmp_path)
    con.execute(sql_objects.get("gpu_peaks").sql)
    found = con.execute(
        "SELECT gpu FROM gpu_peaks() WHERE regexp_matches(lower($1), pattern) "
        "ORDER BY priority LIMIT 1",
        [exported],
    ).fetchall()
    assert (found[0][0] if found else None) == gpu


def test_the_manual_lists_the_peak_table():
    """docs/compute.md's peak table is compute.peaks, row for row (GPU, bf16, fp8, source)."""
    peaks = pd.read_csv(ROOT / "tests" / "golden" / "compute.peaks.csv")
    text = (ROOT / "docs" / "compute.md").read_text()
    listed = re.findall(
        r"^ *\| (\S[^|]*?) \| `([^`]+)` \| ([\d.]+|-) \| ([\d.]+|-) \| ([\d.]+|-) "
        r"\| ([\d.]+|-) \| ([\d.]+|-) \| ([^|]+) \|$",
        text,
        re.M,
    )
    assert len(listed) == len(peaks)
    for (gpu, pattern, *figures, source), row in zip(listed, peaks.itertuples(index=False)):
        assert (gpu, pattern, source.strip()) == (row.gpu, row.pattern, row.source)
        expected = [row.fp32, row.tf32, row.bf16, row.fp16, row.fp8]
        assert [None if f == "-" else float(f) for f in figures] == [
            None if pd.isna(v) else v for v in expected
        ]


# --- MFU ----------------------------------------------------------------------------------


def test_mfu_is_the_flops_over_the_step_time_and_the_peak():
    truth = json.loads((RUN4 / "truth.json").read_text())
    durations = {
        (d["rank"], d["device"], s["step"]): s["span_ns"]
        for d in truth["devices"]
        for s in d["steps"]
    }
    mfu = nsyswrap.query("compute.mfu", [RUN4], flops_per_step=1e12, peak_tflops=500.0)
    assert len(mfu) == len(durations)
    for r in mfu.itertuples(index=False):
        assert r.duration_ns == durations[(r.rank, r.device, r.step)]
        assert r.achieved_tflops == pytest.approx(1e12 / r.duration_ns / 1e3)
        assert r.mfu == pytest.approx(r.achieved_tflops / 500)
        assert (r.flops_source, r.peak_source) == ("--flops-per-step", "--peak-tflops")
    six = nsyswrap.query("compute.mfu", [RUN4], model_params=1e9, tokens_per_step=2048.0)
    assert set(six.flops) == {6 * 1e9 * 2048} and set(six.flops_source) == {"6 x params x tokens"}
    assert six.mfu.isna().all()  # the synthetic reports name no GPU (as nsys 2026.2 exports)


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--flops-per-step", "1e12", "--model-params", "1e9", "--tokens-per-step", "10"], "twice"),
        (["--model-params", "1e9"], "needs --tokens-per-step"),
        (["--tokens-per-step", "4096"], "needs --model-params"),
        (["--flops-per-step", "-5"], "not a positive number"),
        (["--peak-tflops", "inf", "--flops-per-step", "1e12"], "not a positive number"),
        (["--flops-per-step", "1e12", "--dtype", "int4"], "not a data type of the peak table"),
    ],
)
def test_mfu_inputs_that_cannot_be_right_are_one_line_errors(cli, args, needle):
    code, out, err = cli("report", RUN2, *args)
    assert code == 1 and not out and err.startswith("Error: ") and needle in err
    assert len(err.strip().splitlines()) == 1


# --- planted: GPU name, GPU memory, a slow rank -------------------------------------------

GPU_TABLE = (
    "CREATE TABLE TARGET_INFO_GPU (vmId INTEGER, id INTEGER, name TEXT, "
    "totalMemory INTEGER, smCount INTEGER)"
)
MEMORY_TABLE = (
    "CREATE TABLE CUDA_GPU_MEMORY_USAGE_EVENTS (start INTEGER, globalPid INTEGER, "
    "deviceId INTEGER, contextId INTEGER, address INTEGER, pc INTEGER, bytes INTEGER, "
    "memKind INTEGER, memoryOperationType INTEGER, name TEXT, correlationId INTEGER, "
    "streamId INTEGER)"
)
STEP_STARTS = (1_029_849, 3_734_918, 5_991_050)  # run2 rank 0's step:0..2 (window from 1,233,849)


def _memory_events(gpid: int) -> list[tuple]:
    """(start, address, bytes, kind, operation): 1,000 B allocated before the window; each
    step allocates and frees 500 B; step 1 also keeps 300 B; step 2 frees 700 B the capture
    never saw allocated; a pinned host buffer is not device memory."""
    s0, s1, s2 = STEP_STARTS
    events = [
        (1_100_000, 0x1000, 1000, 2, 0),
        (s1 + 500_000, 0x3000, 300, 2, 0),
        (s2 + 100_000, 0x9999, 700, 2, 1),
        (s1 + 1_000, 0x7000, 10**9, 1, 0),
    ]
    for i, s in enumerate(STEP_STARTS):
        events += [(s + 300_000, 0x2000 + i, 500, 2, 0), (s + 400_000, 0x2000 + i, 500, 2, 1)]
    return [(t, gpid, 0, 1, a, 0, b, k, op, None, 1, None) for t, a, b, k, op in events]


@pytest.fixture(scope="module")
def planted(tmp_path_factory) -> Path:
    """run2's rank 0 on a named GPU of 10,000 bytes, with GPU memory events."""
    folder = tmp_path_factory.mktemp("planted")
    source = RUN2 / "rank0.sqlite"
    with sqlite3.connect(f"{source.resolve().as_uri()}?mode=ro", uri=True) as con:
        gpid = con.execute("SELECT globalPid FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 1").fetchone()[0]
    events = _memory_events(gpid)
    insert = "INSERT INTO CUDA_GPU_MEMORY_USAGE_EVENTS VALUES (" + ", ".join("?" * 12) + ")"
    return _planted(
        folder,
        source,
        GPU_TABLE,
        "INSERT INTO TARGET_INFO_GPU VALUES (0, 0, 'NVIDIA H100 80GB HBM3', 10000, 132)",
        MEMORY_TABLE,
        *[insert] * len(events),
        params=((), (), (), *events),
    )


def test_gpu_memory_peak_and_churn_per_step(planted):
    (row,) = nsyswrap.query("memory.usage", [planted]).itertuples(index=False)
    assert (row.peak_bytes, row.peak_ns) == (1800, STEP_STARTS[2] + 300_000)
    assert (row.total_memory_bytes, row.peak_share) == (10_000, 0.18)
    assert (row.allocations, row.allocated_bytes, row.frees) == (4, 1800, 4)
    assert row.freed_unseen_bytes == 700
    assert row.steps == 3  # per step: 2, 2, 1 allocations; 1,500, 800, 500 bytes; 1, 1, 2 frees
    assert (row.allocations_per_step, row.allocated_bytes_per_step) == (2, 800)
    assert row.frees_per_step == 1


def test_a_named_gpu_gets_its_peak_and_the_report_its_memory_table(planted):
    report = nsyswrap.report.report([planted], ReportOptions(flops_per_step=1e12))
    (mfu,) = _table(report, "compute", "mfu")
    assert (mfu["gpu"], mfu["peak"]) == ("H100 SXM", {"value": H100_BF16, "unit": "TFLOP/s"})
    assert mfu["mfu"]["value"] == pytest.approx(mfu["achieved"]["value"] / H100_BF16)
    (memory,) = _table(report, "memory", "gpu_memory")
    assert memory["peak"]["value"] == 1800 and memory["allocs_per_step"]["value"] == 2
    finding = next(f for f in report["diagnosis"]["findings"] if f["id"] == "gpu_memory")
    assert "allocates 2.0 times per step" in finding["text"] and finding["share"]["value"] is None
    fp8 = nsyswrap.query("compute.mfu", [planted], flops_per_step=1e12, dtype="fp8")
    assert set(fp8.peak_tflops) == {1979.0} and set(fp8.peak_gpu) == {"H100 SXM"}


def test_tensor_shapes_in_the_trace_are_said(tmp_path):
    report = _planted(
        tmp_path,
        RUN2 / "rank0.sqlite",
        "UPDATE NVTX_EVENTS SET text = 'aten::mm, seq = 3, op_id = 7, "
        "sizes = [[8, 128], [128, 256]]' WHERE rowid = "
        "(SELECT min(rowid) FROM NVTX_EVENTS WHERE text LIKE 'fwd:%')",
    )
    assert nsyswrap.query("compute.tensor_shapes", [report]).ranges_with_shapes.tolist() == [1]
    compute = _section(nsyswrap.report.report([report]), "compute")
    reasons = [c["reason"] for c in compute["cannot_answer"]]
    assert any("give --flops-per-step" in r and "records tensor shapes" in r for r in reasons)


def test_a_rank_slower_in_one_kernel_is_named():
    """Three GPUs run kernel k: the third's runs are all slower (named); kernel j's third
    copy has a slower median but its fast runs are as fast as the others' (not named)."""
    rows = []
    for rank in range(3):
        for name, p10, median in (("k", 95.0, 100.0), ("j", 95.0, 100.0)):
            if rank == 2:
                p10, median = (125.0, 130.0) if name == "k" else (90.0, 130.0)
            rows.append(
                {
                    "rank": rank,
                    "device": 0,
                    "position": 1 if name == "k" else 2,
                    "name": name,
                    "class": "matmul",
                    "kernels": 10,
                    "total_ns": 10 * median,
                    "share_of_compute": 0.5,
                    "p10_ns": p10,
                    "median_ns": median,
                    "p90_ns": median + 5,
                    "max_ns": int(median) + 9,
                }
            )
    top = kernel_spread(pd.DataFrame(rows))
    assert top.spread.round(2).tolist() == [0.3] * 6
    (slow,) = slow_kernels(top)
    assert (slow["rank"], slow["kernel"], slow["extra"]["value"]) == (2, "k", 300)


def test_the_slow_rank_of_a_kernel_is_a_finding(tmp_path):
    """run4's rank 3 runs its longest matrix multiply 1.5 times longer than the others."""
    folder = tmp_path / "run"
    shutil.copytree(RUN4, folder)
    name = "nvjet_tst_192x208_64x4_1x1_h_bz_coopB_bias_TNT"
    _planted(
        tmp_path,
        folder / "rank3.sqlite",
        'UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET "end" = start + ("end" - start) * 3 / 2 '
        "WHERE shortName = (SELECT id FROM StringIds WHERE value = ?)",
        params=((name,),),
    )
    shutil.copy(tmp_path / "rank3.sqlite", folder / "rank3.sqlite")
    report = nsyswrap.report.report([folder])
    slow = _table(report, "compute", "slow_kernels")
    assert [(r["rank"], r["kernel"]) for r in slow] == [(3, name)]
    finding = next(f for f in report["diagnosis"]["findings"] if f["id"] == "slow_kernel")
    assert finding["devices"] == [[3, 1]] and f"Rank 3 runs {name}" in finding["text"]
    assert finding["share"]["value"] > 0


# --- the real captures --------------------------------------------------------------------


@pytest.fixture(scope="module")
def gloo_run():
    with nsyswrap.open_run([GLOO]) as run:
        yield run


def test_the_real_report_prints_mfu_per_rank_with_its_peak(cli):
    code, out, err = cli("report", GLOO, "--flops-per-step", "2e11")
    assert code == 0, err
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("MFU = achieved / peak"))
    table = lines[start : start + 12]
    for rank in (0, 1):
        row = next(
            line for line in table if re.match(rf"{rank}\s+0\s+H100 SXM\s+bf16\s+989\.500", line)
        )
        assert re.search(r"\s\d+\.\d\s", row), row  # the MFU in percent
    assert "Compute reaches" in out and "MFU at the median step" in out


def test_the_real_report_has_the_new_tables_in_json(cli):
    code, out, err = cli("report", GLOO, "--flops-per-step", "2e11", "--format", "json")
    assert code == 0, err
    report = json.loads(out)
    for section_id, table_id in (
        ("compute", "mfu"),
        ("compute", "mfu_steps"),
        ("compute", "tensor_cores"),
        ("compute", "top_kernels"),
        ("memory", "copy_bandwidth"),
        ("host", "cuda_api"),
        ("host", "osrt"),
    ):
        assert {r["rank"] for r in _table(report, section_id, table_id)} == {0, 1}, table_id
    for row in _table(report, "compute", "mfu"):
        assert row["peak"] == {"value": H100_BF16, "unit": "TFLOP/s"}
        assert row["mfu"]["value"] == pytest.approx(row["achieved"]["value"] / H100_BF16)
    assert report["mfu_inputs"]["flops_per_step"] == 2e11
    assert set(report["options"]) == {"window_nvtx", "step_pattern", "step_from", "step_to"}
    tc = _table(report, "compute", "tensor_cores")
    assert all(0 < r["tensor_core"]["value"] < 1 for r in tc)  # nvjet and cuDNN flash kernels
    pageable = [r for r in _table(report, "memory", "copy_bandwidth") if r["pageable"]]
    assert pageable and all("Pageable" in (r["src"], r["dst"]) for r in pageable)
    reasons = {c["what"]: c["reason"] for c in _section(report, "memory")["cannot_answer"]}
    what = "GPU memory (peak allocated per rank, churn per step)"
    assert "--cuda-memory-usage=true" in reasons[what]


def test_without_flops_mfu_cannot_be_answered(gloo_run):
    section = _section(build_report(gloo_run, ReportOptions()), "compute")
    assert not any(t["id"] == "mfu" for t in section["tables"])
    (item,) = [c for c in section["cannot_answer"] if c["what"] == "MFU and achieved TFLOP/s"]
    assert "give --flops-per-step" in item["reason"]


def test_host_summaries_add_up(gloo_run):
    api = run_module(gloo_run, "host.cuda_api")
    assert api.groupby(["rank", "pid"]).share.sum().round(9).eq(1).all()
    ledger = (
        run_module(gloo_run, "ledger.devices")
        .groupby("rank")
        .agg(start=("window_start_ns", "min"), end=("window_end_ns", "max"))
    )
    calls = gloo_run.df("SELECT rank, start_ns, dur_ns FROM api_calls").join(ledger, on="rank")
    inside = calls[calls.start_ns.between(calls.start, calls.end)].groupby("rank").dur_ns.sum()
    assert api.groupby("rank").total_ns.sum().tolist() == inside.tolist()
    osrt = run_module(gloo_run, "host.osrt")
    assert not osrt.empty and (osrt.cuda_thread_ns <= osrt.total_ns).all()
    assert (osrt.groupby("rank").cuda_thread_ns.sum() > 0).all()


@pytest.mark.skipif(not MEMORY.is_file(), reason="needs ../shared/nsys-sqlite/real-fsdp")
def test_the_real_memory_capture_gets_its_memory_table():
    """The peak is the running sum of the device allocations and releases, whose most is
    reached once the allocations of the first steps are made."""
    events = nsyswrap.sql(
        "SELECT start_ns, operation, bytes FROM gpu_memory "
        "WHERE mem_kind IN ('Device', 'Device Static', 'Array') "
        "ORDER BY start_ns, operation",
        [MEMORY],
    )
    live = (events.bytes.where(events.operation == "alloc", -events.bytes)).cumsum()
    report = nsyswrap.report.report([MEMORY], ReportOptions(step_pattern="iteration %"))
    (row,) = _table(report, "memory", "gpu_memory")
    assert row["peak"]["value"] == live.max() > 2 * 10**9
    assert row["of_device"]["value"] == pytest.approx(live.max() / 85_017_493_504)
    assert row["allocs_per_step"]["value"] == 0  # the caching allocator is warm after step 1


@pytest.mark.skipif(not REAL_MPI.is_file(), reason="needs ../shared/nsys-sqlite/real-mpi")
def test_slow_host_copies_are_below_the_link():
    """The V100 Jacobi solver's large device-to-host copies reach 6 GB/s, below PCIe 3 x16."""
    copies = nsyswrap.query("copies.bandwidth", [REAL_MPI])
    (row,) = copies[copies.copy_kind == "DtoH"].itertuples(index=False)
    assert row.vs_expected == "below" and 5 < row.large_gb_per_s < 10 and not row.pageable


# --- launch --memory ----------------------------------------------------------------------


def test_launch_memory_adds_the_nsys_option_once():
    cfg = LaunchConfig.build(["python", "train.py"], out="/runs/a", memory=True)
    assert nsys_argv(0, cfg, "h").count("--cuda-memory-usage=true") == 1
    again = LaunchConfig.from_wrapper_args(cfg.wrapper_args() + ["--", "python", "train.py"])
    assert nsys_argv(0, again, "h").count("--cuda-memory-usage=true") == 1
    own = LaunchConfig.build(
        ["python"], out="/o", memory=True, nsys_args=["--cuda-memory-usage=false"]
    )
    given = [a for a in nsys_argv(0, own, "h") if "memory-usage" in a]
    assert given == ["--cuda-memory-usage=false"]


# --- findings from hand-made report dicts (the diagnosis reads only the tables) -------------


def _ns(v):
    return {"value": v, "unit": "ns"}


def _device(compute_ns: int, copy_only_ns: int, span: int = 10**7) -> dict:
    """A report dict of one GPU (rank 0) with `compute_ns` of compute and `copy_only_ns` of
    copies alone in a span of `span` ns, over 2 steps."""
    ledger = {
        "rank": 0,
        "device": 0,
        "span": _ns(span),
        "compute_only": _ns(compute_ns),
        "both": _ns(0),
        "comm_only": _ns(0),
        "copy_only": _ns(copy_only_ns),
        "idle": _ns(span - compute_ns - copy_only_ns),
        "compute_busy": _ns(compute_ns),
        "comm_busy": _ns(0),
        "copy_busy": _ns(copy_only_ns),
    }
    steps = [{"rank": 0, "device": 0, "step": s, "duration": _ns(span // 2)} for s in (0, 1)]
    return {
        "sections": [
            {
                "id": "single_rank",
                "verdict": {"label": "balanced", "reason": ""},
                "tables": [
                    {"id": "ledger", "rows": [ledger]},
                    {"id": "steps", "rows": steps},
                    {"id": "shares", "rows": [{"rank": 0, "device": 0, "verdict": None}]},
                ],
            },
            {
                "id": "trace",
                "tables": [
                    {
                        "id": "activity",
                        "rows": [
                            {"rank": 0, "device": 0, "activities": {"value": 100, "unit": "count"}}
                        ],
                    }
                ],
            },
        ]
    }


def test_compute_outside_tensor_cores_is_a_ranked_finding():
    top = {
        "rank": 0,
        "device": 0,
        "kernel": "layer_norm",
        "class": "other",
        "of_compute": {"value": 0.4, "unit": "fraction"},
    }
    report = _tensor_core_report(1 / 3, top=[top])
    d = diagnose(report)
    (finding,) = [f for f in d["findings"] if f["id"] == "tensor_cores"]
    assert finding["cost"] == _ns(3 * 10**6) and finding["cost_basis"] == "per step"
    assert finding["share"]["value"] == pytest.approx(0.6)
    assert "67% of compute kernel time is outside" in finding["text"]
    assert "layer_norm" in finding["text"]
    assert d["findings"][0]["id"] == "compute-bound"  # 90 % of the span: costs more


def _slow_copy_report(src: str, gbps: float) -> dict:
    """A copy-bound GPU whose large HtoD copies from `src` memory reach `gbps` GB/s, below
    the 10-64 GB/s of the host link."""
    report = _device(compute_ns=10**6, copy_only_ns=6 * 10**6)
    report["sections"].append(
        {
            "id": "memory",
            "tables": [
                {
                    "id": "copy_bandwidth",
                    "rows": [
                        {
                            "rank": 0,
                            "device": 0,
                            "kind": "HtoD",
                            "src": src,
                            "dst": "Device",
                            "large_bandwidth": {"value": gbps, "unit": "GB/s"},
                            "expected": "10-64",
                            "vs_expected": "below",
                            "pageable": src == "Pageable",
                            "time": _ns(5 * 10**6),
                            "link": "host link",
                        }
                    ],
                }
            ],
        }
    )
    return report


def test_slow_copies_on_a_copy_bound_device_are_a_ranked_finding():
    report = _slow_copy_report("Pinned", 3.2)
    d = diagnose(report)
    (finding,) = [f for f in d["findings"] if f["id"] == "copy_bandwidth"]
    assert finding["cost"] == _ns(2_500_000) and finding["share"]["value"] == pytest.approx(0.5)
    assert "reach 3.2 GB/s, below the 10-64 GB/s the host link gives" in finding["text"]
    assert "PCIE" in finding["recommendation"]


def _tensor_core_report(tensor_core: float, steps: bool = True, top: list | None = None) -> dict:
    """A compute-bound GPU with the given tensor-core share of its compute kernel time (and
    `top`: the rows of its top_kernels table)."""
    report = _device(compute_ns=9 * 10**6, copy_only_ns=0)
    if not steps:
        report["sections"][0]["tables"][1]["rows"] = []
    frac = lambda v: {"value": v, "unit": "fraction"}  # noqa: E731
    report["sections"].append(
        {
            "id": "compute",
            "tables": [
                {
                    "id": "tensor_cores",
                    "rows": [
                        {
                            "rank": 0,
                            "device": 0,
                            "compute": _ns(9 * 10**6),
                            "other": _ns(round(9 * 10**6 * (1 - tensor_core))),
                            "tensor_core": frac(tensor_core),
                        }
                    ],
                },
                *([{"id": "top_kernels", "rows": top}] if top else []),
            ],
        }
    )
    return report


def test_a_program_without_matmuls_is_not_told_to_fuse_around_them():
    """A compute-bound stencil code (CloverLeaf: no matrix multiply, no attention) has
    nothing to fuse around matrix multiplies: no tensor_cores finding, only the
    compute-bound one; with steps gone its cost reads "over the window"."""
    d = diagnose(_tensor_core_report(0.0))
    assert [f["id"] for f in d["findings"]] == ["compute-bound"]
    assert "matrix multiplies" not in " ".join(d["recommendations"])
    d = diagnose(_tensor_core_report(0.1, steps=False))
    (finding,) = [f for f in d["findings"] if f["id"] == "tensor_cores"]
    assert finding["cost_basis"] == "over the span"  # the JSON's word, as the device findings'
    assert "over the window" in finding["text"] and "over the span" not in finding["text"]


def test_slow_pageable_copies_are_told_to_pin_not_to_check_the_link():
    """Pageable copies measure the driver's staging through a pinned buffer, not the link:
    the finding says so and asks for pinned buffers, not for the PCIe settings."""
    report = _slow_copy_report("Pageable", 3.8)
    (finding,) = [f for f in diagnose(report)["findings"] if f["id"] == "copy_bandwidth"]
    assert "pageable memory" in finding["text"] and "not the link" in finding["text"]
    assert "Pin those host buffers" in finding["recommendation"]
    assert "PCIE" not in finding["recommendation"]


def test_the_copy_bandwidth_table_keeps_its_gb_per_s_at_80_columns():
    """The title asks for bandwidth: at 80 columns the GB/s of every copy stays (the
    pageable flag goes first: src and dst say Pageable already)."""
    from nsyswrap.report.render import render_text

    rep = nsyswrap.report.report([GLOO])
    lines = render_text(rep, 80, detail=False)
    start = next(i for i, line in enumerate(lines) if line.startswith("Copy bandwidth per"))
    block = "\n".join(lines[start : start + 20])
    assert re.search(r"large +bandwidth", block) and "pageable," in block, block
    assert re.search(r"HtoD +Pageable +Device +n/a +10-64 +\d+\.\d{3}$", block, re.M), block


@pytest.mark.parametrize(
    "where, form",
    [
        ("every kernel", []),
        ("one rank's kernels", ["-f", "json"]),
        ("one kernel name", ["--html", "page.html"]),
        ("every kernel but one", ["--detail"]),
    ],
)
def test_kernels_of_0_ns_raise_no_warning(tmp_path, where, form):
    """Kernels that last 0 ns (a capture that lost its end times): the report runs with
    warnings turned into errors, and nothing reaches stderr (no RuntimeWarning)."""
    import os
    import subprocess
    import sys

    from helpers.bad_input import damaged_copy

    zero = {
        "every kernel": "",
        "one rank's kernels": "",
        "one kernel name": " WHERE shortName = (SELECT min(shortName) FROM "
        "CUPTI_ACTIVITY_KIND_KERNEL)",
        "every kernel but one": " WHERE rowid > 1",
    }[where]
    for rank in (0, 1):
        statement = f'UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET "end" = start{zero}'
        if where == "one rank's kernels" and rank == 1:
            statement = "SELECT 1"
        damaged_copy(
            tmp_path / "run",
            statement,
            source=RUN2 / f"rank{rank}.sqlite",
            name=f"rank{rank}.sqlite",
        )
    done = subprocess.run(
        [sys.executable, "-m", "nsyswrap", "report", str(tmp_path / "run"), *form],
        env={
            **os.environ,
            "PYTHONWARNINGS": "error::RuntimeWarning",
            "NSYSWRAP_CACHE_DIR": str(tmp_path / "c"),
        },
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0 and "Warning" not in done.stderr, done.stderr[-3000:]
    assert done.stderr in ("", "wrote page.html\n")
