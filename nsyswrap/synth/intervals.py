"""Plain-Python interval arithmetic on [start, end) pairs of ints (for the ground truth)."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from itertools import accumulate

Intervals = list[tuple[int, int]]


def union(intervals: Intervals) -> Intervals:
    """Sorted, merged intervals (touching ones merge; empty ones vanish)."""
    merged: Intervals = []
    for s, e in sorted(intervals):
        if e <= s:
            continue
        if merged and s <= merged[-1][1]:
            if e > merged[-1][1]:
                merged[-1] = (merged[-1][0], e)
        else:
            merged.append((s, e))
    return merged


def intersect(a: Intervals, b: Intervals) -> Intervals:
    """Intersection of two merged interval lists."""
    out: Intervals = []
    i = j = 0
    while i < len(a) and j < len(b):
        s, e = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if s < e:
            out.append((s, e))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


class Measure:
    """Length of a merged interval list inside any window [lo, hi) (prefix sums + bisect)."""

    def __init__(self, merged: Intervals):
        self.starts = [s for s, _ in merged]
        self.ends = [e for _, e in merged]
        self.before = [0, *accumulate(e - s for s, e in merged)]  # total length of the first i

    def __call__(self, lo: int, hi: int) -> int:
        if hi <= lo:
            return 0
        i = max(0, bisect_right(self.starts, lo) - 1)  # first interval that may reach lo
        j = bisect_left(self.starts, hi)  # intervals i..j-1 start before hi
        if i >= j:
            return 0
        total = self.before[j] - self.before[i]
        total -= max(0, min(self.ends[i], lo) - self.starts[i])  # part of interval i before lo
        total -= max(0, self.ends[j - 1] - hi)  # part of interval j-1 after hi
        return total


def gaps(activities: Intervals, lo: int, hi: int) -> Intervals:
    """Maximal idle intervals inside [lo, hi) between activities (a 0-length one is a point)."""
    out: Intervals = []
    cur = lo
    for s, e in sorted(activities):
        if s >= hi:
            break
        if s > cur:
            out.append((cur, s))
        cur = max(cur, e)
    if cur < hi:
        out.append((cur, hi))
    return out
