"""The replay's inputs, per report: each process's host time cut into segments, each with
what its GPU did for it; the builder of the per-report objects `xr_segments` and
`xr_nccl_calls` (run in the worker, on the report alone: nsyswrap.engine.builders).

A process's host time is cut at its **boundaries**: its step and phase ranges' starts and
ends, each NCCL kernel's launch call, the launch of each GPU activity that waited for an
NCCL kernel (a *join*), and each wait of the host (below). A segment is the time between
two boundaries; the GPU work a segment launched (every activity of the process on its lane
device whose launch call started in it, NCCL kernels apart) is its GPU work. So one row is
a (process, step, phase range or collective segment), never a kernel or a launch gap: a
launch-bound step of a million kernels is a few dozen rows.

The **lane device** of a process is the device of most of its NCCL kernels, else the one
it ran the most activities on; its non-NCCL activities, all streams together, are its
GPU lane (their union: a stream waiting for another is sequencing inside it).

A segment is a wait (`kind` wait) when the host was blocked for a completion it names:

* a blocking CUDA call (stream, event or device synchronisation, a synchronous copy or
  free: BLOCKING_API) waits for the GPU: for the lane's end after the last segment whose
  GPU work had ended when the call returned (`for_seg`), or for an NCCL kernel launched
  before the call that ended after that and before the call returned;
* a collective range (`coll:`) that returned after its collective ended: a gloo or MPI
  call without a completion mark waits for its collective (`for_pg`, `for_seq`, ended at
  the range end); one that launched an NCCL kernel waits from the launch for the kernel;
* an asynchronous collective's completion waited for by a blocking OS call
  (`xr_host_waits`).

A segment is `silent` where the host made no CUDA call and opened or closed no step or
phase range for at least SILENT_NS and resumed within RESUME_NS after a completion of its
own that fell in the silence (an NCCL kernel's end, an asynchronous collective's mark that
no recorded wait took, its lane draining): the trace does not
say whether the host waited for it (an untraced wait) or worked until then; the replay
assumes the wait and states the range (nsyswrap.crossrank.whatif). Anything else is
`work`: the host's own time.

Per segment the GPU lane's end after its work (`gpu_end_ns`: the latest end of the
activities launched up to it) follows, in the replay, the max-plus recurrence

    gpu_end = max(gpu_end before + lane_ns,
                  host at the segment's start + (bound_launch - start) + bound latency
                      + (gpu_end - bound_start),
                  the joined NCCL kernel's end + (join_start - its end) + join_busy_ns)

which the recorded times satisfy with the binding term equal: the lane's own work (its
busy time and its own gaps between queued activities, `lane_ns` and `lane_idle_ns`), the
host's launch of the activity the lane's end rests on (the segment's last activity that
restarted the lane after it had waited for the host, its latency its own; else the one
that started least after its launch, with the process's least launch latency), and the
collective the segment's first activity waited for. Shortening the segment's GPU work
moves its end only by what the host's launches and the joins did not cover.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

RESUME_NS = 50_000
"""A host that resumed this soon after a completion it could have waited for ..."""
SILENT_NS = 100_000
"""... after making no CUDA call for at least this long may have waited for it."""
JOIN_SLACK_NS = 20_000
"""An activity held back by a stream wait started this soon after the NCCL kernel's end."""
BLOCKING_API = re.compile(
    r"synchroni[sz]e|^cu(?:da)?memcpy(?!.*async)|^cu(?:da)?(?:mem)?free(?!host|async)",
    re.IGNORECASE,
)
"""CUDA calls that return only when GPU work is done: synchronisation, synchronous copies,
frees (which synchronise the device)."""

SEGMENT_COLUMNS = [
    "pid",
    "device",
    "seg",
    "kind",
    "start_ns",
    "end_ns",
    "step",
    "phase",
    "phase_start_ns",
    "host_ns",
    "launches",
    "waits_for",
    "for_seg",
    "for_call",
    "for_pg",
    "for_seq",
    "for_end_ns",
    "call_ns",
    "wake_ns",
    "gpu_ns",
    "gpu_from_ns",
    "gpu_end_ns",
    "lane_ns",
    "lane_idle_ns",
    "gpu_idle_host_ns",
    "bound_launch_ns",
    "bound_start_ns",
    "bound_latency_ns",
    "join_start_ns",
    "join_call",
    "join_nccl_end_ns",
    "join_busy_ns",
    "join_idle_ns",
]
NCCL_COLUMNS = [
    "pid",
    "device",
    "call",
    "stream",
    "start_ns",
    "end_ns",
    "launch_ns",
    "ready_ns",
    "seg",
]


@dataclass
class Process:
    """One process's inputs: its lane device's activities (stream, launch, start, end:
    NCCL kernels apart), its NCCL kernels, its CUDA calls (start, end, blocking), its
    stream-wait calls (stream, start), steps, phases, collective ranges and host waits."""

    pid: int
    device: int | None
    acts: pd.DataFrame
    nccl: pd.DataFrame
    calls: pd.DataFrame
    stream_waits: pd.DataFrame
    steps: pd.DataFrame
    phases: pd.DataFrame
    colls: pd.DataFrame
    host_waits: pd.DataFrame


