"""Ranks of the cross-rank analysis when a report holds several rank processes.

A report usually holds one rank (its rank: nsyswrap.storage.reports). One `nsys profile` around
`torchrun` or `mpirun` holds them all: then each process with GPU work or collective
calls is a rank, all on the report's one clock. Ranks are then numbered over the
reports (in rank order) by each process's lowest GPU, then pid: the device order
(the order torchrun's LOCAL_RANK follows when each rank takes its own GPU).

Order of trust: the launcher's manifest, the file name, the `MPI Rank N` nsys records
(nsyswrap.storage.reports), then NCCL's own word: myrank in the process's largest communicator
(the world's) from its ncclCommInitRank payload (nsyswrap.crossrank.nccl_payload), then
the process environment, then the order given / the device order. NCCL's ranks are used
only when every rank not placed by a more trusted source has one and all ranks differ.

This is the run's one rank identity: the run objects `xr_members` and `rank_map` (built
here, `build`), with which the engine labels every per-report result
(nsyswrap.engine.rank_labels). A per-device row (ledger, gaps, steps, ...) carries the rank of
the process that ran the most GPU activities on that device (ties: the lowest rank); a
row of one process, that process's rank; a row of neither, the lowest rank of its report.
"""

from __future__ import annotations

import pandas as pd

from nsyswrap.crossrank.nccl_payload import payload_keys, world_ranks
from nsyswrap.engine.queries import object_rows, run_module

MEMBER_COLUMNS = ["report_rank", "pid", "rank", "rank_source"]
TRUSTED = ("manifest", "file name", "MPI rank (nsys)")  # sources NCCL's rank does not override


def member_ranks(
    processes: pd.DataFrame, callers: pd.DataFrame, reports: list, nccl: pd.DataFrame | None = None
) -> pd.DataFrame:
    """One row per rank: the report (its rank) and process it is, its rank and where that
    came from. `processes` (rank, pid, device): processes with GPU work; `callers`
    (rank, pid): processes with collective calls; `reports`: nsyswrap.storage.reports.Report;
    `nccl` (rank = report rank, pid, world_rank, nranks): NCCL's ranks (see the module doc)."""
    members = _found_ranks(processes, callers, reports)
    return members if nccl is None or nccl.empty else _nccl_ranks(members, nccl)


def _nccl_ranks(members: pd.DataFrame, nccl: pd.DataFrame) -> pd.DataFrame:
    """`members` with NCCL's world rank where no more trusted source placed the rank."""
    said = members.merge(
        nccl.rename(columns={"rank": "report_rank"}), on=["report_rank", "pid"], how="left"
    )
    weak = ~said["rank_source"].isin(TRUSTED)
    if not weak.any() or said.loc[weak, "world_rank"].isna().any():
        return members
    out = members.copy()
    out.loc[weak, "rank"] = said.loc[weak, "world_rank"].astype(int).to_numpy()
    out.loc[weak, "rank_source"] = (
        "NCCL ncclCommInitRank (rank in the world communicator of "
        + said.loc[weak, "nranks"].astype(int).astype(str)
        + " ranks)"
    ).to_numpy()
    return out.sort_values("rank").reset_index(drop=True) if out["rank"].is_unique else members


def _found_ranks(processes: pd.DataFrame, callers: pd.DataFrame, reports: list) -> pd.DataFrame:
    """member_ranks from the reports' ranks and, for a report of several rank processes,
    the device order."""
    found = pd.concat(
        [processes[["rank", "pid", "device"]], callers[["rank", "pid"]]], ignore_index=True
    )
    found = (
        found.groupby(["rank", "pid"], as_index=False)["device"]
        .min()
        .sort_values(["rank", "device", "pid"], na_position="last")
    )
    per_report = found.groupby("rank")["pid"].nunique()
    source = {r.rank: r.rank_source for r in reports}
    if per_report.max() <= 1 if len(per_report) else True:
        pids = found.groupby("rank")["pid"].first()
        return pd.DataFrame(
            [
                {
                    "report_rank": r.rank,
                    "pid": pids.get(r.rank),
                    "rank": r.rank,
                    "rank_source": r.rank_source,
                }
                for r in reports
            ],
            columns=MEMBER_COLUMNS,
        )
    rows = []
    for i, row in enumerate(found.itertuples(index=False)):
        several = per_report[row.rank] > 1
        rows.append(
            {
                "report_rank": row.rank,
                "pid": row.pid,
                "rank": i,
                "rank_source": (
                    f"device order (report of rank {row.rank} holds {per_report[row.rank]} "
                    "rank processes)"
                )
                if several
                else source.get(row.rank, "order"),
            }
        )
    return pd.DataFrame(rows, columns=MEMBER_COLUMNS)


