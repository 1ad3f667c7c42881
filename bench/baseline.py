"""The pandas baseline: ledger, idle gaps and cross-rank collective skew, written the way
pandas-based trace tools compute them.

Each report's tables are loaded with stdlib `sqlite3` and `pandas.read_sql` (only the
columns needed), names are merged in from StringIds, and per-device intervals are
unioned by sorting on start and taking a running maximum of the ends. Reports are
processed one at a time; only their collectives are kept for the cross-rank step.
The definitions follow nsyswrap's `ledger.devices`, `gaps.idle` and
`crossrank.collectives` (window = first to last GPU activity of the device).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd

from nsyswrap.storage.reports import assign_ranks, expand

PTOP = 10  # ENUM_CUDA_MEMCPY_OPER: peer-to-peer copy
STREAM_WAIT = 2  # ENUM_CUPTI_SYNC_TYPE: cudaStreamWaitEvent
PUSH_POP_OR_START_END = (59, 60, 70, 71)
COLL_TEXT = r"^coll:(?P<op>\S+).*\bpg=(?P<pg>\S+).*\bseq=(?P<seq>\d+)"


def _read(con: sqlite3.Connection, sql: str) -> pd.DataFrame:
    return pd.read_sql(sql, con)


def _has(con: sqlite3.Connection, table: str) -> bool:
    return (
        con.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (table,)).fetchone() is not None
    )


def load_rank(path: Path) -> dict[str, pd.DataFrame]:
    """The tables of one report the analysis needs, names merged in."""
    con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
    try:
        names = _read(con, "SELECT id, value FROM StringIds").set_index("id")["value"]
        device_cols = (
            'start, "end", deviceId AS device, contextId AS context, globalPid, correlationId'
        )
        kernels = _read(con, f"SELECT {device_cols}, shortName FROM CUPTI_ACTIVITY_KIND_KERNEL")
        kernels["name"] = kernels["shortName"].map(names)
        frames = {"kernels": kernels}
        for key, table, extra in (
            ("memcpy", "CUPTI_ACTIVITY_KIND_MEMCPY", ", copyKind"),
            ("memset", "CUPTI_ACTIVITY_KIND_MEMSET", ""),
            ("syncs", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", ", syncType"),
        ):
            frames[key] = (
                _read(con, f"SELECT {device_cols}{extra} FROM {table}")
                if _has(con, table)
                else None
            )
        runtime = _read(
            con,
            'SELECT start, "end", eventClass, globalTid, correlationId, nameId '
            "FROM CUPTI_ACTIVITY_KIND_RUNTIME",
        )
        runtime["api"] = runtime["nameId"].map(names)
        frames["runtime"] = runtime
        nvtx = _read(
            con, 'SELECT start, "end", eventType, text, textId, globalTid FROM NVTX_EVENTS'
        )
        nvtx["text"] = nvtx["text"].fillna(nvtx["textId"].map(names))
        frames["nvtx"] = nvtx
        frames["utc_epoch_ns"] = con.execute(
            "SELECT max(utcEpochNs) FROM TARGET_INFO_SESSION_START_TIME"
        ).fetchone()[0]
    finally:
        con.close()
    return frames


def _pid(global_id: pd.Series) -> pd.Series:
    """Process id in bits 24..47 of an nsys global id."""
    return global_id // (1 << 24) % (1 << 24)


def _tid(global_id: pd.Series) -> pd.Series:
    return global_id % (1 << 24)


def gpu_work(t: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Every kernel, memcpy and memset as compute, comm (NCCL or P2P copy) or copy."""
    k = t["kernels"]
    kernels = pd.DataFrame(
        {
            "start": k["start"],
            "end": k["end"],
            "device": k["device"],
            "context": k["context"],
            "pid": _pid(k["globalPid"]),
            "correlationId": k["correlationId"],
            "name": k["name"],
            "activity": np.where(
                k["name"].str.lower().str.startswith("nccl", na=False), "comm", "compute"
            ),
        }
    )
    parts = [kernels]
    for key in ("memcpy", "memset"):
        c = t[key]
        if c is not None and len(c):
            comm = c["copyKind"].eq(PTOP) if key == "memcpy" else False
            parts.append(
                pd.DataFrame(
                    {
                        "start": c["start"],
                        "end": c["end"],
                        "device": c["device"],
                        "context": c["context"],
                        "pid": _pid(c["globalPid"]),
                        "correlationId": c["correlationId"],
                        "name": key,
                        "activity": np.where(comm, "comm", "copy"),
                    }
                )
            )
    return pd.concat(parts, ignore_index=True).sort_values(
        ["device", "start"], kind="stable", ignore_index=True
    )


