"""Which collective calls of different ranks are one collective, and which ranks form a group.

The calls come from the per-report reduction `xr_rank_keys` in four kinds, taken in this
order of preference when every rank has them: nsyswrap's `coll:` ranges (`range`), NCCL's
own NVTX ranges keyed by the communicator hash of their payload (`payload`, made by
nsyswrap.crossrank.nccl_payload), MPI collectives traced by nsys (`mpi`), and NCCL kernels
per CUDA stream (`kernel`). For the first three the key (pg, seq) is recorded. For kernels it is not: each stream of a process
is a candidate member sequence, and streams of different ranks form one group when their
ops agree and the intervals between consecutive collective ends agree (a collective ends
at one instant on every member, whatever the clocks). Groups are never merged: a set of
streams that would put two sequences of one rank in one group is reported as ambiguous
and left out.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from nsyswrap.crossrank.graph import components

KINDS = ("range", "payload", "mpi", "kernel")
FOUND_BY = {"range": "nsyswrap coll: ranges", "payload": "nccl payload (communicator hash of NCCL's NVTX ranges)",
            "mpi": "MPI ranges (domain MPI)",
            "kernel": "NCCL kernels per stream, groups inferred from agreeing end intervals"}
P2P = {"send", "recv", "isend", "irecv"}
AGREE_NS = 2_000          # end intervals of one group agree within this (+ AGREE_PPM of the interval)
AGREE_PPM = 200
AGREE_SHARE = 0.9         # ... for at least this share of the intervals
KEY_COLUMNS = ["rank", "pg", "seq", "op", "bytes", "group_size", "cpu_start_ns", "cpu_end_ns",
               "kernel_start_ns", "kernel_end_ns", "group_ranks", "ranks", "duplicate", "op_differs",
               "bytes_differ", "matches", "found_by", "size_differs"]
GROUP_COLUMNS = ["pg", "found_by", "members", "captured", "group_size", "status"]


def choose_kind(keys: pd.DataFrame) -> str | None:
    """The most trusted kind of key that every rank with collective calls has."""
    with_calls = set(keys["rank"])
    for kind in KINDS:
        if with_calls and set(keys.loc[keys["keyed"] == kind, "rank"]) == with_calls:
            return kind
    counts = keys.groupby("keyed")["rank"].nunique()
    return max(counts.index, key=lambda k: (counts[k], -KINDS.index(k))) if len(counts) else None


def match(keys: pd.DataFrame, note: str | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(keys with verdicts, groups) for the run's best kind of key; see the module doc.
    `note` (nsyswrap.crossrank.nccl_payload.payload_keys): what the groups found by NCCL
    payloads or by a less trusted kind say about the payloads."""
    kind = choose_kind(keys)
    if kind is None:
        return pd.DataFrame(columns=KEY_COLUMNS), pd.DataFrame(columns=GROUP_COLUMNS)
    calls = keys[keys["keyed"] == kind].drop(columns=["keyed", "pid"]).copy()
    groups = None
    if kind == "kernel":
        calls, groups = infer_stream_groups(calls)
    calls = verdicts(calls)
    calls["found_by"] = kind
    if groups is None:
        groups = _recorded_groups(calls, kind)
    if note and KINDS.index(kind) >= KINDS.index("payload"):
        groups["found_by"] = groups["found_by"] + "; " + note
    return calls[KEY_COLUMNS], groups[GROUP_COLUMNS]


def verdicts(calls: pd.DataFrame) -> pd.DataFrame:
    """Per call: its group's ranks and whether the key matches on all of them.

    A key differs when a rank has it twice, or the ranks disagree on its op (send and
    recv pair up), payload size (all_to_all sizes may differ) or group size (two
    groups under one id). A key matches when every
    rank of its group has it and no key of the group differs at or before it: past a
    divergence the sequences disagree. Groups seen on one rank only are not checked
    (verdict columns empty)."""
    calls = calls.copy()
    if calls.empty:
        return calls.assign(group_ranks=[], ranks=[], duplicate=[], op_differs=[], bytes_differ=[],
                            size_differs=[], matches=[])
    calls["group_ranks"] = calls.groupby("pg")["rank"].transform("nunique")
    op_class = calls["op"].where(~calls["op"].isin(P2P), "p2p")
    sized = calls["bytes"].where(~calls["op"].astype(str).str.startswith("all_to_all"))
    per_key = pd.DataFrame({
        "ranks": calls.groupby(["pg", "seq"])["rank"].nunique(),
        "calls": calls.groupby(["pg", "seq"]).size(),
        "ops": op_class.groupby([calls["pg"], calls["seq"]]).nunique(),
        "sizes": sized.groupby([calls["pg"], calls["seq"]]).nunique(),
        "group_sizes": calls.groupby(["pg", "seq"])["group_size"].nunique(),
    }).reset_index()
    per_key["duplicate"] = per_key["calls"] > per_key["ranks"]
    per_key["op_differs"] = per_key["ops"] > 1
    per_key["bytes_differ"] = per_key["sizes"] > 1
    per_key["size_differs"] = per_key["group_sizes"] > 1
    bad = per_key[per_key["duplicate"] | per_key["op_differs"] | per_key["bytes_differ"] | per_key["size_differs"]]
    first_bad = bad.groupby("pg")["seq"].min()
    calls = calls.merge(per_key[["pg", "seq", "ranks", "duplicate", "op_differs", "bytes_differ", "size_differs"]],
                        on=["pg", "seq"], how="left")
    limit = calls["pg"].map(first_bad)
    calls["matches"] = (limit.isna() | (calls["seq"] < limit)) & (calls["ranks"] == calls["group_ranks"])
    single = calls["group_ranks"] < 2
    for column in ("ranks", "duplicate", "op_differs", "bytes_differ", "size_differs", "matches"):
        calls[column] = calls[column].astype(object).where(~single, None)
    return calls


