"""Interval arithmetic written plainly in Python: the reference the SQL's sweeps are
checked against."""


def union_length(spans: list[tuple[int, int]]) -> int:
    """The length of the union of half-open `spans` (start, end)."""
    total, reach = 0, None
    for start, end in sorted(spans):
        if reach is None or start > reach:
            total += end - start
            reach = end
        elif end > reach:
            total += end - reach
            reach = end
    return total
