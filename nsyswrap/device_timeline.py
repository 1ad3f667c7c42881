"""One sorted timeline per device, and the per-report objects read off it: the planner's
Python builders of `device_timeline`, `window_unions`, `step_unions`, `nccl_overlap` and
`idle_gap_rows` (see `nsyswrap.planner.arrow_built`; their `sql/_reductions` files declare
them and only type them).

`device_timeline` reads a report's GPU activities once and sorts each device's by start
once, in the worker right after the views are written, then sweeps them: the furthest end
so far of compute (with zero-length activities), communication and copies, and the union
lengths so far of compute, communication, copies, compute-or-communication and any
activity. The time a set X covers before an instant t is

    covered_X(t) = union_X so far - max(0, furthest end of X so far - t)

over the rows starting before t. That state is stored compactly: before every BLOCK-th row
of a device; a look-up at t takes the state before the block holding the last row starting
before t and sweeps the at most BLOCK rows from there. A window, a step region or an NCCL
kernel is two look-ups, never another pass over the activities. A row that ends an idle
stretch of its device carries where the stretch started and the work that ends it; an idle
gap of a window is such a stretch cut at the window's edges.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from nsyswrap import sql_objects

NONE = -(1 << 62)
"""No time: below every time, and safe to subtract times from (-NONE: after every time)."""
BLOCK = 64
"""Rows per block: the sweep state is stored before the first row of each."""
COMPUTE, COMM, COPY, ZERO, BAD = 0, 1, 2, 3, 6
"""Sweep codes: an activity of each set, a zero-length activity (it splits idle gaps and
adds no time), one that ends before it starts or never (only its start counts)."""
STATE = ("compute_end_ns", "comm_end_ns", "copy_end_ns", "compute_ns", "comm_ns", "copy_ns",
         "compute_comm_ns", "busy_ns")
SETS = ("c", "m", "p", "cm", "a")  # compute, comm, copy, compute or comm, any activity
ENDS = {"c": (0,), "m": (1,), "p": (2,), "cm": (0, 1), "a": (0, 1, 2)}
"""The furthest ends (of compute, comm, copy: STATE[0:3]) each set's union is swept against."""
ADDS = {"c": (COMPUTE,), "m": (COMM,), "p": (COPY,), "cm": (COMPUTE, COMM), "a": (COMPUTE, COMM, COPY)}
"""The codes whose time each set's union adds."""


# -- the timeline ------------------------------------------------------------------------


@dataclass
class Device:
    """One device's timeline: its rows in start order (NULL times as NONE) and the sweep
    state before each block (STATE columns, one row per block)."""

    start: np.ndarray
    end: np.ndarray
    activity: np.ndarray
    launch: np.ndarray
    ends_idle: np.ndarray
    idle_since: np.ndarray
    next_launch: np.ndarray
    next_name: pa.Array
    state: np.ndarray  # blocks x STATE
    code: np.ndarray = field(init=False)
    sweep_end: np.ndarray = field(init=False)

    def __post_init__(self):
        ends = (self.end != NONE) & (self.end >= self.start)
        self.code = np.where(~ends, BAD, np.where(self.end == self.start, ZERO, self.activity)
                             ).astype(np.int8)
        self.sweep_end = np.where(ends, self.end, self.start)

    def covered(self, x: str, t) -> np.ndarray:
        """covered_x(t) for each t."""
        t = np.asarray(t, np.int64)
        j = np.searchsorted(self.start, t, side="left")  # rows starting before t
        if not len(self.start):
            return np.zeros(len(t), np.int64)
        block = np.maximum(j - 1, 0) // BLOCK
        furthest = [self.state[block, k].copy() for k in range(3)]
        union = self.state[block, 3 + SETS.index(x)].copy()
        for k in range(BLOCK):
            row = block * BLOCK + k
            on = row < j
            row = np.minimum(row, len(self.start) - 1)
            s, e, code = self.start[row], self.sweep_end[row], self.code[row]
            before = np.maximum.reduce([furthest[i] for i in ENDS[x]]) if len(ENDS[x]) > 1 \
                else furthest[ENDS[x][0]]
            adds = on & np.isin(code, ADDS[x])
            union += np.where(adds, np.maximum(0, e - np.maximum(s, before)), 0)
            for i, member in enumerate(((COMPUTE, ZERO), (COMM,), (COPY,))):
                grows = on & np.isin(code, member)
                furthest[i] = np.where(grows, np.maximum(furthest[i], e), furthest[i])
        ahead = np.maximum.reduce([furthest[i] for i in ENDS[x]]) if len(ENDS[x]) > 1 \
            else furthest[ENDS[x][0]]
        return np.where(j > 0, union - np.maximum(0, ahead - t), 0)

    def busy_until(self) -> int:
        """The end of everything (NONE: no activity with a usable end)."""
        ok = self.code <= ZERO
        return int(self.sweep_end[ok].max()) if ok.any() else NONE


