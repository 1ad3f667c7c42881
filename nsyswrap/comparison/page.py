"""`nsyswrap diff --html`: one self-contained page (inline SVG, no network): the headline,
a chart of every step's time in BASE and NEW with their medians, the comparability
check, the section tables and the stragglers."""

from __future__ import annotations

import html

import pandas as pd

from nsyswrap.comparison import DiffResult

WIDTH, HEIGHT, PAD = 720, 220, 40
COLORS = {"BASE": "#888888", "NEW": "#1f77b4"}
STYLE = (
    "body{font-family:sans-serif;max-width:62em;margin:auto}table{border-collapse:"
    "collapse}td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}"
    ".warn{color:#a60}"
)


def as_html(result: DiffResult, tables: list[tuple[str, pd.DataFrame | None]]) -> str:
    """The page; `tables`: (title, rows or None) as nsyswrap.comparison.render.section_tables."""
    e = html.escape
    parts = [
        f"<h1>{e(result.headline[0])}</h1>",
        "<ul>" + "".join(f"<li>{e(x)}</li>" for x in result.headline[1:]) + "</ul>",
        *(f"<p class=warn>Warning: {e(w)}</p>" for w in result.warnings),
        f"<p>BASE <code>{e(result.base)}</code> vs NEW <code>{e(result.new)}</code>. "
        f"Significance: {e(result.method)}.</p>",
        step_chart(result.step_times),
        "<h2>Comparability</h2>",
        result.checks.to_html(index=False),
    ]
    for title, rows in tables:
        parts += [f"<h2>{e(title)}</h2>"] + ([] if rows is None else [rows.to_html(index=False)])
    if not result.stragglers.empty:
        parts += ["<h2>Stragglers</h2>", result.stragglers.to_html(index=False)]
    parts += [f"<p>Note: {e(n)}.</p>" for n in result.notes]
    return (
        f"<!doctype html><html><head><meta charset=utf-8><title>nsyswrap diff</title>"
        f"<style>{STYLE}</style></head><body>{''.join(parts)}</body></html>\n"
    )


def step_chart(step_times: pd.DataFrame) -> str:
    """Step time (slowest rank) per step, one series per run, in the order of the steps,
    with each run's median as a dashed line."""
    if step_times.empty:
        return ""
    top = float(step_times["step_time_ns"].max()) or 1.0
    n = int(step_times.groupby("run").size().max())

    def x(i: int) -> float:
        return PAD + i * (WIDTH - 2 * PAD) / max(n - 1, 1)

    def y(ns: float) -> float:
        return HEIGHT - PAD - ns / top * (HEIGHT - 2 * PAD)

    body = [
        f'<text x="{PAD}" y="{PAD - 20}" font-size="12">step time per step (max '
        f"{top / 1e6:,.3f} ms); dashed: median</text>"
    ]
    for k, (run, color) in enumerate(COLORS.items()):
        values = step_times[step_times["run"] == run].sort_values("step")["step_time_ns"]
        points = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(values))
        median = y(float(values.median())) if len(values) else HEIGHT - PAD
        body += [
            f'<polyline points="{points}" fill="none" stroke="{color}" stroke-width="1.5">'
            f"<title>{run}</title></polyline>",
            f'<line x1="{PAD}" x2="{WIDTH - PAD}" y1="{median:.1f}" y2="{median:.1f}" '
            f'stroke="{color}" stroke-dasharray="4 3"/>',
            f'<text x="{WIDTH - PAD + 4}" y="{PAD + 14 * k}" font-size="12" '
            f'fill="{color}">{run}</text>',
        ]
    body.append(
        f'<line x1="{PAD}" x2="{WIDTH - PAD}" y1="{HEIGHT - PAD}" y2="{HEIGHT - PAD}" '
        'stroke="#000"/>'
    )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'role="img" aria-label="step time per step">{"".join(body)}</svg>'
    )
