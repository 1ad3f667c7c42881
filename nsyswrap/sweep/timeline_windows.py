"""What a window reads off the device timeline (`nsyswrap.sweep.device_timeline`): the builders
of the per-report objects `window_unions`, `step_unions` and `idle_gap_rows` (`@builder`,
see `nsyswrap.engine.builders`). Each is a few look-ups per window, step region or idle stretch,
never a pass over the activities: a new `--steps` window reads the stored timeline only.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from nsyswrap.sweep import device_timeline
from nsyswrap.sweep.device_timeline import (
    BAD,
    COMM,
    COMPUTE,
    COPY,
    EMPTY,
    NONE,
    SETS,
    Device,
    groups,
    nullable,
    timeline,
)

OUTSIDE = ("a_before_ns", "a_after_ns")
"""Union of every activity before the window's start and after its end (ns)."""
END_OF_TIME = -NONE
"""After every time, and safe to subtract a time from (int64's largest overflowed there)."""
SUMS = ("compute_sum_ns", "comm_sum_ns", "copy_sum_ns", "compute_kernels", "comm_kernels", "copies")


def _windows(inputs) -> list[tuple[tuple[int, int], int, int]]:
    """Each (rank, device) with a window: its start and end."""
    rows = inputs.arrow("device_windows", ["rank", "device", "window_start_ns", "window_end_ns"])
    return sorted(
        ((int(r), int(d)), int(a), int(b))
        for r, d, a, b in zip(*(rows[c].to_pylist() for c in rows.column_names), strict=True)
    )


def window_unions(inputs) -> pa.Table:
    """`window_unions`: per window, the union lengths (covered at its end - at its start),
    the union of every activity before and after it, and the clipped sums and counts of the
    activities overlapping it."""
    windows = _windows(inputs)
    devices = timeline(inputs) if windows else {}
    columns = ("rank", "device", *(f"{x}_ns" for x in SETS), *OUTSIDE, *SUMS)
    out: dict[str, list] = {c: [] for c in columns}
    for key, w0, w1 in windows:
        line = devices.get(key, EMPTY)
        out["rank"].append(key[0])
        out["device"].append(key[1])
        for x in SETS:
            at_start, at_end = line.covered(x, [w0, w1])
            out[f"{x}_ns"].append(int(at_end - at_start))
        at_start, at_end, at_last = line.covered("a", [w0, w1, END_OF_TIME])
        out["a_before_ns"].append(int(at_start))
        out["a_after_ns"].append(int(at_last - at_end))
        for column, value in zip(SUMS, _window_sums(line, w0, w1), strict=True):
            out[column].append(value)
    return pa.table({c: pa.array(v, pa.int64()) for c, v in out.items()})


def _window_sums(line: Device, w0: int, w1: int) -> list[int]:
    """Per set (compute, comm, copy): the summed time of its activities inside [w0, w1]
    (each clipped to it), then how many overlap it (or, zero-length, lie in it)."""
    s = line.start
    # rows starting before w0 that may reach past it: from the block before the first one
    # whose state has an end past w0
    reach = np.maximum.reduce([line.state[:, k] for k in range(3)]) if len(s) else s
    first = min(
        int(np.searchsorted(s, w0, side="left")),
        device_timeline.BLOCK * (int(np.searchsorted(reach, w0, side="right")) - 1),
    )
    past = int(np.searchsorted(s, w1, side="right"))
    s, e, activity = s[first:past], line.end[first:past], line.activity[first:past]
    inside = (e != NONE) & (((s < w1) & (e > w0)) | ((e == s) & (s >= w0) & (s <= w1)))
    clipped = np.where(inside, np.maximum(0, np.minimum(e, w1) - np.maximum(s, w0)), 0)
    sums = [int(clipped[activity == a].sum()) for a in (COMPUTE, COMM, COPY)]
    counts = [int((inside & (activity == a)).sum()) for a in (COMPUTE, COMM, COPY)]
    return sums + counts