def build(inputs) -> dict[str, pd.DataFrame]:
    """`xr_segments` and `xr_nccl_calls` of one report (see the module doc)."""
    segments, calls = [], []
    for process in processes(inputs):
        s, c = process_rows(process)
        segments.append(s)
        calls.append(c)
    return {
        "xr_segments": _concat(segments, SEGMENT_COLUMNS),
        "xr_nccl_calls": _concat(calls, NCCL_COLUMNS),
    }


def _concat(frames: list[pd.DataFrame], columns: list[str]) -> pd.DataFrame:
    frames = [f for f in frames if len(f)]
    if not frames:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in columns})
    return pd.concat(frames, ignore_index=True)[columns]


def processes(inputs) -> list[Process]:
    """Each process of the report with steps, collective calls or NCCL kernels, with its
    inputs."""
    launches = inputs.frame(
        "launches",
        ["pid", "start_ns", "device", "stream", "kernel_start_ns", "kernel_end_ns", "kind"],
    ).dropna(subset=["kernel_start_ns", "kernel_end_ns", "device", "stream"])
    launches = (
        launches.groupby(
            ["pid", "device", "stream", "kernel_start_ns", "kernel_end_ns", "kind"],
            as_index=False,
        )["start_ns"]
        .min()
        .rename(columns={"start_ns": "launch", "kernel_start_ns": "start", "kernel_end_ns": "end"})
    )
    calls = inputs.frame("api_calls", ["pid", "api", "start_ns", "end_ns"])
    calls["blocking"] = calls["api"].astype(str).str.contains(BLOCKING_API)
    calls["api"] = calls["api"].astype("category")
    calls = calls.rename(columns={"start_ns": "start", "end_ns": "end"})
    syncs = inputs.frame("syncs", ["pid", "stream", "start_ns", "sync_type"])
    waits = syncs[syncs["sync_type"] == "stream_wait"].rename(columns={"start_ns": "start"})
    steps = inputs.frame("xr_steps")
    phases = inputs.frame("xr_phases", ["pid", "phase", "start_ns", "end_ns"])
    keys = inputs.frame(
        "xr_rank_keys", ["keyed", "pid", "pg", "seq", "cpu_start_ns", "cpu_end_ns", "done_ns"]
    )
    colls = keys[keys["keyed"].isin(["range", "mpi"]) & keys["cpu_end_ns"].notna()]
    colls = colls.rename(columns={"cpu_start_ns": "start_ns", "cpu_end_ns": "end_ns"})
    host_waits = inputs.frame(
        "xr_host_waits", ["pid", "pg", "seq", "done_ns", "wait_start_ns", "wait_end_ns"]
    )
    nccl = launches["kind"] == "nccl"
    pids = sorted(
        set(steps["pid"].dropna()) | set(colls["pid"].dropna()) | set(launches.loc[nccl, "pid"])
    )
    out = []
    for pid in pids:
        mine = launches[launches["pid"] == pid]
        device = lane_device(mine)
        on_lane = mine[mine["device"] == device] if device is not None else mine.iloc[:0]
        out.append(
            Process(
                int(pid),
                device,
                on_lane[on_lane["kind"] != "nccl"][["stream", "launch", "start", "end"]],
                on_lane[on_lane["kind"] == "nccl"][["stream", "launch", "start", "end"]]
                .sort_values(["launch", "start", "stream"])
                .reset_index(drop=True),
                calls[calls["pid"] == pid],
                waits[waits["pid"] == pid][["stream", "start"]],
                steps[steps["pid"] == pid],
                phases[phases["pid"] == pid],
                colls[colls["pid"] == pid],
                host_waits[host_waits["pid"] == pid],
            )
        )
    return out


def lane_device(launches: pd.DataFrame) -> int | None:
    """The device of most of a process's NCCL kernels, else of most of its activities."""
    if launches.empty:
        return None
    score = (
        launches.assign(nccl=launches["kind"] == "nccl")
        .groupby("device")
        .agg(nccl=("nccl", "sum"), n=("nccl", "size"))
    )
    score = score.reset_index().sort_values(["nccl", "n", "device"], ascending=[False, False, True])
    return int(score["device"].iloc[0])