def islands(work: pd.DataFrame) -> pd.DataFrame:
    """The union of `work`'s intervals per device as disjoint islands (device, start, end).

    `work` must be sorted by (device, start); zero-length intervals are dropped.
    """
    w = work.loc[work["end"] > work["start"], ["device", "start", "end"]]
    reach = w.groupby("device")["end"].cummax()
    previous = reach.groupby(w["device"]).shift()
    new_island = previous.isna() | (w["start"] > previous)
    island = new_island.cumsum()
    return (
        pd.DataFrame({"device": w["device"], "start": w["start"], "end": reach, "island": island})
        .groupby("island")
        .agg(device=("device", "first"), start=("start", "min"), end=("end", "max"))
        .reset_index(drop=True)
    )


def _union_ns(work: pd.DataFrame) -> pd.Series:
    u = islands(work)
    return (u["end"] - u["start"]).groupby(u["device"]).sum()


def ledger(work: pd.DataFrame, rank: int) -> pd.DataFrame:
    """Per device over its activity span: compute only, comm only, both, copy only, idle (ns)."""
    span = work.groupby("device").agg(start=("start", "min"), end=("end", "max"))
    compute = work[work["activity"] == "compute"]
    comm = work[work["activity"] == "comm"]
    copy = work[work["activity"] == "copy"]
    busy = (
        pd.DataFrame(
            {
                "c": _union_ns(compute),
                "m": _union_ns(comm),
                "y": _union_ns(copy),
                "cm": _union_ns(work[work["activity"] != "copy"]),
                "all": _union_ns(work),
            }
        )
        .reindex(span.index)
        .fillna(0)
        .astype("int64")
    )
    out = pd.DataFrame(
        {
            "rank": rank,
            "device": span.index,
            "span_ns": span["end"] - span["start"],
            "compute_only_ns": busy["cm"] - busy["m"],
            "comm_only_ns": busy["cm"] - busy["c"],
            "both_ns": busy["c"] + busy["m"] - busy["cm"],
            "copy_only_ns": busy["all"] - busy["cm"],
            "idle_ns": span["end"] - span["start"] - busy["all"],
            "compute_busy_ns": busy["c"],
            "comm_busy_ns": busy["m"],
            "copy_busy_ns": busy["y"],
        }
    )
    return out.reset_index(drop=True)


