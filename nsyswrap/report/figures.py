"""Figures: every number in a report carries its unit, and a missing one says why."""

from __future__ import annotations

import math

NS, FRACTION, COUNT, BYTES = "ns", "fraction", "count", "bytes"


def figure(value, unit: str, reason: str | None = None) -> dict:
    """`{"value": v, "unit": u}`; a missing value (None/NaN) becomes null plus a reason."""
    if value is None or _isna(value):
        return missing(unit, reason or "not computed")
    if hasattr(value, "item"):  # numpy / pandas scalar
        value = value.item()
    if isinstance(value, float) and value.is_integer() and unit in (NS, COUNT):
        value = int(value)
    return {"value": value, "unit": unit}


def missing(unit: str, reason: str) -> dict:
    """A figure that cannot be computed, with the reason."""
    return {"value": None, "unit": unit, "reason": reason}


def share(part, whole, reason: str) -> dict:
    """part / whole as a fraction, or null with `reason` when whole is 0 or missing."""
    if part is None or not whole:
        return missing(FRACTION, reason)
    return figure(float(part) / float(whole), FRACTION)


def table(table_id: str, title: str, rows: list[dict], droppable: tuple[str, ...] = ()) -> dict:
    """A report table: `{"id", "title", "rows"}`, and `droppable`, the columns a narrow
    terminal may leave out, in the order they go (nsyswrap.text_table.fit): every other
    column answers the title and stays. A table without the key is fitted by the old rule
    (secondary columns, then from the right)."""
    spec = {"id": table_id, "title": title, "rows": rows}
    return {**spec, "droppable": list(droppable)} if droppable else spec


def is_figure(obj) -> bool:
    return isinstance(obj, dict) and "unit" in obj and "value" in obj


def value(cell, default=None):
    """The plain value of a figure (or of a plain cell)."""
    if is_figure(cell):
        return default if cell["value"] is None else cell["value"]
    return default if cell is None else cell


def section(report: dict, section_id: str) -> dict:
    """A section of a report dict by id ({} when absent)."""
    return next((s for s in report["sections"] if s["id"] == section_id), {})


def rows(report: dict, section_id: str, table_id: str) -> list[dict]:
    """The rows of a table of a report dict by section and table id ([] when absent)."""
    tables = section(report, section_id).get("tables", [])
    return next((t["rows"] for t in tables if t["id"] == table_id), [])


def physical_gpus(report: dict) -> int:
    """How many physical GPUs the ranks ran on (the trace section's gpus table, see
    trace.gpus; 0 when the report has none: no GPU work, or a sampled run)."""
    return len({r["gpu"] for r in rows(report, "trace", "gpus")})


def part(report: dict, name: str) -> tuple[dict, dict | None] | None:
    """A section (`(section, None)`) or a table (`(section, table)`) of a report dict by
    id, as `nsyswrap report --section NAME` finds it, or by `SECTION/TABLE` (a table of
    the same id as a section); None when it has neither."""
    section_id, _, table_id = name.rpartition("/")
    for sec in report["sections"]:
        if sec["id"] == name:
            return sec, None
        for t in sec.get("tables", []):
            if t["id"] == table_id and sec["id"] == (section_id or sec["id"]):
                return sec, t
    return None


def table_ids(report: dict) -> list[str]:
    """The ids of every table of a report dict, section by section."""
    return [t["id"] for s in report["sections"] for t in s.get("tables", [])]


def basis_words(basis: str) -> str:
    """A cost basis as the text says it: the JSON's `cost_basis` "over the span" (no steps)
    reads "over the window"; "per step" and "over the run" as they are."""
    return "over the window" if basis == "over the span" else basis


def time_unit(longest_ns: float) -> tuple[str, float]:
    """(name, ns per unit) that the times of a table are shown in, by its longest time."""
    return ("ms", 1e6) if longest_ns >= 1e6 else ("us", 1e3) if longest_ns >= 1e3 else ("ns", 1)


def cell_text(cell, ns_per_unit: float = 1) -> str:
    """The text of one table cell, in the terminal and on the HTML page alike: times in
    the table's time unit (`ns_per_unit`, see time_unit), fractions in percent, n/a for a
    missing figure (its reason is noted below the table)."""
    if cell is None:
        return ""
    if isinstance(cell, bool):
        return "yes" if cell else "no"
    if not is_figure(cell):
        return str(cell)
    v = cell["value"]
    if v is None:
        return "n/a"
    if cell["unit"] == NS:
        return f"{v:,}" if ns_per_unit == 1 else f"{v / ns_per_unit:,.3f}"
    if cell["unit"] == FRACTION:
        return f"{100 * v:,.1f}"
    if isinstance(v, int):
        return f"{v:,}"
    return f"{v:,.3f}"


def _isna(value) -> bool:
    """NaN, pandas NA or NaT (pandas is imported only when a value might be one)."""
    if isinstance(value, float):
        return math.isnan(value)
    if isinstance(value, (int, str)):
        return False
    import pandas as pd

    return bool(pd.isna(value))
