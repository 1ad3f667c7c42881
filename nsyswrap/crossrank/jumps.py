"""Clock jumps: a step in a clock's residuals (nsyswrap.crossrank.alignment fits it as a
third unknown of the clock) and, per report, the session time from which its readings
are late.

A clock that steps (a time-base resync, captures stitched together) leaves the ends of
its collectives offset by the step from some point on: the residuals of the clock's
ends over its host time are fitted with a line plus one step at each possible place
(between two consecutive ends); the best step is a jump when it is at least JUMP_MIN_NS,
JUMP_SCALES robust scales of the stepped fit, and holds for the medians on both sides
(a few outliers make no step).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

JUMP_MIN_NS = 10_000  # a step in a clock's residuals at least this big ...
JUMP_SCALES = 20  # ... and this many robust scales of the stepped fit is a jump
JUMP_MIN_SIDE = 3  # collectives on each side of a jump


def _step(t: np.ndarray, r: np.ndarray) -> tuple[int, float, float, float] | None:
    """The best single step in residuals ``r`` at sorted times ``t`` over a line: (index of
    the first point after it, its size, robust scale of the stepped fit, the step between
    the medians of both sides less the line: a few outliers make no step), or None."""
    n = len(r)
    if n < 2 * JUMP_MIN_SIDE:
        return None
    tc = t - t.mean()
    tt = float(tc @ tc) or 1.0
    rp = r - r.mean() - tc * float(tc @ r) / tt  # r without its line
    tail_r = np.cumsum(rp[::-1])[::-1]  # sum over i >= k
    tail_t = np.cumsum(tc[::-1])[::-1]
    k = np.arange(JUMP_MIN_SIDE, n - JUMP_MIN_SIDE + 1)
    m = (n - k).astype(np.float64)
    s = m - m * m / n - tail_t[k] ** 2 / tt  # |step less its line|^2
    ok = s > 1e-9
    if not ok.any():
        return None
    gain = np.where(ok, tail_r[k] ** 2 / np.where(ok, s, 1.0), -1.0)
    best = int(np.argmax(gain))
    at, size = int(k[best]), float(tail_r[k[best]] / s[best])
    step = (np.arange(n) >= at).astype(np.float64)
    design = np.column_stack([np.ones(n), tc, step])
    coef, *_ = np.linalg.lstsq(design, r, rcond=None)
    left = r - design @ coef
    flat = r - design[:, :2] @ coef[:2]
    robust = float(np.median(flat[at:]) - np.median(flat[:at]))
    return at, size, max(1.4826 * float(np.median(np.abs(left))), 1.0), robust


def jump_step(t: np.ndarray, r: np.ndarray) -> tuple[int, float] | None:
    """A jump in residuals ``r`` at sorted times ``t`` (a step over a line at least
    JUMP_MIN_NS and JUMP_SCALES robust scales, holding for the medians on both sides): (the
    index of the first point after it, its size), or None."""
    found = _step(t, r)
    if found is None:
        return None
    at, size, scale, robust = found
    if abs(size) < max(JUMP_MIN_NS, JUMP_SCALES * scale) or abs(robust - size) > abs(size) / 4:
        return None
    return at, size


def find_jump(
    reports: list[int], ends: pd.DataFrame, resid: pd.Series, utc: dict[int, int]
) -> tuple[float, dict[int, tuple[float, float]]] | None:
    """A step in the clock's residuals over its host time (module doc): (its size,
    report -> (last end before it, first end after it)), or None. Outliers count too
    (after a jump most ends may be): the step must hold for the medians on both sides."""
    mine = ends[ends["rank"].isin(reports)]
    if mine.empty:
        return None
    first = min(utc.values())
    t = (
        (mine["rank"].map(utc) - first).astype(np.float64) + mine["end_ns"].astype(np.float64)
    ).to_numpy()
    order = np.argsort(t, kind="stable")
    r = resid[mine.index].to_numpy()[order]
    found = jump_step(t[order], r)
    if found is None:
        return None
    at, size = found
    cut = t[order][at]
    out = {}
    for rank, g in mine.groupby("rank"):
        host_t = (utc[rank] - first) + g["end_ns"].astype(np.float64)
        before, after = g["end_ns"][host_t < cut], g["end_ns"][host_t >= cut]
        out[int(rank)] = (
            float(before.max()) if len(before) else -np.inf,
            float(after.min()) if len(after) else np.inf,
        )
    return size, out


def jump_at(jump: dict[int, tuple[float, float]], size: float, events) -> dict[int, int | None]:
    """Per report of a clock that jumps: the session time from which its readings are late.
    The first collective end after the jump is; for a forward jump the report's events
    (`events(report, lo, hi)`) have a hole longer than the jump where it happened, so the
    first event after the first such gap between the last end before and the first after
    (a longer pause of the host later, e.g. data loading, is not the jump)."""
    out = {}
    for r, (before, after) in jump.items():
        at = int(after) if np.isfinite(after) else None
        if at is not None and events is not None and size > 0 and np.isfinite(before):
            times = np.concatenate([[before], events(r, int(before), at)]).astype(np.float64)
            holes = np.flatnonzero(np.diff(times) > size)
            if len(holes):
                at = int(times[holes[0] + 1])
        out[r] = at
    return out
