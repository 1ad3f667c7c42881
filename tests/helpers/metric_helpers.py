"""Helpers for the metric tests: copies in hand-made reports, and a run over plain tables."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pandas as pd

from helpers.report_builder import global_pid, make_report
from nsyswrap import open_run
from nsyswrap.engine.connection import VIEWS, session
from nsyswrap.engine.run import Run

COPY_KINDS = {"HtoD": 1, "DtoH": 2, "DtoD": 8, "PtoP": 10}


def add_copies(path: Path, copies: list[tuple], pid: int = 100) -> Path:
    """Add a memcpy table to a `make_report` file; copies: (start, end, device, stream,
    copy kind name, correlation id)."""
    con = sqlite3.connect(path)
    con.execute(
        "CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER NOT NULL, end INTEGER NOT NULL, "
        "deviceId INTEGER, contextId INTEGER, streamId INTEGER, correlationId INTEGER, "
        "globalPid INTEGER, bytes INTEGER, copyKind INTEGER, srcKind INTEGER, dstKind INTEGER)"
    )
    for start, end, device, stream, kind, corr_id in copies:
        con.execute(
            "INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (?, ?, ?, 1, ?, ?, ?, 4096, ?, 0, 0)",
            (start, end, device, stream, corr_id, global_pid(pid), COPY_KINDS[kind]),
        )
    con.commit()
    con.close()
    return path


def table_run(tmp_path: Path) -> Run:
    """A Run whose views are empty in-memory tables of the same columns: tests fill
    `kernels` directly (fast enough for property tests); the planner computes objects
    on the connection, again for every query (the tables change)."""
    schema = make_report(tmp_path / "schema.sqlite", kernels=[(0, 1, 0, 1, "k")])
    with open_run([schema]) as template:
        schemas = {v: template.con.execute(f"DESCRIBE {v}").df() for v in VIEWS}
    con = session(memory_limit="1GB", spill_dir=tmp_path / "spill")
    for view, cols in schemas.items():
        columns = ", ".join(f'"{n}" {t}' for n, t in zip(cols.column_name, cols.column_type))
        con.execute(f"CREATE TABLE {view} ({columns})")
    return Run(con, [], tmp_path / "spill")


def set_kernels(run: Run, rows: list[dict]) -> None:
    """Replace the kernels table: rows give device, stream, start_ns, end_ns, kind, is_comm."""
    run.con.execute("DELETE FROM kernels")
    if not rows:
        return
    df = pd.DataFrame(rows)
    df["dur_ns"] = df.end_ns - df.start_ns
    df["name"] = df.kind
    df["correlation_id"] = range(len(df))
    run.con.register("new_rows", df)
    run.con.execute(
        "INSERT INTO kernels BY NAME SELECT 0 AS rank, 'r' AS report, 1 AS pid, 1 AS context, "
        "device, stream, start_ns, end_ns, dur_ns, correlation_id, name, kind, is_comm "
        "FROM new_rows"
    )
    run.con.unregister("new_rows")


AR = "ncclDevKernel_AllReduce_Sum_f32_RING_LL"
AG = "ncclDevKernel_AllGather_RING_LL"


def two_device_case(path: Path) -> Path:
    """A report with the hard cases on device 0 (nested kernels on several streams,
    back-to-back and zero-length kernels, NCCL on the compute stream, copies, gaps of each
    cause) and a fully hidden NCCL kernel on device 1; expected values in the tests."""
    make_report(
        path,
        kernels=[
            (100, 400, 0, 7, "gemm", 1),
            (150, 250, 0, 8, "inner", 2),
            (200, 500, 0, 9, AR, 3),
            (400, 450, 0, 7, "relu", 4),
            (450, 480, 0, 7, "relu2", 5),
            (480, 480, 0, 7, "empty", 6),
            (600, 700, 0, 7, AG, 7),
            (1000, 1010, 0, 7, "tail", 10),
            (0, 1000, 1, 1, "big", 11),
            (100, 200, 1, 2, AR, 12),
            (300, 300, 1, 2, "ncclDevKernel_Broadcast_RING_LL", 13),
        ],
        runtime=[
            (90, 92, "cudaLaunchKernel_v7000", 1),
            (95, 97, "cudaLaunchKernel_v7000", 2),
            (200, 202, "cudaLaunchKernel_v7000", 3),
            (300, 302, "cudaLaunchKernel_v7000", 4),
            (310, 312, "cudaLaunchKernel_v7000", 5),
            (320, 322, "cudaLaunchKernel_v7000", 6),
            (550, 552, "cudaLaunchKernel_v7000", 7),
            (560, 562, "cudaMemcpyAsync_v3020", 8),
            (700, 702, "cudaMemcpyAsync_v3020", 9),
            (990, 992, "cudaLaunchKernel_v7000", 10),
            (0, 0, "cudaLaunchKernel_v7000", 11),
            (80, 82, "cudaLaunchKernel_v7000", 12),
            (295, 297, "cudaLaunchKernel_v7000", 13),
            (850, 960, "cudaStreamSynchronize_v3020", 100),
        ],
        nvtx=[
            (50, 520, "step:0"),
            (520, 1100, "step:1"),
            (150, 300, "fwd:model"),
            (160, 200, "fwd:model.a"),
            (200, 290, "fwd:model.b"),
            (530, 580, "bwd:model"),
            (540, 560, "coll:all_gather bytes=4096 dtype=float32 pg=0 size=2 seq=0"),
        ],
    )
    return add_copies(path, [(700, 750, 0, 10, "HtoD", 8), (800, 900, 0, 11, "PtoP", 9)])


LEDGER_KEYS = {  # truth.json key -> ledger.devices column
    "span_ns": "span_ns",
    "compute_only_ns": "compute_only_ns",
    "comm_only_ns": "comm_only_ns",
    "both_ns": "both_ns",
    "other_only_ns": "copy_only_ns",
    "idle_ns": "idle_ns",
    "compute_busy_ns": "compute_busy_ns",
    "comm_busy_ns": "comm_busy_ns",
}


def truth_runs(fixtures: Path) -> list[Path]:
    """Generated runs with planted truth (`fixtures/<run>/truth.json`)."""
    return sorted(p.parent for p in fixtures.glob("*/truth.json"))


def load_truth(run_dir: Path) -> dict:
    return json.loads((run_dir / "truth.json").read_text())