_BUILT: dict = {}
"""The last timeline built in this process, for what reads it next in the same task (the
per-report objects of one report are computed one after the other, in one worker):
{token: {(rank, device): Device}}."""


def build_timeline(run, name: str, params: dict) -> pa.Table:
    """`device_timeline`: the activities read once, one sort per device, its sweep."""
    con = run.connection
    rows = con.sql(f"""
        SELECT
            rank,
            device,
            start_ns,
            coalesce(end_ns, {NONE}) AS end_ns,
            CASE WHEN is_comm THEN 1 WHEN kind IN ('memcpy', 'memset') THEN 2 ELSE 0 END
                ::UTINYINT AS activity,
            coalesce(kind NOT IN ('memcpy', 'memset'), TRUE) AS kernel,
            coalesce(pid, -1) AS pid,
            coalesce(correlation_id, -1) AS correlation_id,
            name
        FROM kernels
        WHERE start_ns IS NOT NULL
    """).to_arrow_table()
    col = {c: rows[c].to_numpy() for c in rows.column_names if c != "name"}
    order = np.lexsort((col["start_ns"], col["device"], col["rank"]))
    col = {c: v[order] for c, v in col.items()}
    names, name_id = _name_ids(rows["name"], order)
    del rows, order
    launch = _first_calls(col.pop("pid"), col.pop("correlation_id"), con.execute(
        "SELECT coalesce(pid, -1) AS pid, coalesce(correlation_id, -1) AS cid, start_ns "
        "FROM launches WHERE start_ns IS NOT NULL").fetchnumpy())
    rank, device, start, end = (col[c] for c in ("rank", "device", "start_ns", "end_ns"))
    n = len(start)
    ends_idle, idle_since = np.zeros(n, bool), np.full(n, NONE)
    named, next_launch = np.full(n, -1, np.int32), np.full(n, NONE)
    devices, states = {}, []
    for lo, hi in _groups(rank, device):
        line = Device(start[lo:hi], end[lo:hi], col["activity"][lo:hi], launch[lo:hi],
                      ends_idle[lo:hi], idle_since[lo:hi], next_launch[lo:hi], pa.nulls(0),
                      np.empty((0, 0)))
        line.state = _sweep(line)
        states.append((lo, hi, line.state))
        # the work ending each idle stretch, and that starting with rows without a usable
        # end (the only work that can start inside an idle stretch, where a window may end)
        at = np.flatnonzero(line.ends_idle | (line.code == BAD))
        named[lo + at], line.next_launch[at] = _work_at(line.start, at, name_id[lo:hi], line.launch)
        line.next_name = _named(names, named[lo:hi])
        devices[int(rank[lo]), int(device[lo])] = line
    if run.cached:
        _BUILT.clear()
        _BUILT[_token(run)] = devices
    return typed(name, {
        "rank": rank, "device": device, "start_ns": start, "end_ns": _nullable(end),
        "activity": col["activity"], "kernel": col["kernel"], "launch_ns": _nullable(launch),
        **{c: _at_blocks(states, k, n) for k, c in enumerate(STATE)},
        "ends_idle": ends_idle, "idle_since_ns": _nullable(idle_since),
        "next_name": _named(names, named), "next_launch_ns": _nullable(next_launch),
    })


