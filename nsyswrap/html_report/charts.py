"""Inline SVG charts of a run: per-rank step timeline, ledger bars, skew heat map.

Each function takes DataFrames from the `sql/` modules and returns one `<svg>`
string that needs no script, style sheet or network to display.
"""

from __future__ import annotations

import math
from html import escape

import pandas as pd

from nsyswrap.html_report.palette import COLORS, WAIT_COLOR

WIDTH = 1200
LABEL_W = 110
OUTSIDE = "outside phases"  # the critical path's work outside every phase, as a phase
LEDGER_PARTS = [
    ("compute_only_ns", "compute only", COLORS["compute"]),
    ("both_ns", "compute + comm", COLORS["both"]),
    ("comm_only_ns", "comm only (exposed)", COLORS["comm"]),
    ("copy_only_ns", "copy only", COLORS["copy"]),
    ("idle_ns", "idle", COLORS["idle"]),
]


def svg_element(width: int, height: int, body: list[str], label: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(label)}" '
        f'font-family="sans-serif" font-size="11">' + "".join(body) + "</svg>"
    )


def rect_element(
    x: float, y: float, w: float, h: float, fill: str, tip: str = "", extra: str = ""
) -> str:
    title = f"<title>{escape(tip)}</title>" if tip else ""
    return (
        f'<rect x="{x:.2f}" y="{y:.2f}" width="{max(w, 0.5):.2f}" height="{h:.2f}" '
        f'fill="{fill}" {extra}>'
        f"{title}</rect>"
    )


def text_element(x: float, y: float, text: str, anchor: str = "start", extra: str = "") -> str:
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" {extra}>{escape(text)}</text>'


def nice_step(span: float, ticks: int = 8) -> float:
    """A round tick interval (1, 2 or 5 times a power of ten) giving about `ticks` ticks."""
    raw = span / ticks
    magnitude = 10 ** math.floor(math.log10(raw))
    return next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)


def legend_elements(items: list[tuple[str, str]], y: float) -> list[str]:
    out, x = [], LABEL_W
    for label, color in items:
        out += [rect_element(x, y - 9, 10, 10, color), text_element(x + 14, y, label)]
        x += 24 + 7 * len(label)
    return out


