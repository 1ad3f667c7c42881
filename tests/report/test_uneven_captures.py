"""Captures that do not line up (#38 item 11): fixtures/run4_straggler with rank 0's
capture cut to start at step 3 (a copy: every event of its report before step 3 dropped,
as a profiler that starts late records none). The default window is the steps every rank
captured, and every per-step figure of those steps is the whole capture's for the same
steps, to the clock solve's microsecond (rank 0 has fewer collectives to fit its clock on;
the first screen prints tens of microseconds)."""

from __future__ import annotations

import shutil
import sqlite3

import pandas as pd
import pytest
from helpers.paths import FIXTURES

from nsyswrap.report import ReportOptions, report_of
from nsyswrap.report.frames import table_frames

RUN = FIXTURES / "run4_straggler"
TIMED = ("KERNEL", "RUNTIME", "MEMCPY", "MEMSET", "SYNCHRONIZATION")
PER_STEP = ("stragglers", "whatif", "comm_split", "rank_waits", "critical_path", "steps", "ledger")
CLOCK_NS = 1_000  # how far the clock solve may move a figure between the two (ns)


def _cut(tmp_path, first_step: int = 3, slow_first_by_ns: int = 0):
    """A copy of run4_straggler whose rank 0 captured nothing before step `first_step`
    (NVTX marks and registrations, which have no end, kept); `slow_first_by_ns` stretches
    that first captured step back by as much (the profiler starting slows it)."""
    out = tmp_path / "cut"
    shutil.copytree(RUN, out)
    with sqlite3.connect(out / "rank0.sqlite") as con:
        (start,) = con.execute(
            "SELECT start FROM NVTX_EVENTS WHERE text = ?", (f"step:{first_step}",)
        ).fetchone()
        for table in TIMED:
            con.execute(f"DELETE FROM CUPTI_ACTIVITY_KIND_{table} WHERE start < ?", (start,))
        con.execute('DELETE FROM NVTX_EVENTS WHERE start < ? AND "end" IS NOT NULL', (start,))
        if slow_first_by_ns:
            con.execute(
                "UPDATE NVTX_EVENTS SET start = start - ? WHERE text = ?",
                (slow_first_by_ns, f"step:{first_step}"),
            )
    return out


def _close(a: pd.DataFrame, b: pd.DataFrame, table: str) -> None:
    assert list(a.columns) == list(b.columns) and len(a) == len(b), table
    for column in a.columns:
        x, y = a[column], b[column]
        if pd.api.types.is_numeric_dtype(x) and not pd.api.types.is_bool_dtype(x):
            diff = (x.astype(float) - y.astype(float)).abs()
            allowed = (y.astype(float).abs() * 1e-4).clip(lower=CLOCK_NS)
            assert ((diff <= allowed) | (x.isna() & y.isna())).all(), (table, column)
        else:
            assert x.equals(y), (table, column)


def test_a_late_capture_narrows_the_window_to_the_steps_every_rank_captured(tmp_path):
    cut = report_of([_cut(tmp_path)])
    window = cut["window"]
    assert (window["step_from"], window["step_to"]) == (3, None)
    assert window["captured"] == [
        {"rank": 0, "first_step": 3, "last_step": 9, "warm_up": 0},
        *({"rank": r, "first_step": 0, "last_step": 9, "warm_up": 0} for r in (1, 2, 3)),
    ]
    whole = report_of([RUN], ReportOptions(step_from=3, step_to=10))
    cut_tables, whole_tables = table_frames(cut), table_frames(whole)
    for table in PER_STEP:
        _close(cut_tables[table], whole_tables[table], table)
    findings = [f["text"] for f in cut["diagnosis"]["findings"]]
    assert findings == [f["text"] for f in whole["diagnosis"]["findings"]]
    assert "0.39 ms per step" in findings[0] and "in 7 of 7 steps" in findings[0]


def test_the_first_step_a_late_profiler_slows_is_that_ranks_warm_up(tmp_path):
    """Rank 0's capture starts at step 5, which it makes 8 ms longer (about 4.5x its usual
    2.2 ms) while the others' step 5 is usual: the window starts at step 6."""
    cut = report_of([_cut(tmp_path, 5, slow_first_by_ns=8_000_000)])
    captured = {c["rank"]: c for c in cut["window"]["captured"]}
    assert (captured[0]["first_step"], captured[0]["warm_up"]) == (5, 1)
    assert cut["window"]["step_from"] == 6


def test_even_captures_say_nothing_of_it():
    assert "captured" not in report_of([RUN])["window"]


@pytest.mark.parametrize("first_step", [1, 5])
def test_any_late_start_keeps_the_remaining_steps_figures(tmp_path, first_step):
    cut = table_frames(report_of([_cut(tmp_path, first_step)]))
    whole = table_frames(report_of([RUN], ReportOptions(step_from=first_step, step_to=10)))
    for table in ("stragglers", "whatif", "comm_split"):
        _close(cut[table], whole[table], table)
