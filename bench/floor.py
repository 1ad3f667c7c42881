"""The floor: the kernel and runtime rows of every report read straight out of SQLite.

Stdlib `sqlite3` only (no nsyswrap import), one report after the other: SQLite walks
every row of both tables but never hands a value out of the library.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

FLOOR_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME")


def reports_of(run: Path) -> list[Path]:
    return sorted(run.glob("*.sqlite")) if run.is_dir() else [run]


def floor(run: Path) -> dict[str, int]:
    """Rows and summed duration (ns) of the kernel and runtime tables over the run."""
    totals = {"rows": 0, "sum_ns": 0}
    for path in reports_of(run):
        con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
        try:
            for table in FLOOR_TABLES:
                rows, total = con.execute(
                    f'SELECT count(*), sum("end" - start) FROM "{table}"'
                ).fetchone()
                totals["rows"] += rows
                totals["sum_ns"] += total or 0
        finally:
            con.close()
    return totals
