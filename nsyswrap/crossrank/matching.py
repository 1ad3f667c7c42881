"""Which collective calls of different ranks are one collective, and which ranks form a group.

The calls come from the per-report reduction `xr_rank_keys` in four kinds, taken in this
order of preference when every rank has them: nsyswrap's `coll:` ranges (`range`), NCCL's
own NVTX ranges keyed by the communicator hash of their payload (`payload`, made by
nsyswrap.crossrank.nccl_payload), MPI collectives traced by nsys (`mpi`), and NCCL kernels
per CUDA stream (`kernel`). For the first three the key (pg, seq) is recorded: every
operation is matched by it, all_to_all and send/recv alike (their members end apart; the
key, not the ends, says which calls are one). For kernels it is not: which streams of
different ranks are one group is inferred (nsyswrap.crossrank.streams): true barriers by
equal ends on a host and one clock offset between hosts, exchanges by overlapping kernels
once the clocks are solved. Groups are never merged on a guess: what could be two groups
is reported as ambiguous and left out.

`is_barrier` says which operations end at one instant on all members (the only ones the
clock solve uses, nsyswrap.crossrank.alignment).
"""

from __future__ import annotations

import pandas as pd

from nsyswrap.crossrank.streams import FOUND_BY as STREAM_FOUND_BY
from nsyswrap.crossrank.streams import GROUP_COLUMNS, infer_barrier_groups

KINDS = ("range", "payload", "mpi", "kernel")
FOUND_BY = {
    "range": "nsyswrap coll: ranges",
    "payload": "nccl payload (communicator hash of NCCL's NVTX ranges)",
    "mpi": "MPI ranges (domain MPI)",
    **STREAM_FOUND_BY,
}
P2P = {"send", "recv", "isend", "irecv", "send_recv"}
# operations whose end is a synchronisation point of all members (NCCL's and torch's names,
# MPI's lower-cased without `mpi_`): each member's output needs every member's input and the
# last hop ends on all members at once. Not: all_to_all, send/recv, broadcast, reduce,
# gather, scatter, scan (members end when their own transfers are done).
BARRIER_OPS = frozenset(
    {
        "all_reduce",
        "all_gather",
        "reduce_scatter",
        "barrier",
        "allreduce",
        "allgather",
        "allgatherv",
        "reduce_scatter_block",
        "all_reduce_coalesced",
        "all_gather_into_tensor",
        "reduce_scatter_tensor",
        "_allgather_base",
        "_reduce_scatter_base",
    }
)
KEY_COLUMNS = [
    "rank",
    "pg",
    "seq",
    "op",
    "bytes",
    "group_size",
    "cpu_start_ns",
    "cpu_end_ns",
    "kernel_start_ns",
    "kernel_end_ns",
    "group_ranks",
    "ranks",
    "duplicate",
    "op_differs",
    "bytes_differ",
    "matches",
    "found_by",
    "size_differs",
    "done_ns",
]


def is_barrier(op) -> bool:
    """Whether every member of `op` ends at one instant (see BARRIER_OPS)."""
    return isinstance(op, str) and op.lower() in BARRIER_OPS


def choose_kind(keys: pd.DataFrame) -> str | None:
    """The most trusted kind of key that every rank with collective calls has."""
    with_calls = set(keys["rank"])
    for kind in KINDS:
        if with_calls and set(keys.loc[keys["keyed"] == kind, "rank"]) == with_calls:
            return kind
    counts = keys.groupby("keyed")["rank"].nunique()
    return max(counts.index, key=lambda k: (counts[k], -KINDS.index(k))) if len(counts) else None


