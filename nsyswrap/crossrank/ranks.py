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

This is the run's one rank identity: every result labels its rows with it
(`label_ranks`). A per-device row (ledger, gaps, steps, ...) carries the rank of the
process that ran the most GPU activities on that device (ties: the lowest rank); a row
of one process, that process's rank; a row of neither, the lowest rank of its report.
"""
from __future__ import annotations

import pandas as pd

from nsyswrap import planner
from nsyswrap.crossrank.nccl_payload import payload_keys, world_ranks

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
    if _each_report_its_rank(members):
        return frame
    out = frame.merge(members[["report_rank", "pid", "rank"]].rename(columns={"rank": "member"}),
                      left_on=["rank", "pid"], right_on=["report_rank", "pid"])
    return out.drop(columns=["rank", "report_rank"]).rename(columns={"member": "rank"})


def run_members(run) -> pd.DataFrame:
    """`member_ranks` of an open run, with each rank's GPU activities per device
    (report_rank, pid, rank, rank_source, device, activities; device NULL for a rank
    without GPU work). Computed once per run of cached reports."""
    if "members" in run.ranks and run.cached:
        return run.ranks["members"]
    for name in ("xr_processes", "xr_rank_keys"):
        planner.prepare(run, name, {})
        planner.bind(run, name, {})
    processes = run.df("SELECT rank, pid, device, activities FROM xr_processes")
    keys = run.df("SELECT * FROM xr_rank_keys")
    schemas = run.df("SELECT * FROM payload_schemas")
    members = member_ranks(processes, payload_keys(keys, schemas)[0], run.reports, world_ranks(keys, schemas))
    devices = processes.rename(columns={"rank": "report_rank"})
    run.ranks["members"] = members.merge(devices, on=["report_rank", "pid"], how="left")
    return run.ranks["members"]


def rank_rows(run, step_pattern: str) -> list[dict]:
    """The run's ranks as the report's JSON lists them: rank, report (its rank), pid
    (null: a report without GPU work or collective calls) and where the rank came from,
    as crossrank.clock_offsets has them (computed once for the cross-rank section)."""
    from nsyswrap.queries import run_module  # (nsyswrap.queries imports this module)

    ranks = run_module(run, "crossrank.clock_offsets", step_pattern=step_pattern)
    return [{"rank": int(r.rank), "report_rank": int(r.report_rank),
             "pid": None if pd.isna(r.pid) else int(r.pid), "rank_source": r.rank_source}
            for r in ranks.sort_values("rank").itertuples(index=False)]


def label_ranks(run, frame: pd.DataFrame) -> pd.DataFrame:
    """A per-report result (`rank` = report rank) with each row's rank the run's rank
    identity (see the module doc): by `pid` where the row has one of a rank, else by
    `device`, else the report's lowest rank. Unchanged when every report is one rank."""
    if "rank" not in frame or one_rank_each(run):
        return frame
    by_pid, by_device, by_report = _maps(run)
    keys = list(zip(frame["rank"], frame["pid"] if "pid" in frame else [None] * len(frame),
                    frame["device"] if "device" in frame else [None] * len(frame)))
    ranks = [by_pid.get((r, p), by_device.get((r, d), by_report.get(r, r))) for r, p, d in keys]
    return frame.assign(rank=pd.Series(ranks, index=frame.index, dtype=frame["rank"].dtype))


def rank_sql(run, columns: list[str]) -> tuple[str, dict]:
    """`label_ranks` as a SQL expression over a per-report result of `columns` (and its
    bound values): "rank" itself when every report is one rank."""
    if "rank" not in columns or one_rank_each(run):
        return '"rank"', {}
    by_pid, by_device, by_report = _maps(run)
    cases, values = [], {}
    for column, mapping in (("pid", by_pid), ("device", by_device)):
        if column not in columns:
            continue
        for i, ((report, key), rank) in enumerate(mapping.items()):
            cases.append(f'WHEN "rank" = $r_{column}{i} AND "{column}" = $k_{column}{i} THEN $to_{column}{i}')
            values |= {f"r_{column}{i}": report, f"k_{column}{i}": key, f"to_{column}{i}": rank}
    for i, (report, rank) in enumerate(by_report.items()):
        cases.append(f'WHEN "rank" = $r_report{i} THEN $to_report{i}')
        values |= {f"r_report{i}": report, f"to_report{i}": rank}
    return f'CAST(CASE {" ".join(cases)} ELSE "rank" END AS INTEGER)', values


def rank_maps(members: pd.DataFrame) -> tuple[dict, dict, dict]:
    """(report_rank, pid) -> rank, (report_rank, device) -> rank of the process that ran
    the most activities on the device (ties: lowest rank), report_rank -> lowest rank."""
    by_pid = {(int(r.report_rank), int(r.pid)): int(r.rank)
              for r in members.dropna(subset=["pid"]).itertuples(index=False)}
    used = members.dropna(subset=["device"]).sort_values(["activities", "rank"], ascending=[False, True])
    by_device = {(int(r.report_rank), int(r.device)): int(r.rank)
                 for r in used.drop_duplicates(["report_rank", "device"]).itertuples(index=False)}
    by_report = {int(r): int(k) for r, k in members.groupby("report_rank")["rank"].min().items()}
    return by_pid, by_device, by_report


def ranks_by_report(run) -> dict[int, list[int]]:
    """Report rank -> the ranks it holds (its own alone when each report is one rank)."""
    if one_rank_each(run):
        return {r.rank: [r.rank] for r in run.reports}
    members = run_members(run)
    return {r.rank: sorted(set(members.loc[members["report_rank"] == r.rank, "rank"].astype(int)))
            for r in run.reports}


def _maps(run) -> tuple[dict, dict, dict]:
    """`rank_maps` of the run, once per run of cached reports."""
    if "maps" not in run.ranks or not run.cached:
        run.ranks["maps"] = rank_maps(run_members(run))
    return run.ranks["maps"]


def one_rank_each(run) -> bool:
    """Whether every report is one rank, its own: told from the views when no report has
    GPU work or NVTX ranges of two processes and NCCL cannot renumber the ranks (each
    placed by a trusted source, or no ncclCommInitRank range), else from `run_members`."""
    if "one_each" not in run.ranks or not run.cached:
        seen = run.df("SELECT rank, count(DISTINCT pid) AS n, bool_or(nccl) AS nccl FROM ("
                      " SELECT rank, pid, false AS nccl FROM kernels UNION ALL"
                      " SELECT rank, pid, domain = 'NCCL' AND text LIKE 'ncclCommInit%' FROM nvtx"
                      ") GROUP BY rank")
        trusted = all(r.rank_source in TRUSTED for r in run.reports) or not seen["nccl"].any()
        if trusted and (seen["n"] <= 1).all():
            run.ranks["one_each"] = True
        else:
            run.ranks["one_each"] = _each_report_its_rank(run_members(run))
    return run.ranks["one_each"]


def _each_report_its_rank(members: pd.DataFrame) -> bool:
    ranks = members.drop_duplicates(["report_rank", "rank"])
    return bool((ranks["report_rank"] == ranks["rank"]).all() and ranks["report_rank"].is_unique)
