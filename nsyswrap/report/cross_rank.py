"""The cross-rank section of `nsyswrap report` (layout: see nsyswrap.report), built on
nsyswrap.crossrank.

It names the straggler, the phase behind its lag and what it costs the others,
with the clock offsets (and their uncertainty) that all cross-rank times rest on.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import pandas as pd

from nsyswrap.crossrank.alpha_beta import fit_alpha_beta
from nsyswrap.report.diagnosis.rules import replay_causes, straggler_named
from nsyswrap.report.diagnosis.words import ms
from nsyswrap.report.figures import BYTES, COUNT, FRACTION, NS, figure, share
from nsyswrap.report.figures import table as _table
from nsyswrap.report.options import ReportOptions

if TYPE_CHECKING:
    from nsyswrap.report.flow import Inputs

GB_PER_S = "GB/s"
PCT, TIMES = "%", "x"
NO_PHASE = "no phase is longer than on the median rank"
MAX_RESIDUAL = replay_causes.RULE.default("max_residual")  # above it, the replay sizes no fix


def _ms(ns: float) -> str:
    """A duration for people: `1.234 ms`."""
    return ms(ns, 3)


def _text(value) -> str | None:
    """A text cell, None where missing (an unaligned rank has no clock: never NaN in JSON)."""
    return None if pd.isna(value) else str(value)


def _offsets_tables(offsets: pd.DataFrame) -> list[dict]:
    no_shared = "no collective shared with the reference rank"
    offset_rows = [
        {
            "rank": int(r["rank"]),
            "report_rank": int(r.report_rank),
            "pid": None if pd.isna(r.pid) else int(r.pid),
            "rank_source": _text(r.rank_source),
            "offset": figure(r.offset_ns, NS),
            "shift": figure(r.shift_ns, NS),
            "source": _text(r.source),
            "drift": figure(r.drift_ppb, "ppb"),
            "aligned": bool(r.aligned),
            "method": _text(r.method),
            "host": _text(r.host),
            "clock": _text(r.clock),
            "jump": figure(r.jump_ns, NS),
        }
        for _, r in offsets.iterrows()
    ]
    quality_rows = [
        {
            "rank": int(r["rank"]),
            "uncertainty": figure(r.spread_ns, NS, no_shared),
            "offset_uncertainty": figure(r.uncertainty_ns, NS, no_shared),
            "max_residual": figure(r.max_residual_ns, NS, no_shared),
            "collectives": figure(r.collectives, COUNT),
        }
        for _, r in offsets.iterrows()
    ]
    return [
        _table(
            "clock_offsets",
            "Clock offsets to the reference rank: aligned = UTC session start + t + offset; "
            "shift = session time to run time",
            offset_rows,
            ("method", "host", "rank_source", "pid", "report_rank", "shift"),
        ),
        _table(
            "clock_uncertainty",
            "Clock alignment uncertainty: robust spread (1.4826 x MAD) and largest "
            "residual of the per-collective end differences",
            quality_rows,
            ("max_residual", "offset_uncertainty"),
        ),
    ]


def _straggler_rows(strag: pd.DataFrame) -> list[dict]:
    return [
        {
            "step": "all" if pd.isna(r.step) else int(r.step),
            "rank": int(r.rank),
            "last": figure(r.last_count, COUNT),
            "collectives": figure(r.collectives, COUNT),
            "lag": figure(r.lag_ns, NS),
            "gap": figure(r.gap_ns, NS),
            "imposed_wait": figure(r.imposed_wait_ns, NS),
            "share_of_wait": share(r.imposed_wait_ns, r.total_wait_ns, "nobody waited"),
            "significant": bool(r.significant),
            "jitter": figure(r.jitter_ns, NS),
            "affected_steps": r.affected_steps if isinstance(r.affected_steps, str) else None,
            "slow_steps": r.slow_steps if isinstance(r.slow_steps, str) else None,
            "phase": r.phase if isinstance(r.phase, str) else None,
            "phase_excess": figure(r.phase_excess_ns, NS, NO_PHASE),
            "phase_steps": figure(r.phase_steps, COUNT, NO_PHASE),
        }
        for r in strag.itertuples(index=False)  # one row per step: thousands
    ]


def _waits_table(coll: pd.DataFrame, split: pd.DataFrame) -> dict:
    """Per rank: its wait counted once per step (crossrank.comm_split's union of the waits
    of collectives outstanding together), mean lag and arrivals last."""
    per = coll.groupby("rank").agg(mean_lag_ns=("lag_ns", "mean"), collectives=("seq", "size"))
    per["wait_ns"] = split.groupby("rank")["wait_ns"].sum().reindex(per.index, fill_value=0)
    last = coll[coll["rank"] == coll["last_rank"]].groupby("rank").size()
    rows = [
        {
            "rank": int(rank),
            "waited": figure(r.wait_ns, NS),
            "mean_lag": figure(round(r.mean_lag_ns), NS),
            "last": figure(int(last.get(rank, 0)), COUNT),
            "collectives": figure(r.collectives, COUNT),
        }
        for rank, r in per.iterrows()
    ]
    return _table(
        "rank_waits",
        "Per rank: time waited inside matched collectives (each instant once), mean "
        "arrival vs the median rank, and how often it arrived last",
        rows,
        ("collectives", "last"),
    )


def _exchange_bytes_table(coll: pd.DataFrame) -> dict | None:
    """Per rank and exchange op (all_to_all: each member sends its own amount): the bytes it
    sent in the window's matched collectives of that op, against the median rank's; None
    without such collectives whose bytes every member's range gives."""
    ex = coll[coll["op"].astype(str).str.lower().str.startswith("all_to_all")]
    known = ex.groupby(["pg", "seq"])["bytes"].transform(lambda b: b.notna().all())
    ex = ex[known.astype(bool)]
    if ex.empty:
        return None
    per = ex.groupby(["op", "rank"]).agg(bytes=("bytes", "sum"), collectives=("seq", "size"))
    median = per.groupby(level="op")["bytes"].transform("median")
    rows = [
        {
            "rank": int(rank),
            "op": op,
            "collectives": figure(int(r.collectives), COUNT),
            "bytes": figure(int(r.bytes), BYTES),
            "vs_median": figure(r.bytes / m if m else None, TIMES, "the median rank sent none"),
        }
        for ((op, rank), r), m in zip(per.iterrows(), median, strict=True)
    ]
    return _table(
        "exchange_bytes",
        "Per rank: bytes it sent in all_to_all collectives, against the median rank "
        "(an MoE rank whose experts get more tokens sends more)",
        rows,
        ("collectives",),
    )


