"""Showing a report: rich tables for people, JSON for machines.

The terminal renderer knows no section in particular: it draws each section's verdict,
tables (columns = row keys; figures scaled to readable units, nulls footnoted with their
reasons), recommendations and cannot-answer lines.
"""
from __future__ import annotations

import io
import json
from enum import Enum
from pathlib import Path

from rich.console import Console
from rich.table import Table

from nsyswrap.output import check_writable
from nsyswrap.report.figures import COUNT, FRACTION, NS, is_figure

MAX_ROWS = 40
VERDICT_STYLE = {
    "compute-bound": "bold green", "communication-bound": "bold red",
    "host-bound": "bold yellow", "balanced": "bold cyan",
}


class ReportFormat(str, Enum):
    table = "table"
    json = "json"


def to_json(report: dict) -> str:
    return json.dumps(report, indent=1) + "\n"


def write_report(report: dict, fmt: ReportFormat, output: Path | None, force: bool,
                 console: Console) -> None:
    """Print the report or save it to `output` (refusing to overwrite unless forced)."""
    check_writable(output, force)
    if fmt is ReportFormat.json:
        text = to_json(report)
        if output is None:
            console.file.write(text)
        else:
            output.write_text(text)
        return
    if output is None:
        render_terminal(report, console)
    else:
        buf = io.StringIO()
        render_terminal(report, Console(file=buf, width=160, color_system=None))
        output.write_text(buf.getvalue())


def render_terminal(report: dict, console: Console) -> None:
    ranks = ", ".join(f"rank {r['rank']}: {Path(r['path']).name}" for r in report["reports"])
    console.print(f"[bold]nsyswrap report[/bold] of {len(report['reports'])} report(s) ({ranks})")
    for section in report["sections"]:
        _section(section, console)


def _section(section: dict, console: Console) -> None:
    console.rule(f"[bold]{section['title']}")
    v = section.get("verdict")
    if v:
        label = v["label"] or "no verdict"
        console.print(f"Verdict: [{VERDICT_STYLE.get(v['label'], 'bold')}]{label.upper()}"
                      f"[/] - {v['reason']}")
    for table in section.get("tables", []):
        console.print(_table(table))
    recs = section.get("recommendations") or []
    if recs:
        console.print("[bold]Recommendations[/bold]")
        for i, rec in enumerate(recs, 1):
            console.print(f" {i}. {rec}")
    for item in section.get("cannot_answer") or []:
        console.print(f"[yellow]Cannot answer[/yellow] {item['what']} because {item['reason']}.")


def _table(spec: dict) -> Table:
    rows = spec["rows"]
    columns = list(dict.fromkeys(k for row in rows for k in row))
    times = [c["value"] for row in rows for c in row.values()
             if is_figure(c) and c["unit"] == NS and c["value"] is not None]
    longest = max(map(abs, times), default=0)
    scales = {c: _scale([row.get(c) for row in rows], longest) for c in columns}
    table = Table(title=spec["title"], title_justify="left", header_style="bold")
    for c in columns:
        unit = scales[c][0]
        numeric = any(is_figure(row.get(c)) for row in rows)
        table.add_column(f"{c} ({unit})" if unit else c, justify="right" if numeric else "left",
                         overflow="fold")
    reasons: dict[str, None] = {}
    for row in rows[:MAX_ROWS]:
        cells = []
        for c in columns:
            cell = row.get(c)
            if is_figure(cell) and cell["value"] is None:
                reasons[cell["reason"]] = None
                cells.append("n/a")
            else:
                cells.append(_cell(cell, scales[c][1]))
        table.add_row(*cells)
    notes = [f"{len(rows) - MAX_ROWS} more rows in --format json"] if len(rows) > MAX_ROWS else []
    notes += [f"n/a: {reason}" for reason in reasons]
    table.caption = "\n".join(notes) or None
    table.caption_justify = "left"
    return table


def _scale(column: list, longest_ns: float) -> tuple[str, float]:
    """Display unit and divisor of a column; times share one unit across the table,
    chosen by its longest time."""
    unit = next((c["unit"] for c in column if is_figure(c)), None)
    if unit is None:
        return "", 1
    if unit == NS:
        top = longest_ns
        return ("ms", 1e6) if top >= 1e6 else ("us", 1e3) if top >= 1e3 else ("ns", 1)
    if unit == FRACTION:
        return "%", 0.01
    return ("" if unit == COUNT else unit), 1


def _cell(cell, divisor: float) -> str:
    if cell is None:
        return ""
    if isinstance(cell, bool):
        return "yes" if cell else "no"
    if not is_figure(cell):
        return str(cell)
    v = cell["value"]
    if divisor == 1 and isinstance(v, int):
        return f"{v:,}"
    scaled = v / divisor
    return f"{scaled:,.1f}" if divisor in (0.01, 1e3) else f"{scaled:,.3f}"