def step_unions(inputs) -> pa.Table:
    """`step_unions`: per step region overlapping the window and in [step_from, step_to),
    the union lengths over the region (covered at its end - at its start)."""
    step_from, step_to = inputs.params["step_from"], inputs.params["step_to"]
    windows = {key: (w0, w1) for key, w0, w1 in _windows(inputs)}
    regions = inputs.arrow(
        "device_step_regions", ["rank", "device", "step", "start_ns", "end_ns", "region_end_ns"]
    )
    regions = regions.sort_by(
        [
            ("rank", "ascending"),
            ("device", "ascending"),
            ("step", "ascending"),
            ("start_ns", "ascending"),
        ]
    )
    rank, device = _ints(regions["rank"]), _ints(regions["device"])
    step, start = _ints(regions["step"]), _ints(regions["start_ns"])
    end, region_end = _ints(regions["end_ns"], NONE), _ints(regions["region_end_ns"], NONE)
    edges = np.array(
        [windows.get(key, (-NONE, NONE)) for key in zip(rank, device, strict=True)], np.int64
    ).reshape(-1, 2)
    w0, w1 = edges[:, 0], edges[:, 1]
    kept = (
        (start < w1)
        & (end != NONE)
        & (end > w0)
        & (step >= (step if step_from is None else step_from))
        & (step < (step + 1 if step_to is None else step_to))
    )
    rank, device, step, start, end, region_end = (
        v[kept] for v in (rank, device, step, start, end, region_end)
    )
    holds = (region_end != NONE) & (region_end > start)
    out = {"region_ns": np.where(holds, region_end - start, 0)}
    out.update({f"{x}_ns": np.zeros(len(start), np.int64) for x in SETS})
    devices = timeline(inputs) if len(start) else {}
    for lo, hi in groups(rank, device):
        line = devices.get((int(rank[lo]), int(device[lo])), EMPTY)
        for x in SETS:
            span = line.covered(x, region_end[lo:hi]) - line.covered(x, start[lo:hi])
            out[f"{x}_ns"][lo:hi] = np.where(holds[lo:hi], span, 0)
    return pa.table(
        {"rank": rank, "device": device, "step": step, "start_ns": start, "end_ns": end, **out}
    )


def idle_gap_rows(inputs) -> pa.Table:
    """`idle_gap_rows`: the idle stretches of each device cut at its window's edges, each
    with the step holding its start, the host sync time inside, the work ending it and its
    cause."""
    windows = _windows(inputs)
    devices = timeline(inputs) if windows else {}
    regions = _by_device(
        inputs.arrow(
            "device_step_regions", ["rank", "device", "step", "start_ns", "end_ns", "region_end_ns"]
        ),
        ("start_ns", "step"),
    )
    islands = _by_device(
        inputs.arrow("device_sync_islands", ["rank", "device", "start_ns", "end_ns", "before_ns"]),
        ("start_ns",),
    )
    parts = []
    for key, w0, w1 in windows:
        line = devices.get(key, EMPTY)
        opens = np.flatnonzero(line.ends_idle)
        # every idle stretch and the open-ended one after the last work, cut at the window
        since = line.idle_since[opens]
        g0 = np.append(np.where(since == NONE, w0, since), line.busy_until())
        g1 = np.append(line.start[opens], -NONE)
        a0, a1 = np.maximum(g0, w0), np.minimum(g1, w1)
        kept = np.flatnonzero(a0 < a1)
        if not len(kept):
            continue
        a0, a1, cut = a0[kept], a1[kept], a1[kept] < g1[kept]
        rows = np.append(opens, -1)[kept]  # -1: the open-ended stretch
        launch = np.where(rows >= 0, line.next_launch[np.maximum(rows, 0)], NONE)
        ending = (
            line.next_name.take(pa.array(np.maximum(rows, 0))).cast(pa.string())
            if len(line.start)
            else pa.nulls(len(rows), pa.string())
        )
        ending = pc.if_else(pa.array(rows >= 0), ending, pa.scalar(None, pa.string()))
        if cut.any():  # ended by the window's end: the work starting there, if any
            at = np.flatnonzero((line.start == w1) & (line.code == BAD))
            name_at = line.next_name[int(at[0])].as_py() if len(at) else None
            launch_at = int(line.next_launch[at[0]]) if len(at) else NONE
            ending = pc.if_else(pa.array(cut), pa.scalar(name_at, pa.string()), ending)
            launch = np.where(cut, launch_at, launch)
        sync = _synced(islands.get(key), a1) - _synced(islands.get(key), a0)
        parts.append(
            pa.table(
                {
                    "rank": np.full(len(a0), key[0]),
                    "device": np.full(len(a0), key[1]),
                    "step": _gap_steps(regions.get(key), islands.get(key), a0, a1),
                    "start_ns": a0,
                    "end_ns": a1,
                    "dur_ns": a1 - a0,
                    "sync_ns": sync,
                    "next_name": ending,
                    "next_launch_ns": nullable(launch),
                    "cause": _causes(a0, a1, sync, launch),
                }
            )
        )
    if parts:
        return pa.concat_tables(parts)
    return pa.table(
        {
            c: pa.array([], pa.string() if c in ("next_name", "cause") else pa.int64())
            for c in (
                "rank",
                "device",
                "step",
                "start_ns",
                "end_ns",
                "dur_ns",
                "sync_ns",
                "next_name",
                "next_launch_ns",
                "cause",
            )
        }
    )


def _ints(column, fill: int | None = None) -> np.ndarray:
    """An integer Arrow column as int64 numpy (NULLs as `fill`)."""
    column = column.cast(pa.int64())
    if fill is not None:
        column = pc.fill_null(column, fill)
    return column.to_numpy(zero_copy_only=False)


