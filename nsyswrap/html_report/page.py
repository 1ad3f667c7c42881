"""`nsyswrap report RUN --html PATH`: one self-contained page (inline CSS and SVG, no
script, no network): the diagnosis first, then the plots of the run, then every report
section as HTML tables. Colours mean the same everywhere (charts.COLORS)."""

from __future__ import annotations

from html import escape
from pathlib import Path

import pandas as pd

from nsyswrap.crossrank import matched_collectives
from nsyswrap.crossrank.ranks import ranks_by_report
from nsyswrap.engine.opener import DEFAULT_OPENER, Opener
from nsyswrap.engine.queries import catalog, run_module
from nsyswrap.engine.run import Run
from nsyswrap.errors import shown
from nsyswrap.html_report.charts import (
    COLORS,
    critical_path_bars,
    ledger_bars,
    skew_heatmap,
    step_timeline,
)
from nsyswrap.report import ReportOptions, build_report, planned
from nsyswrap.report.figures import FRACTION, NS, cell_text, is_figure, time_unit
from nsyswrap.report.render import heading
from nsyswrap.storage.safe_output import check_writable, save

MAX_STEPS = 12
MAX_ROWS = 200
CSS = """
body { font-family: sans-serif; margin: 24px; color: #222; max-width: 1260px; }
h1 { font-size: 22px; } h2 { font-size: 18px; margin-top: 32px; border-bottom: 2px solid #ccc; }
h3 { font-size: 14px; margin: 18px 0 4px; }
p.note { color: #666; font-size: 13px; margin: 2px 0 8px; }
p.verdict { font-size: 15px; } p.verdict b { text-transform: uppercase; }
table { border-collapse: collapse; font-size: 12px; margin: 4px 0 10px; }
th, td { padding: 3px 8px; border-bottom: 1px solid #eee; text-align: right; }
th { background: #f4f4f4; } td.text { text-align: left; }
div.diagnosis { border: 2px solid #333; border-radius: 6px; padding: 4px 16px 8px; }
div.diagnosis h2 { margin-top: 8px; border: none; } div.diagnosis li { margin: 4px 0; }
span.label { color: #fff; padding: 1px 6px; border-radius: 3px; font-weight: bold; }
"""
# The colour of each verdict: the colour of its cause in the plots.
LABEL_COLORS = {
    "compute-bound": COLORS["compute"],
    "communication-bound": COLORS["comm"],
    "copy-bound": "#6f6f6f",
    "host-bound": "#8c8c8c",
    "waiting-for-peers": COLORS["wait"],
    "straggler": COLORS["wait"],
    "balanced": "#59a14f",
    "not enough data": "#bbbbbb",
}


def _unit_of(rows: list[dict], column: str, time_name: str) -> str:
    """The unit a column's header names: times share one unit per table (time_name)."""
    unit = next((row[column]["unit"] for row in rows if is_figure(row.get(column))), "")
    return {NS: time_name.replace("us", "µs"), FRACTION: "%", "count": ""}.get(unit, unit)


def _table_html(spec: dict) -> str:
    rows = spec["rows"]
    columns = list(dict.fromkeys(k for row in rows for k in row))
    time_name, ns_per_unit = time_unit(
        max(
            (
                abs(c["value"])
                for row in rows
                for c in row.values()
                if is_figure(c) and c["unit"] == NS and c["value"] is not None
            ),
            default=0,
        )
    )
    units = {c: _unit_of(rows, c, time_name) for c in columns}
    head = "".join(
        f"<th>{escape(c)}{escape(f' ({units[c]})' if units[c] else '')}</th>" for c in columns
    )
    body, reasons = [], {}
    for row in rows[:MAX_ROWS]:
        cells = []
        for c in columns:
            cell = row.get(c)
            if is_figure(cell) and cell["value"] is None:
                reasons[cell["reason"]] = None
            text = escape(cell_text(cell, ns_per_unit))
            cells.append(f"<td>{text}</td>" if is_figure(cell) else f'<td class="text">{text}</td>')
        body.append("<tr>" + "".join(cells) + "</tr>")
    notes = (
        [f"{len(rows) - MAX_ROWS} more rows in `nsyswrap report --format json`"]
        if len(rows) > MAX_ROWS
        else []
    )
    notes += [f"n/a: {r}" for r in reasons]
    note = "".join(f'<p class="note">{escape(n)}</p>' for n in notes)
    return f"<h3>{escape(spec['title'])}</h3><table><tr>{head}</tr>{''.join(body)}</table>{note}"