def _recorded_groups(calls: pd.DataFrame, kind: str) -> pd.DataFrame:
    rows = []
    for pg, g in calls.groupby("pg", sort=False):
        members = sorted(g["rank"].unique())
        size = g["group_size"].dropna()
        rows.append({"pg": pg, "found_by": FOUND_BY[kind], "members": ",".join(map(str, members)),
                     "captured": len(members), "group_size": int(size.max()) if len(size) else None,
                     "status": "matched" if len(members) >= 2 else "one rank only"})
    return pd.DataFrame(rows, columns=GROUP_COLUMNS)


def _end_intervals(seq: pd.DataFrame) -> np.ndarray:
    return np.diff(seq["kernel_end_ns"].to_numpy(np.int64))


def agree(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    """Two call sequences (sorted by seq) are one collective sequence: same ops over the
    common length and end intervals that agree (clock offsets cancel in intervals)."""
    n = min(len(a), len(b))
    if n < 2 or abs(len(a) - len(b)) > max(1, n // 10):
        return False
    if (a["op"].to_numpy()[:n] != b["op"].to_numpy()[:n]).any():
        return False
    da, db = _end_intervals(a.iloc[:n]), _end_intervals(b.iloc[:n])
    tolerance = AGREE_NS + AGREE_PPM * 1e-6 * np.abs(da)
    return bool(np.mean(np.abs(da - db) <= tolerance) >= AGREE_SHARE)


def infer_stream_groups(calls: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Rename each stream's pg to its inferred group ('nccl:<k>'); streams that agree with
    none stay alone; an ambiguous set (two streams of one rank that do not agree with each
    other) is left out. Streams of one rank that agree are one member (several GPUs)."""
    calls = calls.assign(pg="rank" + calls["rank"].astype(str) + ":" + calls["pg"])  # pids repeat across hosts
    seqs = {pg: g.sort_values("seq") for pg, g in calls.groupby("pg")}
    names = sorted(seqs, key=lambda pg: (int(seqs[pg]["rank"].iloc[0]), pg))
    rank = {pg: int(seqs[pg]["rank"].iloc[0]) for pg in names}
    agreeing = {(a, b): True for i, a in enumerate(names) for b in names[i + 1:] if agree(seqs[a], seqs[b])}
    root = components(names, agreeing)
    grouped: dict[str, list[str]] = {}
    for pg in names:
        grouped.setdefault(root[pg], []).append(pg)
    renamed, rows, k = {}, [], 0
    for streams in grouped.values():
        by_rank: dict[int, list[str]] = {}
        for pg in streams:
            by_rank.setdefault(rank[pg], []).append(pg)
        same_rank_ok = all(agreeing.get((a, b)) or agreeing.get((b, a))
                           for ss in by_rank.values() for i, a in enumerate(ss) for b in ss[i + 1:])
        members = ",".join(map(str, sorted(by_rank)))
        if len(by_rank) < 2:
            status = "one rank only"
        elif not same_rank_ok:
            status = "ambiguous: two streams of one rank disagree; left out"
        else:
            status = "matched"
        name = f"nccl:{k}" if status == "matched" else f"unmatched:{streams[0]}"
        k += status == "matched"
        for pg in streams:
            renamed[pg] = name if status == "matched" else f"unmatched:{pg}"
        rows.append({"pg": name, "found_by": FOUND_BY["kernel"], "members": members,
                     "captured": len(by_rank), "group_size": None, "status": status})
    out = calls.copy()
    out["pg"] = out["pg"].map(renamed)
    out = out[~out["pg"].str.startswith("unmatched:")]
    # one member per rank: a rank's streams of one group (several GPUs) count as one call
    out = (out.groupby(["rank", "pg", "seq"], as_index=False)
              .agg(op=("op", "first"), bytes=("bytes", "first"), group_size=("group_size", "first"),
                   cpu_start_ns=("cpu_start_ns", "min"), cpu_end_ns=("cpu_end_ns", "max"),
                   kernel_start_ns=("kernel_start_ns", "min"), kernel_end_ns=("kernel_end_ns", "max")))
    return out, pd.DataFrame(rows, columns=GROUP_COLUMNS)
