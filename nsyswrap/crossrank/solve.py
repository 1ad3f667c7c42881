"""The run-scope part of the cross-rank analysis, done once per open run in Python over
small per-report frames: match the collective calls (nsyswrap.crossrank.matching), solve
the clocks (nsyswrap.crossrank.alignment) and time every matched collective on the run
clock. The results are run objects of `sql/_run` (the planner calls `build` for them,
once per run and step_pattern; their SQL bodies only declare and type them):

* `xr_keys`: one row per rank and collective call of the chosen kind, with its verdict.
* `xr_groups`: one row per group found: members, how found, captured vs group size.
* `xr_clock`: one row per rank: offset, drift, shift, uncertainty, method, aligned, and
  the report and process it is (nsyswrap.crossrank.ranks: a report may hold several).
* `xr_member_steps`, `xr_member_phases`: the reductions xr_steps and xr_phases by rank.
* `xr_aligned`: one row per aligned rank and matched collective, in run time (ns since
  the reference rank's aligned session start): arrival, end, wait, lag, last rank, skew,
  transfer, step, and whether the skew exceeds the alignment uncertainty.

Reports of different runs (`unrelated`) are never matched; the report refuses them.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from nsyswrap.crossrank.alignment import CLOCK_COLUMNS, solve_clocks
from nsyswrap.crossrank.matching import GROUP_COLUMNS, KEY_COLUMNS, match
from nsyswrap.crossrank.nccl_payload import payload_keys
from nsyswrap.crossrank.ranks import MEMBER_COLUMNS, run_members, to_member_ranks
from nsyswrap.errors import NsysWrapError

RUN_SCOPE_TABLES = frozenset({"xr_keys", "xr_groups", "xr_clock", "xr_aligned", "xr_member_steps",
                              "xr_member_phases"})
MEMBER_EXTRA = ["report_rank", "pid", "rank_source"]
PHASE_COLUMNS = ["rank", "pid", "tid", "step", "phase", "start_ns", "end_ns", "host_ns", "gpu_ns"]
UNRELATED_GAP_NS = 600 * 10**9  # reports whose spans are further apart than this are other runs
TYPES = {
    "rank": "INTEGER", "pg": "VARCHAR", "seq": "BIGINT", "op": "VARCHAR", "bytes": "BIGINT",
    "group_size": "BIGINT", "cpu_start_ns": "BIGINT", "cpu_end_ns": "BIGINT", "kernel_start_ns": "BIGINT",
    "kernel_end_ns": "BIGINT", "group_ranks": "BIGINT", "ranks": "BIGINT", "duplicate": "BOOLEAN",
    "op_differs": "BOOLEAN", "bytes_differ": "BOOLEAN", "matches": "BOOLEAN", "found_by": "VARCHAR",
    "size_differs": "BOOLEAN",
    "members": "VARCHAR", "captured": "BIGINT", "status": "VARCHAR", "utc_epoch_ns": "BIGINT",
    "offset_ns": "BIGINT", "drift_ppb": "DOUBLE", "shift_ns": "BIGINT", "uncertainty_ns": "BIGINT",
    "spread_ns": "BIGINT", "max_residual_ns": "BIGINT", "collectives": "BIGINT", "source": "VARCHAR",
    "method": "VARCHAR", "aligned": "BOOLEAN", "host": "VARCHAR", "on_gpu": "BOOLEAN", "step": "BIGINT",
    "start_ns": "BIGINT", "end_ns": "BIGINT", "wait_ns": "BIGINT", "lag_ns": "BIGINT",
    "last_rank": "INTEGER", "skew_ns": "BIGINT", "transfer_ns": "BIGINT", "threshold_ns": "BIGINT",
    "significant": "BOOLEAN", "spans_hosts": "BOOLEAN", "report_rank": "INTEGER", "pid": "BIGINT",
    "rank_source": "VARCHAR", "tid": "BIGINT", "phase": "VARCHAR", "host_ns": "BIGINT", "gpu_ns": "BIGINT",
}
ALIGNED_COLUMNS = ["pg", "seq", "op", "bytes", "group_size", "on_gpu", "rank", "step", "start_ns", "end_ns",
                   "wait_ns", "lag_ns", "last_rank", "skew_ns", "transfer_ns", "threshold_ns", "significant"]


def build(run, name: str, params: dict, table: str) -> None:
    """Planner builder (nsyswrap.planner.python_built) of run object `name` (one of
    RUN_SCOPE_TABLES) into table `table`: the solve runs once per run and step_pattern
    (the only parameter of what it reads), its six frames kept on the run."""
    key = params.get("step_pattern", "step:%")
    if key not in run.solved or not run.cached:  # hand-made tables may change
        run.solved[key] = solved(run)
    _table(run, table, run.solved[key][name])


def solved(run) -> dict[str, pd.DataFrame]:
    """The run-scope frames, by table name, over the objects bound on `run` now."""
    keys, payload_note = payload_keys(run.df("SELECT * FROM xr_rank_keys"), run.df("SELECT * FROM payload_schemas"))
    members = run_members(run)[MEMBER_COLUMNS].drop_duplicates(ignore_index=True)
    reports = _sessions(run)
    run.unrelated = None if run.allow_unrelated else unrelated(run, reports.rename(columns={"report_rank": "rank"}))
    if run.unrelated is not None:
        keys = keys.iloc[:0]  # nothing is matched across runs
    keys = to_member_ranks(keys, members)
    calls, groups = match(keys, payload_note)
    matched = calls[calls["matches"].eq(True)].copy()
    ended = matched["kernel_end_ns"].notna()  # (a vectorized "all", not a Python call per group)
    matched["on_gpu"] = ended.groupby([matched["pg"], matched["seq"]]).transform("all").astype(bool)
    matched["start_ns"] = matched["kernel_start_ns"].where(matched["on_gpu"], matched["cpu_start_ns"])
    matched["end_ns"] = matched["kernel_end_ns"].where(matched["on_gpu"], matched["cpu_end_ns"])
    clock = member_clocks(matched, members, reports.fillna({"utc_epoch_ns": 0}),
                          tie_hosts=run.unrelated is None)
    utc = dict(zip(reports["report_rank"], reports["utc_epoch_ns"]))
    clock["utc_epoch_ns"] = clock["report_rank"].map(utc)
    steps = to_member_ranks(run.df("SELECT rank, pid, step, start_ns, end_ns FROM xr_steps"), members)
    phases = to_member_ranks(run.df("SELECT * EXCLUDE (report) FROM xr_phases"), members)
    aligned = time_collectives(matched, clock, steps)
    hosts = dict(zip(clock["rank"], clock["host"]))
    groups = groups.copy()
    groups["spans_hosts"] = [len({hosts.get(int(m)) for m in str(ms).split(",") if m}) > 1
                             for ms in groups["members"]]
    out = {}
    out["xr_keys"] = calls[KEY_COLUMNS]
    out["xr_groups"] = groups[[*GROUP_COLUMNS, "spans_hosts"]]
    out["xr_clock"] = clock[[*CLOCK_COLUMNS, *MEMBER_EXTRA]]
    out["xr_aligned"] = aligned[ALIGNED_COLUMNS]
    out["xr_member_steps"] = steps[["rank", "step", "start_ns", "end_ns"]]
    out["xr_member_phases"] = phases[PHASE_COLUMNS]
    return out


def _sessions(run) -> pd.DataFrame:
    """Each report's rank, UTC session start and host. A report that records no session
    start (TARGET_INFO_SESSION_START_TIME) is one clock alone, never set beside others."""
    reports = run.df("SELECT rank AS report_rank, utc_epoch_ns, host FROM session ORDER BY rank")
    missing = reports.loc[reports["utc_epoch_ns"].isna(), "report_rank"]
    if len(missing) and len(reports) > 1:
        path = next((r.path for r in run.reports if r.rank == int(missing.iloc[0])), "report")
        raise NsysWrapError(path, "records no session start time (TARGET_INFO_SESSION_START_TIME), "
                            "so its clock cannot be set beside the other reports'",
                            "export it again with nsys export, or analyse it on its own")
    return reports


def member_clocks(matched: pd.DataFrame, members: pd.DataFrame, reports: pd.DataFrame,
                  tie_hosts: bool) -> pd.DataFrame:
    """The clock table per rank: one clock per report (its processes share it), solved over
    the matched collectives of all ranks (nsyswrap.crossrank.alignment)."""
    report_of = dict(zip(members["rank"], members["report_rank"]))
    per_clock = matched.assign(rank=matched["rank"].map(report_of))
    clocks, _ = solve_clocks(per_clock, reports.rename(columns={"report_rank": "rank"}), tie_hosts)
    out = members.merge(clocks.drop(columns=["rank"]).assign(report_rank=clocks["rank"]), on="report_rank")
    shared = out.groupby("report_rank")["rank"].transform("size") > 1
    out.loc[shared, "method"] = out.loc[shared, "method"] + "; its report's processes share one clock"
    return out.sort_values("rank").reset_index(drop=True)


def _table(run, name: str, frame: pd.DataFrame) -> None:
    con = run.connection
    view = f"nsyswrap_frame_{name}"
    con.register(view, frame.astype(object).where(frame.notna(), None) if len(frame) else frame)
    columns = ", ".join(f'CAST("{c}" AS {TYPES[c]}) AS "{c}"' for c in frame.columns)
    con.execute(f'CREATE OR REPLACE TABLE "{name}" AS SELECT {columns} FROM {view}')
    con.unregister(view)


def unrelated(run, sessions: pd.DataFrame) -> NsysWrapError | None:
    """The one-line error when the reports cannot be one run: capture spans (UTC) far
    apart. The cross-rank section raises it; queries see every rank unaligned."""
    if len(sessions) < 2:
        return None
    ends = run.df("SELECT rank, max(end_ns) AS end_ns FROM kernels GROUP BY rank")
    span = sessions.merge(ends, on="rank", how="left").fillna({"end_ns": 0}).sort_values("utc_epoch_ns")
    span["stop"] = span["utc_epoch_ns"] + span["end_ns"].astype("int64")
    reach = span["stop"].cummax().shift()
    gaps = span["utc_epoch_ns"] - reach
    far = gaps[gaps > UNRELATED_GAP_NS]
    if len(far):
        i = far.index[0]
        hours = far.iloc[0] / 3.6e12
        report = next((r.path for r in run.reports if r.rank == int(span.loc[i, "rank"])), "report")
        return NsysWrapError(report, f"starts {hours:,.1f} h after the other reports ended: they are not "
                            "one run", "analyse each run on its own (pass --allow-unrelated to insist)")
    return None


def to_run_time(frame: pd.DataFrame, clock: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """`columns` (session ns) of `frame` (with rank) on the run clock, the drift term
    rounded half to even (the rule of the SQL macro run_ns); unaligned ranks dropped."""
    out = frame.merge(clock.loc[clock["aligned"], ["rank", "shift_ns", "drift_ppb"]], on="rank")
    for c in columns:
        t = out[c].astype("int64")
        out[c] = t + out["shift_ns"].astype("int64") + np.round(
            t.to_numpy(np.float64) * out["drift_ppb"].to_numpy(np.float64) / 1e9).astype(np.int64)
    return out.drop(columns=["shift_ns", "drift_ppb"])


def time_collectives(matched: pd.DataFrame, clock: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """Per aligned rank and matched collective, in run time: see the module doc."""
    if matched.empty:
        return pd.DataFrame(columns=ALIGNED_COLUMNS)
    m = matched.copy()
    m["rank"] = m["rank"].astype(int)
    m["step"] = _step_of(m, steps)
    m["step"] = m.groupby(["pg", "seq"])["step"].transform("min")
    m = to_run_time(m, clock, ["start_ns", "end_ns"])
    thr = m["rank"].map(dict(zip(clock["rank"], clock["uncertainty_ns"]))).fillna(0)
    g = m.groupby(["pg", "seq"])
    last_start = g["start_ns"].transform("max")
    is_latest = m["start_ns"] == last_start
    m["last_rank"] = m["rank"].where(is_latest).groupby([m["pg"], m["seq"]]).transform("min").astype(int)
    m["skew_ns"] = last_start - g["start_ns"].transform("min")
    m["transfer_ns"] = (m["end_ns"] - m["start_ns"]).groupby([m["pg"], m["seq"]]).transform("min")
    m["wait_ns"] = (np.minimum(last_start, m["end_ns"]) - m["start_ns"]).clip(lower=0)
    median = g["start_ns"].transform("median")
    m["lag_ns"] = m["start_ns"] - np.round(median).astype("int64")
    m["threshold_ns"] = (2 * thr.groupby([m["pg"], m["seq"]]).transform("max")).astype("int64")
    m["significant"] = m["skew_ns"] > m["threshold_ns"]
    m["members"] = g["rank"].transform("size")
    m = m[m["members"] >= 2]
    return m[ALIGNED_COLUMNS]


def _step_of(m: pd.DataFrame, steps: pd.DataFrame) -> pd.Series:
    """The `step:<i>` range of the same rank that holds the call's CPU start, else NaN: the
    latest started by then, of ranges starting together the lowest step (as step_regions)."""
    out = pd.Series(np.nan, index=m.index)
    if steps.empty:
        return out
    left = m[["rank", "cpu_start_ns"]].dropna().astype("int64").reset_index()
    # merge_asof takes the last of equal starts: there, the lowest step
    right = steps.astype({"rank": "int64", "start_ns": "int64"}).sort_values(
        ["start_ns", "step"], ascending=[True, False], kind="stable")
    hit = pd.merge_asof(left.sort_values("cpu_start_ns"), right, left_on="cpu_start_ns",
                        right_on="start_ns", by="rank", direction="backward")
    hit = hit[hit["cpu_start_ns"] <= hit["end_ns"]]
    out.loc[hit["index"].to_numpy()] = hit["step"].to_numpy()
    return out
