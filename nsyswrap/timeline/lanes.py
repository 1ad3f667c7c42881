"""Lanes whose slices nest: a trace viewer draws a track's slices as a stack, so a slice
that overlaps another without one holding the other goes on a lane of its own (a start/end
range closed on another thread, DDP's overlapping bucket waits, two groups' collectives)."""

from __future__ import annotations

from collections.abc import Iterable


def nested_lanes(spans: Iterable[tuple[int, int]]) -> list[int]:
    """Per (start, end) span, given in order of start and, at one start, longest first: the
    lowest lane on which it nests, i.e. where every slice still open holds it."""
    open_ends: list[list[int]] = []  # per lane, the ends of its open slices, innermost last
    lanes = []
    for start, end in spans:
        for lane, stack in enumerate(open_ends):
            while stack and stack[-1] <= start:
                stack.pop()
            if not stack or end <= stack[-1]:
                stack.append(end)
                lanes.append(lane)
                break
        else:
            open_ends.append([end])
            lanes.append(len(open_ends) - 1)
    return lanes