def _at_blocks(states: list[tuple[int, int, np.ndarray]], k: int, n: int) -> pa.Array:
    """Column k of the state, on the first row of each block (NULL elsewhere), run-end
    encoded (no full-length buffer)."""
    ends, values, nulls = [], [], []
    for lo, hi, state in states:
        first = np.arange(lo, hi, BLOCK)
        run_ends = np.empty(2 * len(first), np.int64)
        run_ends[0::2] = first + 1
        run_ends[1::2] = np.r_[first[1:], hi]
        value = np.zeros(2 * len(first), np.int64)
        value[0::2] = state[:, k]
        null = np.ones(2 * len(first), bool)
        null[0::2] = state[:, k] == NONE
        ends.append(run_ends), values.append(value), nulls.append(null)
    if not ends:
        return pa.nulls(n, pa.int64())
    run_ends, value, null = (np.concatenate(x) for x in (ends, values, nulls))
    kept = np.r_[True, run_ends[1:] > run_ends[:-1]]  # no empty runs (a one-row last block)
    return pa.RunEndEncodedArray.from_arrays(pa.array(run_ends[kept].astype(np.int32)),
                                             pa.array(value[kept], mask=null[kept]))


def _name_ids(names: pa.ChunkedArray, order: np.ndarray) -> tuple[list[str], np.ndarray]:
    """The distinct names in byte order, and each row's index among them (-1: none), rows
    taken in `order`."""
    encoded = pc.dictionary_encode(names).combine_chunks()
    dictionary = encoded.dictionary.to_pylist()
    by_name = sorted(range(len(dictionary)), key=dictionary.__getitem__)
    rank = np.empty(len(dictionary) + 1, np.int32)
    rank[by_name] = np.arange(len(dictionary))
    rank[-1] = -1
    indices = pc.fill_null(encoded.indices, -1).to_numpy()
    return [dictionary[i] for i in by_name], rank[indices[order]]


def _first_calls(pid: np.ndarray, cid: np.ndarray, calls: dict) -> np.ndarray:
    """Per activity (pid, correlation id; -1: none), the first launch call of that
    correlation id in its process (NONE: none): a CUDA graph's kernels share one."""
    call_pid, call_cid = calls["pid"], calls["cid"]
    if len(call_cid) and not (max(cid.max(initial=0), call_cid.max()) < 1 << 32
                              and max(pid.max(initial=0), call_pid.max()) < 1 << 30):
        ids = np.unique(np.r_[cid, call_cid], return_inverse=True)[1].reshape(-1)  # (rare)
        cid, call_cid = ids[:len(cid)], ids[len(cid):]
    call_key = (call_pid.astype(np.int64) << 32) | call_cid
    order = np.argsort(call_key, kind="stable")
    keys, starts = call_key[order], calls["start_ns"][order]
    if not len(keys):
        return np.full(len(pid), NONE)
    first = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    keys, starts = keys[first], np.minimum.reduceat(starts, first)
    key = (pid.astype(np.int64) << 32) | cid
    at = np.searchsorted(keys, key)
    np.minimum(at, len(keys) - 1, out=at)
    found = (keys[at] == key) & (pid >= 0) & (cid >= 0)
    return np.where(found, starts[at], NONE)


def _sweep(line: Device) -> np.ndarray:
    """Sweep one device's rows (sorted by start): fills its ends_idle and idle_since, and
    returns the state before each block (blocks x STATE)."""
    s, e, code = line.start, line.sweep_end, line.code
    compute, comm, copy = code == COMPUTE, code == COMM, code == COPY

    def furthest_before(member: np.ndarray) -> np.ndarray:
        ends = np.where(member, e, NONE)
        np.maximum.accumulate(ends, out=ends)
        return _shifted(ends)

    c = furthest_before(compute | (code == ZERO))
    m = furthest_before(comm)
    p = furthest_before(copy)
    cm = np.maximum(c, m)
    a = np.maximum(cm, p)
    blocks = slice(0, len(s), BLOCK)
    out = [c[blocks], m[blocks], p[blocks]]
    added = np.empty_like(s)
    for member, before in ((compute, c), (comm, m), (copy, p), (compute | comm, cm),
                           (compute | comm | copy, a)):
        np.maximum(s, before, out=added)
        np.subtract(e, added, out=added)
        np.maximum(added, 0, out=added)
        added[~member] = 0
        np.cumsum(added, out=added)
        # the union before each block: what the rows before its first one added
        out.append(np.r_[0, added[BLOCK - 1:len(s) - 1:BLOCK]])
    line.ends_idle[:] = (code <= ZERO) & (s > a)
    line.idle_since[line.ends_idle] = a[line.ends_idle]
    return np.stack(out, axis=1)