def _comm_split_table(split: pd.DataFrame) -> dict:
    per = split.groupby("rank")[["collectives", "comm_ns", "wait_ns", "transfer_ns"]].sum()
    rows = [
        {
            "step": "all",
            "rank": int(rank),
            "collectives": figure(r.collectives, COUNT),
            "in_collectives": figure(r.comm_ns, NS),
            "waiting": figure(r.wait_ns, NS),
            "transfer": figure(r.transfer_ns, NS),
            "wait_share": share(r.wait_ns, r.comm_ns, "no time in collectives"),
        }
        for rank, r in per.iterrows()
    ]
    rows += [
        {
            "step": int(r.step),
            "rank": int(r.rank),
            "collectives": figure(r.collectives, COUNT),
            "in_collectives": figure(r.comm_ns, NS),
            "waiting": figure(r.wait_ns, NS),
            "transfer": figure(r.transfer_ns, NS),
            "wait_share": share(r.wait_ns, r.comm_ns, "no time in collectives"),
        }
        for r in split.dropna(subset=["step"]).itertuples(index=False)
    ]
    return _table(
        "comm_split",
        "Time in matched collectives per rank (all steps, then per step): waiting for "
        "the last member to arrive vs transfer after it arrived",
        rows,
        ("collectives", "in_collectives"),
    )


def _mismatch_table(miss: pd.DataFrame) -> dict:
    rows = [
        {
            "pg": r.pg,
            "seq": int(r.seq),
            "ops": r.ops,
            "bytes": r.bytes,
            "present_ranks": r.present_ranks,
            "missing_ranks": r.missing_ranks or None,
            "reason": r.reason,
        }
        for _, r in miss.iterrows()
    ]
    return _table(
        "mismatches",
        "Collective keys (pg, seq) not matched across ranks, left out of every cross-rank figure",
        rows,
        ("ops", "bytes"),
    )


def _bandwidth_table(bw: pd.DataFrame) -> dict:
    rows = [
        {
            "op": r.op,
            "bytes": figure(r.bytes, BYTES),
            "ranks": int(r.ranks),
            "collectives": figure(r.collectives, COUNT),
            "transfer": figure(r.transfer_ns, NS),
            "algbw": figure(r.algbw_gb_per_s, GB_PER_S),
            "busbw": figure(r.busbw_gb_per_s, GB_PER_S),
            "spans_hosts": bool(r.spans_hosts),
        }
        for _, r in bw.iterrows()
    ]
    return _table(
        "bandwidth",
        "NCCL bandwidth per op and size: transfer = shortest duration across "
        "ranks; busbw = algbw x NCCL's bus factor",
        rows,
        ("spans_hosts", "collectives", "ranks", "transfer"),
    )


