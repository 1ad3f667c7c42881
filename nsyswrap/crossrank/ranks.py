"""Ranks of the cross-rank analysis when a report holds several rank processes.

A report usually holds one rank (its rank: nsyswrap.reports). One `nsys profile` around
`torchrun` or `mpirun` holds them all: then each process with GPU work or collective
calls is a rank, all on the report's one clock. Ranks are then numbered over the
reports (in rank order) by each process's lowest GPU, then pid: the device order
(the order torchrun's LOCAL_RANK follows when each rank takes its own GPU).

Order of trust: the launcher's manifest, the file name, the `MPI Rank N` nsys records
(nsyswrap.reports), then NCCL's own word: myrank in the process's largest communicator
(the world's) from its ncclCommInitRank payload (nsyswrap.crossrank.nccl_payload), then
the process environment, then the order given / the device order. NCCL's ranks are used
only when every rank not placed by a more trusted source has one and all ranks differ.
"""
from __future__ import annotations

import pandas as pd

MEMBER_COLUMNS = ["report_rank", "pid", "rank", "rank_source"]
TRUSTED = ("manifest", "file name", "MPI rank (nsys)")  # sources NCCL's rank does not override


def member_ranks(processes: pd.DataFrame, callers: pd.DataFrame, reports: list,
                 nccl: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per rank: the report (its rank) and process it is, its rank and where that
    came from. `processes` (rank, pid, device): processes with GPU work; `callers`
    (rank, pid): processes with collective calls; `reports`: nsyswrap.reports.Report;
    `nccl` (rank = report rank, pid, world_rank, nranks): NCCL's ranks (see the module doc)."""
    members = _found_ranks(processes, callers, reports)
    return members if nccl is None or nccl.empty else _nccl_ranks(members, nccl)


def _nccl_ranks(members: pd.DataFrame, nccl: pd.DataFrame) -> pd.DataFrame:
    """`members` with NCCL's world rank where no more trusted source placed the rank."""
    said = members.merge(nccl.rename(columns={"rank": "report_rank"}), on=["report_rank", "pid"], how="left")
    weak = ~said["rank_source"].isin(TRUSTED)
    if not weak.any() or said.loc[weak, "world_rank"].isna().any():
        return members
    out = members.copy()
    out.loc[weak, "rank"] = said.loc[weak, "world_rank"].astype(int).to_numpy()
    out.loc[weak, "rank_source"] = ("NCCL ncclCommInitRank (rank in the world communicator of "
                                    + said.loc[weak, "nranks"].astype(int).astype(str) + " ranks)").to_numpy()
    return out.sort_values("rank").reset_index(drop=True) if out["rank"].is_unique else members


def _found_ranks(processes: pd.DataFrame, callers: pd.DataFrame, reports: list) -> pd.DataFrame:
    """member_ranks from the reports' ranks and, for a report of several rank processes,
    the device order."""
    found = pd.concat([processes[["rank", "pid", "device"]], callers[["rank", "pid"]]], ignore_index=True)
    found = (found.groupby(["rank", "pid"], as_index=False)["device"].min()
             .sort_values(["rank", "device", "pid"], na_position="last"))
    per_report = found.groupby("rank")["pid"].nunique()
    source = {r.rank: r.rank_source for r in reports}
    if per_report.max() <= 1 if len(per_report) else True:
        pids = found.groupby("rank")["pid"].first()
        return pd.DataFrame([{"report_rank": r.rank, "pid": pids.get(r.rank), "rank": r.rank,
                              "rank_source": r.rank_source} for r in reports], columns=MEMBER_COLUMNS)
    rows = []
    for i, row in enumerate(found.itertuples(index=False)):
        several = per_report[row.rank] > 1
        rows.append({"report_rank": row.rank, "pid": row.pid, "rank": i,
                     "rank_source": (f"device order (report of rank {row.rank} holds {per_report[row.rank]} "
                                     "rank processes)") if several else source.get(row.rank, "order")})
    return pd.DataFrame(rows, columns=MEMBER_COLUMNS)


def to_member_ranks(frame: pd.DataFrame, members: pd.DataFrame) -> pd.DataFrame:
    """`frame` (rank = report rank, pid) with rank replaced by the member rank; rows of
    processes that are no rank are dropped. With one process per report: unchanged."""
    if (members["report_rank"] == members["rank"]).all() and members["report_rank"].is_unique:
        return frame
    out = frame.merge(members[["report_rank", "pid", "rank"]].rename(columns={"rank": "member"}),
                      left_on=["rank", "pid"], right_on=["report_rank", "pid"])
    return out.drop(columns=["rank", "report_rank"]).rename(columns={"member": "rank"})
