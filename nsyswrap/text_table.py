"""Plain-text tables that fit a width: cells are never wrapped or split.

A table wider than the terminal first shortens long text cells (names, ranges) in the
middle, keeping what tells the column's values apart, then drops columns and says which;
a header may fold onto two lines at a space. Numbers are never cut.

Which columns go: a table declares the columns that may be dropped at narrow widths
(`droppable`, in the order they go); the others answer its title and stay. A table that
declares nothing loses the columns in `drop_first`, then columns from the right (never
the leading key columns).

Control characters in cells, headers and wrapped text (a crafted kernel name holding ESC
sequences or a newline) are shown escaped (`errors.printable`): they never reach the
terminal raw.
"""

from __future__ import annotations

import textwrap

from nsyswrap.errors import printable

GAP = 2
TEXT_MIN = 12  # text cells are shortened no further than this
TEXT_MAX = 40  # nor kept longer than this when the table does not fit
NBSP = "\u00a0"


def _header_split(header: str) -> list[str]:
    """One or two lines, split after a space or an underscore, whichever makes the header
    narrowest (`compute_only_ns` -> `compute_` / `only_ns`)."""
    best = [header]
    for i in range(1, len(header)):
        if header[i - 1] in " _":
            lines = [header[:i].rstrip(), header[i:]]
            if max(map(len, lines)) < max(map(len, best)):
                best = lines
    return best


def _shorten(text: str, width: int, head: int | None = None) -> str:
    """`text` in `width` characters: its first `head` (default: about half) and its last
    ones around an ellipsis."""
    if len(text) <= width:
        return text
    width = max(width, 2)
    head = width // 2 if head is None else head
    tail = width - 1 - head
    return text[:head] + "…" + (text[-tail:] if tail else "")


def shorten_column(values: list[str], width: int) -> list[str]:
    """Each value in `width` characters, cut in the middle: about half kept before the
    ellipsis, half after; values that would then look alike take, together, the split
    that tells the most of them apart (ties: nearest an even split)."""
    width = max(width, 2)
    even = width // 2
    short = {v: _shorten(v, width, even) for v in values}
    alike: dict[str, set[str]] = {}
    for v, text in short.items():
        alike.setdefault(text, set()).add(v)
    for group in alike.values():
        if len(group) > 1:
            head = max(
                range(1, width - 1),
                key=lambda h: (len({_shorten(v, width, h) for v in group}), -abs(h - even)),
            )
            short.update({v: _shorten(v, width, head) for v in group})
    return [short[v] for v in values]


def fit(
    headers: list[str],
    rows: list[list[str]],
    right: list[bool],
    width: int,
    keep: int = 1,
    whole: frozenset[int] = frozenset(),
    drop_first: tuple[int, ...] = (),
    droppable: tuple[int, ...] | None = None,
) -> tuple[list[str], list[str]]:
    """(lines, dropped headers) of a table no wider than `width`. `right`: right-align
    (numbers) per column; the first `keep` columns are never dropped; the text of the
    columns in `whole` (e.g. verdicts) is never shortened, like numbers. `droppable`: the
    table's declaration of the columns that may go at this width, in that order (text is
    shortened to 24 characters before any goes, and further after); without it the
    columns in `drop_first` go first, then columns from the right. Only a table whose
    other columns still do not fit loses more, from the right."""
    headers = [printable(h) for h in headers]
    rows = [[printable(c) for c in row] for row in rows]
    right_or_whole = [r or i in whole for i, r in enumerate(right)]
    cols = list(range(len(headers)))
    split = [_header_split(h) for h in headers]

    def natural(c: int, text_cap: int | None = None) -> int:
        cells = [len(r[c]) for r in rows] or [0]
        cell = max(cells)
        if text_cap is not None and not right_or_whole[c]:
            cell = min(cell, text_cap)
        head = min(len(headers[c]), max(max(map(len, split[c])), cell))
        return max(cell, head, 1)

    def total(widths: dict[int, int]) -> int:
        return sum(widths[c] for c in cols) + GAP * (len(cols) - 1)

    widths = {c: max(natural(c), len(headers[c])) for c in cols}  # headers on one line
    if total(widths) > width:
        widths = {c: natural(c) for c in cols}
    dropped = []

    def drop(candidates) -> None:
        for c in candidates:
            if total(widths) > width and c in cols and cols.index(c) >= keep:
                cols.remove(c)
                dropped.append(headers[c])

    caps = (TEXT_MAX, 24, TEXT_MIN)
    for cap in caps:
        if total(widths) <= width:
            break
        if cap == TEXT_MIN and droppable is not None:
            drop(droppable)  # declared columns go before names are cut short
            if total(widths) <= width:
                break
        widths = {c: natural(c, cap) for c in cols}
    if droppable is None:
        drop(drop_first)
    while total(widths) > width and len(cols) > keep:
        dropped.append(headers[cols.pop()])
    dropped.sort(key=headers.index)
    two = any(widths[c] < len(headers[c]) for c in cols)
    head_lines = [[], []] if two else [[]]
    for c in cols:
        parts = [headers[c]] if widths[c] >= len(headers[c]) else split[c]
        parts = ([""] * (len(head_lines) - len(parts))) + parts
        for line, part in zip(head_lines, parts):
            line.append(_pad(_shorten(part, widths[c]), widths[c], right[c]))
    out = [(" " * GAP).join(line).rstrip() for line in head_lines]
    out.append((" " * GAP).join("-" * widths[c] for c in cols))
    shown = {
        c: [r[c] for r in rows]
        if right_or_whole[c]
        else shorten_column([r[c] for r in rows], widths[c])
        for c in cols
    }
    for i in range(len(rows)):
        out.append((" " * GAP).join(_pad(shown[c][i], widths[c], right[c]) for c in cols).rstrip())
    return out, dropped


def _pad(text: str, width: int, right: bool) -> str:
    return text.rjust(width) if right else text.ljust(width)


def wrap(text: str, width: int, indent: str = "", first: str = "") -> list[str]:
    """Words wrapped to `width`; a number stays with its unit (`0.99 ms`, `26 %`)."""
    glued = printable(text)
    for unit in (" ms", " us", " ns", " s ", " %", " GB/s", " MB", " kB"):
        glued = glued.replace(unit, NBSP + unit[1:])
    lines = textwrap.wrap(
        glued,
        width,
        initial_indent=first or indent,
        subsequent_indent=indent,
        break_long_words=False,
        break_on_hyphens=False,
    )
    return [line.replace(NBSP, " ") for line in lines]