def _alpha_beta_table(fit: pd.DataFrame) -> dict:
    one_size = "needs collectives of two or more payload sizes"
    rows = [
        {
            "op": r.op,
            "collectives": figure(r.collectives, COUNT),
            "sizes": figure(r.sizes, COUNT),
            "latency": figure(r.latency_ns, NS, one_size),
            "bandwidth": figure(
                r.bandwidth_gb_per_s,
                GB_PER_S,
                one_size if r.sizes < 2 else "transfer time does not grow with size",
            ),
            "r2": figure(r.r2, FRACTION, one_size),
        }
        for _, r in fit.iterrows()
    ]
    return _table(
        "alpha_beta",
        "Alpha-beta fit per op: transfer = latency + bytes / bandwidth (least squares)",
        rows,
        ("r2", "sizes"),
    )


def _text(x) -> str | None:
    return x if isinstance(x, str) else None


def _int(x) -> int | None:
    return None if pd.isna(x) else int(x)


def _whatif_rows(fixes: pd.DataFrame) -> list[dict]:
    none = "no step is affected"
    return [
        {
            "kind": r.kind,
            "rank": _int(r.rank),
            "phase": _text(r.phase),
            "stage": _int(r.stage),
            "pg": _text(r.pg),
            "op": _text(r.op),
            "gain_ns_per_step": figure(r.gain_ns_per_step, NS),
            "gain_pct": figure(r.gain_pct, PCT),
            "pattern": r.pattern,
            "steps": _text(r.steps),
            "affected_steps": figure(r.affected_steps, COUNT),
            "steps_in_window": figure(r.steps_in_window, COUNT),
            "gain_ns_per_affected_step": figure(r.gain_ns_per_affected_step, NS, none),
            "residual_ns": figure(r.residual_ns, NS),
            "noise_ns": figure(r.noise_ns, NS),
            "share": figure(r.share, FRACTION, "only for kind rank"),
            "slowdown": figure(r.slowdown, TIMES, "only for kind all"),
            "gain_low_ns_per_step": figure(r.gain_low_ns_per_step, NS),
            "gain_high_ns_per_step": figure(r.gain_high_ns_per_step, NS),
            "assumed": bool(r.assumed),
            "gain_steady_ns_per_step": figure(r.gain_steady_ns_per_step, NS),
        }
        for r in fixes.itertuples(index=False)
    ]


def _critical_path_rows(path: pd.DataFrame) -> list[dict]:
    return [
        {
            "step": _int(r.step),
            "kind": r.kind,
            "rank": _int(r.rank),
            "phase": _text(r.phase),
            "side": _text(r.side),
            "pg": _text(r.pg),
            "op": _text(r.op),
            "time": figure(r.ns, NS),
            "share": figure(r.share, FRACTION),
        }
        for r in path.itertuples(index=False)
    ]


def _assumed_wait_rows(waits: pd.DataFrame) -> list[dict]:
    return [
        {
            "rank": _int(r.rank),
            "step": _int(r.step),
            "phase": _text(r.phase),
            "waits_for": r.waits_for,
            "pg": _text(r.pg),
            "seq": _int(r.seq),
            "op": _text(r.op),
            "after": figure(r.after_ns, NS),
            "silent": figure(r.silent_ns, NS),
        }
        for r in waits.itertuples(index=False)
    ]


def _residual_row(check: pd.DataFrame) -> dict:
    recorded = check["recorded_ns"].where(check["recorded_ns"] > 0)
    share = (check["residual_ns"] / recorded).dropna()
    why = "no step to replay"

    def stat(x):
        return figure(x if len(share) else None, FRACTION, why)

    return {
        "steps": figure(len(check), COUNT),
        "median": stat(share.median()),
        "p90": stat(share.quantile(0.9)),
        "max": stat(share.max()),
        "max_ns": figure(check["residual_ns"].max() if len(check) else None, NS, why),
    }


