"""Wall time outside the window said with the GPU's busy time beside it (#38 item 7): the
window table's busy_before / busy_after are the union of the device's activities before
the window's start and after its end, recomputed here from the report's own rows with
sqlite3 (h200_fix_clean: 4,178 ms before step 1, the GPU busy 1.8 ms of it)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from helpers.intervals import union_length
from helpers.real_captures import CAPTURES

import nsyswrap
from nsyswrap.report import report_of
from nsyswrap.report.frames import table_frames

ACTIVITIES = ("KERNEL", "MEMCPY", "MEMSET")
WINDOWED = [n for n, paths in CAPTURES.items() if n.startswith("real/h")]


def _busy(path: Path, device: int, lo: int | None, hi: int | None) -> int:
    """The union of the device's activities clipped to [lo, hi) (None: open)."""
    rows = []
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
        for kind in ACTIVITIES:
            rows += con.execute(
                f'SELECT start, "end" FROM CUPTI_ACTIVITY_KIND_{kind} '
                'WHERE deviceId = ? AND "end" >= start',
                (int(device),),
            ).fetchall()
    clipped = [
        (max(s, lo) if lo is not None else s, min(e, hi) if hi is not None else e) for s, e in rows
    ]
    return union_length([(s, e) for s, e in clipped if e > s])


@pytest.mark.parametrize("name", WINDOWED)
def test_busy_time_outside_the_window_is_the_union_of_its_activities(name):
    paths = CAPTURES[name]
    report = report_of(paths)
    windows = table_frames(report)["window"]
    ledger = nsyswrap.query("ledger.devices", paths, **report["options"])
    files = {r["rank"]: Path(r["path"]) for r in report["reports"]}
    assert len(windows) == len(ledger) > 0
    for (_, w), (_, led) in zip(windows.iterrows(), ledger.iterrows()):
        path, device = files[int(w["rank"])], int(w["device"])
        start, end = int(led.window_start_ns), int(led.window_end_ns)
        assert w["busy_before"] == _busy(path, device, None, start)
        assert w["busy_after"] == _busy(path, device, end, None)
        assert w["busy_before"] <= w["before"] and w["busy_after"] <= w["after"]


def test_the_clean_runs_wall_time_before_the_window_is_mostly_idle():
    windows = table_frames(report_of(CAPTURES["real/h200_fix_clean"]))["window"]
    assert (windows["before"] > 4_000e6).all() and (windows["busy_before"] < 2e6).all()