def match(
    keys: pd.DataFrame, note: str | None = None, clock_of: dict | None = None
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(keys with verdicts, groups, exchange streams still to be grouped) for the run's
    best kind of key; see the module doc. `note` (nsyswrap.crossrank.nccl_payload.payload_keys):
    what the groups found by NCCL payloads or by a less trusted kind say about the payloads.
    `clock_of`: rank -> (its clock, UTC start since the run's earliest), for kernel keys."""
    kind = choose_kind(keys)
    empty = pd.DataFrame(columns=[*KEY_COLUMNS, "barrier"])
    if kind is None:
        return empty, pd.DataFrame(columns=GROUP_COLUMNS), empty
    calls = keys[keys["keyed"] == kind].drop(columns=["keyed", "pid"]).copy()
    calls["barrier"] = calls["op"].map(is_barrier).astype(bool)
    pending = calls.iloc[:0]
    rows = None
    if kind == "kernel":  # streams per rank (pids repeat across hosts)
        calls["pg"] = "rank" + calls["rank"].astype(int).astype(str) + ":" + calls["pg"]
        barriers = calls.groupby("pg")["barrier"].transform("all")
        pending = calls[~barriers]
        calls, rows = infer_barrier_groups(calls[barriers], clock_of or {})
    calls = verdicts(calls)
    calls["found_by"] = kind
    if "done_ns" not in calls:  # kernel keys (streams) and the sampler's: no completion mark
        calls["done_ns"] = float("nan")
    groups = (
        _recorded_groups(calls, kind) if rows is None else pd.DataFrame(rows, columns=GROUP_COLUMNS)
    )
    if note and KINDS.index(kind) >= KINDS.index("payload"):
        groups["found_by"] = groups["found_by"] + "; " + note
    return calls[[*KEY_COLUMNS, "barrier"]], groups[GROUP_COLUMNS], pending


def verdicts(calls: pd.DataFrame) -> pd.DataFrame:
    """Per call: its group's ranks and whether the key matches on all of them.

    A key differs when a rank has it twice, or the ranks disagree on its op (send and
    recv pair up), payload size (all_to_all sizes may differ, and those of point-to-point
    calls: a receive may record none) or group size (two
    groups under one id). A key matches when every
    rank of its group has it and no key of the group differs at or before it: past a
    divergence the sequences disagree. Groups seen on one rank only are not checked
    (verdict columns empty)."""
    calls = calls.copy()
    if calls.empty:
        return calls.assign(
            group_ranks=[],
            ranks=[],
            duplicate=[],
            op_differs=[],
            bytes_differ=[],
            size_differs=[],
            matches=[],
        )
    calls["group_ranks"] = calls.groupby("pg")["rank"].transform("nunique")
    op_class = calls["op"].where(~calls["op"].isin(P2P), "p2p")
    # all_to_all sizes may differ; a receive may record no bytes (only what it sends)
    ops = calls["op"].astype(str)
    sized = calls["bytes"].where(~ops.str.startswith("all_to_all") & ~ops.isin(P2P))
    per_key = pd.DataFrame(
        {
            "ranks": calls.groupby(["pg", "seq"])["rank"].nunique(),
            "calls": calls.groupby(["pg", "seq"]).size(),
            "ops": op_class.groupby([calls["pg"], calls["seq"]]).nunique(),
            "sizes": sized.groupby([calls["pg"], calls["seq"]]).nunique(),
            "group_sizes": calls.groupby(["pg", "seq"])["group_size"].nunique(),
        }
    ).reset_index()
    per_key["duplicate"] = per_key["calls"] > per_key["ranks"]
    per_key["op_differs"] = per_key["ops"] > 1
    per_key["bytes_differ"] = per_key["sizes"] > 1
    per_key["size_differs"] = per_key["group_sizes"] > 1
    bad = per_key[
        per_key["duplicate"]
        | per_key["op_differs"]
        | per_key["bytes_differ"]
        | per_key["size_differs"]
    ]
    first_bad = bad.groupby("pg")["seq"].min()
    calls = calls.merge(
        per_key[["pg", "seq", "ranks", "duplicate", "op_differs", "bytes_differ", "size_differs"]],
        on=["pg", "seq"],
        how="left",
    )
    limit = calls["pg"].map(first_bad)
    calls["matches"] = (limit.isna() | (calls["seq"] < limit)) & (
        calls["ranks"] == calls["group_ranks"]
    )
    single = calls["group_ranks"] < 2
    for column in ("ranks", "duplicate", "op_differs", "bytes_differ", "size_differs", "matches"):
        calls[column] = calls[column].astype(object).where(~single, None)
    return calls


def _recorded_groups(calls: pd.DataFrame, kind: str) -> pd.DataFrame:
    rows = []
    for pg, g in calls.groupby("pg", sort=False):
        members = sorted(g["rank"].unique())
        size = g["group_size"].dropna()
        rows.append(
            {
                "pg": pg,
                "found_by": FOUND_BY[kind],
                "members": ",".join(map(str, members)),
                "captured": len(members),
                "group_size": int(size.max()) if len(size) else None,
                "status": "matched" if len(members) >= 2 else "one rank only",
                "calls": len(g),
                "left_out": int((~g["matches"].eq(True)).sum()),
            }
        )
    return pd.DataFrame(rows, columns=GROUP_COLUMNS)
