"""The HTML page of a report over sample files (`nsyswrap report DIR --html PAGE` where DIR
holds `samples.rank<R>.jsonl`): the diagnosis, one chart of the step time of every rank
over the sampled steps with the straggler's slow windows marked, the capture command,
then every section as tables. Self-contained as the nsys page is (inline SVG, no script)."""

from __future__ import annotations

from html import escape

from nsyswrap.html_report.charts import (
    LABEL_W,
    WIDTH,
    legend_elements,
    nice_step,
    rect_element,
    svg_element,
    text_element,
)
from nsyswrap.html_report.page import CSS, diagnosis_html, figure_html, section_html
from nsyswrap.html_report.palette import SLOW_FILL, rank_colors
from nsyswrap.report.figures import rows
from nsyswrap.report.render import heading


def samples_page(report: dict) -> str:
    times = rows(report, "samples", "step_times")
    windows = rows(report, "samples", "slow_windows")
    straggler = windows[0]["rank"] if windows else None
    chart = step_time_chart(
        [(r["step"], r["rank"], r["duration"]["value"]) for r in times],
        [(w["first"], w["last"], w["before"], w["after"]) for w in windows],
        straggler,
    )
    where = ""
    if windows:
        where = f"rank {straggler} slow" + (
            f" in `{windows[0]['phase']}`" if windows[0]["phase"] else ""
        )
    parts = [
        f"<h1>nsyswrap report: {escape(heading(report))}</h1>",
        diagnosis_html(report),
        "<h2>Plots</h2>",
        figure_html(
            "Step time per rank over the sampled steps",
            chart,
            "One line per rank; shaded: the sampled steps where " + where + " (the "
            "window's true edges lie within half a sampling interval of the shading)."
            if where
            else "One line per rank.",
            "the sample files hold no complete step.",
        ),
    ]
    capture = report.get("capture")
    if capture:
        parts.append(
            f'<h3>Capture it with nsys</h3><p class="note">{escape(capture["why"])}</p>'
            f"<pre>{escape(capture['command'])}</pre>"
            + (f"<pre>{escape(capture['when'])}</pre>" if capture.get("when") else "")
        )
    parts += [section_html(s) for s in report["sections"]]
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>nsyswrap report</title><style>{CSS}</style></head><body>"
        + "\n".join(parts)
        + "</body></html>\n"
    )


def step_time_chart(points: list[tuple[int, int, int]], windows: list[tuple], straggler) -> str:
    """Step time (ms) against step number, one polyline per rank (the straggler's in the
    wait colour); `windows` (first, last, before, after) shaded from halfway to the sampled
    step before to halfway to the one after."""
    if not points:
        return ""
    steps = [s for s, _, _ in points]
    lo, hi = min(steps), max(steps)
    span = max(hi - lo, 1)
    top_ms = max(d for _, _, d in points) / 1e6 * 1.08
    plot_w, plot_h, top = WIDTH - LABEL_W - 20, 220, 14
    height = top + plot_h + 60

    def x(step: float) -> float:
        return LABEL_W + (step - lo) / span * plot_w

    def y(ms: float) -> float:
        return top + plot_h - ms / top_ms * plot_h

    body = []
    for first, last, before, after in windows:
        left = (first + before) / 2 if before is not None else first
        right = (last + after) / 2 if after is not None else last
        body.append(
            rect_element(
                x(left),
                top,
                max(x(right) - x(left), 2),
                plot_h,
                SLOW_FILL,
                f"slow in sampled steps {first}–{last}",
            )
        )
    tick = nice_step(top_ms, 5)
    for k in range(int(top_ms // tick) + 1):
        body += [
            f'<line x1="{LABEL_W}" y1="{y(k * tick):.1f}" x2="{LABEL_W + plot_w}" '
            f'y2="{y(k * tick):.1f}" stroke="#e4e4e4"/>',
            text_element(LABEL_W - 6, y(k * tick) + 4, f"{k * tick:g} ms", "end", 'fill="#555"'),
        ]
    step_tick = max(1, int(nice_step(span)))
    for s in range(lo - lo % step_tick, hi + 1, step_tick):
        if s >= lo:
            body.append(text_element(x(s), top + plot_h + 16, str(s), "middle", 'fill="#555"'))
    body.append(
        text_element(LABEL_W + plot_w / 2, top + plot_h + 32, "step", "middle", 'fill="#555"')
    )
    ranks = sorted({r for _, r, _ in points})
    colors = rank_colors(ranks, straggler)
    for rank in ranks:
        line = sorted((s, d) for s, r, d in points if r == rank)
        path = " ".join(f"{x(s):.1f},{y(d / 1e6):.1f}" for s, d in line)
        width = 2.2 if rank == straggler else 1.2
        body.append(
            f'<polyline points="{path}" fill="none" stroke="{colors[rank]}" '
            f'stroke-width="{width}"><title>rank {rank}</title></polyline>'
        )
    legend = [(f"rank {r}", colors[r]) for r in ranks]
    legend += [("slow window", SLOW_FILL)] if windows else []
    body += legend_elements(legend, height - 8)
    return svg_element(WIDTH, height, body, "step time per rank over the sampled steps")