def _shifted(values: np.ndarray) -> np.ndarray:
    """values[i - 1] at i (NONE at 0)."""
    out = np.empty_like(values)
    out[:1] = NONE
    out[1:] = values[:-1]
    return out


def _groups(rank: np.ndarray, device: np.ndarray) -> list[tuple[int, int]]:
    """[lo, hi) of each (rank, device) in rows sorted by them."""
    if not len(rank):
        return []
    cuts = np.flatnonzero((rank[1:] != rank[:-1]) | (device[1:] != device[:-1])) + 1
    bounds = [0, *cuts.tolist(), len(rank)]
    return list(zip(bounds[:-1], bounds[1:], strict=True))


def _work_at(start: np.ndarray, rows: np.ndarray, name_id: np.ndarray,
             launch: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each of `rows` (of one device), the work starting when it starts (every row
    with that start): its name (see work_named) and first launch call (NONE: none)."""
    first = np.searchsorted(start, start[rows], side="left")
    past = np.searchsorted(start, start[rows], side="right")
    names, launches = name_id[rows].astype(np.int64), launch[rows].astype(np.int64)
    for i in np.flatnonzero(past - first > 1):  # several rows start together: rare
        names[i], launches[i] = work_named(name_id[first[i]:past[i]], launch[first[i]:past[i]])
    return names, launches


def work_named(names: np.ndarray, launches: np.ndarray) -> tuple[int, int]:
    """Of work starting together: the name (rank, -1: none) of the first launched among the
    named ones (of those launched together, the least name), else the least name; and the
    first launch call (NONE: none)."""
    launched = launches != NONE
    named = names >= 0
    first = int(launches[launched].min()) if launched.any() else NONE
    candidates = launched & named
    if candidates.any():
        earliest = launches[candidates].min()
        return int(names[candidates & (launches == earliest)].min()), first
    return (int(names[named].min()) if named.any() else -1), first


def _named(names: list[str], ids: np.ndarray) -> pa.Array:
    """Names by their index in `names` (-1: NULL), dictionary-encoded."""
    return pa.DictionaryArray.from_arrays(pa.array(ids, pa.int32(), mask=ids < 0),
                                          pa.array(names, pa.string()))


def _nullable(values: np.ndarray, mask: np.ndarray | None = None) -> pa.Array:
    return pa.array(values, pa.int64(), mask=(values == NONE) if mask is None else mask)


ARROW = {"BIGINT": pa.int64(), "INTEGER": pa.int32(), "UTINYINT": pa.uint8(),
         "BOOLEAN": pa.bool_(), "VARCHAR": pa.string(), "DOUBLE": pa.float64()}


def typed(name: str, columns: dict) -> pa.Table:
    """The rows of object `name` from `columns` (numpy or Arrow), each of the type its
    header declares (`rank` first, an INTEGER)."""
    types = {"rank": "INTEGER", **{c.name: c.type for c in sql_objects.get(name).columns}}
    assert list(columns) == ["rank", *(c.name for c in sql_objects.get(name).columns)], name
    arrays = {}
    for column, values in columns.items():
        wanted = ARROW[types[column]]
        if not isinstance(values, (pa.Array, pa.ChunkedArray)):
            values = pa.array(values)
        if isinstance(values.type, pa.DictionaryType) and wanted == pa.string():
            arrays[column] = values  # read as VARCHAR; written dictionary-encoded
        elif isinstance(values.type, pa.RunEndEncodedType) and values.type.value_type == wanted:
            arrays[column] = values  # read as the values
        else:
            arrays[column] = values.cast(wanted) if values.type != wanted else values
    return pa.table(arrays)


# -- reading it --------------------------------------------------------------------------


def _token(run) -> tuple:
    return tuple(sorted((c.rank, str(c.views_dir)) for c in run.cached))


def timeline(run) -> dict[tuple[int, int], Device]:
    """The device timeline bound on `run`, per (rank, device): the one built in this task,
    else read from the stored rows."""
    if run.cached and _token(run) in _BUILT:
        return _BUILT[_token(run)]
    rows = run.connection.sql(f"""
        SELECT
            rank,
            device,
            start_ns,
            coalesce(end_ns, {NONE}) AS end_ns,
            activity,
            coalesce(launch_ns, {NONE}) AS launch_ns,
            ends_idle,
            coalesce(idle_since_ns, {NONE}) AS idle_since_ns,
            coalesce(next_launch_ns, {NONE}) AS next_launch_ns,
            next_name,
            {", ".join(f"coalesce({c}, {NONE}) AS {c}" for c in STATE)}
        FROM device_timeline
    """).to_arrow_table()  # in the stored order: by rank, device and start, blocks in place
    rank, device = (rows[c].to_numpy().astype(np.int64) for c in ("rank", "device"))
    start = rows["start_ns"].to_numpy()
    if len(start) and not (np.diff(rank) >= 0).all() or not all(
            (np.diff(start[lo:hi]) >= 0).all() and (np.diff(device[lo:hi]) == 0).all()
            for lo, hi in _groups(rank, device)):
        raise RuntimeError("device_timeline was read out of its stored order")
    devices = {}
    for lo, hi in _groups(rank, device):
        part = rows.slice(lo, hi - lo)
        col = {c: part[c].to_numpy() for c in part.column_names if c != "next_name"}
        state = np.stack([col[c][::BLOCK] for c in STATE], axis=1).astype(np.int64)
        devices[int(rank[lo]), int(device[lo])] = Device(
            col["start_ns"], col["end_ns"], col["activity"], col["launch_ns"],
            col["ends_idle"], col["idle_since_ns"], col["next_launch_ns"],
            part["next_name"].combine_chunks(), state)
    if run.cached:
        _BUILT.clear()
        _BUILT[_token(run)] = devices
    return devices


def _windows(run) -> list[tuple[tuple[int, int], int, int]]:
    rows = run.connection.execute(
        "SELECT rank, device, window_start_ns, window_end_ns FROM device_windows "
        "ORDER BY rank, device").fetchall()
    return [((int(r), int(d)), int(a), int(b)) for r, d, a, b in rows]


EMPTY = Device(*(np.zeros(0, np.int64) for _ in range(7)), pa.nulls(0, pa.string()),
               np.zeros((0, len(STATE)), np.int64))


# -- window unions, step unions, NCCL overlap ---------------------------------------------


SUMS = ("compute_sum_ns", "comm_sum_ns", "copy_sum_ns", "compute_kernels", "comm_kernels",
        "copies")


def build_window_unions(run, name: str, params: dict) -> pa.Table:
    """`window_unions`: per window, the union lengths (covered at its end - at its start)
    and the clipped sums and counts of the activities overlapping it."""
    devices = timeline(run)
    out: dict[str, list] = {c: [] for c in ("rank", "device", *(f"{x}_ns" for x in SETS), *SUMS)}
    for key, w0, w1 in _windows(run):
        device = devices.get(key, EMPTY)
        out["rank"].append(key[0])
        out["device"].append(key[1])
        for x in SETS:
            lo, hi = device.covered(x, [w0, w1])
            out[f"{x}_ns"].append(int(hi - lo))
        for column, value in zip(SUMS, _window_sums(device, w0, w1), strict=True):
            out[column].append(value)
    return typed(name, {c: np.array(v, np.int64) for c, v in out.items()})


def _window_sums(device: Device, w0: int, w1: int) -> list[int]:
    """Per set (compute, comm, copy): the summed time of its activities inside [w0, w1]
    (each clipped to it), then how many overlap it (or, zero-length, lie in it)."""
    s = device.start
    # rows starting before w0 that may reach past it: from the block before the first one
    # whose state has an end past w0
    reach = np.maximum.reduce([device.state[:, k] for k in range(3)]) if len(s) else s
    first = min(BLOCK * max(0, int(np.searchsorted(reach, w0, side="right")) - 1),
                int(np.searchsorted(s, w0, side="left")))
    past = int(np.searchsorted(s, w1, side="right"))
    s, e, activity = s[first:past], device.end[first:past], device.activity[first:past]
    known = e != NONE
    inside = known & (((s < w1) & (e > w0)) | ((e == s) & (s >= w0) & (s <= w1)))
    clipped = np.where(inside, np.maximum(0, np.minimum(e, w1) - np.maximum(s, w0)), 0)
    sums = [int(clipped[activity == a].sum()) for a in (COMPUTE, COMM, COPY)]
    counts = [int((inside & (activity == a)).sum()) for a in (COMPUTE, COMM, COPY)]
    return sums + counts


def build_step_unions(run, name: str, params: dict) -> pa.Table:
    """`step_unions`: per step region overlapping the window and in [step_from, step_to),
    the union lengths over the region (covered at its end - at its start)."""
    values = sql_objects.get(name).values(params)
    regions = run.connection.execute(f"""
        SELECT
            r.rank,
            r.device,
            r.step,
            r.start_ns,
            r.end_ns,
            coalesce(r.region_end_ns, {NONE}) AS region_end_ns,
            coalesce(r.region_end_ns > r.start_ns, FALSE) AS holds_time
        FROM device_step_regions AS r
        JOIN device_windows AS w
            ON w.rank = r.rank
            AND w.device = r.device
        WHERE r.start_ns < w.window_end_ns
            AND r.end_ns > w.window_start_ns
            AND r.step >= coalesce($step_from, r.step)
            AND r.step < coalesce($step_to, r.step + 1)
        ORDER BY r.rank, r.device, r.step, r.start_ns
    """, {k: values[k] for k in ("step_from", "step_to")}).fetchnumpy()
    rank, device = regions["rank"].astype(np.int64), regions["device"].astype(np.int64)
    start = regions["start_ns"].astype(np.int64)
    region_end = regions["region_end_ns"].astype(np.int64)
    holds = regions["holds_time"].astype(bool)
    out = {"region_ns": np.where(holds, region_end - start, 0)}
    out.update({f"{x}_ns": np.zeros(len(start), np.int64) for x in SETS})
    devices = timeline(run) if len(start) else {}
    for lo, hi in _groups(rank, device):
        line = devices.get((int(rank[lo]), int(device[lo])), EMPTY)
        for x in SETS:
            span = line.covered(x, region_end[lo:hi]) - line.covered(x, start[lo:hi])
            out[f"{x}_ns"][lo:hi] = np.where(holds[lo:hi], span, 0)
    return typed(name, {"rank": rank, "device": device, "step": regions["step"],
                        "start_ns": start, "end_ns": regions["end_ns"], **out})


def build_nccl_overlap(run, name: str, params: dict) -> pa.Table:
    """`nccl_overlap`: every NCCL kernel with the time compute ran beside it on its device,
    covered_c(end) - covered_c(start) (a kernel without end: from the device's first
    activity, where covered_c is 0, so -covered_c(start))."""
    kernels = run.connection.sql("""
        SELECT rank, pid, device, stream, correlation_id, name, start_ns, end_ns, dur_ns
        FROM kernels
        WHERE kind = 'nccl'
        ORDER BY rank, device, start_ns, pid, stream, correlation_id
    """).to_arrow_table()
    rank, device, start = (_ints(kernels[c]) for c in ("rank", "device", "start_ns"))
    end = _ints(kernels["end_ns"], NONE)
    overlap = np.zeros(len(start), np.int64)
    devices = timeline(run) if len(start) else {}
    for lo, hi in _groups(rank, device):
        line = devices.get((int(rank[lo]), int(device[lo])), EMPTY)
        origin = line.start[0] if len(line.start) else 0
        stop = np.where(end[lo:hi] != NONE, end[lo:hi], origin)
        overlap[lo:hi] = line.covered("c", stop) - line.covered("c", start[lo:hi])
    return typed(name, {**{c: kernels[c] for c in kernels.column_names}, "overlap_ns": overlap})


def _ints(column, fill: int | None = None) -> np.ndarray:
    """An integer Arrow column as int64 numpy (NULLs as `fill`)."""
    if fill is not None:
        column = pc.fill_null(column, fill)
    return column.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)


# -- idle gaps ---------------------------------------------------------------------------


def build_idle_gap_rows(run, name: str, params: dict) -> pa.Table:
    """`idle_gap_rows`: the idle stretches of each device cut at its window's edges, each
    with the step holding its start, the host sync time inside, the work ending it and its
    cause."""
    con = run.connection
    devices = timeline(run)
    regions = _by_device(con.execute(f"""
        SELECT rank, device, step, start_ns, coalesce(end_ns, {NONE}) AS end_ns,
            coalesce(region_end_ns, {NONE}) AS region_end_ns
        FROM device_step_regions
        ORDER BY rank, device, start_ns, step""").fetchnumpy())
    islands = _by_device(con.execute(
        "SELECT rank, device, start_ns, end_ns, before_ns FROM device_sync_islands "
        "ORDER BY rank, device, start_ns").fetchnumpy())
    parts = []
    for key, w0, w1 in _windows(run):
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
        launch = np.where(rows >= 0, line.next_launch[rows], NONE)
        ending = (line.next_name.take(pa.array(np.maximum(rows, 0))).cast(pa.string())
                  if len(line.start) else pa.nulls(len(rows), pa.string()))
        ending = pc.if_else(pa.array(rows >= 0), ending, pa.scalar(None, pa.string()))
        if cut.any():  # ended by the window's end: the work starting there, if any
            at = np.flatnonzero((line.start == w1) & (line.code == BAD))
            name_at = line.next_name[int(at[0])].as_py() if len(at) else None
            launch_at = int(line.next_launch[at[0]]) if len(at) else NONE
            ending = pc.if_else(pa.array(cut), pa.scalar(name_at, pa.string()), ending)
            launch = np.where(cut, launch_at, launch)
        sync = _synced(islands.get(key), a1) - _synced(islands.get(key), a0)
        parts.append(typed(name, {
            "rank": np.full(len(a0), key[0]), "device": np.full(len(a0), key[1]),
            "step": _gap_steps(regions.get(key), islands.get(key), a0, a1), "start_ns": a0,
            "end_ns": a1, "dur_ns": a1 - a0, "sync_ns": sync, "next_name": ending,
            "next_launch_ns": _nullable(launch), "cause": _causes(a0, a1, sync, launch)}))
    if parts:
        return pa.concat_tables(parts)
    return typed(name, {c: pa.array([], pa.string() if c in ("next_name", "cause") else pa.int64())
                        for c in ("rank", *(c.name for c in sql_objects.get(name).columns))})


def _by_device(columns: dict) -> dict[tuple[int, int], dict[str, np.ndarray]]:
    """Columns fetched in (rank, device) order, split per (rank, device)."""
    rank, device = columns["rank"].astype(np.int64), columns["device"].astype(np.int64)
    return {(int(rank[lo]), int(device[lo])): {c: v[lo:hi] for c, v in columns.items()}
            for lo, hi in _groups(rank, device)}


def _synced(islands: dict | None, t: np.ndarray) -> np.ndarray:
    """Host sync time before each t: before_ns + least(t, end) - start of the last island
    starting at or before t (0 before the first)."""
    if islands is None:
        return np.zeros(len(t), np.int64)
    start = islands["start_ns"].astype(np.int64)
    last = np.searchsorted(start, t, side="right") - 1
    row = np.maximum(last, 0)
    value = (islands["before_ns"].astype(np.int64)[row]
             + np.minimum(t, islands["end_ns"].astype(np.int64)[row]) - start[row])
    return np.where(last >= 0, value, 0)


def _gap_steps(regions: dict | None, islands: dict | None, g0: np.ndarray, g1: np.ndarray) -> pa.Array:
    """The step of each gap [g0, g1]: the step region holding its start, else the first one
    starting inside it (steps starting together: the lowest number; see step_regions)."""
    none = pa.nulls(len(g0), pa.int64())
    if regions is None or not len(regions["start_ns"]):
        return none
    start = regions["start_ns"].astype(np.int64)
    step = regions["step"].astype(np.int64)
    end = regions["end_ns"].astype(np.int64)
    holds = regions["region_end_ns"].astype(np.int64) > start
    # per start (rows are in (start, step) order): the lowest step; the end of the lowest
    # step with an end; and the next region that holds time in (start, step DESC) order
    # after the lowest step having one: a later start's, else (a step starting together
    # with the lowest one, which holds time) the lowest one's
    first = np.flatnonzero(np.r_[True, start[1:] != start[:-1]])
    at, at_step, at_holds = start[first], step[first], holds[first]
    with_end = np.minimum.reduceat(np.where(end != NONE, np.arange(len(start)), len(start)), first)
    past = np.r_[first[1:], len(start)]
    at_end = np.where(with_end < past, end[np.minimum(with_end, len(start) - 1)], NONE)
    later = np.r_[np.flatnonzero(at_holds), len(at)]
    following = later[np.searchsorted(later, np.arange(len(at)), side="right")]
    has_later = following < len(at)
    itself = ~has_later & at_holds & (past - first > 1)
    has_next = has_later | itself
    pick = np.where(has_later, np.minimum(following, len(at) - 1), np.arange(len(at)))
    next_at = np.where(has_next, at[pick], NONE)
    next_step = at_step[pick]

    def latest(t: np.ndarray) -> np.ndarray:
        return np.searchsorted(at, t, side="right") - 1

    r_end = latest(g1)  # the latest region starting by the gap's end
    isle = (np.searchsorted(islands["start_ns"].astype(np.int64), g1, side="right") - 1
            if islands is not None and len(islands["start_ns"]) else np.full(len(g0), -1))
    inside = (r_end >= 0) & (at[np.maximum(r_end, 0)] > g0)
    if islands is not None and len(islands["start_ns"]):
        inside |= (isle >= 0) & (islands["start_ns"].astype(np.int64)[np.maximum(isle, 0)] > g0)
    # nothing starts inside the gap: the region holding its start, if it does
    rg = np.maximum(r_end, 0)
    outside = np.where((r_end >= 0) & (g0 < at_end[rg]), at_step[rg], NONE)
    # something starts inside: look up at the gap's start
    r = latest(g0)
    rr = np.maximum(r, 0)
    holding = np.flatnonzero(at_holds)
    before_first = (r < 0) & (at[holding[0]] < g1) if len(holding) else np.zeros(len(g0), bool)
    held = (r >= 0) & (g0 < at_end[rr])
    then_next = (r >= 0) & ~held & has_next[rr] & (next_at[rr] < g1)
    inner = np.select([before_first, held, then_next],
                      [at_step[holding[0]] if len(holding) else NONE, at_step[rr], next_step[rr]], NONE)
    steps = np.where(inside, inner, outside)
    return pa.array(steps, pa.int64(), mask=steps == NONE)


def _causes(a0: np.ndarray, a1: np.ndarray, sync: np.ndarray, launch: np.ndarray) -> pa.Array:
    """other (the work ending the gap was launched before it), else sync (host syncs cover
    at least half of it), host_bound (launched during it) or unknown (no launch record)."""
    known = launch != NONE
    cause = np.where(known & (launch < a0), "other",
                     np.where(2 * sync >= a1 - a0, "sync", np.where(known, "host_bound", "unknown")))
    return pa.array(cause, pa.string())
