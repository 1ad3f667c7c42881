"""The rows of crossrank.trace_events as Chrome trace events (the JSON trace-event format
that Perfetto and chrome://tracing read): one process per rank, a track per thread (NVTX
ranges), per thread's CUDA API calls, per GPU stream and for the collectives, each split
into lanes whose slices nest, and the ideal steps' track (nsyswrap.timeline.ideal) above
them; `args` on every slice; flows from each launch to its GPU
activity and from the last rank to arrive at a collective to every other member."""

from __future__ import annotations

import math

import pandas as pd

from nsyswrap.timeline.ideal import ARGS as IDEAL_ARGS
from nsyswrap.timeline.lanes import nested_lanes

# Track kinds, in the order a rank's tracks are listed: its ideal steps (above the
# recorded ones), its threads (each thread's NVTX ranges, then its CUDA API calls), its GPU
# streams, its collectives.
_KIND = {"ideal": -1, "nvtx": 0, "cuda_api": 1, "collective": 3, "wait": 3}
_GPU = 2
# What a slice's args hold, by its category (GPU activities: every other category).
_ARGS = {
    "nvtx": ("domain", "pid", "tid", "op", "bytes", "dtype", "pg", "seq"),
    "cuda_api": ("pid", "tid", "correlation_id"),
    "collective": ("op", "bytes", "pg", "seq", "wait_ns", "last_rank"),
    "wait": ("op", "pg", "seq", "last_rank"),
    "ideal": IDEAL_ARGS,
}
_GPU_ARGS = ("device", "stream", "correlation_id", "grid", "block", "bytes")


def _us(ns: int) -> float:
    return ns / 1_000


def _value(v):
    """A cell as JSON: NaN and NULL drop out, whole floats become ints."""
    if v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA:
        return None
    if hasattr(v, "item"):
        v = v.item()
    return int(v) if isinstance(v, float) and v.is_integer() else v


def _args(row: dict) -> dict:
    keys = _ARGS.get(row["category"], _GPU_ARGS)
    args = {"kind": row["category"]} | {k: _value(row[k]) for k in keys}
    return {k: v for k, v in args.items() if v is not None}


def _laned(events: pd.DataFrame) -> pd.DataFrame:
    """`events` with `kind`, `lane` and `lane_track` (the track, or `<track> #<n>` for its
    n-th lane), in the order of rank, track, start and, at one start, longest first."""
    e = events.copy()
    e["kind"] = e["category"].map(_KIND).fillna(_GPU).astype(int)
    e = e.sort_values(
        ["rank", "track", "start_ns", "dur_ns", "name"],
        ascending=[True, True, True, False, True],
        kind="stable",
    ).reset_index(drop=True)
    lanes = []
    for _, group in e.groupby(["rank", "track"], sort=False):
        ends = group["start_ns"] + group["dur_ns"]
        lanes += nested_lanes(zip(group["start_ns"].tolist(), ends.tolist()))
    e["lane"] = lanes
    e["lane_track"] = [t if n == 0 else f"{t} #{n + 1}" for t, n in zip(e["track"], e["lane"])]
    return e


def _track_ids(e: pd.DataFrame) -> dict[tuple[int, str], int]:
    """Per (rank, lane track), its thread id in the trace: listed by kind, process, thread,
    device, stream, track and lane."""
    keys = ["kind", "pid", "tid", "device", "stream", "track", "lane"]
    tracks = e.drop_duplicates(["rank", "lane_track"]).sort_values(
        ["rank", *keys], na_position="first", kind="stable"
    )
    ids: dict[tuple[int, str], int] = {}
    for rank, group in tracks.groupby("rank", sort=False):
        for i, track in enumerate(group["lane_track"], 1):
            ids[(int(rank), track)] = i
    return ids


def _meta(what: str, pid: int, tid: int | None, **args) -> dict:
    event = {"ph": "M", "name": what, "pid": pid, "args": args}
    return event if tid is None else event | {"tid": tid}