def launches(t: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """One launch call per (pid, correlationId): the runtime call, else the driver call,
    earliest first."""
    r = t["runtime"]
    calls = pd.DataFrame(
        {
            "pid": _pid(r["globalTid"]),
            "tid": _tid(r["globalTid"]),
            "correlationId": r["correlationId"],
            "launch": r["start"],
            "preference": r["eventClass"].clip(upper=2),
        }
    )
    calls = calls.sort_values(["preference", "launch"], kind="stable")
    return calls.drop_duplicates(["pid", "correlationId"]).drop(columns="preference")


def device_syncs(t: dict[str, pd.DataFrame], work: pd.DataFrame) -> pd.DataFrame:
    """Host synchronization intervals per device: CUPTI sync records (not stream waits:
    syncType 2, a stream waiting on the GPU) and *Synchronize calls."""
    contexts = work[["pid", "context", "device"]].drop_duplicates()
    parts = []
    if t["syncs"] is not None and len(t["syncs"]):
        s = t["syncs"][t["syncs"]["syncType"] != STREAM_WAIT]
        s = s.assign(pid=_pid(s["globalPid"])).drop(columns="device")
        parts.append(s.merge(contexts, on=["pid", "context"])[["device", "start", "end"]])
    r = t["runtime"]
    calls = r[r["api"].str.contains("synchronize", case=False, na=False)]
    drivers = work[["pid", "device"]].drop_duplicates()
    parts.append(
        calls.assign(pid=_pid(calls["globalTid"])).merge(drivers, on="pid")[
            ["device", "start", "end"]
        ]
    )
    return pd.concat(parts, ignore_index=True).sort_values(["device", "start"], ignore_index=True)


def _covered_before(union: pd.DataFrame, device: pd.Series, t: pd.Series) -> np.ndarray:
    """Time covered by the `union` islands of the same device before each time t."""
    out = np.zeros(len(t), dtype="int64")
    for dev, u in union.groupby("device"):
        mask = (device == dev).to_numpy()
        starts, ends = u["start"].to_numpy(), u["end"].to_numpy()
        before = np.concatenate([[0], np.cumsum(ends - starts)])
        times = t.to_numpy()[mask]
        i = np.searchsorted(starts, times, side="right")  # islands starting at or before t
        j = np.maximum(i - 1, 0)
        out[mask] = np.where(i > 0, before[j] + np.minimum(times, ends[j]) - starts[j], 0)
    return out


def idle_gaps(work: pd.DataFrame, t: dict[str, pd.DataFrame], rank: int) -> pd.DataFrame:
    """Stretches of each device's span with nothing running, with sync time and cause."""
    span = work.groupby("device").agg(lo=("start", "min"), hi=("end", "max"))
    busy = islands(work)
    edges = pd.concat(
        [
            busy[["device", "start", "end"]],
            pd.DataFrame({"device": span.index, "start": span["lo"], "end": span["lo"]}),
            pd.DataFrame({"device": span.index, "start": span["hi"], "end": span["hi"]}),
        ],
        ignore_index=True,
    ).sort_values(["device", "start", "end"], ignore_index=True)
    gaps = pd.DataFrame(
        {
            "device": edges["device"],
            "start_ns": edges.groupby("device")["end"].cummax(),
            "end_ns": edges.groupby("device")["start"].shift(-1),
        }
    ).dropna()
    gaps = gaps[gaps["end_ns"] > gaps["start_ns"]].astype("int64")
    sync_union = islands(device_syncs(t, work))
    gaps["sync_ns"] = _covered_before(sync_union, gaps["device"], gaps["end_ns"]) - _covered_before(
        sync_union, gaps["device"], gaps["start_ns"]
    )
    launched = work.merge(launches(t), on=["pid", "correlationId"], how="left")
    first = (
        launched.groupby(["device", "start"])["launch"].min().rename("next_launch_ns").reset_index()
    )
    gaps = gaps.merge(first, left_on=["device", "end_ns"], right_on=["device", "start"], how="left")
    dur = gaps["end_ns"] - gaps["start_ns"]
    gaps["cause"] = np.select(
        [
            gaps["next_launch_ns"] < gaps["start_ns"],
            2 * gaps["sync_ns"] >= dur,
            gaps["next_launch_ns"].notna(),
        ],
        ["other", "sync", "host_bound"],
        "unknown",
    )
    return gaps.assign(rank=rank, dur_ns=dur)[
        ["rank", "device", "start_ns", "end_ns", "dur_ns", "sync_ns", "next_launch_ns", "cause"]
    ]


def collectives(t: dict[str, pd.DataFrame], work: pd.DataFrame, rank: int) -> pd.DataFrame:
    """nsyswrap `coll:` ranges keyed by (pg, seq), timed by the NCCL kernels launched inside
    them."""
    n = t["nvtx"]
    n = n[n["eventType"].isin(PUSH_POP_OR_START_END) & n["text"].str.startswith("coll:", na=False)]
    keys = n["text"].str.extract(COLL_TEXT)
    ranges = pd.DataFrame(
        {
            "pid": _pid(n["globalTid"]),
            "tid": _tid(n["globalTid"]),
            "start": n["start"],
            "end": n["end"],
            "op": keys["op"],
            "pg": keys["pg"],
            "seq": pd.to_numeric(keys["seq"]),
        }
    ).dropna(subset=["pg", "seq"])
    nccl = work[work["activity"].eq("comm") & work["name"].ne("memcpy")]
    nccl = nccl.merge(launches(t), on=["pid", "correlationId"]).sort_values("launch")
    inside = pd.merge_asof(
        nccl,
        ranges.sort_values("start"),
        left_on="launch",
        right_on="start",
        by=["pid", "tid"],
        suffixes=("", "_range"),
    )
    inside = inside[inside["launch"] <= inside["end_range"]]
    timed = inside.groupby(["pg", "seq"]).agg(
        kernel_start=("start", "min"), kernel_end=("end", "max")
    )
    out = ranges.merge(timed, on=["pg", "seq"], how="left")
    return out.assign(rank=rank, utc_epoch_ns=t["utc_epoch_ns"])


def collective_skew(colls: pd.DataFrame) -> pd.DataFrame:
    """Per matched collective and rank: arrival, wait, last rank and skew on aligned clocks.

    Clocks are aligned to the lowest rank by the median difference of collective ends.
    """
    members = colls.groupby("pg")["rank"].nunique()
    per_key = (
        colls.groupby(["pg", "seq"])
        .agg(ranks=("rank", "nunique"), copies=("rank", "size"), ops=("op", "nunique"))
        .reset_index()
    )
    group = per_key["pg"].map(members)
    keep = (
        (group >= 2)
        & (per_key["ranks"] == group)
        & (per_key["copies"] == group)
        & (per_key["ops"] == 1)
    )
    full = pd.MultiIndex.from_frame(per_key.loc[keep, ["pg", "seq"]])
    m = colls.set_index(["pg", "seq"]).loc[full].reset_index()
    m["on_gpu"] = m["kernel_end"].notna().groupby([m["pg"], m["seq"]]).transform("all")
    m["t0"] = np.where(m["on_gpu"], m["kernel_start"], m["start"])
    m["t1"] = np.where(m["on_gpu"], m["kernel_end"], m["end"])
    ref = m.loc[m["rank"] == m["rank"].min(), ["pg", "seq", "t1", "utc_epoch_ns"]]
    m = m.merge(ref, on=["pg", "seq"], suffixes=("", "_ref"))
    m["diff"] = (m["utc_epoch_ns_ref"] - m["utc_epoch_ns"]) + (m["t1_ref"] - m["t1"])
    usable = m["on_gpu"] == m.groupby("rank")["on_gpu"].transform("max")
    median = m[usable].groupby("rank")["diff"].median()
    offset = np.sign(median) * np.floor(median.abs() + 0.5)  # SQL round(): halves away from zero
    shift = m["utc_epoch_ns"] - m["utc_epoch_ns_ref"] + m["rank"].map(offset).fillna(0)
    m["start_ns"], m["end_ns"] = m["t0"] + shift, m["t1"] + shift
    latest = m.groupby(["pg", "seq"])["start_ns"].transform("max")
    m["skew_ns"] = latest - m.groupby(["pg", "seq"])["start_ns"].transform("min")
    m["wait_ns"] = (np.minimum(latest, m["end_ns"]) - m["start_ns"]).clip(lower=0)
    last = m.sort_values(["start_ns", "rank"], ascending=[False, True]).drop_duplicates(
        ["pg", "seq"]
    )
    m = m.merge(last[["pg", "seq", "rank"]].rename(columns={"rank": "last_rank"}), on=["pg", "seq"])
    return m[["pg", "seq", "op", "rank", "start_ns", "end_ns", "wait_ns", "last_rank", "skew_ns"]]


def analyse(inputs: list[str | Path]) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(ledger, idle gaps, collective skew) of a run, one report at a time."""
    ledgers, gaps, colls = [], [], []
    for report in assign_ranks(expand(inputs)):
        tables = load_rank(report.path)
        work = gpu_work(tables)
        ledgers.append(ledger(work, report.rank))
        gaps.append(idle_gaps(work, tables, report.rank))
        colls.append(collectives(tables, work, report.rank))
        del tables, work
    return (
        pd.concat(ledgers, ignore_index=True),
        pd.concat(gaps, ignore_index=True),
        collective_skew(pd.concat(colls, ignore_index=True)),
    )