def to_member_ranks(frame: pd.DataFrame, members: pd.DataFrame) -> pd.DataFrame:
    """`frame` (rank = report rank, pid) with rank replaced by the member rank; rows of
    processes that are no rank are dropped. With one process per report: unchanged."""
    if _each_report_its_rank(members):
        return frame
    out = frame.merge(
        members[["report_rank", "pid", "rank"]].rename(columns={"rank": "member"}),
        left_on=["rank", "pid"],
        right_on=["report_rank", "pid"],
    )
    return out.drop(columns=["rank", "report_rank"]).rename(columns={"member": "rank"})


MAP_COLUMNS = ["report_rank", "pid", "device", "rank"]


def build(inputs) -> dict[str, pd.DataFrame]:
    """Builder of the run objects `xr_members` and `rank_map` (their headers name it, see
    nsyswrap.engine.builders). xr_members: `member_ranks` with each rank's GPU activities per
    device (device NULL for a rank without GPU work). rank_map: how the engine labels a
    per-report result with the run's ranks (see the module doc), none when every report is
    one rank, its own: by (report_rank, pid), else (report_rank, device: the rank of the
    process that ran the most activities on it, ties the lowest), else report_rank (its
    lowest rank; pid and device NULL)."""
    processes = inputs.frame("xr_processes", ["rank", "pid", "device", "activities"])
    keys, schemas = inputs.frame("xr_rank_keys"), inputs.frame("payload_schemas")
    members = member_ranks(
        processes, payload_keys(keys, schemas)[0], inputs.reports, world_ranks(keys, schemas)
    )
    devices = processes.rename(columns={"rank": "report_rank"})
    members = members.merge(devices, on=["report_rank", "pid"], how="left")
    return {"xr_members": members, "rank_map": rank_map(members)}


def rank_map(members: pd.DataFrame) -> pd.DataFrame:
    """The rows of rank_map (see `build`) for `members` (xr_members' rows)."""
    if _each_report_its_rank(members):
        return pd.DataFrame(columns=MAP_COLUMNS)
    by_pid = members.dropna(subset=["pid"]).drop_duplicates(["report_rank", "pid"])
    used = members.dropna(subset=["device"]).sort_values(
        ["activities", "rank"], ascending=[False, True]
    )
    by_device = used.drop_duplicates(["report_rank", "device"])
    by_report = members.groupby("report_rank", as_index=False)["rank"].min()
    parts = [
        by_pid[["report_rank", "pid", "rank"]],
        by_device[["report_rank", "device", "rank"]],
        by_report,
    ]
    return pd.concat(parts, ignore_index=True)[MAP_COLUMNS]


def rank_rows(run, step_pattern: str) -> list[dict]:
    """The run's ranks as the report's JSON lists them: rank, report (its rank), pid
    (null: a report without GPU work or collective calls) and where the rank came from,
    as crossrank.clock_offsets has them (computed once for the cross-rank section)."""
    ranks = run_module(run, "crossrank.clock_offsets", step_pattern=step_pattern)
    return [
        {
            "rank": int(r.rank),
            "report_rank": int(r.report_rank),
            "pid": None if pd.isna(r.pid) else int(r.pid),
            "rank_source": r.rank_source,
        }
        for r in ranks.sort_values("rank").itertuples(index=False)
    ]


def ranks_by_report(run) -> dict[int, list[int]]:
    """Report rank -> the ranks it holds (its own alone when each report is one rank)."""
    if object_rows(run, "rank_map").empty:
        return {r.rank: [r.rank] for r in run.reports}
    members = object_rows(run, "xr_members")
    return {
        r.rank: sorted(set(members.loc[members["report_rank"] == r.rank, "rank"].astype(int)))
        for r in run.reports
    }


def _each_report_its_rank(members: pd.DataFrame) -> bool:
    ranks = members.drop_duplicates(["report_rank", "rank"])
    return bool((ranks["report_rank"] == ranks["rank"]).all() and ranks["report_rank"].is_unique)