def _whatif(rows) -> tuple[list[dict], list[dict]]:
    """The replay's tables (residual, what-if fixes, critical path) and what it cannot answer,
    from `rows(key)`: the modules of crossrank_modules by key."""
    what = "what a fix would save (the replay)"
    check = rows("replay_check")
    if check.empty:
        return [], [
            {"what": what, "reason": "no matched collective or no step in the window to replay"}
        ]
    residual = _residual_row(check)
    tables = [
        _table(
            "replay_residual",
            "Replay check: each rank's step times replayed from the "
            "recorded durations vs recorded; residual in % of the step time (median, p90, "
            "max over ranks and steps)",
            [residual],
            ("max_ns", "steps"),
        )
    ]
    worst = residual["max"]["value"]
    if worst is not None and worst > MAX_RESIDUAL:
        return tables, [
            {
                "what": what,
                "reason": f"replaying the recorded durations misses a "
                f"recorded step time by {100 * worst:.1f} % (more than "
                f"{100 * MAX_RESIDUAL:.0f} %): collectives end before their last member "
                "arrives on the aligned clocks, or ranks wait for something the replay "
                "does not see (see crossrank.replay_check)",
            }
        ]
    fixes, path, assumed = rows("whatif"), rows("critical_path"), rows("assumed_waits")
    if len(assumed):
        tables.append(
            _table(
                "assumed_waits",
                "Waits the replay assumed: a host silent until right after a completion it "
                "could have waited for, no recorded call waiting (a fix's gain then ranges "
                "from without them to with them)",
                _assumed_wait_rows(assumed),
                ("silent", "seq", "pg", "phase"),
            )
        )
    return tables + [
        _table(
            "whatif",
            "What a fix would save: the step time replayed with each candidate fix "
            "(rank, phase, stage or collective idealised; all: every rank), largest first",
            _whatif_rows(fixes),
            (
                "noise_ns",
                "residual_ns",
                "slowdown",
                "share",
                "gain_ns_per_affected_step",
                "steps_in_window",
                "affected_steps",
                "assumed",
                "gain_steady_ns_per_step",
                "gain_high_ns_per_step",
                "gain_low_ns_per_step",
                "stage",
                "pg",
                "steps",
                "op",
            ),
        ),
        _table(
            "critical_path",
            "Critical path per step: the step time charged to the work of a "
            "(rank, phase, side: host or gpu) or the transfer of a (pg, op) it rests on (a "
            "transfer has no rank: every member's at once; an empty phase: outside every "
            "phase)",
            _critical_path_rows(path),
            ("share", "side"),
        ),
        *_links_table(rows("links")),
    ], []


def _links_table(links: pd.DataFrame) -> list[dict]:
    """The links between hosts (crossrank.links), where the run spans hosts."""
    if links.empty:
        return []
    rows = [
        {
            "host_a": r.host_a,
            "host_b": r.host_b,
            "collectives": figure(r.collectives, COUNT),
            "busbw": figure(r.busbw_gb_per_s, GB_PER_S, "no bytes recorded"),
            "inside": figure(r.inside_gb_per_s, GB_PER_S, "no collective inside one host"),
            "expected": figure(r.expected_gb_per_s, GB_PER_S),
            "healthy": figure(r.healthy_gb_per_s, GB_PER_S),
            "slow": bool(r.slow),
            "gain_ns_per_step": figure(r.gain_ns_per_step, NS),
            "gain_pct": figure(r.gain_pct, PCT),
        }
        for r in links.itertuples(index=False)
    ]
    return [
        _table(
            "links",
            "Links between hosts: bus bandwidth of the collectives across each against the "
            "run's inside a host and a healthy link's (slow: below half its healthy "
            "bandwidth), and what the replay saves with it at the healthy bandwidth",
            rows,
            ("collectives", "expected", "gain_pct"),
        )
    ]


def _step_time_ns(ranges: pd.DataFrame, options: ReportOptions) -> int:
    """The steps' time: the sum of each step's median duration over the ranks
    (`ranges`: crossrank.step_phases)."""
    steps = ranges[ranges["phase"].isna()]
    if options.step_from is not None:
        steps = steps[steps["step"] >= options.step_from]
    if options.step_to is not None:
        steps = steps[steps["step"] < options.step_to]
    return int((steps["end_ns"] - steps["start_ns"]).groupby(steps["step"]).median().sum())


