"""The run-scope part of the cross-rank analysis, done once per open run in Python over
small per-report frames: match the collective calls (nsyswrap.crossrank.matching), solve
the clocks over the true barriers (nsyswrap.crossrank.alignment), group the exchange
streams of a kernel-only run on the solved clocks (nsyswrap.crossrank.streams) and time
every matched collective on the run clock. The results are run objects of `sql/_run` whose
headers name `build` as their builder (nsyswrap.engine.builders): one call makes all six, once per
run and step_pattern:

* `xr_keys`: one row per rank and collective call of the chosen kind, with its verdict.
* `xr_groups`: one row per group found: members, how found, captured vs group size, its
  calls and how many were left out.
* `xr_clock`: one row per rank: offset, drift, shift, jump, uncertainty, method, aligned,
  its clock (host) and the report and process it is (nsyswrap.crossrank.ranks: a report
  may hold several).
* `xr_member_steps`, `xr_member_phases`: the reductions xr_steps and xr_phases by rank.
* `xr_aligned`: one row per aligned rank and matched collective, in run time (ns since
  the reference rank's aligned session start): arrival (kernel start), end, wait, lag,
  last rank, skew, transfer, step, whether it is a true barrier (members end together)
  and whether the skew exceeds the alignment uncertainty. All_to_all and send/recv
  members are here too, each with its own end.

Reports of different runs (`unrelated`) are never matched; the report refuses them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from nsyswrap.crossrank.alignment import CLOCK_COLUMNS, host_clocks, solve_clocks, to_run_time
from nsyswrap.crossrank.matching import KEY_COLUMNS, match, verdicts
from nsyswrap.crossrank.nccl_payload import payload_keys
from nsyswrap.crossrank.p2p_clocks import bind_unaligned
from nsyswrap.crossrank.ranks import MEMBER_COLUMNS, to_member_ranks
from nsyswrap.crossrank.streams import GROUP_COLUMNS, group_exchanges
from nsyswrap.errors import NsysWrapError

RUN_SCOPE_TABLES = frozenset(
    {"xr_keys", "xr_groups", "xr_clock", "xr_aligned", "xr_member_steps", "xr_member_phases"}
)
"""The run objects of the solve's frames (`build`; with xr_unrelated, its verdict): what
the report over sample files makes from samples instead (nsyswrap.sample.objects)."""
MEMBER_EXTRA = ["report_rank", "pid", "rank_source"]
PHASE_COLUMNS = ["rank", "pid", "tid", "step", "phase", "start_ns", "end_ns", "host_ns", "gpu_ns"]
UNRELATED_GAP_NS = 600 * 10**9  # reports whose spans are further apart than this are other runs
ALIGNED_COLUMNS = [
    "pg",
    "seq",
    "op",
    "bytes",
    "group_size",
    "on_gpu",
    "rank",
    "step",
    "start_ns",
    "end_ns",
    "wait_ns",
    "lag_ns",
    "last_rank",
    "skew_ns",
    "transfer_ns",
    "threshold_ns",
    "significant",
    "barrier",
]


def build(inputs) -> dict[str, pd.DataFrame]:
    """Builder of the run objects of the solve (their headers name it, see
    nsyswrap.engine.builders): the six frames, and xr_unrelated (why the reports are not one run,
    if they are not), by object name, from what `inputs` declares."""
    rank_keys = inputs.frame("xr_rank_keys")
    keys, payload_note = payload_keys(rank_keys, inputs.frame("payload_schemas"))
    members = inputs.frame("xr_members", MEMBER_COLUMNS).drop_duplicates(ignore_index=True)
    reports = _sessions(inputs)
    ends = (
        inputs.frame("xr_processes", ["rank", "last_end_ns"])
        .groupby("rank", as_index=False)["last_end_ns"]
        .max()
        .rename(columns={"last_end_ns": "end_ns"})
    )
    refused = (
        None
        if inputs.allow_unrelated
        else unrelated(inputs.reports, reports.rename(columns={"report_rank": "rank"}), ends)
    )
    if refused is not None:
        keys = keys.iloc[:0]  # nothing is matched across runs
    keys = to_member_ranks(keys, members)
    tie_hosts = refused is None
    known = reports.fillna({"utc_epoch_ns": 0})  # one report without a start: its own clock
    calls, groups, pending = match(keys, payload_note, clock_of(members, known, tie_hosts))
    matched = timed(calls[calls["matches"].eq(True)])
    report_steps = inputs.frame("xr_steps", ["rank", "pid", "step", "start_ns", "end_ns"])
    report_phases = inputs.frame("xr_phases").drop(columns="report")
    barriers = matched.loc[matched["barrier"].astype(bool)]
    events = report_events(rank_keys, report_steps, report_phases)
    clock = member_clocks(barriers, members, known, tie_hosts, events)
    utc = dict(zip(reports["report_rank"], reports["utc_epoch_ns"]))
    clock["utc_epoch_ns"] = clock["report_rank"].map(utc)

    def solve_part(ranks: list[int]) -> pd.DataFrame:
        """The clocks of `ranks` solved among themselves (nsyswrap.crossrank.p2p_clocks)."""
        mine = members[members["rank"].isin(ranks)]
        part = member_clocks(
            barriers[barriers["rank"].isin(ranks)],
            mine,
            known[known["report_rank"].isin(mine["report_rank"])],
            tie_hosts,
            events,
        )
        return part.assign(utc_epoch_ns=part["report_rank"].map(utc))

    clock, paired, within = bind_unaligned(clock, matched, pending, solve_part)
    if not pending.empty:
        x_calls, x_groups = exchanges(pending, clock, paired, within)
        calls = pd.concat([calls, x_calls[calls.columns]], ignore_index=True)
        groups = pd.concat([groups, x_groups], ignore_index=True)
        x_matched = timed(x_calls[x_calls["matches"].eq(True)])
        matched = pd.concat([matched, x_matched], ignore_index=True)
    steps = to_member_ranks(report_steps, members)
    phases = to_member_ranks(report_phases, members)
    lookup = to_member_ranks(
        inputs.frame("step_lookup", ["rank", "pid", "step", "start_ns", "region_end_ns"]), members
    )
    aligned = time_collectives(matched, clock, lookup)
    hosts = dict(zip(clock["rank"], clock["host"]))
    groups = groups.copy()
    groups["spans_hosts"] = [
        len({hosts.get(int(m)) for m in str(ms).split(",") if m}) > 1 for ms in groups["members"]
    ]
    return {
        "xr_keys": calls[KEY_COLUMNS],
        "xr_groups": groups[[*GROUP_COLUMNS, "spans_hosts"]],
        "xr_clock": clock[[*CLOCK_COLUMNS, *MEMBER_EXTRA]],
        "xr_aligned": aligned[ALIGNED_COLUMNS],
        "xr_member_steps": steps[["rank", "step", "start_ns", "end_ns"]],
        "xr_member_phases": phases[PHASE_COLUMNS],
        "xr_unrelated": pd.DataFrame(
            []
            if refused is None
            else [{"report": str(refused.where), "problem": refused.problem, "fix": refused.fix}],
            columns=["report", "problem", "fix"],
        ),
    }


def _sessions(inputs) -> pd.DataFrame:
    """Each report's rank (`report_rank`), UTC session start and host. A report that records
    no session start (TARGET_INFO_SESSION_START_TIME) is one clock alone, never set beside
    others."""
    reports = (
        inputs.frame("session", ["rank", "utc_epoch_ns", "host"])
        .sort_values("rank", ignore_index=True)
        .rename(columns={"rank": "report_rank"})
    )
    missing = reports.loc[reports["utc_epoch_ns"].isna(), "report_rank"]
    if len(missing) and len(reports) > 1:
        path = next((r.path for r in inputs.reports if r.rank == int(missing.iloc[0])), "report")
        raise NsysWrapError(
            path,
            "records no session start time (TARGET_INFO_SESSION_START_TIME), "
            "so its clock cannot be set beside the other reports'",
            "export it again with nsys export, or analyse it on its own",
        )
    return reports


def clock_of(
    members: pd.DataFrame, reports: pd.DataFrame, tie_hosts: bool
) -> dict[int, tuple[str, int]]:
    """rank -> (the clock its report reads: its host's, else its own; its report's UTC start
    less the run's earliest), for the kernel-only group inference."""
    sessions = reports.rename(columns={"report_rank": "rank"})
    name = {r: c.name for c in host_clocks(sessions, tie_hosts) for r in c.reports}
    utc = dict(zip(sessions["rank"], sessions["utc_epoch_ns"].astype("int64")))
    first = min(utc.values(), default=0)
    return {
        int(m): (name[int(r)], int(utc[int(r)] - first))
        for m, r in zip(members["rank"], members["report_rank"])
    }


def timed(matched: pd.DataFrame) -> pd.DataFrame:
    """Matched calls with on_gpu (every member has its kernels) and the start and end they
    are timed by: the kernels' when on_gpu, else the ranges' (an asynchronous call's end:
    its completion mark)."""
    matched = matched.copy()
    ended = matched["kernel_end_ns"].notna()  # (a vectorized "all", not a Python call per group)
    matched["on_gpu"] = ended.groupby([matched["pg"], matched["seq"]]).transform("all").astype(bool)
    on_gpu = matched["on_gpu"]
    matched["start_ns"] = matched["kernel_start_ns"].where(on_gpu, matched["cpu_start_ns"])
    host_end, done = matched["cpu_end_ns"].copy(), matched["done_ns"].notna()
    host_end[done] = matched.loc[done, "done_ns"].astype(host_end.dtype)
    matched["end_ns"] = matched["kernel_end_ns"].where(on_gpu, host_end)
    return matched


def exchanges(
    pending: pd.DataFrame,
    clock: pd.DataFrame,
    paired: list[tuple[str, str]] = (),
    within: dict[int, tuple[str, float]] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Kernel-only exchange streams grouped on the solved clocks (nsyswrap.crossrank.streams):
    (their calls with verdicts, group rows; streams of unaligned ranks left out); `paired`,
    `within`: the pairs of streams told apart while clocks were bound by point-to-point
    transfers, and each bound rank's component (nsyswrap.crossrank.p2p_clocks)."""
    times = pending.assign(start_ns=pending["kernel_start_ns"], end_ns=pending["kernel_end_ns"])
    on_clock = to_run_time(times, clock, ["start_ns", "end_ns"])
    uncertainty = dict(zip(clock["rank"], clock["uncertainty_ns"].fillna(0).astype(float)))
    unplaced = pending[~pending["pg"].isin(on_clock["pg"])]
    renamed, rows = group_exchanges(on_clock, unplaced, uncertainty, 0, paired, within)
    calls = pending.assign(pg=pending["pg"].map(renamed)).dropna(subset=["pg"])
    calls = verdicts(calls).assign(found_by="kernel")
    return calls, pd.DataFrame(rows, columns=GROUP_COLUMNS)


def report_events(keys: pd.DataFrame, steps: pd.DataFrame, phases: pd.DataFrame):
    """events(report rank, lo, hi): the times the builder has of the report (its collective
    calls' starts and ends, host and GPU, and its step and phase ranges'), in (lo, hi],
    sorted: where a clock jump's hole is (nsyswrap.crossrank.jumps.jump_at). Gathered when
    first asked for: only a clock that jumps asks."""
    gathered: list[pd.DataFrame] = []
    sources = (
        (keys, ["cpu_start_ns", "cpu_end_ns", "kernel_start_ns", "kernel_end_ns"]),
        (steps, ["start_ns", "end_ns"]),
        (phases, ["start_ns", "end_ns"]),
    )

    def events(rank: int, lo: int, hi: int) -> np.ndarray:
        if not gathered:
            gathered.append(
                pd.concat(
                    [f.melt(id_vars="rank", value_vars=c)[["rank", "value"]] for f, c in sources],
                    ignore_index=True,
                ).dropna()
            )
        times = gathered[0]
        t = times.loc[times["rank"] == rank, "value"].to_numpy(np.float64)
        return np.sort(t[(t > lo) & (t <= hi)])

    return events


def member_clocks(
    matched: pd.DataFrame,
    members: pd.DataFrame,
    reports: pd.DataFrame,
    tie_hosts: bool,
    events=None,
) -> pd.DataFrame:
    """The clock table per rank: one clock per report (its processes share it), solved over
    the matched true barriers of all ranks (nsyswrap.crossrank.alignment)."""
    report_of = dict(zip(members["rank"], members["report_rank"]))
    per_clock = matched.assign(rank=matched["rank"].map(report_of))
    sessions = reports.rename(columns={"report_rank": "rank"})
    clocks, _ = solve_clocks(per_clock, sessions, tie_hosts, events)
    out = members.merge(
        clocks.drop(columns=["rank"]).assign(report_rank=clocks["rank"]), on="report_rank"
    )
    shared = out.groupby("report_rank")["rank"].transform("size") > 1
    out.loc[shared, "method"] = (
        out.loc[shared, "method"] + "; its report's processes share one clock"
    )
    return out.sort_values("rank").reset_index(drop=True)


def unrelated(reports: list, sessions: pd.DataFrame, ends: pd.DataFrame) -> NsysWrapError | None:
    """The one-line error when the reports cannot be one run: capture spans (UTC) far
    apart. `sessions` (rank, utc_epoch_ns), `ends` (rank, end_ns: its last GPU activity's
    end). The cross-rank section raises it; queries see every rank unaligned."""
    if len(sessions) < 2:
        return None
    span = (
        sessions.merge(ends, on="rank", how="left")
        .fillna({"end_ns": 0})
        .sort_values("utc_epoch_ns")
    )
    span["stop"] = span["utc_epoch_ns"] + span["end_ns"].astype("int64")
    reach = span["stop"].cummax().shift()
    gaps = span["utc_epoch_ns"] - reach
    far = gaps[gaps > UNRELATED_GAP_NS]
    if len(far):
        i = far.index[0]
        hours = far.iloc[0] / 3.6e12
        report = next((r.path for r in reports if r.rank == int(span.loc[i, "rank"])), "report")
        return NsysWrapError(
            report,
            f"starts {hours:,.1f} h after the other reports ended: they are not one run",
            "analyse each run on its own (pass --allow-unrelated to insist)",
        )
    return None


def time_collectives(
    matched: pd.DataFrame, clock: pd.DataFrame, lookup: pd.DataFrame
) -> pd.DataFrame:
    """Per aligned rank and matched collective, in run time: see the module doc; `lookup`:
    the step regions (step_lookup) by rank."""
    if matched.empty:
        return pd.DataFrame(columns=ALIGNED_COLUMNS)
    m = matched.copy()
    m["rank"] = m["rank"].astype(int)
    m["step"] = step_at(m, "cpu_start_ns", lookup)
    m["step"] = m.groupby(["pg", "seq"])["step"].transform("min")
    m = to_run_time(m, clock, ["start_ns", "end_ns"])
    thr = m["rank"].map(dict(zip(clock["rank"], clock["uncertainty_ns"]))).fillna(0)
    g = m.groupby(["pg", "seq"])
    last_start = g["start_ns"].transform("max")
    is_latest = m["start_ns"] == last_start
    m["last_rank"] = (
        m["rank"].where(is_latest).groupby([m["pg"], m["seq"]]).transform("min").astype(int)
    )
    m["skew_ns"] = last_start - g["start_ns"].transform("min")
    m["transfer_ns"] = (m["end_ns"] - m["start_ns"]).groupby([m["pg"], m["seq"]]).transform("min")
    m["wait_ns"] = (np.minimum(last_start, m["end_ns"]) - m["start_ns"]).clip(lower=0)
    median = g["start_ns"].transform("median")
    m["lag_ns"] = m["start_ns"] - np.round(median).astype("int64")
    m["threshold_ns"] = (2 * thr.groupby([m["pg"], m["seq"]]).transform("max")).astype("int64")
    m["significant"] = m["skew_ns"] > m["threshold_ns"]
    m["members"] = g["rank"].transform("size")
    m["barrier"] = m["barrier"].astype(bool)
    m = m[m["members"] >= 2]
    return m[ALIGNED_COLUMNS]


def step_at(frame: pd.DataFrame, column: str, lookup: pd.DataFrame) -> pd.Series:
    """The step whose region (`lookup`: step_lookup's rows, by `rank`) holds the instant
    `column` of each row of `frame` (by `rank`), else NaN: the rule is step_lookup's,
    this only finds the region."""
    out = pd.Series(np.nan, index=frame.index)
    regions = lookup[lookup["region_end_ns"] > lookup["start_ns"]]  # those that hold time
    if regions.empty or frame.empty:
        return out
    left = frame[["rank", column]].dropna().astype("int64").reset_index()
    right = regions.astype({"rank": "int64", "start_ns": "int64"}).sort_values("start_ns")
    hit = pd.merge_asof(
        left.sort_values(column),
        right,
        left_on=column,
        right_on="start_ns",
        by="rank",
        direction="backward",
    )
    hit = hit[hit[column] < hit["region_end_ns"]]
    out.loc[hit["index"].to_numpy()] = hit["step"].to_numpy()
    return out
