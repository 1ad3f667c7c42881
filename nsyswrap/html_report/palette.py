"""The colours of the HTML pages, one meaning each, the same in every plot and label of a
page: a cause of GPU time (COLORS), a verdict (LABEL_COLORS: the colour of its cause), a
phase (phase_colors: one colour per phase name over the whole page, from PHASES), a rank
(rank_colors, the sample page's lines) and a slow window (SLOW_FILL). No two meanings
share a colour."""

from __future__ import annotations

from collections.abc import Iterable

COLORS = {
    "compute": "#4e79a7",
    "both": "#8e6bb0",
    "comm": "#f28e2b",
    "copy": "#9c9c9c",
    "idle": "#e4e4e4",
    "wait": "#d62728",
}
WAIT_COLOR = COLORS["wait"]
# The colour of each verdict: the colour of its cause in the plots.
LABEL_COLORS = {
    "compute-bound": COLORS["compute"],
    "communication-bound": COLORS["comm"],
    "copy-bound": "#6f6f6f",
    "host-bound": "#8c8c8c",
    "waiting-for-peers": COLORS["wait"],
    "straggler": COLORS["wait"],
    "balanced": "#2e7d32",
    "not enough data": "#bbbbbb",
}
SLOW_FILL = "#f7c6c6"  # the sample page's slow windows
# Phases (ranges inside a step) take colours no meaning above uses.
PHASES = (
    "#59a14f",
    "#76b7b2",
    "#edc948",
    "#9c755f",
    "#b6992d",
    "#86bcb6",
    "#a0cbe8",
    "#d4a6c8",
    "#499894",
)
# The lines of ranks (the sample page, which draws no phase): neither a phase nor a cause.
RANKS = ("#1f3b63", "#6b4c9a", "#3c7d8c", "#8a6d3b", "#5a5a5a", "#2f6f4f", "#7a3e65")


def _colors(names: list, base: tuple[str, ...], lightness: int) -> dict:
    """`base` in order, then hues around the wheel at the golden angle (an `hsl()` colour,
    never the hex colour of another meaning)."""
    return {
        name: base[i]
        if i < len(base)
        else f"hsl({((i - len(base)) * 137.5) % 360:.1f},45%,{lightness}%)"
        for i, name in enumerate(names)
    }


def phase_colors(names: Iterable[str]) -> dict[str, str]:
    """One colour per phase name, the names sorted: the page's phases, drawn alike in every
    plot."""
    return _colors(sorted(set(names)), PHASES, 62)


def rank_colors(ranks: Iterable[int], highlighted=None) -> dict[int, str]:
    """One colour per rank for the lines of a chart: the highlighted rank (the straggler) in
    the wait colour, the others from RANKS."""
    ranks = sorted(set(ranks))
    others = _colors([r for r in ranks if r != highlighted], RANKS, 35)
    return {r: others.get(r, WAIT_COLOR) for r in ranks}