def _section_html(section: dict) -> str:
    parts = [f"<h2>{escape(section['title'])}</h2>"]
    v = section.get("verdict")
    if v:
        parts.append(
            f'<p class="verdict"><b>{escape(v["label"] or "no verdict")}</b> — '
            f"{escape(v['reason'])}</p>"
        )
    recs = section.get("recommendations") or []
    if recs:
        parts.append("<ol>" + "".join(f"<li>{escape(r)}</li>" for r in recs) + "</ol>")
    parts += [_table_html(t) for t in section.get("tables", [])]
    parts += [
        f'<p class="note">Cannot answer {escape(i["what"])} because {escape(i["reason"])}.</p>'
        for i in section.get("cannot_answer") or []
    ]
    return "\n".join(parts)


def _figure(title: str, svg: str, note: str, missing: str) -> str:
    body = svg or f'<p class="note">Not drawn: {escape(missing)}</p>'
    return f'<h3>{escape(title)}</h3><p class="note">{escape(note)}</p>{body}'


def _label(label: str | None) -> str:
    text = label or "no verdict"
    color = LABEL_COLORS.get(text.split(":")[0], "#555")
    return f'<span class="label" style="background:{color}">{escape(text)}</span>'


def _diagnosis_html(report: dict) -> str:
    """The diagnosis block: headline, findings by cost, key figures per rank, what to do."""
    d = report.get("diagnosis") or {}
    parts = ['<div class="diagnosis">', f"<h2>Diagnosis: {escape(d.get('headline', 'none'))}</h2>"]
    findings = d.get("findings", [])
    if findings:
        parts.append(
            "<ol>"
            + "".join(f"<li>{_label(f['label'])} {escape(f['text'])}</li>" for f in findings)
            + "</ol>"
        )
    parts += [
        f'<p class="note">Cannot answer {escape(c["what"])}: {escape(c["reason"])}.</p>'
        for c in d.get("cannot_answer", [])
    ]
    if d.get("window"):
        parts.append(f'<p class="note">{escape(d["window"])}</p>')
    if d.get("host_steps"):
        parts.append(
            _table_html(
                {
                    "id": "host_steps",
                    "title": "Per rank: host step times (NVTX step ranges)",
                    "rows": [
                        {k: h[k] for k in ("rank", "steps", "step_mean", "step_p90", "step_max")}
                        for h in d["host_steps"]
                    ],
                }
            )
        )
    devices = d.get("devices", [])
    if devices:
        keys = [
            k
            for k in (
                "steps",
                "step_mean",
                "step_p90",
                "step_max",
                "compute",
                "exposed_comm",
                "copy_only",
                "idle",
                "waited",
            )
            if any(x[k]["value"] for x in devices)
        ]  # no column of zeros or n/a only
        rows = [
            {
                "rank": x["rank"],
                "gpu": x["device"],
                "verdict": x["label"],
                **{k: x[k] for k in keys},
            }
            for x in devices
        ]
        stepped = any(x["steps"]["value"] for x in devices)
        table = _table_html(
            {
                "id": "diagnosis",
                "title": "Per rank: "
                + ("step times (mean, p90, max), " if stepped else "")
                + "shares of the GPU time"
                + (
                    ", wait in collectives"
                    if any(x["waited"]["value"] is not None for x in devices)
                    else ""
                ),
                "rows": rows,
            }
        )
        for label in {x["label"] for x in devices if x["label"]}:
            table = table.replace(
                f'<td class="text">{escape(label)}</td>', f'<td class="text">{_label(label)}</td>'
            )
        parts.append(table)
    recs = d.get("recommendations", [])
    if recs:
        parts.append(
            "<h3>What to do</h3><ol>" + "".join(f"<li>{escape(r)}</li>" for r in recs) + "</ol>"
        )
    return "\n".join(parts + ["</div>"])


