"""`nsyswrap report RUN --html PATH`: one self-contained page (inline CSS and SVG, no
script, no network): the diagnosis first, then the plots of the run, then every report
section as HTML tables. Colours mean the same everywhere (nsyswrap.html_report.palette)."""

from __future__ import annotations

from html import escape

from nsyswrap.html_report.charts import (
    OUTSIDE,
    critical_path_bars,
    ledger_bars,
    skew_heatmap,
    step_timeline,
)
from nsyswrap.html_report.palette import LABEL_COLORS, phase_colors
from nsyswrap.report.figures import FRACTION, NS, cell_text, is_figure, time_unit
from nsyswrap.report.options import ReportOptions
from nsyswrap.report.plots import frame_of
from nsyswrap.report.render import heading

MAX_ROWS = 200
CSS = """
body { font-family: sans-serif; margin: 24px; color: #222; max-width: 1260px; }
h1 { font-size: 22px; } h2 { font-size: 18px; margin-top: 32px; border-bottom: 2px solid #ccc; }
h3 { font-size: 14px; margin: 18px 0 4px; }
p.note { color: #666; font-size: 13px; margin: 2px 0 8px; }
p.verdict { font-size: 15px; } p.verdict b { text-transform: uppercase; }
div.table { max-width: 100%; overflow-x: auto; }
table { border-collapse: collapse; font-size: 12px; margin: 4px 0 10px; }
td.text { overflow-wrap: anywhere; min-width: 8em; } svg { max-width: 100%; height: auto; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; }
th, td { padding: 3px 8px; border-bottom: 1px solid #eee; text-align: right; }
th { background: #f4f4f4; } td.text { text-align: left; }
div.diagnosis { border: 2px solid #333; border-radius: 6px; padding: 4px 16px 8px; }
div.diagnosis h2 { margin-top: 8px; border: none; } div.diagnosis li { margin: 4px 0; }
span.label { color: #fff; padding: 1px 6px; border-radius: 3px; font-weight: bold; }
"""


def _unit_of(rows: list[dict], column: str, time_name: str) -> str:
    """The unit a column's header names: times share one unit per table (time_name)."""
    unit = next((row[column]["unit"] for row in rows if is_figure(row.get(column))), "")
    return {NS: time_name.replace("us", "µs"), FRACTION: "%", "count": ""}.get(unit, unit)


def table_html(spec: dict) -> str:
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
        f"<th>{_breakable(c)}{escape(f' ({units[c]})' if units[c] else '')}</th>" for c in columns
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
    table = f"<table><tr>{head}</tr>{''.join(body)}</table>"
    return f'<h3>{escape(spec["title"])}</h3><div class="table">{table}</div>{note}'


def _breakable(column: str) -> str:
    """A column name that may wrap after each underscore (a header no wider than its
    widest part)."""
    return "_<wbr>".join(escape(part) for part in column.split("_"))


def section_html(section: dict) -> str:
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
    parts += [table_html(t) for t in section.get("tables", [])]
    parts += [
        f'<p class="note">Cannot answer {escape(i["what"])} because {escape(i["reason"])}.</p>'
        for i in section.get("cannot_answer") or []
    ]
    return "\n".join(parts)


def figure_html(title: str, svg: str, note: str, missing: str) -> str:
    body = svg or f'<p class="note">Not drawn: {escape(missing)}</p>'
    return f'<h3>{escape(title)}</h3><p class="note">{escape(note)}</p>{body}'


def _label(label: str | None) -> str:
    text = label or "no verdict"
    color = LABEL_COLORS.get(text.split(":")[0], "#555")
    return f'<span class="label" style="background:{color}">{escape(text)}</span>'


def diagnosis_html(report: dict) -> str:
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
        parts.append(_host_steps_html(d["host_steps"]))
    if d.get("devices"):
        parts.append(_devices_html(d["devices"]))
    recs = d.get("recommendations", [])
    if recs:
        parts.append(
            "<h3>What to do</h3><ol>" + "".join(f"<li>{escape(r)}</li>" for r in recs) + "</ol>"
        )
    return "\n".join(parts + ["</div>"])


def _host_steps_html(host_steps: list[dict]) -> str:
    rows = [
        {k: h[k] for k in ("rank", "steps", "step_mean", "step_p90", "step_max")}
        for h in host_steps
    ]
    title = "Per rank: host step times (NVTX step ranges)"
    return table_html({"id": "host_steps", "title": title, "rows": rows})


DEVICE_FIGURES = ("steps", "step_mean", "step_p90", "step_max", "compute", "exposed_comm")
DEVICE_FIGURES += ("copy_only", "idle", "waited")