def _by_device(rows: pa.Table, order: tuple[str, ...]) -> dict[tuple[int, int], dict]:
    """Rows per (rank, device), each in `order`, as int64 columns (NULL times as NONE)."""
    rows = rows.sort_by([(c, "ascending") for c in ("rank", "device", *order)])
    columns = {c: _ints(rows[c], NONE) for c in rows.column_names}
    return {
        (int(columns["rank"][lo]), int(columns["device"][lo])): {
            c: v[lo:hi] for c, v in columns.items()
        }
        for lo, hi in groups(columns["rank"], columns["device"])
    }


def _synced(islands: dict | None, t: np.ndarray) -> np.ndarray:
    """Host sync time before each t: before_ns + least(t, end) - start of the last island
    starting at or before t (0 before the first)."""
    if islands is None:
        return np.zeros(len(t), np.int64)
    start = islands["start_ns"]
    last = np.searchsorted(start, t, side="right") - 1
    row = np.maximum(last, 0)
    value = islands["before_ns"][row] + np.minimum(t, islands["end_ns"][row]) - start[row]
    return np.where(last >= 0, value, 0)


def _gap_steps(
    regions: dict | None, islands: dict | None, g0: np.ndarray, g1: np.ndarray
) -> pa.Array:
    """The step of each gap [g0, g1]: the step region holding its start, else the first one
    starting inside it (of steps starting together, the lowest number; see step_regions)."""
    if regions is None:
        return pa.nulls(len(g0), pa.int64())
    at = _region_starts(regions)
    starts, steps, ends = at["start"], at["step"], at["end"]

    def latest(t: np.ndarray) -> np.ndarray:  # the last region starting at or before t
        return np.searchsorted(starts, t, side="right") - 1

    by_end = latest(g1)
    inside = (by_end >= 0) & (starts[np.maximum(by_end, 0)] > g0)
    if islands is not None:  # a sync island starting inside the gap looks up at its start too
        isle = np.searchsorted(islands["start_ns"], g1, side="right") - 1
        inside |= (isle >= 0) & (islands["start_ns"][np.maximum(isle, 0)] > g0)
    # nothing starts inside the gap: the region holding its start, if it does
    r = np.maximum(by_end, 0)
    outside = np.where((by_end >= 0) & (g0 < ends[r]), steps[r], NONE)
    # something does: the region holding the gap's start, else the next one holding time
    # that starts inside it (before the first region: the first one holding time)
    by_start = latest(g0)
    r = np.maximum(by_start, 0)
    holding = np.flatnonzero(at["holds"])
    first_holding = (
        (by_start < 0) & (starts[holding[0]] < g1) if len(holding) else np.zeros(len(g0), bool)
    )
    held = (by_start >= 0) & (g0 < ends[r])
    then_next = (by_start >= 0) & ~held & (at["next_start"][r] != NONE) & (at["next_start"][r] < g1)
    inner = np.select(
        [first_holding, held, then_next],
        [steps[holding[0]] if len(holding) else NONE, steps[r], at["next_step"][r]],
        NONE,
    )
    step = np.where(inside, inner, outside)
    return pa.array(step, pa.int64(), mask=step == NONE)


def _region_starts(regions: dict) -> dict[str, np.ndarray]:
    """Per start of a step region (rows in (start, step) order): the lowest step starting
    there; the end of the lowest one with an end; whether the lowest one's region holds
    time; and the next region holding time in (start, step DESC) order after the lowest
    step that has one (a later start's, else, when a higher step starts together with a
    lowest one holding time, that lowest one)."""
    start, step, end = regions["start_ns"], regions["step"], regions["end_ns"]
    holds = regions["region_end_ns"] > start  # (NONE: holds none)
    first = np.flatnonzero(np.r_[True, start[1:] != start[:-1]])
    past = np.r_[first[1:], len(start)]
    with_end = np.minimum.reduceat(np.where(end != NONE, np.arange(len(start)), len(start)), first)
    at, at_step, at_holds = start[first], step[first], holds[first]
    later = np.r_[np.flatnonzero(at_holds), len(at)]
    following = later[np.searchsorted(later, np.arange(len(at)), side="right")]
    has_later = following < len(at)
    itself = ~has_later & at_holds & (past - first > 1)
    pick = np.where(has_later, np.minimum(following, len(at) - 1), np.arange(len(at)))
    return {
        "start": at,
        "step": at_step,
        "holds": at_holds,
        "end": np.where(with_end < past, end[np.minimum(with_end, len(start) - 1)], NONE),
        "next_start": np.where(has_later | itself, at[pick], NONE),
        "next_step": at_step[pick],
    }


def _causes(a0: np.ndarray, a1: np.ndarray, sync: np.ndarray, launch: np.ndarray) -> pa.Array:
    """other (the work ending the gap was launched before it), else sync (host syncs cover
    at least half of it), host_bound (launched during it) or unknown (no launch record)."""
    known = launch != NONE
    cause = np.where(
        known & (launch < a0),
        "other",
        np.where(2 * sync >= a1 - a0, "sync", np.where(known, "host_bound", "unknown")),
    )
    return pa.array(cause, pa.string())