def _metadata(ids: dict[tuple[int, str], int]) -> list[dict]:
    """Each rank's process and each track's thread, named and in order."""
    out = []
    for rank in sorted({r for r, _ in ids}):
        out += [
            _meta("process_name", rank, None, name=f"rank {rank}"),
            _meta("process_sort_index", rank, None, sort_index=rank),
        ]
    for (rank, track), tid in sorted(ids.items(), key=lambda kv: (kv[0][0], kv[1])):
        out += [
            _meta("thread_name", rank, tid, name=track),
            _meta("thread_sort_index", rank, tid, sort_index=tid),
        ]
    return out


def _flow(flow_id: int, name: str, source: tuple[int, int, int], target: tuple[int, int, int]):
    """A flow arrow from the slice open at `source` (rank, tid, ns) to the one at `target`."""
    (pid, tid, ns), (pid2, tid2, ns2) = source, target
    common = {"name": name, "cat": name, "id": flow_id}
    return [
        {"ph": "s", "pid": pid, "tid": tid, "ts": _us(ns), **common},
        {"ph": "f", "bp": "e", "pid": pid2, "tid": tid2, "ts": _us(ns2), **common},
    ]


def _launch_flows(e: pd.DataFrame, start_id: int) -> list[dict]:
    """From each CUDA API call to every GPU activity of its process with its correlation id
    (a graph launch: all of its graph's kernels)."""
    keys = ["rank", "pid", "correlation_id"]
    calls = e[(e["category"] == "cuda_api") & e["correlation_id"].notna()]
    work = e[(e["kind"] == _GPU) & e["correlation_id"].notna()]
    pairs = calls[[*keys, "tid_in_trace", "start_ns"]].merge(
        work[[*keys, "tid_in_trace", "start_ns"]], on=keys, suffixes=("_call", "_work")
    )
    pairs = pairs.sort_values(["rank", "start_ns_call", "start_ns_work", "tid_in_trace_work"])
    out = []
    for i, p in enumerate(pairs.itertuples(index=False), start_id):
        out += _flow(
            i,
            "launch",
            (int(p.rank), int(p.tid_in_trace_call), int(p.start_ns_call)),
            (int(p.rank), int(p.tid_in_trace_work), int(p.start_ns_work)),
        )
    return out


def _collective_flows(e: pd.DataFrame, start_id: int) -> list[dict]:
    """From the last rank to arrive at each matched collective (at its arrival) to every
    other member, at the instant the last one arrived (the end of its wait)."""
    parts = e[e["category"] == "collective"]
    out = []
    flow_id = start_id
    for _, members in parts.groupby(["pg", "seq"], sort=True):
        last = members[members["rank"] == members["last_rank"]]
        if last.empty:
            continue
        src = last.iloc[0]
        for m in (
            members[members["rank"] != src["rank"]].sort_values("rank").itertuples(index=False)
        ):
            released = int(m.start_ns) + int(m.wait_ns or 0)
            out += _flow(
                flow_id,
                "collective",
                (int(src["rank"]), int(src["tid_in_trace"]), int(src["start_ns"])),
                (int(m.rank), int(m.tid_in_trace), released),
            )
            flow_id += 1
    return out


def trace_events(events: pd.DataFrame) -> tuple[list[dict], int]:
    """The Chrome trace events of the rows of crossrank.trace_events, and how many flows."""
    e = _laned(events)
    ids = _track_ids(e)
    e["tid_in_trace"] = [ids[(int(r), t)] for r, t in zip(e["rank"], e["lane_track"])]
    slices = [
        {
            "ph": "X",
            "pid": int(row["rank"]),
            "tid": row["tid_in_trace"],
            "name": row["name"],
            "cat": row["category"],
            "ts": _us(int(row["start_ns"])),
            "dur": _us(int(row["dur_ns"])),
            "args": _args(row),
        }
        for row in e.to_dict("records")
    ]
    launches = _launch_flows(e, 1)
    collectives = _collective_flows(e, 1 + len(launches) // 2)
    flows = launches + collectives
    return _metadata(ids) + slices + flows, len(flows) // 2