def _replayed(report: dict) -> bool:
    """Whether the report's cross-rank section has the replay's critical path."""
    return any(t["id"] == "critical_path" for s in report["sections"] for t in s.get("tables", []))


def _plots(run: Run, options: ReportOptions, report: dict) -> str:
    """The four plots, over the report's steps (the first MAX_STEPS of them on the timeline)."""
    lo, hi = options.step_from, options.step_to
    ranges = run_module(run, "crossrank.step_phases", step_pattern=options.step_pattern)
    coll = matched_collectives(run, step_pattern=options.step_pattern, step_from=lo, step_to=hi)
    steps = sorted(
        s
        for s in ranges["step"].dropna().unique().astype(int).tolist()
        if (lo is None or s >= lo) and (hi is None or s < hi)
    )
    shown = steps[:MAX_STEPS]
    path = (
        run_module(
            run,
            "crossrank.critical_path",
            step_pattern=options.step_pattern,
            step_from=lo,
            step_to=hi,
        )
        if _replayed(report)
        else pd.DataFrame()
    )
    ledger = (
        run_module(run, "ledger.devices", **options.window_params())
        if "ledger.devices" in catalog()
        else pd.DataFrame()
    )
    return "\n".join(
        [
            "<h2>Plots</h2>",
            _figure(
                "Per-rank step timeline",
                step_timeline(ranges, coll, shown),
                f"Steps {shown[0]}–{shown[-1]} of {len(steps)} on aligned run time (ms since the "
                "reference rank's aligned session start); bars are the ranges nested in each step, "
                "red marks are waits inside collectives."
                if shown
                else "",
                "these reports have no `step:<i>` ranges; mark steps with nsyswrap.step(i) or "
                "capture with nsyswrap launch --annotate steps.",
            ),
            _figure(
                "GPU time ledger per rank",
                ledger_bars(ledger),
                f"Where each GPU's time went over the window ({options.describe()}; exact unions, "
                "all streams).",
                "these reports have no GPU activity; capture CUDA with nsys profile --trace=cuda "
                "(nsyswrap launch does by default).",
            ),
            _figure(
                "Critical path per step",
                critical_path_bars(path),
                "What each step's time rests on, walking back from its end on its last rank: the "
                "work of a rank in a phase (its rank in the tip) or the transfer of a collective "
                "after its last member arrived; waiting is never on it (crossrank.critical_path).",
                "no step is replayed: it needs matched collectives and step ranges, and a replay "
                "residual under 2 % (see the cross-rank section).",
            ),
            _figure(
                "Arrival skew: rank × collective",
                skew_heatmap(coll),
                "One cell per matched collective and rank; darker red = arrived later than the "
                "first rank, so the others waited for it.",
                "no collective is matched across two or more ranks; profile two or more ranks "
                "(nsyswrap launch --ranks) and annotate their collectives "
                "(--annotate collectives).",
            ),
        ]
    )


def html_page(run: Run, report: dict, options: ReportOptions) -> str:
    """The page of an open run and its report dict (nsyswrap.report.build_report)."""
    held = ranks_by_report(run)
    ranks = "; ".join(
        f"{shown(r.path.name)}: rank{'s' * (len(held[r.rank]) > 1)} "
        f"{', '.join(map(str, held[r.rank]))}"
        for r in run.reports
    )
    analysed = ReportOptions.from_params(report["options"])  # the window the report chose
    parts = [
        f"<h1>nsyswrap report: {escape(heading(report))}</h1>",
        f'<p class="note">{escape(ranks)}</p>',
        _diagnosis_html(report),
        _plots(run, analysed, report),
    ]
    parts += [_section_html(s) for s in report["sections"]]
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>nsyswrap report</title>'
        f"<style>{CSS}</style></head><body>" + "\n".join(parts) + "</body></html>\n"
    )


def report_with_html(
    inputs: list[str | Path],
    options: ReportOptions,
    html: Path,
    *,
    opener: Opener = DEFAULT_OPENER,
    force: bool = False,
) -> dict:
    """Build the report of the reports, write its HTML page to `html`, return the report dict."""
    check_writable(html, force, inputs, option="--html")
    with planned(opener, options).open(inputs) as run:
        report = build_report(run, options)
        save(html, html_page(run, report, options))
    return report