def _recommendations(
    run_row: pd.Series | None, offsets: pd.DataFrame, miss: pd.DataFrame
) -> list[str]:
    out = []
    if run_row is not None and isinstance(run_row.phase, str):
        out.append(
            f"Look at `{run_row.phase}` on rank {int(run_row['rank'])}: it runs "
            f"{_ms(run_row.phase_excess_ns / run_row.phase_steps)} per step longer than on the "
            "median rank (host time without waits, or GPU time of its kernels), and every other "
            "rank waits for it in the next collective."
        )
    fine = offsets[offsets["source"] != "utc"]
    if not fine.empty and fine["spread_ns"].max() > 10_000:
        out.append(
            f"Clock alignment is loose (uncertainty up to {_ms(fine['spread_ns'].max())}): skews "
            "below that are noise."
        )
    if not miss.empty:
        first = miss.iloc[0]
        out.append(
            f"{len(miss)} collective key(s) are not matched across ranks (first: pg {first.pg} seq "
            f"{first.seq}, {first.reason}); a rank issuing a different sequence of collectives "
            "hangs or corrupts NCCL runs, so check the code path of ranks "
            f"{first.present_ranks if first.reason == 'missing' else 'around that step'}."
        )
    return out


def _waiting_note(run_row: pd.Series | None, split: pd.DataFrame) -> list[str]:
    """What the fast ranks' communication time really is, when a straggler is named."""
    if run_row is None or not run_row.significant or split.empty:
        return []
    others = split[split["rank"] != run_row["rank"]]
    comm, wait = others["comm_ns"].sum(), others["wait_ns"].sum()
    if not comm or wait < comm / 2:
        return []
    return [
        f"On the other ranks {wait / comm:.0%} of the time in collectives "
        f"({_ms(wait)} of {_ms(comm)}) is waiting for late peers, not transfer: their exposed "
        f"communication is rank {int(run_row['rank'])}'s lateness, so faster links or more "
        "overlap would not remove it."
    ]


def _cannot_answer(
    offsets: pd.DataFrame, bw: pd.DataFrame | None, strag: pd.DataFrame
) -> list[dict]:
    out = []
    utc_only = offsets[~offsets["aligned"].astype(bool)]
    if len(utc_only) == len(offsets):
        out.append(
            {
                "what": "fine clock alignment",
                "reason": "no collective is matched across ranks, so reports are aligned by "
                "UTC session start only (errors of milliseconds are possible)",
            }
        )
    elif not utc_only.empty:
        out.append(
            {
                "what": f"the fine clock offsets of ranks {utc_only['rank'].tolist()}",
                "reason": "no matched collective connects them to the reference rank and no "
                "aligned rank shares their host: they are left out of every cross-rank figure",
            }
        )
    if bw is None:
        out.append(
            {
                "what": "NCCL bandwidth",
                "reason": "the run has no NCCL kernel (gloo or MPI "
                "collectives run on the host: their times are host calls, not transfers)",
            }
        )
    elif bw.empty:
        out.append(
            {
                "what": "NCCL bandwidth",
                "reason": "no matched collective has known bytes (nsyswrap's "
                "`coll:` ranges carry them: annotate with nsyswrap.annotate_collectives)",
            }
        )
    if not strag.empty and strag["phase"].isna().all():
        out.append(
            {
                "what": "the phase behind the straggler's lag",
                "reason": "no range nested in a step range is longer on it than on the median rank",
            }
        )
    return out


def crossrank_modules(options: ReportOptions) -> dict[str, tuple[str, dict]]:
    """The modules the section asks for (with two ranks or more), `key: (module, params)`."""
    pattern = {"step_pattern": options.step_pattern}
    steps = {**pattern, "step_from": options.step_from, "step_to": options.step_to}
    # the replay covers the outliers after the window too: a stall is a stall where it falls
    replayed = {**steps, "step_to": None} if options.outliers_after else steps
    return {
        "offsets": ("crossrank.clock_offsets", pattern),
        "collectives": ("crossrank.collectives", steps),
        "stragglers": ("crossrank.stragglers", steps),
        "mismatches": ("crossrank.mismatches", {}),
        "bandwidth": ("crossrank.bandwidth", steps),
        "split": ("crossrank.comm_split", steps),
        "groups": ("crossrank.groups", pattern),
        "step_phases": ("crossrank.step_phases", pattern),
        # the what-if replay's (a run of exports only: nsyswrap.crossrank.whatif)
        "replay_check": ("crossrank.replay_check", replayed),
        "whatif": ("crossrank.whatif", replayed),
        "critical_path": ("crossrank.critical_path", replayed),
        "links": ("crossrank.links", replayed),
        "assumed_waits": ("crossrank.assumed_waits", replayed),
    }


