"""What the HTML page's plots draw (nsyswrap.html_report), computed with the report from
the modules its sections read, over its window, and stored with its answer
(nsyswrap.report.answers), so a page is drawn from the answer, stored or fresh, never
from a second round of queries.

`plot_data` gives a JSON dict: the ranks each report holds; the steps and the first
MAX_STEPS of them (`shown`) with their phase ranges and the waits inside collectives
among them (the step timeline); each GPU's ledger; the critical path (where the replay
ran); the arrival skew per rank and collective, neighbours averaged into at most
SKEW_COLUMNS columns. Each table is `{"columns", "dtypes", "rows"}` (`frame_of` reads
it back as the DataFrame it was).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from nsyswrap.errors import shown
from nsyswrap.report.figures import table_ids
from nsyswrap.report.options import ReportOptions

if TYPE_CHECKING:
    from nsyswrap.report.flow import Inputs

MAX_STEPS = 12
SKEW_COLUMNS = 160
RANGES = ["step", "rank", "phase", "start_ns", "end_ns"]
WAITS = ["rank", "start_ns", "wait_ns", "op", "pg", "seq", "last_rank"]
LEDGER = ["rank", "device", "span_ns", "compute_only_ns", "both_ns", "comm_only_ns"]
LEDGER += ["copy_only_ns", "idle_ns"]
PATH = ["step", "kind", "rank", "phase", "pg", "op", "ns"]


def plots_modules(options: ReportOptions) -> dict[str, tuple[str, dict]]:
    """The modules the plots read, `key: (module, params)` (the sections read them too)."""
    pattern = {"step_pattern": options.step_pattern}
    steps = {**pattern, "step_from": options.step_from, "step_to": options.step_to}
    return {
        "ranges": ("crossrank.step_phases", pattern),
        "collectives": ("crossrank.collectives", steps),
        "critical_path": ("crossrank.critical_path", steps),
        "ledger": ("ledger.devices", options.window_params()),
    }


def table_of(frame: pd.DataFrame) -> dict:
    """A DataFrame as JSON: columns, dtypes, rows (nulls as null)."""
    plain = frame.astype(object).where(frame.notna(), None)
    return {
        "columns": list(frame.columns),
        "dtypes": [str(t) for t in frame.dtypes],
        "rows": plain.values.tolist(),
    }


def frame_of(table: dict | None) -> pd.DataFrame:
    """The DataFrame of `table_of` (an empty one for None)."""
    if table is None:
        return pd.DataFrame()
    frame = pd.DataFrame(table["rows"], columns=table["columns"])
    return frame.astype(dict(zip(table["columns"], table["dtypes"], strict=True)))


def skew_cells(collectives: pd.DataFrame, max_columns: int = SKEW_COLUMNS) -> dict | None:
    """Rank x collective: how long after the first rank each rank arrived and how long it
    waited (crossrank.collectives), the collectives in time order, neighbours averaged
    into one column beyond `max_columns`: {cells (by rank, column), collectives, per_bin}."""
    if collectives.empty:
        return None
    c = collectives.copy()
    c["late_ns"] = c["start_ns"] - c.groupby(["pg", "seq"])["start_ns"].transform("min")
    order = c.groupby(["pg", "seq"])["start_ns"].min().sort_values().index
    column = {key: i for i, key in enumerate(order)}
    c["col"] = [column[k] for k in zip(c["pg"], c["seq"])]
    per_bin = -(-len(order) // max_columns)
    c["col"] //= per_bin
    cells = c.groupby(["rank", "col"]).agg(
        late_ns=("late_ns", "mean"),
        wait_ns=("wait_ns", "mean"),
        last=("last_rank", "first"),
        pg=("pg", "first"),
        seq=("seq", "first"),
    )
    return {"cells": table_of(cells.reset_index()), "collectives": len(order), "per_bin": per_bin}


def _timeline(ranges: pd.DataFrame, collectives: pd.DataFrame, options: ReportOptions) -> dict:
    """The step timeline's steps, its first MAX_STEPS steps' ranges, and the waits inside
    collectives while they run."""
    lo, hi = options.step_from, options.step_to
    steps = sorted(
        s
        for s in ranges["step"].dropna().unique().astype(int).tolist()
        if (lo is None or s >= lo) and (hi is None or s < hi)
    )
    shown = steps[:MAX_STEPS]
    mine = ranges[ranges["step"].isin(shown)]
    waits = collectives.iloc[0:0]
    if not mine.empty:
        t0, t1 = mine["start_ns"].min(), mine["end_ns"].max()
        start = collectives["start_ns"]
        waits = collectives[(collectives["wait_ns"] > 0) & (start >= t0) & (start <= t1)]
    return {
        "steps": len(steps),
        "shown": shown,
        "ranges": table_of(mine[RANGES]),
        "waits": table_of(waits[WAITS]),
    }


def plot_data(inputs: Inputs, document: dict) -> dict:
    """What the page's plots draw (module doc) for the report `document`."""
    frames, options = inputs.frames, inputs.options
    replayed = "critical_path" in table_ids(document)  # as the page's _replayed was
    return {
        "ranks": [
            {"report": shown(r.path.name), "ranks": inputs.held[r.rank]} for r in inputs.reports
        ],
        **_timeline(frames["ranges"], frames["collectives"], options),
        "ledger": table_of(frames["ledger"][LEDGER]),
        "critical_path": table_of(frames["critical_path"][PATH]) if replayed else None,
        "skew": skew_cells(frames["collectives"]),
    }