def process_rows(p: Process) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The segments of one process and its NCCL calls (see the module doc)."""
    joins = find_joins(p)
    acts = p.acts.sort_values(["start", "end", "launch"])
    lane = lane_of(acts, acts.index.isin(joins["act"]))
    waits = host_waits(p, drains(lane[0]))
    segs = cut(p, joins, waits)
    segs = with_gpu(segs, p, joins, acts, lane)
    segs = with_wait_costs(with_targets(segs, p), p)
    return segs[SEGMENT_COLUMNS], nccl_calls(p, segs)


def find_joins(p: Process) -> pd.DataFrame:
    """The activities (by index of p.acts) that waited for an NCCL kernel: the first after
    it on its own stream (stream order), or one its stream held back until the kernel's
    end (a cudaStreamWaitEvent on its stream since the previous activity's launch, idle
    before that end, launched before it, started within JOIN_SLACK_NS of it). Columns: act,
    call (the NCCL kernel's row of p.nccl), nccl_end."""
    a = p.acts.sort_values(["stream", "start", "end", "launch"])
    first = a["stream"].ne(a["stream"].shift())
    prev_start = a["start"].shift().where(~first)
    prev_end = a["end"].shift().where(~first)
    prev_launch = a["launch"].shift().where(~first)
    same = _after_on_stream(a, prev_start, p.nccl)
    waited = _held_back(a, prev_end, prev_launch, p)
    found = same.combine_first(waited)
    hit = found["call"].notna()
    call = found.loc[hit, "call"].to_numpy(np.int64)
    return pd.DataFrame(
        {"act": a.index[hit], "call": call, "nccl_end": p.nccl["end"].to_numpy(np.int64)[call]}
    )


def _after_on_stream(a: pd.DataFrame, prev_start: pd.Series, nccl: pd.DataFrame) -> pd.DataFrame:
    """Per activity of `a`: the NCCL kernel on its own stream that ran between the
    previous activity there and it (the latest such), if any, where the activity was
    launched before that kernel's end (queued behind it; launched after, it waited for its
    launch, not for the kernel)."""
    out = pd.DataFrame({"call": np.nan}, index=a.index)
    if nccl.empty:
        return out
    n = nccl.sort_values(["stream", "start"])
    for stream, rows in a.groupby("stream"):
        mine = n[n["stream"] == stream]
        if mine.empty:
            continue
        starts = mine["start"].to_numpy(np.int64)
        i = np.searchsorted(starts, rows["start"].to_numpy(np.int64), side="left") - 1
        ok = i >= 0
        lower = prev_start.loc[rows.index].to_numpy(np.float64)
        ok &= ~(starts[np.maximum(i, 0)] < np.nan_to_num(lower, nan=-np.inf))
        launch = rows["launch"].to_numpy(np.float64)
        ends = mine["end"].to_numpy(np.int64)[np.maximum(i, 0)]
        ok &= ~(launch >= ends)  # a launch the trace lacks (NaN) stays queued
        out.loc[rows.index[ok], "call"] = mine.index.to_numpy()[i[ok]]
    return out


def _held_back(
    a: pd.DataFrame, prev_end: pd.Series, prev_launch: pd.Series, p: Process
) -> pd.DataFrame:
    """Per activity of `a`: the NCCL kernel its stream waited for (see find_joins)."""
    out = pd.DataFrame({"call": np.nan}, index=a.index)
    if p.nccl.empty or p.stream_waits.empty:
        return out
    n = p.nccl.sort_values("end")
    ends = n["end"].to_numpy(np.int64)
    start = a["start"].to_numpy(np.int64)
    i = np.searchsorted(ends, start, side="right") - 1
    end = ends[np.maximum(i, 0)].astype(np.float64)
    ok = (i >= 0) & (prev_end.to_numpy(np.float64) < end)
    ok &= (a["launch"].to_numpy(np.float64) < end) & (start - end <= JOIN_SLACK_NS)
    called = np.full(len(a), -np.inf)
    for stream, rows in p.stream_waits.groupby("stream"):
        at = np.sort(rows["start"].to_numpy(np.int64))
        mine = np.flatnonzero(a["stream"].to_numpy() == stream)
        k = np.searchsorted(at, a["launch"].to_numpy(np.int64)[mine], side="right") - 1
        called[mine] = np.where(k >= 0, at[np.maximum(k, 0)], -np.inf)
    ok &= called > np.nan_to_num(prev_launch.to_numpy(np.float64), nan=-np.inf)
    out.loc[a.index[ok], "call"] = n.index.to_numpy()[i[ok]]
    return out


WAIT_COLUMNS = [
    "start",
    "end",
    "kind",
    "waits_for",
    "for_call",
    "for_pg",
    "for_seq",
    "for_end",
    "api",
]


def drains(lane: Lane) -> np.ndarray:
    """The instants the lane drained and then waited for the host: the ends of its busy
    stretches followed by a wait for a launch, and its last end."""
    return np.r_[lane.b[:-1][lane.host_after[:-1] > 0], lane.b[-1:]]


def host_waits(p: Process, drained: np.ndarray) -> pd.DataFrame:
    """The host's waits (see the module doc), none inside another: start, end, kind (wait
    or silent), waits_for (gpu: resolved by with_targets; nccl; collective), for_call,
    for_pg, for_seq, for_end (the completion, where known); `drained`: when the lane
    drained (silences may end right after)."""
    found = pd.concat(
        [_blocking_calls(p), _collective_waits(p), _recorded_host_waits(p)], ignore_index=True
    )
    found = pd.concat([found, _silences(p, found, drained)], ignore_index=True)
    found = found[found["end"] > found["start"]].sort_values(
        ["start", "end"], ascending=[True, False]
    )
    reach = found["end"].cummax().shift()
    found = found[~(found["end"] <= reach)]  # inside an earlier one
    found["start"] = np.maximum(found["start"], reach.loc[found.index].fillna(-np.inf)).astype(
        np.int64
    )
    return found[found["end"] > found["start"]].reset_index(drop=True)[WAIT_COLUMNS]


def _waits(start, end, kind: str, waits_for: str, **target) -> pd.DataFrame:
    out = pd.DataFrame({"start": start, "end": end, "kind": kind, "waits_for": waits_for})
    for c in ("for_call", "for_pg", "for_seq", "for_end", "api"):
        out[c] = target.get(c, None)
    return out.astype({"start": np.int64, "end": np.int64})


def _blocking_calls(p: Process) -> pd.DataFrame:
    c = p.calls[p.calls["blocking"]]
    return _waits(
        c["start"].to_numpy(),
        c["end"].to_numpy(),
        "wait",
        "gpu",
        api=c["api"].astype(str).to_numpy(),
    )


def _collective_waits(p: Process) -> pd.DataFrame:
    """Collective ranges that returned after their collective ended: an NCCL one waits from
    its kernel's launch for the kernel (the last it launched), a gloo or MPI one without a
    completion mark for its collective, which ended with the range."""
    c = p.colls[p.colls["done_ns"].isna()]
    if c.empty:
        return _waits([], [], "wait", "collective")
    n = p.nccl.sort_values("launch")
    last = np.searchsorted(n["launch"].to_numpy(np.int64), c["end_ns"].to_numpy(np.int64)) - 1
    k = np.maximum(last, 0)
    inside = (
        (last >= 0) & (n["launch"].to_numpy(np.int64)[k] >= c["start_ns"].to_numpy(np.int64))
        if len(n)
        else np.zeros(len(c), bool)
    )
    out = []
    if inside.any():
        launch = n["launch"].to_numpy(np.int64)[k[inside]]
        end = n["end"].to_numpy(np.int64)[k[inside]]
        waited = c["end_ns"].to_numpy(np.int64)[inside] >= end
        out.append(
            _waits(
                launch[waited],
                c["end_ns"].to_numpy(np.int64)[inside][waited],
                "wait",
                "nccl",
                for_call=n.index.to_numpy()[k[inside]][waited],
                for_end=end[waited],
            )
        )
    gloo = c[~inside]
    out.append(
        _waits(
            gloo["start_ns"].to_numpy(),
            gloo["end_ns"].to_numpy(),
            "wait",
            "collective",
            for_pg=gloo["pg"].to_numpy(),
            for_seq=gloo["seq"].to_numpy(),
            for_end=gloo["end_ns"].to_numpy(),
        )
    )
    return pd.concat(out, ignore_index=True)


def _recorded_host_waits(p: Process) -> pd.DataFrame:
    w = p.host_waits
    return _waits(
        w["wait_start_ns"].to_numpy(),
        w["wait_end_ns"].to_numpy(),
        "wait",
        "collective",
        for_pg=w["pg"].to_numpy(),
        for_seq=w["seq"].to_numpy(),
        for_end=w["done_ns"].to_numpy(),
    )


def _host_marks(p: Process) -> pd.DataFrame:
    """What shows the host at work, in time order (start, end): its CUDA calls and the
    edges of its step and phase ranges (zero-length)."""
    edges = np.concatenate(
        [p.steps["start_ns"], p.steps["end_ns"], p.phases["start_ns"], p.phases["end_ns"]]
    ).astype(np.int64)
    marks = pd.concat(
        [p.calls[["start", "end"]], pd.DataFrame({"start": edges, "end": edges})],
        ignore_index=True,
    )
    return marks.sort_values(["start", "end"], ignore_index=True)


def _silences(p: Process, waits: pd.DataFrame, drained: np.ndarray) -> pd.DataFrame:
    """Silent stretches that ended right after a completion (see the module doc: an NCCL
    kernel's end, an asynchronous collective's mark no recorded wait took, the lane
    draining), outside the recorded waits; of completions in one silence, the last."""
    done = p.colls[p.colls["done_ns"].notna()]
    done = done.merge(p.host_waits[["pg", "seq"]], on=["pg", "seq"], how="left", indicator=True)
    done = done[done["_merge"] == "left_only"]
    completions = pd.concat(
        [
            pd.DataFrame({"at": p.nccl["end"], "waits_for": "nccl", "for_call": p.nccl.index}),
            pd.DataFrame(
                {
                    "at": done["done_ns"],
                    "waits_for": "collective",
                    "for_pg": done["pg"],
                    "for_seq": done["seq"],
                }
            ),
            pd.DataFrame({"at": drained, "waits_for": "gpu"}),
        ],
        ignore_index=True,
    ).dropna(subset=["at"])
    calls = _host_marks(p)
    if completions.empty or calls.empty:
        return _waits([], [], "silent", "nccl")
    starts = calls["start"].to_numpy(np.int64)
    reach = np.maximum.accumulate(calls["end"].to_numpy(np.int64))
    at = completions["at"].to_numpy(np.int64)
    i = np.searchsorted(starts, at, side="left")
    ok = (i > 0) & (i < len(starts))
    q1 = starts[np.minimum(i, len(starts) - 1)]
    q0 = reach[np.maximum(i - 1, 0)]
    ok &= (q0 < at) & (q1 - at <= RESUME_NS) & (q1 - q0 >= SILENT_NS)
    found = completions[ok].assign(start=q0[ok], end=q1[ok], for_end=at[ok])
    recorded = waits.sort_values("start")
    if len(recorded) and len(found):
        j = (
            np.searchsorted(recorded["start"].to_numpy(np.int64), found["end"].to_numpy(np.int64))
            - 1
        )
        overlap = (j >= 0) & (
            recorded["end"].to_numpy(np.int64)[np.maximum(j, 0)] > found["start"].to_numpy(np.int64)
        )
        found = found[~overlap]
    found = found.sort_values("at").drop_duplicates(["start", "end"], keep="last")
    return _waits(
        found["start"].to_numpy(),
        found["end"].to_numpy(),
        "silent",
        None,
        for_end=found["for_end"].to_numpy(),
    ).assign(
        waits_for=found["waits_for"].to_numpy(),
        for_call=found.get("for_call", pd.Series(np.nan, index=found.index)).to_numpy(),
        for_pg=found.get("for_pg", pd.Series(None, index=found.index)).to_numpy(),
        for_seq=found.get("for_seq", pd.Series(np.nan, index=found.index)).to_numpy(),
    )


def cut(p: Process, joins: pd.DataFrame, waits: pd.DataFrame) -> pd.DataFrame:
    """The process's host time cut at its boundaries (module doc): one row per segment
    with its kind, step, phase range and own host time."""
    issued = p.colls[p.colls["done_ns"].notna()]["start_ns"]
    points = np.unique(
        np.concatenate(
            [
                p.steps["start_ns"],
                p.steps["end_ns"],
                p.phases["start_ns"],
                p.phases["end_ns"],
                p.nccl["launch"],
                p.acts.loc[joins["act"], "launch"].to_numpy() if len(joins) else [],
                waits["start"],
                waits["end"],
                issued,
                [_first_instant(p), _last_instant(p)],
            ]
        ).astype(np.float64)
    )
    points = points[np.isfinite(points)].astype(np.int64)
    segs = pd.DataFrame({"start_ns": points[:-1], "end_ns": points[1:]})
    segs["seg"] = np.arange(len(segs))
    segs["pid"], segs["device"] = p.pid, p.device
    last = segs.merge(waits, left_on="end_ns", right_on="end", how="left")
    is_wait = last["kind"].notna().to_numpy() & (
        last["start"].to_numpy(np.float64) <= segs["start_ns"].to_numpy()
    )
    for c in ("waits_for", "for_call", "for_pg", "for_seq", "for_end", "api"):
        segs["for_end_ns" if c == "for_end" else c] = last[c].where(is_wait)
    segs["kind"] = np.where(is_wait, last["kind"], "work")
    segs["host_ns"] = np.where(is_wait, 0, segs["end_ns"] - segs["start_ns"])
    segs["step"] = _open_at(p.steps, "step", segs["start_ns"])
    segs["phase"] = _open_at(p.phases, "phase", segs["start_ns"])
    segs["phase_start_ns"] = _open_at(p.phases, "start_ns", segs["start_ns"])
    return segs


def _first_instant(p: Process) -> float:
    """The process's first instant: its first launch, call, step or collective."""
    return _extreme(
        np.nanmin,
        p.acts["launch"],
        p.nccl["launch"],
        p.calls["start"],
        p.steps["start_ns"],
        p.colls["start_ns"],
    )


def _last_instant(p: Process) -> float:
    """The process's last instant: its last launch, call end, step end or collective end."""
    return _extreme(
        np.nanmax,
        p.acts["launch"],
        p.nccl["launch"],
        p.calls["end"],
        p.steps["end_ns"],
        p.colls["end_ns"],
    )


def _extreme(reduce, *columns: pd.Series) -> float:
    values = [pd.to_numeric(c, errors="coerce").astype(np.float64).to_numpy() for c in columns]
    values = np.concatenate([v for v in values if len(v)] or [np.array([np.nan])])
    return float(reduce(values)) if np.isfinite(values).any() else np.nan


def _open_at(ranges: pd.DataFrame, column: str, at: pd.Series) -> pd.Series:
    """Per instant: `column` of the range of `ranges` (start_ns, end_ns) open then (of
    several, the latest started), else NaN."""
    if ranges.empty:
        return pd.Series(np.nan, index=at.index)
    r = ranges.sort_values("start_ns")
    i = np.searchsorted(r["start_ns"].to_numpy(np.int64), at.to_numpy(np.int64), side="right") - 1
    k = np.maximum(i, 0)
    inside = (i >= 0) & (at.to_numpy(np.int64) < r["end_ns"].to_numpy(np.int64)[k])
    return pd.Series(r[column].to_numpy()[k], index=at.index).where(inside)


@dataclass
class Lane:
    """A process's GPU lane as busy stretches [a, b) in time order, with per stretch the
    busy time before it and the lane's idle time before it of two kinds: waiting for the
    host (the gap's next activity was launched after the lane went idle) and otherwise
    (queued, not started at once: the GPU's own gaps between activities, or a wait the
    model does not know), a join's wait for its NCCL kernel apart; and the length of the
    gap after each stretch of either kind (0 for the other)."""

    a: np.ndarray
    b: np.ndarray
    busy_before: np.ndarray
    host_before: np.ndarray
    other_before: np.ndarray
    host_after: np.ndarray
    other_after: np.ndarray

    def busy(self, t) -> np.ndarray:
        """Union busy time before each instant t (NaN: NaN)."""
        return self._cum(t, self.busy_before, self.b - self.a, self.a)

    def host_idle(self, t) -> np.ndarray:
        """The lane's idle time waiting for the host before each instant t."""
        return self._cum(t, self.host_before, self.host_after, self.b)

    def other_idle(self, t) -> np.ndarray:
        """The lane's other idle time before each instant t (not a join's wait)."""
        return self._cum(t, self.other_before, self.other_after, self.b)

    def _cum(self, t, before, length, origin) -> np.ndarray:
        t = np.asarray(t, np.float64)
        if not len(self.a):
            return np.where(np.isnan(t), np.nan, 0.0)
        j = np.searchsorted(self.a, np.nan_to_num(t, nan=0), side="right") - 1
        k = np.maximum(j, 0)
        out = np.where(j >= 0, before[k] + np.clip(t - origin[k], 0, length[k]), 0)
        return np.where(np.isnan(t), np.nan, out)


def lane_of(acts: pd.DataFrame, joiner: np.ndarray) -> tuple[Lane, np.ndarray, np.ndarray]:
    """The lane of activities sorted by start (`joiner`: those that waited for an NCCL
    kernel), and per activity the lane's furthest end before it and the busy time it adds
    (the union time it first covers)."""
    start = acts["start"].to_numpy(np.int64)
    end = np.maximum(acts["end"].to_numpy(np.int64), start)
    if not len(start):
        empty = np.zeros(0, np.int64)
        return Lane(*([empty] * 7)), empty, empty
    reach = np.maximum.accumulate(end)
    before = np.r_[np.iinfo(np.int64).min // 2, reach[:-1]]
    adds = np.maximum(end - np.maximum(start, before), 0)
    new = start > before
    a = start[new]
    b = np.r_[before[new][1:], reach[-1]]  # a stretch ends where the lane reached before the next
    gap = a[1:] - b[:-1]  # the gap before stretch 1..
    by_host = acts["launch"].to_numpy(np.int64)[new][1:] >= b[:-1]
    host = np.where(by_host, gap, 0)
    other = np.where(~by_host & ~joiner[new][1:], gap, 0)
    return (
        Lane(
            a,
            b,
            np.r_[0, np.cumsum(b - a)[:-1]],
            np.r_[0, np.cumsum(host)],
            np.r_[0, np.cumsum(other)],
            np.r_[host, 0],
            np.r_[other, 0],
        ),
        before,
        adds,
    )


def with_gpu(
    segs: pd.DataFrame, p: Process, joins: pd.DataFrame, acts: pd.DataFrame, swept: tuple
) -> pd.DataFrame:
    """Each segment's GPU columns (module doc): its work, the lane's end before and after
    it, the lane's busy and host-waiting time between, the launch its end rests on, and the
    collective its first activity waited for; `acts` sorted by start and their lane
    (lane_of)."""
    lane, before, adds = swept
    bounds = segs["start_ns"].to_numpy(np.int64)
    seg = np.clip(
        np.searchsorted(bounds, acts["launch"].to_numpy(np.int64), side="right") - 1, 0, None
    )
    n = len(segs)
    segs["launches"] = np.bincount(seg, minlength=n)
    segs["gpu_ns"] = np.bincount(seg, weights=adds, minlength=n).astype(np.int64)
    last = np.full(n, -np.inf)
    np.maximum.at(last, seg, acts["end"].to_numpy(np.float64))
    end = np.maximum.accumulate(last)
    end[np.isinf(end)] = np.nan
    segs["gpu_end_ns"] = end
    segs["gpu_from_ns"] = np.r_[np.nan, end[:-1]]
    advances = ~np.isnan(end) & ~(end <= segs["gpu_from_ns"].to_numpy())
    from_ = segs["gpu_from_ns"].to_numpy()
    segs["lane_ns"] = np.where(advances, lane.busy(end) - np.nan_to_num(lane.busy(from_)), 0)
    segs["lane_idle_ns"] = np.where(
        advances, lane.other_idle(end) - np.nan_to_num(lane.other_idle(from_)), 0
    )
    segs["gpu_idle_host_ns"] = np.where(
        advances, lane.host_idle(end) - np.nan_to_num(lane.host_idle(from_)), 0
    )
    joined = acts.index.isin(joins["act"])
    segs = _with_bound(segs, acts, seg, before, advances, joined)
    return _with_join(segs, p, joins, lane)


def _with_bound(segs, acts, seg, before, advances, joined) -> pd.DataFrame:
    """The launch each advancing segment's lane end rests on: of its activities that ran
    after the lane's end before it, the last that restarted the lane after it had waited
    for the host (launched once the lane was idle, started after, not held back by an NCCL
    kernel, `joined`: latency its own), else the one that started least after its launch
    (latency: the process's least)."""
    start = acts["start"].to_numpy(np.int64)
    launch = acts["launch"].to_numpy(np.int64)
    queue = start - launch
    least = int(queue[queue >= 0].min()) if (queue >= 0).any() else 0
    end = segs["gpu_end_ns"].to_numpy()[seg]
    from_ = np.nan_to_num(segs["gpu_from_ns"].to_numpy()[seg], nan=-np.inf)
    ok = advances[seg] & (start >= from_) & (start <= end)
    restart = (launch >= before) & (start > before) & ~joined
    rows = np.flatnonzero(ok)
    order = np.where(restart[rows], -start[rows], queue[rows])
    rows = rows[np.lexsort((order, ~restart[rows], seg[rows]))]
    rows = rows[np.r_[True, seg[rows][1:] != seg[rows][:-1]]] if len(rows) else rows
    for c in ("bound_launch_ns", "bound_start_ns", "bound_latency_ns"):
        segs[c] = np.nan
    at = seg[rows]
    segs.loc[at, "bound_launch_ns"] = launch[rows]
    segs.loc[at, "bound_start_ns"] = start[rows]
    segs.loc[at, "bound_latency_ns"] = np.where(restart[rows], queue[rows], least)
    return segs


def _with_join(segs, p: Process, joins: pd.DataFrame, lane: Lane) -> pd.DataFrame:
    """The NCCL kernel the segment's first activity (launched at its start) waited for."""
    for c in ("join_start_ns", "join_call", "join_nccl_end_ns", "join_busy_ns"):
        segs[c] = np.nan
    segs["join_idle_ns"] = np.nan
    if joins.empty:
        return segs
    j = joins.assign(
        launch=p.acts.loc[joins["act"], "launch"].to_numpy(),
        start=p.acts.loc[joins["act"], "start"].to_numpy(),
    )
    j = j.sort_values(["launch", "start"]).drop_duplicates("launch")
    at = np.searchsorted(segs["start_ns"].to_numpy(np.int64), j["launch"].to_numpy(np.int64))
    ok = (at < len(segs)) & (
        segs["start_ns"].to_numpy()[np.minimum(at, len(segs) - 1)] == j["launch"].to_numpy()
    )
    at, j = at[ok], j[ok]
    end = segs["gpu_end_ns"].to_numpy()[at]
    segs.loc[at, "join_start_ns"] = j["start"].to_numpy()
    segs.loc[at, "join_call"] = j["call"].to_numpy()
    segs.loc[at, "join_nccl_end_ns"] = j["nccl_end"].to_numpy()
    start = j["start"].to_numpy()
    segs.loc[at, "join_busy_ns"] = np.maximum(lane.busy(end) - lane.busy(start), 0)
    segs.loc[at, "join_idle_ns"] = np.maximum(lane.other_idle(end) - lane.other_idle(start), 0)
    # the GPU's gap after the kernel it waited for would have followed the lane's work too
    after = start - j["nccl_end"].to_numpy()
    inside = start > segs["gpu_from_ns"].to_numpy(np.float64)[at]
    segs.loc[at[inside], "lane_idle_ns"] += after[inside]
    return segs


def with_targets(segs: pd.DataFrame, p: Process) -> pd.DataFrame:
    """Each blocking call's completion (module doc): the lane's end after the last segment
    (up to the call's own) whose GPU work had ended when the call returned, or an NCCL
    kernel launched before the call that ended after that and before it returned; a call
    that named neither is the host's own time."""
    segs["for_seg"] = np.nan
    rows = np.flatnonzero((segs["waits_for"] == "gpu").to_numpy())
    if not len(rows):
        return segs
    c0 = segs["start_ns"].to_numpy(np.int64)[rows]
    c1 = segs["end_ns"].to_numpy(np.int64)[rows]
    end = np.nan_to_num(segs["gpu_end_ns"].to_numpy(), nan=-np.inf)
    s = np.minimum(np.searchsorted(end, c1, side="right") - 1, rows)
    lane_at = np.where(s >= 0, end[np.maximum(s, 0)], -np.inf)
    n = p.nccl.sort_values("end")
    k = (
        np.searchsorted(n["end"].to_numpy(np.int64), c1, side="right") - 1
        if len(n)
        else np.full(len(rows), -1)
    )
    kk = np.maximum(k, 0)
    nccl_at = np.where(k >= 0, n["end"].to_numpy(np.float64)[kk] if len(n) else -np.inf, -np.inf)
    if len(n):
        nccl_at = np.where(n["launch"].to_numpy(np.int64)[kk] < c0, nccl_at, -np.inf)
    use_nccl = nccl_at > lane_at
    named = np.isfinite(np.maximum(lane_at, nccl_at))
    segs.loc[rows, "for_seg"] = np.where(~use_nccl & named, s, np.nan)
    segs.loc[rows, "waits_for"] = np.where(named, np.where(use_nccl, "nccl", "gpu"), None)
    segs.loc[rows, "for_end_ns"] = np.where(named, np.maximum(lane_at, nccl_at), np.nan)
    if len(n):
        segs.loc[rows, "for_call"] = np.where(use_nccl & named, n.index.to_numpy()[kk], np.nan)
    unnamed = rows[~named]
    segs.loc[unnamed, "kind"] = "work"
    segs.loc[unnamed, "host_ns"] = (segs["end_ns"] - segs["start_ns"])[unnamed]
    return segs


def nccl_calls(p: Process, segs: pd.DataFrame) -> pd.DataFrame:
    """The process's NCCL kernels with their launch, the segment their launch starts, and
    ready_ns: the latest end, at most their start, of the lane's activities launched
    before them."""
    n = p.nccl  # in launch order: its index is the call's number
    acts = p.acts.sort_values("launch")
    reach = (
        np.maximum.accumulate(acts["end"].to_numpy(np.int64))
        if len(acts)
        else np.zeros(0, np.int64)
    )
    i = (
        np.searchsorted(
            acts["launch"].to_numpy(np.int64), n["launch"].to_numpy(np.int64), side="left"
        )
        - 1
    )
    ready = np.where(i >= 0, reach[np.maximum(i, 0)] if len(reach) else 0, np.nan).astype(
        np.float64
    )
    seg = (
        np.searchsorted(
            segs["start_ns"].to_numpy(np.int64), n["launch"].to_numpy(np.int64), side="right"
        )
        - 1
    )
    return pd.DataFrame(
        {
            "pid": p.pid,
            "device": p.device,
            "call": n.index.to_numpy(),
            "stream": n["stream"].to_numpy(),
            "start_ns": n["start"].to_numpy(),
            "end_ns": n["end"].to_numpy(),
            "launch_ns": n["launch"].to_numpy(),
            "ready_ns": np.minimum(ready, n["start"].to_numpy(np.float64)),
            "seg": seg,
        }
    )


def with_wait_costs(segs: pd.DataFrame, p: Process) -> pd.DataFrame:
    """Each wait's two costs: `call_ns`, how long after its start it would have returned
    had its completion come before (a blocking CUDA call that did not wait: its length;
    one that waited: the median length of the process's calls of that API that did not,
    else of all its CUDA calls, at most its own; a collective or OS wait: 0), and
    `wake_ns`, how long after its completion it returned (one that did not wait: the median
    of the process's calls of that API that did, at most what is left). A silence resumes
    its length after its completion either way."""
    segs["call_ns"], segs["wake_ns"] = np.nan, np.nan
    kind = segs["kind"].to_numpy()
    c0, c1 = segs["start_ns"].to_numpy(np.float64), segs["end_ns"].to_numpy(np.float64)
    done = segs["for_end_ns"].to_numpy(np.float64)
    cuda = (kind == "wait") & segs["api"].notna().to_numpy()
    waited = done > c0
    length = c1 - c0
    api = segs["api"].astype(object).to_numpy()
    frame = pd.DataFrame({"api": api, "length": length, "wake": c1 - done})
    free = frame[cuda & ~waited].groupby("api")["length"].median()
    woke = frame[cuda & waited].groupby("api")["wake"].median()
    overall = float((p.calls["end"] - p.calls["start"]).median()) if len(p.calls) else 0.0
    call = np.where(waited, np.minimum(pd.Series(api).map(free).fillna(overall), length), length)
    wake = np.where(waited, c1 - done, np.minimum(pd.Series(api).map(woke).fillna(0), c1 - done))
    segs["call_ns"] = np.where(cuda, call, np.where(kind == "wait", 0, np.nan))
    segs["wake_ns"] = np.where(cuda, wake, np.where(kind == "wait", c1 - done, np.nan))
    silent = kind == "silent"
    segs.loc[silent, "call_ns"] = (c1 - done)[silent]
    segs.loc[silent, "wake_ns"] = (c1 - done)[silent]
    return segs
