"""A report's tables as pandas DataFrames (the notebook path: `nsyswrap.report_tables`).

A table's rows become a DataFrame's rows, its columns in the order the rows first give
them; a figure `{"value", "unit"}` becomes its value (a missing one NaN or None: its reason
is the JSON's), and the units go in `frame.attrs["units"]` (column -> ns, fraction, count,
bytes, ...), the table's title in `frame.attrs["title"]`.
"""

from __future__ import annotations

import pandas as pd

from nsyswrap.report.figures import is_figure


def table_frame(table: dict) -> pd.DataFrame:
    """One report table (`{"id", "title", "rows"}`) as a DataFrame."""
    columns = list(dict.fromkeys(c for row in table["rows"] for c in row))
    units = {}
    for row in table["rows"]:
        for c, cell in row.items():
            if is_figure(cell):
                units.setdefault(c, cell["unit"])
    frame = pd.DataFrame(
        [[_plain(row.get(c)) for c in columns] for row in table["rows"]], columns=columns
    )
    frame.attrs.update(title=table["title"], units=units)
    return frame


def table_frames(report: dict) -> dict[str, pd.DataFrame]:
    """Every table of a report dict, section by section, by table id (`SECTION/TABLE`
    where two sections have a table of the same id)."""
    tables = [(s["id"], t) for s in report["sections"] for t in s.get("tables", [])]
    ids = [t["id"] for _, t in tables]
    return {
        (t["id"] if ids.count(t["id"]) == 1 else f"{section}/{t['id']}"): table_frame(t)
        for section, t in tables
    }


def _plain(cell):
    return cell["value"] if is_figure(cell) else cell
