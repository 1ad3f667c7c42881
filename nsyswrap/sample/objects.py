"""The cross-rank run objects of sample files: the six the nsys path computes
(nsyswrap.crossrank.solve: keys, groups, clocks, aligned collectives, steps, phases),
made from the sampled collectives, steps and phases, and the crossrank modules over them.

The collectives are matched by (process group, sequence number) as the `coll:` ranges
are, the clocks solved by the same robust solve over the collectives' ends
(nsyswrap.crossrank.alignment) and every collective timed by the same code. Host-timed
ranks of one host read its monotonic clock (`monotonic_ns` of their `run` records puts
them on one time line), so the solve is over the hosts' clocks; a CUDA-timed step's times
rest on its first event (the GPU may run behind the host), so each such step is solved on
its own. The section (nsyswrap.report.samples) words the answer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import duckdb
import pandas as pd

from nsyswrap.crossrank.alignment import CLOCK_COLUMNS, solve_clocks
from nsyswrap.crossrank.matching import KEY_COLUMNS, match
from nsyswrap.crossrank.solve import (
    ALIGNED_COLUMNS,
    MEMBER_EXTRA,
    PHASE_COLUMNS,
    RUN_SCOPE_TABLES,
    time_collectives,
)
from nsyswrap.engine.builders import create_table
from nsyswrap.engine.planner import result_over
from nsyswrap.engine.queries import bind, get
from nsyswrap.sample.read import Samples

SOURCE = "sample file"  # the rank source of a sample file's rank


@contextmanager
def crossrank_modules(samples: Samples) -> Iterator[Callable[..., pd.DataFrame]]:
    """`module(name, **params)` -> the rows of a crossrank module over the samples' run
    objects, while the context lasts."""
    con = duckdb.connect()
    try:
        for name, frame in run_objects(samples).items():
            create_table(con, name, name, frame)
        yield lambda name, **params: result_over(
            con, name, bind(get(name), params), RUN_SCOPE_TABLES
        )
    finally:
        con.close()


def run_objects(samples: Samples) -> dict[str, pd.DataFrame]:
    """The six cross-rank run objects (nsyswrap.crossrank.solve) from the samples."""
    runs = samples.runs
    first = runs.drop_duplicates("rank").set_index("rank")
    timers = samples.steps[["rank", "segment", "step", "timer"]]
    calls = samples.collectives.dropna(subset=["start_ns", "end_ns"]).merge(
        timers, on=["rank", "segment", "step"]
    )
    if runs.groupby("rank").size().max() > 1:  # each segment restarts every sequence number
        calls["pg"] = calls["segment"].astype(str) + "/" + calls["pg"]
    cuda = calls["timer"] == "cuda"
    keys = pd.DataFrame(
        {
            "rank": calls["rank"],
            "pg": calls["pg"],
            "seq": calls["seq"],
            "op": calls["op"],
            "bytes": calls["bytes"],
            "group_size": calls["group_size"],
            "cpu_start_ns": calls["start_ns"],
            "cpu_end_ns": calls["end_ns"],
            "kernel_start_ns": calls["start_ns"].where(cuda),
            "kernel_end_ns": calls["end_ns"].where(cuda),
            "keyed": "range",
            "pid": calls["rank"].map(first["pid"]),
        }
    )
    keyed, groups, _ = match(keys)  # keyed calls: no exchange stream is left to group
    hosts = first["host"].to_dict()
    groups["spans_hosts"] = [
        len({hosts.get(int(m)) for m in str(ms).split(",") if m}) > 1 for ms in groups["members"]
    ]
    matched = keyed[keyed["matches"].eq(True)].merge(
        calls[["rank", "pg", "seq", "segment", "step", "timer"]], on=["rank", "pg", "seq"]
    )
    aligned, clocks = _timed(matched, samples)
    members = first.reset_index()[["rank", "pid"]].assign(
        report_rank=first.index, rank_source=SOURCE
    )
    clock = _clock_table(clocks, runs).merge(members, on="rank")
    return {
        "xr_keys": keyed[KEY_COLUMNS],
        "xr_groups": groups,
        "xr_clock": clock[[*CLOCK_COLUMNS, *MEMBER_EXTRA]],
        "xr_aligned": aligned[ALIGNED_COLUMNS],
        "xr_member_steps": samples.steps[["rank", "step", "start_ns", "end_ns"]].dropna(),
        "xr_member_phases": _phases(samples)[PHASE_COLUMNS],
    }


def host_clocks(runs: pd.DataFrame) -> pd.DataFrame:
    """Per rank and segment: the rank whose clock stands for its host (`clock`: the lowest
    rank of the host, first segment), and `delta_ns`, what puts the segment's times on that
    clock: the ranks of one host read one monotonic clock."""
    first = runs.sort_values(["rank", "segment"]).drop_duplicates("host")
    rep = runs["host"].map(dict(zip(first["host"], first["rank"])))
    zero = runs["host"].map(dict(zip(first["host"], first["monotonic_ns"])))
    return runs.assign(clock=rep, delta_ns=runs["monotonic_ns"] - zero)[
        ["rank", "segment", "host", "clock", "delta_ns", "utc_epoch_ns"]
    ]


def _timed(matched: pd.DataFrame, samples: Samples) -> tuple[pd.DataFrame, list[pd.DataFrame]]:
    """Every matched collective in run time, and the clock tables (one row per rank, in
    the host clock's time): host-timed steps are one solve over the hosts' clocks, each
    CUDA-timed step a solve of its own over the ranks (each GPU's queue is its own)."""
    base = host_clocks(samples.runs)
    shift = base.set_index(["rank", "segment"])["delta_ns"]
    matched = matched.copy()
    at = pd.MultiIndex.from_frame(matched[["rank", "segment"]])
    delta = pd.Series(shift.reindex(at).to_numpy(), index=matched.index)
    for c in ("cpu_start_ns", "cpu_end_ns", "kernel_start_ns", "kernel_end_ns"):
        matched[c] = matched[c] + delta
    matched["on_gpu"] = (
        matched["kernel_end_ns"]
        .notna()
        .groupby([matched["pg"], matched["seq"]])
        .transform("all")
        .astype(bool)
    )
    gpu = matched["on_gpu"]
    matched["start_ns"] = matched["kernel_start_ns"].where(gpu, matched["cpu_start_ns"])
    matched["end_ns"] = matched["kernel_end_ns"].where(gpu, matched["cpu_end_ns"])
    steps = samples.steps.dropna(subset=["start_ns", "end_ns"]).merge(base, on=["rank", "segment"])
    steps = steps.assign(
        start_ns=steps["start_ns"] + steps["delta_ns"], end_ns=steps["end_ns"] + steps["delta_ns"]
    )
    owner = base.drop_duplicates("rank").set_index("rank")
    utc = owner["clock"].map(owner["utc_epoch_ns"])  # the host clock's UTC zero, per rank
    aligned, clocks = [pd.DataFrame(columns=ALIGNED_COLUMNS)], []
    cuda = matched["timer"] == "cuda"
    groups = [(matched[~cuda], steps)] if (~cuda).any() else []
    groups += [(part, steps[steps["step"] == step]) for step, part in matched[cuda].groupby("step")]
    for part, mine in groups:
        ranks = sorted(set(part["rank"]))
        if part["timer"].iloc[0] == "cuda":  # each GPU's queue a clock of its own
            sessions = pd.DataFrame(
                {
                    "rank": ranks,
                    "utc_epoch_ns": utc[ranks].to_numpy(),
                    "host": owner["host"][ranks].to_numpy(),
                }
            )
            clock = _solve(part, sessions, tie_hosts=False)
        else:  # one clock per host: its lowest rank's
            hosts = sorted(set(owner["clock"][ranks]))
            sessions = pd.DataFrame(
                {
                    "rank": hosts,
                    "utc_epoch_ns": owner["utc_epoch_ns"][hosts].to_numpy(),
                    "host": owner["host"][hosts].to_numpy(),
                }
            )
            per_host = _solve(part.assign(rank=part["rank"].map(owner["clock"])), sessions)
            clock = per_host.set_index("rank").loc[owner["clock"][ranks]].reset_index(drop=True)
            same = owner["clock"][ranks].to_numpy() != ranks
            clock["method"] = [
                f"same host clock as rank {c}" if s else m
                for c, s, m in zip(owner["clock"][ranks], same, clock["method"])
            ]
            clock["rank"] = ranks
        regions = mine[mine["rank"].isin(ranks)].rename(columns={"end_ns": "region_end_ns"})
        aligned.append(
            time_collectives(part, clock, regions[["rank", "step", "start_ns", "region_end_ns"]])
        )
        clocks.append(clock)
    return pd.concat([a for a in aligned if len(a)] or aligned[:1], ignore_index=True), clocks


def _solve(part: pd.DataFrame, sessions: pd.DataFrame, tie_hosts: bool = True) -> pd.DataFrame:
    """solve_clocks over the true barriers of the collectives `part` (an all_to_all's
    members end apart) of the clocks `sessions`; one clock (one host) is the reference by
    itself."""
    if len(sessions) > 1:
        return solve_clocks(part[part["barrier"].astype(bool)], sessions, tie_hosts)[0]
    r = sessions.iloc[0]
    gpu = bool(part["on_gpu"].all())
    return pd.DataFrame(
        [
            {
                "rank": r["rank"],
                "utc_epoch_ns": r["utc_epoch_ns"],
                "offset_ns": 0,
                "drift_ppb": 0.0,
                "shift_ns": 0,
                "uncertainty_ns": 0,
                "spread_ns": 0,
                "max_residual_ns": 0,
                "collectives": int((part["rank"] == r["rank"]).sum()),
                "source": "kernel" if gpu else "nvtx",
                "method": "reference",
                "aligned": True,
                "host": r["host"],
            }
        ],
        columns=CLOCK_COLUMNS,
    )


def _clock_table(clocks: list[pd.DataFrame], runs: pd.DataFrame) -> pd.DataFrame:
    """One clock row per rank, its shift taking the rank's own times to run time: the
    solve's row when there was one solve, else (one per CUDA-timed step) their median
    offset and shift and their largest uncertainty."""
    source = {"nvtx": "host timers", "kernel": "cuda events"}
    if len(clocks) == 1:
        out = clocks[0].copy()
    else:
        every = (
            pd.concat(clocks, ignore_index=True) if clocks else pd.DataFrame(columns=CLOCK_COLUMNS)
        )
        ok = every[every["aligned"].astype(bool)]
        out = ok.groupby("rank", as_index=False).agg(
            utc_epoch_ns=("utc_epoch_ns", "first"),
            offset_ns=("offset_ns", "median"),
            shift_ns=("shift_ns", "median"),
            uncertainty_ns=("uncertainty_ns", "max"),
            spread_ns=("spread_ns", "max"),
            max_residual_ns=("max_residual_ns", "max"),
            collectives=("collectives", "sum"),
            source=("source", "first"),
            host=("host", "first"),
            solves=("rank", "size"),
        )
        out = out.assign(
            drift_ppb=0.0,
            aligned=True,
            method=[
                f"one solve per sampled step ({n}): robust least squares over the step's "
                "collectives' ends"
                for n in out.pop("solves")
            ],
        )
        for c in ("offset_ns", "shift_ns"):
            out[c] = out[c].round().astype("int64")
    base = host_clocks(runs).drop_duplicates("rank").set_index("rank")
    out["shift_ns"] = out["shift_ns"] + out["rank"].map(base["delta_ns"])
    out["utc_epoch_ns"] = out["rank"].map(base["utc_epoch_ns"])
    first = runs.drop_duplicates("rank")
    missing = first[~first["rank"].isin(out["rank"])]
    unaligned = pd.DataFrame(
        {
            "rank": missing["rank"],
            "utc_epoch_ns": missing["utc_epoch_ns"],
            "offset_ns": 0,
            "drift_ppb": 0.0,
            "shift_ns": None,
            "uncertainty_ns": None,
            "spread_ns": None,
            "max_residual_ns": None,
            "collectives": 0,
            "source": "utc",
            "aligned": False,
            "method": "unaligned: no matched collective connects it to the reference rank",
            "host": missing["host"],
        }
    )
    out = pd.concat([out, unaligned] if len(unaligned) else [out], ignore_index=True)
    out["source"] = out["source"].replace(source)
    for column, default in (("clock", None), ("jump_at_ns", None), ("jump_ns", 0)):
        if column not in out:  # solved per step: no one clock, no jump
            out[column] = default
    return out.sort_values("rank").reset_index(drop=True)[CLOCK_COLUMNS]


def _phases(samples: Samples) -> pd.DataFrame:
    """Per rank, step and phase: host time (less calls into collectives) and, on CUDA
    steps, GPU time (the events' span less the collectives inside it)."""
    phases = samples.phases.dropna(subset=["start_ns", "end_ns"]).merge(
        samples.steps[["rank", "segment", "step", "timer"]], on=["rank", "segment", "step"]
    )
    phases = phases.reset_index(drop=True)
    calls = samples.collectives.dropna(subset=["start_ns", "end_ns"])
    inside = phases.reset_index().merge(calls, on=["rank", "segment", "step"], suffixes=("", "_c"))
    inside = inside[
        (inside["start_ns_c"] >= inside["start_ns"]) & (inside["end_ns_c"] <= inside["end_ns"])
    ]
    in_calls = (inside["end_ns_c"] - inside["start_ns_c"]).groupby(inside["index"]).sum()
    span = phases["end_ns"] - phases["start_ns"]
    gpu = (span - in_calls.reindex(phases.index, fill_value=0)).clip(lower=0)
    return phases.assign(
        pid=0,
        tid=0,
        gpu_ns=gpu.where(phases["timer"] == "cuda", 0),
        host_ns=phases["host_ns"].fillna(0).clip(lower=0),
    )