def asked_modules(options: ReportOptions) -> dict[str, tuple[str, dict]]:
    """What it reads before its own modules: the run's ranks, whether it has NCCL kernels."""
    return {"ranks": ("crossrank.clock_offsets", {}), "activity": ("trace.activity", {})}


def crossrank_section(inputs: Inputs) -> dict:
    """Build the section dict: verdict names the straggler; tables hold every figure."""
    frames, options = inputs.frames, inputs.options
    return crossrank_answer(
        frames.__getitem__,
        options,
        len(frames["ranks"]),
        lambda: _step_time_ns(frames["step_phases"], options),
        nccl=int(frames["activity"]["nccl"].sum()) > 0,
        replay=True,
    )


def crossrank_answer(
    rows: Callable[[str], pd.DataFrame],
    options: ReportOptions,
    ranks: int,
    step_time_ns: Callable[[], int],
    nccl: bool | None = None,
    replay: bool = False,
) -> dict:
    """The section from the rows of the modules of `crossrank_modules` (`rows(key)`) of a run
    of `ranks` ranks whose steps take `step_time_ns()` in all (the sum of the median step),
    with the what-if replay's tables where `replay` (a run of exports: the replay needs
    their kernels); the sample files' report (nsyswrap.report.samples) answers through it
    too. `nccl`: whether the run has NCCL kernels (False: no NCCL bandwidth, the
    collectives' times are host calls; None: not known)."""
    section = {
        "id": "crossrank",
        "title": "Across ranks: clock alignment, collective waits, stragglers",
        "verdict": None,
        "recommendations": [],
        "tables": [],
        "cannot_answer": [],
    }
    if ranks < 2:
        section["cannot_answer"].append(
            {
                "what": "cross-rank analysis",
                "reason": "it needs two or more "
                "ranks (reports, or processes with GPU work in one report)",
            }
        )
        return section
    offsets, coll, strag = rows("offsets"), rows("collectives"), rows("stragglers")
    miss, bw, split = rows("mismatches"), rows("bandwidth"), rows("split")
    run_rows = strag[strag["step"].isna()]
    run_row = None if run_rows.empty else run_rows.iloc[0]
    section["verdict"] = straggler_named.find(
        None if run_row is None else run_row.to_dict(), step_time_ns()
    )
    section["recommendations"] = _recommendations(run_row, offsets, miss) + _waiting_note(
        run_row, split
    )
    section["tables"] = _offsets_tables(offsets) + _collective_tables(coll, strag, split)
    section["tables"] += _group_tables(rows("groups"), miss)
    if not bw.empty and nccl is not False:  # without NCCL kernels: times of host calls
        section["tables"] += [_bandwidth_table(bw), _alpha_beta_table(fit_alpha_beta(coll))]
    replayed, no_replay = _whatif(rows) if replay else ([], [])
    section["tables"] += replayed
    section["cannot_answer"] = (
        _cannot_answer(offsets, None if nccl is False else bw, strag) + no_replay
    )
    if options.window_nvtx:
        section["cannot_answer"].append(
            {
                "what": "limiting cross-rank figures to --window-nvtx",
                "reason": "they are computed per step (use --steps)",
            }
        )
    return section


def _collective_tables(coll: pd.DataFrame, strag: pd.DataFrame, split: pd.DataFrame) -> list:
    """The stragglers, the waits per rank, the time in collectives split, the bytes each
    rank sends in all_to_all; none without a matched collective."""
    if coll.empty:
        return []
    tables = [
        _table(
            "stragglers",
            "Straggler per step (the rank whose lateness imposed the most wait) and over "
            "all steps; phase = the range in the step that is longest vs the median rank",
            _straggler_rows(strag),
            (
                "affected_steps",
                "slow_steps",
                "jitter",
                "collectives",
                "last",
                "significant",
                "share_of_wait",
            ),
        ),
        _waits_table(coll, split),
        _comm_split_table(split),
    ]
    exchange = _exchange_bytes_table(coll)
    return tables + ([exchange] if exchange is not None else [])


def _group_tables(groups: pd.DataFrame, miss: pd.DataFrame) -> list:
    """The process groups found, and the collective keys not matched across ranks."""
    tables = []
    if not groups.empty:
        records = groups.astype(object).where(groups.notna(), None).to_dict("records")
        tables.append(
            _table(
                "groups",
                "Process groups found: members captured, group size when "
                "recorded, whether the group spans hosts, how it was found",
                records,
                ("spans_hosts", "captured", "group_size"),
            )
        )
    if not miss.empty:
        tables.append(_mismatch_table(miss))
    return tables