def _devices_html(devices: list[dict]) -> str:
    """Per GPU: its label (coloured) and its key figures, no column of zeros or n/a only."""
    keys = [k for k in DEVICE_FIGURES if any(x[k]["value"] for x in devices)]
    rows = [
        {"rank": x["rank"], "gpu": x["device"], "verdict": x["label"], **{k: x[k] for k in keys}}
        for x in devices
    ]
    stepped = any(x["steps"]["value"] for x in devices)
    waited = any(x["waited"]["value"] is not None for x in devices)
    title = (
        "Per rank: "
        + ("step times (mean, p90, max), " if stepped else "")
        + "shares of the GPU time"
        + (", wait in collectives" if waited else "")
    )
    table = table_html({"id": "diagnosis", "title": title, "rows": rows})
    for label in {x["label"] for x in devices if x["label"]}:
        table = table.replace(
            f'<td class="text">{escape(label)}</td>', f'<td class="text">{_label(label)}</td>'
        )
    return table


def page_phase_colors(ranges, path) -> dict[str, str]:
    """The colour of every phase the page draws: the step timeline's (`ranges`) and the
    critical path's (`path`, its work outside every phase as OUTSIDE), one per name."""
    names = set(ranges["phase"].dropna()) if "phase" in ranges else set()
    if "phase" in path:
        names |= set(path.loc[path["kind"] == "work", "phase"].fillna(OUTSIDE))
    return phase_colors(names)


def _plots(plots: dict, options: ReportOptions) -> str:
    """The four plots (nsyswrap.report.plots: the first MAX_STEPS steps on the timeline),
    each phase in one colour on all of them."""
    shown, skew = plots["shown"], plots["skew"]
    ranges, path = frame_of(plots["ranges"]), frame_of(plots["critical_path"])
    colors = page_phase_colors(ranges, path)
    return "\n".join(
        [
            "<h2>Plots</h2>",
            figure_html(
                "Per-rank step timeline",
                step_timeline(ranges, frame_of(plots["waits"]), shown, colors),
                f"Steps {shown[0]}–{shown[-1]} of {plots['steps']} on aligned run time (ms "
                "since the reference rank's aligned session start); bars are the ranges nested "
                "in each step, red marks are waits inside collectives."
                if shown
                else "",
                "these reports have no `step:<i>` ranges; mark steps with nsyswrap.step(i) or "
                "capture with nsyswrap launch --annotate steps.",
            ),
            figure_html(
                "GPU time ledger per rank",
                ledger_bars(frame_of(plots["ledger"])),
                f"Where each GPU's time went over the window ({options.describe()}; exact unions, "
                "all streams).",
                "these reports have no GPU activity; capture CUDA with nsys profile --trace=cuda "
                "(nsyswrap launch does by default).",
            ),
            figure_html(
                "Critical path per step",
                critical_path_bars(path, colors),
                "What each step's time rests on, walking back from its end on its last rank: the "
                "work of a rank in a phase (its rank in the tip) or the transfer of a collective "
                "after its last member arrived; waiting is never on it (crossrank.critical_path).",
                "no step is replayed: it needs matched collectives and step ranges, and a replay "
                "residual under 2 % (see the cross-rank section).",
            ),
            figure_html(
                "Arrival skew: rank × collective",
                skew_heatmap(frame_of(skew["cells"]), skew["collectives"], skew["per_bin"])
                if skew
                else "",
                "One cell per matched collective and rank; darker red = arrived later than the "
                "first rank, so the others waited for it.",
                "no collective is matched across two or more ranks; profile two or more ranks "
                "(nsyswrap launch --ranks) and annotate their collectives "
                "(--annotate collectives).",
            ),
        ]
    )


def html_page(report: dict, plots: dict) -> str:
    """The page of a report's document and what its plots draw (nsyswrap.report.plots)."""
    ranks = "; ".join(
        f"{r['report']}: rank{'s' * (len(r['ranks']) > 1)} {', '.join(map(str, r['ranks']))}"
        for r in plots["ranks"]
    )
    analysed = ReportOptions.from_params(report["options"])  # the window the report chose
    parts = [
        f"<h1>nsyswrap report: {escape(heading(report))}</h1>",
        f'<p class="note">{escape(ranks)}</p>',
        diagnosis_html(report),
        _plots(plots, analysed),
    ]
    parts += [section_html(s) for s in report["sections"]]
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>nsyswrap report</title>'
        f"<style>{CSS}</style></head><body>" + "\n".join(parts) + "</body></html>\n"
    )