def step_timeline(
    ranges: pd.DataFrame, collectives: pd.DataFrame, steps: list[int], colors: dict[str, str]
) -> str:
    """One row per rank: its step ranges with their phases (in the page's `colors`, by
    phase) and, in red, its waits inside collectives, on aligned run time. `ranges` is
    crossrank.step_phases, `collectives` crossrank.collectives; only `steps` are drawn."""
    shown = ranges[ranges["step"].isin(steps)]
    if shown.empty:
        return ""
    t0, t1 = shown["start_ns"].min(), shown["end_ns"].max()
    span = max(t1 - t0, 1)
    ranks = sorted(shown["rank"].unique())
    row_h, top = 28, 24
    plot_w = WIDTH - LABEL_W - 20
    height = top + row_h * len(ranks) + 50

    def x(t: float) -> float:
        return LABEL_W + (t - t0) / span * plot_w

    body = []
    tick = nice_step(span / 1e6)
    first = -(-t0 / 1e6 // tick) * tick
    for k in range(int((t1 / 1e6 - first) // tick) + 1):
        ms_at = first + k * tick
        px = x(ms_at * 1e6)
        body += [
            f'<line x1="{px:.1f}" y1="{top - 4}" x2="{px:.1f}" y2="{top + row_h * len(ranks)}" '
            'stroke="#ddd"/>',
            text_element(px, top - 8, f"{ms_at:g} ms", "middle", 'fill="#555"'),
        ]
    for i, rank in enumerate(ranks):
        y = top + i * row_h
        body.append(text_element(LABEL_W - 8, y + row_h / 2 + 4, f"rank {rank}", "end"))
        mine = shown[shown["rank"] == rank]
        for r in mine[mine["phase"].isna()].itertuples():
            body.append(
                rect_element(
                    x(r.start_ns),
                    y + 2,
                    x(r.end_ns) - x(r.start_ns),
                    row_h - 4,
                    "#f6f6f6",
                    f"rank {rank} step {r.step}: {(r.end_ns - r.start_ns) / 1e6:.3f} ms",
                    'stroke="#999" stroke-width="0.5"',
                )
            )
        for r in mine[mine["phase"].notna()].itertuples():
            body.append(
                rect_element(
                    x(r.start_ns),
                    y + 4,
                    x(r.end_ns) - x(r.start_ns),
                    row_h - 14,
                    colors[r.phase],
                    f"rank {rank} step {r.step} {r.phase}: {(r.end_ns - r.start_ns) / 1e6:.3f} ms",
                )
            )
        waits = collectives[
            (collectives["rank"] == rank)
            & (collectives["wait_ns"] > 0)
            & (collectives["start_ns"] >= t0)
            & (collectives["start_ns"] <= t1)
        ]
        for c in waits.itertuples():
            body.append(
                rect_element(
                    x(c.start_ns),
                    y + row_h - 9,
                    x(c.start_ns + c.wait_ns) - x(c.start_ns),
                    5,
                    WAIT_COLOR,
                    f"rank {rank} waited {c.wait_ns / 1e3:,.1f} µs in {c.op} pg={c.pg} seq={c.seq} "
                    f"for rank {c.last_rank}",
                )
            )
    legend = [(name, colors[name]) for name in sorted(set(shown["phase"].dropna()))]
    legend += [("wait in collective", WAIT_COLOR)]
    body += legend_elements(legend, height - 14)
    return svg_element(WIDTH, height, body, "per-rank step timeline")


def ledger_bars(ledger: pd.DataFrame) -> str:
    """One stacked bar per (rank, device): the ledger.devices split of the window."""
    if ledger.empty:
        return ""
    row_h, top = 22, 10
    plot_w = WIDTH - LABEL_W - 110
    height = top + row_h * len(ledger) + 36
    body = []
    for i, r in enumerate(ledger.sort_values(["rank", "device"]).itertuples()):
        y = top + i * row_h
        body.append(text_element(LABEL_W - 8, y + 14, f"rank {r.rank} · GPU {r.device}", "end"))
        x = LABEL_W
        span = max(r.span_ns, 1)
        for column, label, color in LEDGER_PARTS:
            value = getattr(r, column)
            w = value / span * plot_w
            if w > 0:
                body.append(
                    rect_element(
                        x,
                        y + 3,
                        w,
                        row_h - 6,
                        color,
                        f"rank {r.rank} GPU {r.device} {label}: {value / 1e6:.3f} ms "
                        f"({100 * value / span:.1f}%)",
                    )
                )
            x += w
        body.append(
            text_element(
                LABEL_W + plot_w + 8, y + 14, f"{r.span_ns / 1e6:,.2f} ms", "start", 'fill="#555"'
            )
        )
    body += legend_elements([(label, color) for _, label, color in LEDGER_PARTS], height - 12)
    return svg_element(WIDTH, height, body, "GPU time ledger per rank")


def _heat(fraction: float) -> str:
    f = min(max(fraction, 0.0), 1.0)
    r, g, b = (255 - round(f * 76), 255 - round(f * 230), 255 - round(f * 230))
    return f"rgb({r},{g},{b})"


def skew_heatmap(cells: pd.DataFrame, collectives: int, per_bin: int) -> str:
    """Rank x collective: how long after the first rank each rank arrived (darker = later,
    saturated at the 90th percentile); the last rank's cell is outlined. `cells`: per rank
    and column (`col`), the mean lateness and wait of its collectives, its last rank, pg and
    seq (nsyswrap.report.plots.skew_cells: `per_bin` of the `collectives` a column)."""
    if cells.empty:
        return ""
    c, cells = cells, cells.set_index(["rank", "col"])
    ranks = sorted(c["rank"].unique())
    ncols = int(c["col"].max()) + 1
    cell_w = min(28.0, (WIDTH - LABEL_W - 20) / ncols)
    cell_h, top = 18, 8
    late = cells["late_ns"][cells["late_ns"] > 0]
    peak = (
        max(late.quantile(0.9), 1) if len(late) else 1
    )  # start-up skew must not wash out the rest
    height = top + cell_h * len(ranks) + 46
    body = []
    for i, rank in enumerate(ranks):
        y = top + i * cell_h
        body.append(text_element(LABEL_W - 8, y + 13, f"rank {rank}", "end"))
    for (rank, col), cell in cells.iterrows():
        y = top + ranks.index(rank) * cell_h
        if per_bin == 1:
            what = f"pg={cell.pg} seq={cell.seq}"
        else:
            what = f"collectives {col * per_bin}–{(col + 1) * per_bin - 1}"
        last = per_bin == 1 and cell["last"] == rank
        outline = 'stroke="#000" stroke-width="1.2"' if last else 'stroke="#fff" stroke-width="0.3"'
        body.append(
            rect_element(
                LABEL_W + col * cell_w,
                y,
                cell_w,
                cell_h,
                _heat(cell.late_ns / peak),
                f"rank {rank}, {what}: arrived {cell.late_ns / 1e3:,.1f} µs after the first rank, "
                f"waited {cell.wait_ns / 1e3:,.1f} µs",
                outline,
            )
        )
    y = top + cell_h * len(ranks) + 16
    body.append(
        text_element(
            LABEL_W,
            y,
            f"collectives in time order ({collectives}"
            + (f", {per_bin} per column" if per_bin > 1 else "")
            + ")",
            "start",
            'fill="#555"',
        )
    )
    for k in range(11):
        body.append(rect_element(LABEL_W + k * 16, y + 8, 16, 10, _heat(k / 10)))
    body.append(
        text_element(
            LABEL_W + 11 * 16 + 6,
            y + 17,
            f"0 … ≥{peak / 1e3:,.1f} µs after the first arrival"
            + ("; outlined: last to arrive" if per_bin == 1 else ""),
        )
    )
    return svg_element(WIDTH, height, body, "arrival skew per rank and collective")


def critical_path_bars(path: pd.DataFrame, colors: dict[str, str], max_steps: int = 40) -> str:
    """One stacked bar per step (the first `max_steps`): its critical path
    (crossrank.critical_path), work in the colour of its phase (the page's `colors`; work
    outside every phase: OUTSIDE; each piece's rank in its tip), transfer in the
    communication colour; a bar is as long as its step."""
    if path.empty:
        return ""
    path = path.assign(step=path["step"].fillna(-1).astype(int))
    steps = sorted(path["step"].unique())[:max_steps]
    longest = max(path[path["step"].isin(steps)].groupby("step")["ns"].sum().max(), 1)
    row_h, top = 20, 8
    plot_w = WIDTH - LABEL_W - 110
    height = top + row_h * len(steps) + 36
    drawn = path["step"].isin(steps) & (path["kind"] == "work")
    phases = sorted(set(path.loc[drawn, "phase"].fillna(OUTSIDE)))
    body = []
    for i, step in enumerate(steps):
        y = top + i * row_h
        body.append(text_element(LABEL_W - 8, y + 14, "run" if step < 0 else f"step {step}", "end"))
        x = LABEL_W
        mine = path[path["step"] == step]
        for r in mine.itertuples():
            w = r.ns / longest * plot_w
            if r.kind == "transfer":
                color, tip = COLORS["comm"], f"transfer of {r.op} (group {r.pg})"
            else:
                phase = r.phase if isinstance(r.phase, str) else OUTSIDE
                color, tip = colors[phase], f"rank {int(r.rank)} {phase}"
            share = 100 * r.ns / max(mine["ns"].sum(), 1)
            body.append(
                rect_element(
                    x,
                    y + 3,
                    w,
                    row_h - 6,
                    color,
                    f"step {step}: {tip}, {r.ns / 1e6:.3f} ms ({share:.1f}%)",
                )
            )
            x += w
        total = f"{mine['ns'].sum() / 1e6:,.2f} ms"
        body.append(text_element(x + 8, y + 14, total, "start", 'fill="#555"'))
    legend = [(name, colors[name]) for name in phases] + [("transfer", COLORS["comm"])]
    body += legend_elements(legend, height - 12)
    return svg_element(WIDTH, height, body, "critical path per step")
