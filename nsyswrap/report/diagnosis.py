"""The diagnosis on top of a report: the few findings that cost the most step time, ranked
by that cost, each with its number and its evidence.

It reads only the report dict's sections (their stable table ids and columns), never SQL:
* cross-rank findings first (the straggler: who, in which phase, its lag per step, the
  wait it imposes on the others per step and how much of their communication that is:
  their NCCL time and exposed communication, or, when the collectives are MPI calls, their
  time in MPI calls, which blocks the host, not the GPU);
* then per-device findings, one per verdict (communication-, copy-, host-, compute-bound),
  ranked by the step time their cause takes;
* a device whose exposed communication is mostly waiting for a slower rank is labelled
  waiting-for-peers, never communication-bound (the per-device labels of the report are
  set to the same labels, so no part of the report contradicts another);
* recommendations follow the findings and cite their figures; framework advice only for
  frameworks the trace section saw;
* the compute, memory and host sections add findings where they change the answer
  (nsyswrap.report.metric_findings): ranked among the per-device findings by their cost,
  or, without a cost of their own (MFU, GPU memory), after them as context.

Costs are per step when the report found steps, else over the analysed span (the run,
for the straggler), as each finding's `cost_basis` says; a finding about several GPUs
gives the figures of one GPU (their mean, "per GPU"), and its advice the same figures.
Step statistics need at least MIN_STEPS steps and leave out the steps the window set
apart (warm-up and outliers, nsyswrap.report.window). The `window` line says what was
analysed and what was not.
"""

from __future__ import annotations

import statistics

from nsyswrap.report.figures import (
    COUNT,
    FRACTION,
    NS,
    basis_words,
    figure,
    rows,
    section,
    value,
)
from nsyswrap.report.link_findings import link_findings
from nsyswrap.report.metric_findings import metric_findings
from nsyswrap.report.options import ReportOptions
from nsyswrap.report.verdict import NOT_ENOUGH, Evidence, Totals, ms, recommendations, verdict

WAIT_DOMINATES = 0.5  # waits >= this share of a device's NCCL time: waiting-for-peers,
WAIT_NOTABLE = 0.05  # when its exposed communication is at least this share of the span
MIN_STEPS = 2
MPI_WAIT = (
    "the collectives are MPI calls on the host: a wait in one blocks the host, not "
    "the GPU's communication"
)
WORST_STEPS = 3
# of two ranks the median is their midpoint: the lag and the phase excess are half the gap
TWO_RANKS = " (of two ranks, their midpoint: half the gap to the other, here and in its phase)"
MIN_GAIN_SHARE = 0.01  # a fix is named when it saves this share of a step where it saves time
NAMED_PHASE = 0.8  # a rank's fix is told by its phase when that phase holds this much of it
ADVISED_PHASE = 0.5  # ... and advised by its largest phase when that holds this much of it
LAG_IN = "; its lag is in `{}`"
LAG_MOST = "; of its phase ranges, `{}` lags the most"  # where the replay names another phase
HOT_EXCHANGE = 1.25  # a slow rank sending this x the median rank's all_to_all bytes: hot expert
MAX_CAUSES = 3
MOVING = 0.25  # stalls of one phase move between ranks when each saves this x the largest
TOLD = 0.5  # moving stalls tell a rank's gain when their phase on it holds this much of it
# The time behind each per-device verdict (the cost a finding ranks by).
DRIVER = {
    "communication-bound": ("exposed_comm_ns", "is exposed communication"),
    "copy-bound": ("copy_only_ns", "is copies with nothing else running"),
    "host-bound": ("host_idle_ns", "is idle waiting for the host"),
    "compute-bound": ("compute_busy_ns", "runs compute"),
}
ADVICE_TOPICS = {
    "communication-bound": ("exposed", "overlap", "same_stream"),  # all said, in order
    "copy-bound": ("copies",),
    "host-bound": ("sync", "host_work", "launch"),
    "compute-bound": ("compute",),
}


def listed(noun: str, numbers) -> str:
    """`rank 3`, `ranks 0, 1 and 3`, `steps 0-9`, `steps 0-3, 5 and 7`: runs of three or
    more as ranges."""
    numbers = sorted(numbers)
    runs: list[list[int]] = []
    for n in numbers:
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    parts = [
        p for run in runs for p in ([f"{run[0]}-{run[-1]}"] if len(run) > 2 else map(str, run))
    ]
    words = ", ".join(parts[:-1]) + (" and " if len(parts) > 1 else "") + parts[-1]
    return f"{noun} " + words if len(numbers) == 1 else f"{noun}s " + words


def _ranks(ranks: list[int], of: int | None = None) -> str:
    """`rank 3`, `ranks 0, 1 and 3`, `ranks 0-1 and 3-15`, or `the other 15 ranks` when
    they are all `of` ranks but one."""
    if of is not None and len(ranks) == of - 1 and len(ranks) > 3:
        return f"the other {len(ranks)} ranks"
    return listed("rank", ranks)


def _devices(keys: list[tuple[int, int]], devices_per_rank: dict[int, int]) -> str:
    """`ranks 0 and 1` when each has one GPU, else `rank 0 GPU 0, rank 0 GPU 1`."""
    if all(devices_per_rank.get(rank, 1) == 1 for rank, _ in keys):
        return _ranks([rank for rank, _ in keys])
    return ", ".join(f"rank {rank} GPU {device}" for rank, device in sorted(keys))


class _Run:
    """The figures of one report dict, by (rank, device)."""

    def __init__(self, report: dict):
        self.report = report
        gaps: dict[tuple, dict[str, int]] = {}
        for r in rows(report, "single_rank", "idle_gaps"):
            gaps.setdefault((r["rank"], r["device"]), {})[r["cause"]] = value(r["total"], 0)
        self.totals = {
            (r["rank"], r["device"]): Totals(
                span_ns=value(r["span"], 0),
                compute_busy_ns=value(r["compute_busy"], 0),
                comm_busy_ns=value(r["comm_busy"], 0),
                both_ns=value(r["both"], 0),
                exposed_comm_ns=value(r["comm_only"], 0),
                copy_only_ns=value(r["copy_only"], 0),
                idle_ns=value(r["idle"], 0),
                gap_ns=gaps.get((r["rank"], r["device"]), {}),
            )
            for r in rows(report, "single_rank", "ledger")
        }
        self.activities = {
            (r["rank"], r["device"]): value(r["activities"], 0)
            for r in rows(report, "trace", "activity")
        }
        window = report.get("window") or {}
        self.set_apart = frozenset(
            o["step"] for o in window.get("outliers", []) if o.get("set_apart")
        )
        self.steps: dict[tuple, list[tuple[int, int]]] = {}  # every step in the window
        for r in rows(report, "single_rank", "steps"):
            self.steps.setdefault((r["rank"], r["device"]), []).append(
                (r["step"], value(r["duration"], 0))
            )
        self.usual = {
            key: [(s, d) for s, d in steps if s not in self.set_apart]
            for key, steps in self.steps.items()
        }  # what step statistics are of
        # figures are per step only over a window of steps (not the whole capture, not NVTX)
        self.of_steps = window.get("source") in (None, "steps") or (
            window.get("source") == "given"
            and not (report.get("options") or {}).get("window_nvtx")
            and (window.get("step_from"), window.get("step_to")) != (None, None)
        )
        self.waited = {
            r["rank"]: value(r["waited"], 0) for r in rows(report, "crossrank", "rank_waits")
        }
        self.in_collectives = {
            r["rank"]: value(r["in_collectives"], 0)
            for r in rows(report, "crossrank", "comm_split")
            if r["step"] == "all"
        }
        self.per_rank = {}
        for rank, _ in self.totals:
            self.per_rank[rank] = self.per_rank.get(rank, 0) + 1
        self.frameworks = frozenset(r["framework"] for r in rows(report, "trace", "frameworks"))

    def step_count(self, key) -> int:
        """The steps a window of steps holds, to divide its figures by (0: not one)."""
        return len(self.steps.get(key, [])) if self.of_steps else 0

    def per_step(self, key, ns: float) -> tuple[float, str]:
        """(ns per step, basis) over a window of steps, else (ns over the span, basis)."""
        n = self.step_count(key)
        return (ns / n, "per step") if n else (ns, "over the span")

    def per_gpu_step(self, keys: list) -> tuple[Totals, float, str]:
        """The devices' totals as one GPU's per step (over the span without steps), the
        factor and the basis (as per_step's)."""
        n = self.step_count(keys[0])
        factor = 1 / (len(keys) * (n or 1))
        group = sum((self.totals[k] for k in keys), Totals())
        return group.scaled(factor), factor, "per step" if n else "over the span"

    def label(self, key) -> dict:
        t = self.totals[key]
        v = verdict(t, self.activities.get(key))
        waited = self.waited.get(key[0], 0)
        inside = self.in_collectives.get(key[0], 0)  # the matched collectives its waits are in
        if (
            v["label"] in ("communication-bound", "balanced")
            and t.comm_busy_ns
            and waited >= WAIT_DOMINATES * t.comm_busy_ns
            and t.exposed_comm_ns >= WAIT_NOTABLE * t.span_ns
        ):
            return {
                "label": "waiting-for-peers",
                "reason": f"it waits {ms(waited)} in collectives for slower ranks, "
                f"{waited / max(inside, waited):.0%} of its time in them; "
                f"{v['reason']}",
            }
        return v

    def evidence(self, keys: list, factor: float = 1.0, basis: str = "") -> Evidence:
        """What the advice on devices `keys` cites, from the report's tables; times of the
        devices scaled by `factor` as their totals are (basis says how)."""
        ranks = {k[0] for k in keys}

        def mine(table: str) -> list[dict]:
            return [
                r
                for r in rows(self.report, "single_rank", table)
                if (r["rank"], r.get("device")) in keys
            ]

        copies = [
            r
            for r in rows(self.report, "trace", "copies")
            if r["rank"] in ranks and r["kind"] in ("HtoD", "DtoH")
        ]
        pageable = [r for r in copies if "Pageable" in (r["src"], r["dst"])]
        known = any(r["src"] != "Unknown" for r in copies)
        e = Evidence(
            ranks=len(ranks),
            frameworks=self.frameworks,
            basis=basis,
            gpus=len(keys),
            host_copies=sum(value(r["copies"], 0) for r in copies),
            host_copy_bytes=sum(value(r.get("bytes"), 0) for r in copies),
            pageable_copies=sum(value(r["copies"], 0) for r in pageable) if known else None,
            pageable_bytes=sum(value(r.get("bytes"), 0) for r in pageable) if known else None,
            host_alloc_calls=sum(
                value(r["calls"], 0)
                for r in rows(self.report, "trace", "host_alloc")
                if r["rank"] in ranks
            ),
            graph_launches=sum(
                value(r["graph_launches"], 0)
                for r in rows(self.report, "trace", "graphs")
                if r["rank"] in ranks
            ),
            kernels=sum(value(r["kernels"], 0) for r in mine("launches")),
            tiny_kernels=sum(value(r["tiny_kernels"], 0) for r in mine("launches")),
        )
        work: dict[tuple, float] = {}
        for r in mine("host_work"):
            key = (r["source"], r["host_work"])
            work[key] = work.get(key, 0) + value(r["idle"], 0) * factor
        e.host_work = [(src, name, ns) for (src, name), ns in work.items()]
        exposed = [r for r in mine("top_exposed") if value(r["exposed"], 0) > 0]
        if exposed:
            r = exposed[0]
            where = f" in {r['context']}" if r.get("context") else ""
            step = f" (step {value(r['step'])})" if value(r["step"]) is not None else ""
            e.top_exposed = (
                f"{r['kernel']} on rank {r['rank']} device {r['device']}{where}"
                f"{step}, {ms(value(r['exposed'], 0))} exposed"
            )
            e.same_stream = sorted(
                {
                    f"rank {r['rank']} device {r['device']}"
                    for r in exposed
                    if r.get("compute_stream")
                }
            )
        return e


def diagnose(report: dict) -> dict:
    """The diagnosis dict (layout in README, "The report as JSON"); also sets the report's
    per-device labels (shares.verdict, the single-rank verdict) to the diagnosis' labels."""
    run = _Run(report)
    labels = {key: run.label(key) for key in run.totals}
    ranked, context = metric_findings(report, run, labels)
    findings = _gain_findings(report, run) + link_findings(report)
    device_findings = _device_findings(run, labels)
    findings += sorted(device_findings + ranked, key=lambda f: -f["share"]["value"])
    findings += context
    _with_gains(report, findings)
    findings = _by_gain(findings)
    _reconcile(report, run, labels, sorted(device_findings, key=lambda f: -f["share"]["value"]))
    _reconcile_crossrank(report, findings)
    return {
        "headline": _headline(findings, labels, run),
        "findings": findings,
        "window": window_text(report),
        "devices": [_device_row(run, key, labels[key]) for key in sorted(run.totals)],
        "host_steps": _host_steps(report, run),
        "worst_steps": _worst_steps(run),
        "recommendations": [f["recommendation"] for f in findings if f.get("recommendation")],
        "cannot_answer": _cannot_answer(report, run),
    }


def window_text(report: dict) -> str:
    """What the report analysed, in one paragraph: the window, the steps set apart, the
    time outside it (per GPU, not analysed)."""
    w = report.get("window") or {}
    pattern, steps = w.get("step_pattern", "step:%"), w.get("steps") or []
    if w.get("source") == "capture":
        held = (
            (f"; it holds {listed('step', steps)} (NVTX ranges like {pattern!r}), none set apart")
            if steps
            else ""
        )
        return f"Window: first to last GPU activity of each device, as given{held}."
    if not steps and not rows(report, "trace", "activity"):
        return ""  # nothing captured to window: the cannot-answer lines say so
    if w.get("source") == "activity" or not steps:
        nvtx = (report.get("options") or {}).get("window_nvtx")
        where = (
            f"NVTX ranges like {nvtx!r}, as given"
            if nvtx
            else "first to last GPU activity of each device"
        )
        return (
            f"Window: {where}. No step ranges were found (NVTX 'step:<i>', "
            "'ProfilerStep#<i>' or a range repeated with a growing number), so every figure "
            "is over the window, none divided by steps (--step-pattern names yours)."
        )
    window = ReportOptions.from_params(w)
    inside = [s for s in steps if window.selects(s)]
    how = {
        "found": "found by themselves: no 'step:<i>' range; --step-pattern to choose others",
        "given": "--step-pattern",
    }.get(w.get("pattern_source"))
    of = f" of {len(steps)}" if len(inside) < len(steps) else ""
    if w.get("pattern_source") == "samples":
        text = f"Window: {len(inside)} sampled steps{of}, {inside[0]} to {inside[-1]}"
    else:
        where = f"NVTX ranges like {pattern!r}" + (f"; {how}" if how else "")
        text = f"Window: {listed('step', inside)}{of} ({where})"
    text += ("" if w.get("source") == "steps" else " as given") + "."
    median = value(w.get("median_step"))
    for o in w.get("outliers", []):
        what = "warm-up" if o["why"] == "warm-up" else "an outlier"
        fate = (
            "left out (the replay, what a fix would save, still counts it)"
            if o["set_apart"] and window.step_to is not None and o["step"] >= window.step_to
            else "left out"
            if o["set_apart"] and not window.selects(o["step"])
            else "left out of the step statistics (its time is in the window)"
            if o["set_apart"]
            else "kept, as the window was given"
        )
        text += (
            f" Step {o['step']} is {what} ({ms(value(o['duration'], 0))}, "
            f"{o['times_median']:g}x the median step of {ms(median or 0)}): {fate}."
        )
    outside = rows(report, "single_rank", "window")
    if outside:
        before = max(value(r["before"], 0) for r in outside)
        after = max(value(r["after"], 0) for r in outside)
        parts = ([f"{ms(before)} before step {inside[0]}"] if before >= 5e3 else []) + (
            [f"{ms(after)} after step {inside[-1]}"] if after >= 5e3 else []
        )
        if parts:
            text += (
                " Not analysed: the GPU activity "
                + " and ".join(parts)
                + (" (the most of any GPU)" if len(outside) > 1 else "")
                + "."
            )
    return text


def _crossrank_findings(report: dict, run: _Run) -> list[dict]:
    """The straggler finding. Every per-step figure is divided by the steps it sums: its lag
    and the wait it imposes by the steps of the straggler table (a group's first
    collective, which holds the ranks' start-up skew, is left out, so a step whose only
    collective that is has no row), its phase excess by the steps that excess sums, the
    others' exposed communication by each device's steps."""
    v = section(report, "crossrank").get("verdict") or {}
    if not str(v.get("label") or "").startswith("straggler"):
        return []
    strag = rows(report, "crossrank", "stragglers")
    total = next((r for r in strag if r["step"] == "all"), None)
    if total is None:
        return []
    rank = total["rank"]
    lag_steps = {r["step"] for r in strag if r["step"] != "all"}
    n, basis = (len(lag_steps), "per step") if lag_steps else (1, "over the run")
    lag = value(total["lag"], 0) / n
    others = sorted(r for r, w in run.waited.items() if r != rank and w > 0)
    wait = value(total["imposed_wait"], 0) / len(others) / n if others else 0.0
    on_host = _mpi_only(report)
    steps = lag_steps or {"all"}
    inside = [
        value(r["in_collectives"], 0)
        for r in rows(report, "crossrank", "comm_split")
        if r["rank"] in others and r["step"] in steps
    ]
    in_collectives = sum(inside) / len(others) / n if others else 0.0  # >= wait: waits are in them
    other_keys = [] if on_host else [k for k in run.totals if k[0] in others]
    exposed = (
        statistics.fmean(run.per_step(k, run.totals[k].exposed_comm_ns)[0] for k in other_keys)
        if other_keys
        else 0.0
    )
    phase = total.get("phase")
    phase_steps = value(total.get("phase_steps"), 0) if lag_steps else 1
    excess = value(total.get("phase_excess"), 0) / (phase_steps or n)
    late = 0 < phase_steps < len(lag_steps)  # over the steps where it is late only
    phase_basis = "per step where it is late" if late else basis
    ops = sorted({r["op"] for r in rows(report, "crossrank", "bandwidth")})
    where = " and ".join(ops) if ops else "MPI collectives" if on_host else "collectives"
    all_steps = {s for steps in run.steps.values() for s, _ in steps}
    skipped = (
        f" (over {n} steps: each group's first collective, which holds the ranks' "
        "start-up skew, is left out)"
        if lag_steps and len(all_steps - lag_steps)
        else ""
    )
    text = (
        f"Rank {rank} is the straggler: it arrives last at {value(total['last'], 0)} of "
        f"{value(total['collectives'], 0)} collectives, {ms(lag)} {basis} after the median rank"
        + skipped
        + (TWO_RANKS if len(run.waited) == 2 else "")
        + (LAG_IN.format(phase) + f" (+{ms(excess)} {phase_basis})" if phase else "")
        + "."
    )
    if others:
        who = _ranks(others, of=len(run.per_rank))
        verb, their = ("waits", "its") if len(others) == 1 else ("wait", "their")
        each = "" if len(others) == 1 else " each"  # the mean of the waiting ranks
        text += f" {who[0].upper()}{who[1:]} {verb} {ms(wait)} {basis}{each} for it in {where}"
        if on_host:
            text += (
                f": {wait / in_collectives:.0%} of {their} MPI time" if in_collectives else ""
            ) + (
                "; a wait inside an MPI call blocks the host, not the GPU, so it is not "
                f"part of {their} GPU's exposed communication"
            )
        elif in_collectives:
            kind = "" if _host_timed(report) else "NCCL "
            text += f": {wait / in_collectives:.0%} of {their} {kind}time in those collectives"
        if exposed:
            text += (
                f", {min(wait / exposed, 1):.0%} of {their} exposed communication "
                f"({ms(exposed)} {basis}{each})"
                if wait < exposed
                else f", more than {their} exposed communication ({ms(exposed)} {basis}{each}),"
                " so all of it is waiting"
            )
        text += "."
    step_ns = _median_step(run)
    share = lag / step_ns if step_ns else None
    advice = (
        f"Make `{phase}` on rank {rank} as fast as on the others (+{ms(excess)} {phase_basis}"
        f"{'' if late else ' now'}); every other rank waits for it in the next collective."
        if phase
        else f"Find what makes rank {rank} slower (`nsyswrap query crossrank.stragglers`): the "
        "others wait for it in every collective."
    )
    return [
        {
            "id": "straggler",
            "scope": "cross-rank",
            "label": f"straggler: rank {rank}",
            "ranks": [rank],
            "cost": figure(lag, NS),
            "cost_basis": basis,
            "share": figure(share, FRACTION, "no step ranges to compare with"),
            "text": text,
            "recommendation": advice,
            "evidence": {
                "rank": rank,
                "phase": phase,
                "lag_per_step": figure(lag, NS),
                "phase_excess_per_step": figure(excess, NS),
                "waiting_ranks": others,
                "wait_per_step": figure(wait, NS),
                "share_of_nccl_time": figure(
                    wait / in_collectives if in_collectives and not on_host else None,
                    FRACTION,
                    MPI_WAIT if on_host else "no time in collectives",
                ),
                "share_of_exposed_comm": figure(
                    min(wait / exposed, 1) if exposed else None,
                    FRACTION,
                    MPI_WAIT if on_host else "no exposed communication",
                ),
                "exposed_comm_per_step": figure(exposed, NS),
                "steps": figure(n, COUNT),
                "phase_steps": figure(phase_steps, COUNT),
            },
        }
    ]


def _fix_steps(fix: dict) -> list[int]:
    return [int(x) for x in (fix.get("steps") or "").split(",") if x]


def _significant(fix: dict, step_ns: float) -> bool:
    """A fix worth naming: it saves time in some step (crossrank.whatif: more than the
    replay residual and the step noise), at least MIN_GAIN_SHARE of a step where it does."""
    per_affected = value(fix["gain_ns_per_affected_step"], 0)
    return fix["pattern"] != "none" and per_affected >= MIN_GAIN_SHARE * step_ns


def _causes(fixes: list[dict]) -> list[dict]:
    """The what-if causes worth naming, largest gain first: a phase whose stalls move between
    ranks (several ranks' fixes of one phase, each in its own steps and saving per affected
    step at least MOVING x the largest of them: one cause), and a rank
    with the phase that holds most of its gain, or else with its largest phase's part
    (unless moving stalls already name that phase on it, or each step where it is slow and
    at least TOLD of its gain)."""
    step_ns = next(
        (
            value(f["gain_ns_per_step"], 0) * 100 / value(f["gain_pct"])
            for f in fixes
            if value(f["gain_pct"], 0) > 0
        ),
        0.0,
    )
    sig = [f for f in fixes if _significant(f, step_ns)]
    per_rank = {
        (f["rank"], f["phase"]): f
        for f in sig
        if f["kind"] == "rank_phase" and f["rank"] is not None
    }
    causes, moving, moved = [], set(), set()
    for f in sig:
        if f["kind"] != "rank_phase" or f["rank"] is not None:
            continue
        mine = [g for (r, p), g in per_rank.items() if p == f["phase"]]
        largest = max((value(g["gain_ns_per_affected_step"], 0) for g in mine), default=0)
        mine = [g for g in mine if value(g["gain_ns_per_affected_step"], 0) >= MOVING * largest]
        pairs = sorted((s, g["rank"]) for g in mine for s in _fix_steps(g))
        if len(mine) >= 2 and len({s for s, _ in pairs}) == len(pairs):  # each step: one rank
            causes.append({"fix": f, "phase": f["phase"], "pairs": pairs})
            moving |= {(g["rank"], f["phase"]) for g in mine}
            moved |= set(pairs)
    causes += [{"fix": f, "stage": f["stage"]} for f in sig if f["kind"] == "stage"]
    for f in sig:
        if f["kind"] != "rank":
            continue
        phases = [g for (r, _), g in per_rank.items() if r == f["rank"]]
        best = max(phases, key=lambda g: value(g["gain_ns_per_step"], 0), default=None)
        named = best is not None and (
            value(best["gain_ns_per_step"], 0) >= NAMED_PHASE * value(f["gain_ns_per_step"], 0)
        )
        told = max(  # the largest gain of its moving stalls
            (value(g["gain_ns_per_step"], 0) for g in phases if (g["rank"], g["phase"]) in moving),
            default=0,
        )
        if (named and (f["rank"], best["phase"]) in moving) or (
            {(s, f["rank"]) for s in _fix_steps(f)} <= moved
            and told >= TOLD * value(f["gain_ns_per_step"], 0)
        ):
            continue  # moving stalls already say it (its phase, or its steps and gain)
        causes.append(
            {
                "fix": best if named else f,
                "rank": f["rank"],
                "phase": best["phase"] if named else None,
                "part": None if named else best,
            }
        )
    causes.sort(key=lambda c: -value(c["fix"]["gain_ns_per_step"], 0))
    return causes[:MAX_CAUSES]


def _gain_figures(fix: dict) -> tuple[float, float, str]:
    gain, pct = value(fix["gain_ns_per_step"], 0), value(fix["gain_pct"], 0)
    steps = f"in {value(fix['affected_steps'], 0)} of {value(fix['steps_in_window'], 0)} steps"
    return gain, pct, steps


def _moving_finding(cause: dict, gain_evidence: dict) -> dict:
    """Stalls of one phase that move between ranks: one finding naming each (step, rank)."""
    fix, phase = cause["fix"], cause["phase"]
    gain, pct, _ = _gain_figures(fix)
    per_affected = value(fix["gain_ns_per_affected_step"], 0)
    where = _and([f"rank {r} in step {s}" for s, r in cause["pairs"]])
    return {
        "id": "intermittent",
        "scope": "cross-rank",
        "label": f"intermittent: {phase} stalls on {where}",
        "ranks": sorted({r for _, r in cause["pairs"]}),
        "cost": figure(gain, NS),
        "cost_basis": "per step",
        "share": figure(pct / 100, FRACTION),
        "text": f"Intermittent `{phase}` stalls move between ranks: {where}. Fixing them would "
        f"save {ms(per_affected)} per affected step, {ms(gain)} per step on average "
        f"({pct:.0f} % of the step time); no rank is slow in most steps.",
        "recommendation": f"Find what stalls `{phase}` now and then ({where}): each stall costs "
        f"{ms(per_affected)} of step time, on every rank.",
        "evidence": {
            "phase": phase,
            "stalls": [{"step": s, "rank": r} for s, r in cause["pairs"]],
            **gain_evidence,
        },
    }


def _stage_finding(cause: dict, gain_evidence: dict) -> dict:
    """A pipeline stage slower than the others: what making it as fast saves, bubbles included."""
    fix, stage = cause["fix"], cause["stage"]
    gain, pct, steps = _gain_figures(fix)
    return {
        "id": "slow-stage",
        "scope": "cross-rank",
        "label": f"slow pipeline stage: {stage}",
        "ranks": [],
        "cost": figure(gain, NS),
        "cost_basis": "per step",
        "share": figure(pct / 100, FRACTION),
        "text": f"Pipeline stage {stage} is slower than the others: making its work as fast as the "
        f"other stages' would save {ms(gain)} per step ({pct:.0f} % of the step time, "
        f"{steps}), the bubbles it causes in the other stages included; the send/recv "
        "waits around it are partly the pipeline's own structure, this is not.",
        "recommendation": f"Rebalance the pipeline: move layers off stage {stage} (or speed up its "
        f"work); that saves {ms(gain)} per step.",
        "evidence": {"stage": stage, **gain_evidence},
    }


def _rank_finding(
    cause: dict, gain_evidence: dict, straggler: list[dict], hot: dict | None = None
) -> dict:
    """A rank slow in every step or in some: its gain, then the straggler's evidence (its lag,
    the others' waiting: figures, not its cost) when the stragglers table names it too;
    `hot`: its exchange_bytes row where it sends much more than the others in all_to_all
    (an MoE rank whose experts get more tokens: balance the routing)."""
    fix, rank, phase = cause["fix"], cause["rank"], cause["phase"]
    gain, pct, steps = _gain_figures(fix)
    per_affected = value(fix["gain_ns_per_affected_step"], 0)
    persistent = fix["pattern"] == "persistent"
    kind = "straggler" if persistent else "intermittent"
    fixing = f"fixing `{phase}` on it" if phase else "making it as fast as the others"
    saves = (
        f"{ms(gain)} per step ({pct:.0f} % of the step time, {steps})"
        if persistent
        else f"{ms(per_affected)} per affected step, {ms(gain)} per step on average "
        f"({pct:.0f} %, {steps}: {fix['steps']})"
    )
    text = (
        f"Rank {rank} is {'the straggler' if persistent else 'slow in some steps'}: {fixing} "
        f"would save {saves}."
    )
    evidence = {"rank": rank, "phase": phase, **gain_evidence}
    advice = (
        f"Make `{phase}` on rank {rank} as fast as on the others (it saves {ms(gain)} per "
        "step); every other rank waits for it in the next collective."
        if phase
        else f"Find what makes rank {rank} slower (`nsyswrap query crossrank.whatif`): making it "
        f"as fast as the others saves {ms(gain)} per step."
    )
    part = cause.get("part")
    if part is not None:
        from nsyswrap.crossrank.lanes import PHASE_GLOSS  # numpy: off the stored answer's path

        part_gain = value(part["gain_ns_per_step"], 0)
        gloss = f" ({PHASE_GLOSS[part['phase']]})" if part["phase"] in PHASE_GLOSS else ""
        text += (
            f" Of it, `{part['phase']}`{gloss} on rank {rank} alone "
            f"saves {ms(value(part['gain_ns_per_affected_step'], 0))} per affected step, "
            f"{ms(part_gain)} per step on average (steps {part['steps']})."
        )
        evidence["largest_phase"] = part["phase"]
        evidence["largest_phase_gain_per_step"] = part["gain_ns_per_step"]
        if part_gain >= ADVISED_PHASE * gain:
            advice = (
                f"Make `{part['phase']}` on rank {rank} as fast as on the others: that alone "
                f"saves {ms(part_gain)} per step (the whole rank made as fast, {ms(gain)}); "
                "every other rank waits for it in the next collective."
            )
    if hot is not None:
        sentence, advice = _hot_expert_words(rank, gain, hot)
        text += sentence
        evidence["exchange_bytes_vs_median"] = hot["vs_median"]
    known = next((f for f in straggler if f["ranks"] == [rank]), None)
    if known is not None:
        told = phase or (part or {}).get("phase")
        lag_phase = known["evidence"]["phase"]
        said = known["text"].split(":", 1)[1].removeprefix(" it")
        if told and lag_phase and lag_phase != told:  # the lag's phase ranges hold less
            said = said.replace(LAG_IN.format(lag_phase), LAG_MOST.format(lag_phase))
        text += " It" + said
        evidence = {**known["evidence"], **evidence}
        straggler.remove(known)
    return {
        "id": kind,
        "scope": "cross-rank",
        "label": f"{kind}: rank {rank}",
        "ranks": [rank],
        "cost": figure(gain, NS),
        "cost_basis": "per step",
        "share": figure(pct / 100, FRACTION),
        "text": text,
        "recommendation": advice,
        "evidence": evidence,
    }


def _hot_expert_words(rank: int, gain: float, hot: dict) -> tuple[str, str]:
    """(sentence, advice) of a slow rank that sends much more than the others in all_to_all."""
    op = hot["op"]
    sentence = (
        f" It sends {value(hot['vs_median']):.1f}x the median rank's bytes in {op}: the "
        "experts on it get more tokens than the others' (a hot expert)."
    )
    advice = (
        f"Balance the tokens routed to rank {rank}'s experts (a load-balancing loss, a "
        "capacity factor, or the hot expert replicated or placed elsewhere): making rank "
        f"{rank}'s work as fast as the others' saves {ms(gain)} per step; the shorter {op} "
        "transfers of a balanced routing come on top (the trace holds each rank's total "
        "bytes, not what it sends to each peer, so the replay cannot size them)."
    )
    return sentence, advice


def _gain_findings(report: dict, run: _Run) -> list[dict]:
    """Cross-rank findings ranked by what a fix saves (crossrank.whatif), each with its gain
    beside its evidence; without a replay, the straggler finding alone (its cost: its lag)."""
    straggler = _crossrank_findings(report, run)
    fixes = rows(report, "crossrank", "whatif")
    if not fixes:
        return straggler
    out = []
    for cause in _causes(fixes):
        fix = cause["fix"]
        gain, pct, _ = _gain_figures(fix)
        gain_evidence = {
            "gain_per_step": figure(gain, NS),
            "gain_share": figure(pct / 100, FRACTION),
            "gain_per_affected_step": fix["gain_ns_per_affected_step"],
            "pattern": fix["pattern"],
            "affected_steps": _fix_steps(fix),
        }
        if fix.get("assumed"):  # it rests on waits the trace does not show: a range
            gain_evidence["gain_low_per_step"] = fix["gain_low_ns_per_step"]
            gain_evidence["gain_high_per_step"] = fix["gain_high_ns_per_step"]
        if "pairs" in cause:
            finding = _moving_finding(cause, gain_evidence)
        elif "stage" in cause:
            finding = _stage_finding(cause, gain_evidence)
        else:
            hot = _hot_exchange(report, cause["rank"])
            finding = _rank_finding(cause, gain_evidence, straggler, hot)
        out.append(_with_range(finding, fix))
        _note_outliers(out[-1], run.set_apart)
    return out


def _with_range(finding: dict, fix: dict) -> dict:
    """A finding whose gain rests on waits the replay assumed says its range."""
    if not fix.get("assumed"):
        return finding
    low, high = value(fix["gain_low_ns_per_step"], 0), value(fix["gain_high_ns_per_step"], 0)
    finding["text"] += (
        f" That rests on waits the trace does not show (a host that resumed right after a "
        f"completion, no call recorded waiting: `assumed_waits`): between {ms(low)} per step "
        f"if the hosts waited for none of them and {ms(high)} if they waited for each."
    )
    return finding


def _note_outliers(finding: dict, set_apart: frozenset[int]) -> None:
    """A finding whose steps include steps set apart as outliers (left out of the step
    statistics, or out of the window after it) says that the replay counts them."""
    steps = sorted(set(finding["evidence"].get("affected_steps") or []) & set_apart)
    if steps:
        verb = "is an outlier" if len(steps) == 1 else "are outliers"
        finding["text"] += (
            f" ({listed('step', steps).capitalize()} {verb}, set apart from the step "
            "statistics; the replay counts them here.)"
        )
        finding["evidence"]["outlier_steps"] = steps


def _hot_exchange(report: dict, rank: int) -> dict | None:
    """The exchange_bytes row of `rank` that sends at least HOT_EXCHANGE x the median rank's
    bytes in an all_to_all op (the most, if several), else None."""
    mine = [
        r
        for r in rows(report, "crossrank", "exchange_bytes")
        if r["rank"] == rank and value(r["vs_median"], 0) >= HOT_EXCHANGE
    ]
    return max(mine, key=lambda r: value(r["vs_median"]), default=None)


def _and(items: list[str]) -> str:
    return ", ".join(items[:-1]) + (" and " if len(items) > 1 else "") + items[-1] if items else ""


def _with_gains(report: dict, findings: list[dict]) -> None:
    """Each finding's `gain`: what the replay says fixing it saves per step, else null and
    why. Exposed communication gets, as evidence, what hiding its costliest collective
    would save: at most that, for hiding it also removes the waits in it."""
    fixes = rows(report, "crossrank", "whatif")
    hide = max(
        (f for f in fixes if f["kind"] == "collective"),
        default=None,
        key=lambda f: value(f["gain_ns_per_step"], 0),
    )
    for f in findings:
        if f["scope"] == "cross-rank" and f["evidence"].get("gain_per_step"):
            f["gain"] = f["evidence"]["gain_per_step"]
            continue
        if f["id"] == "communication-bound" and hide and value(hide["gain_ns_per_step"], 0) > 0:
            gain, pct, _ = _gain_figures(hide)
            f["evidence"]["hide_gain_per_step"] = figure(gain, NS)
            f["text"] += (
                f" Hiding {hide['op']} (group {hide['pg']}) completely, waits included, "
                f"would save {ms(gain)} per step ({pct:.0f} %) at most."
            )
        f["gain"] = figure(
            None,
            NS,
            "the replay does not idealise this cause (crossrank.whatif); "
            "its cost is the time it takes, at most what fixing it saves"
            if fixes
            else "no what-if replay of this run (see cannot_answer)",
        )


def _by_gain(findings: list[dict]) -> list[dict]:
    """Findings with a replayed gain first, largest first; then the others in their order."""
    gained = [f for f in findings if f["gain"]["value"] is not None]
    rest = [f for f in findings if f not in gained]
    return sorted(gained, key=lambda f: -f["gain"]["value"]) + rest


def _reconcile_crossrank(report: dict, findings: list[dict]) -> None:
    """The cross-rank section's verdict names what the diagnosis names first from the replay
    (its own kept where it names the same rank); a straggler by the waits it imposes whose
    fix the replay finds not worth naming is no significant straggler, its gain said."""
    first = next(
        (f for f in findings if f["scope"] == "cross-rank" and f["gain"]["value"] is not None), None
    )
    verdict = section(report, "crossrank").get("verdict")
    if verdict is None:
        return
    if first is None:
        _straggler_without_gain(report, verdict)
        return
    same_rank = first["ranks"] and verdict.get("label") == f"straggler: rank {first['ranks'][0]}"
    if verdict.get("label") != first["label"] and not (len(first["ranks"]) == 1 and same_rank):
        verdict.update(label=first["label"], reason=first["text"])


def _straggler_without_gain(report: dict, verdict: dict) -> None:
    """Where the replay ran and names no cross-rank cause, the section's straggler (the rank
    the others waited for most) becomes "no significant straggler" with what making it as
    fast as the others saves: the waits it imposes are not what fixing it saves."""
    label = str(verdict.get("label") or "")
    fixes = rows(report, "crossrank", "whatif")
    if not fixes or not label.startswith("straggler: rank "):
        return
    rank = int(label.rsplit(" ", 1)[1])
    fix = next((f for f in fixes if f["kind"] == "rank" and f["rank"] == rank), None)
    gain, pct = (value(fix["gain_ns_per_step"], 0), value(fix["gain_pct"], 0)) if fix else (0, 0)
    steps = bool((report.get("window") or {}).get("steps"))
    basis, of = ("per step", "the step time") if steps else ("over the window", "the window")
    verdict.update(
        label="no significant straggler",
        reason=f"{verdict.get('reason', '')}; but the replay finds that making rank {rank} as "
        f"fast as the others would save {ms(gain)} {basis} ({pct:.1f} % of {of}, under "
        f"{MIN_GAIN_SHARE:.0%}): the others' waiting is not what fixing it saves",
    )


def _mpi_only(report: dict) -> bool:
    """Whether every matched collective is an MPI call (found by MPI ranges, timed on the
    host) rather than NCCL work on the GPU."""
    found = {
        r["found_by"] for r in rows(report, "crossrank", "groups") if r.get("status") == "matched"
    }
    return bool(found) and all(f.startswith("MPI") for f in found)


def _host_timed(report: dict) -> bool:
    """Whether the collectives are timed on the host (gloo, MPI: no rank has NCCL kernels)."""
    sources = {r["source"] for r in rows(report, "crossrank", "clock_offsets") if r["source"]}
    return bool(sources) and "kernel" not in sources


def _median_step(run: _Run) -> float:
    durations = [d for steps in run.usual.values() for _, d in steps]
    return statistics.median(durations) if durations else 0.0


def _device_findings(run: _Run, labels: dict) -> list[dict]:
    groups: dict[str, list] = {}
    for key, v in labels.items():
        if v["label"] in DRIVER:
            groups.setdefault(v["label"], []).append(key)
    out = []
    for label, keys in groups.items():
        attr, what = DRIVER[label]
        per, factor, basis = run.per_gpu_step(keys)  # one GPU's figures
        reason = verdict(sum((run.totals[k] for k in keys), Totals()))["reason"]
        evidence = run.evidence(keys, factor, basis_words(basis))
        cost = getattr(per, attr)
        share = per.share(cost)
        names = _devices(keys, run.per_rank)
        text = (
            f"{names[0].upper()}{names[1:]} {'is' if len(keys) == 1 else 'are'} {label}: "
            f"{share:.0%} of the GPU time {what} ({evidence.amount(cost)})."
        )
        advice = recommendations(per, evidence, label)
        said = [advice[t] for t in ADVICE_TOPICS[label] if t in advice]
        out.append(
            {
                "id": label,
                "scope": "device",
                "label": label,
                "devices": [list(k) for k in sorted(keys)],
                "cost": figure(cost, NS),
                "cost_basis": basis,
                "share": figure(share, FRACTION),
                "text": text,
                "recommendation": " ".join(said) or None,
                "evidence": {"reason": reason},
            }
        )
    return out


def _device_row(run: _Run, key, v: dict) -> dict:
    t = run.totals[key]
    durations = sorted(d for _, d in run.usual.get(key, []))
    few = f"fewer than {MIN_STEPS} steps"
    stat = (
        (lambda f: figure(f(durations), NS))
        if len(durations) >= MIN_STEPS
        else (lambda f: figure(None, NS, few))
    )
    n = len(run.steps.get(key, []))  # waits are in the steps' collectives, whatever the window
    waited, basis = (
        (run.waited.get(key[0], 0) / n, "per step")
        if n
        else (run.waited.get(key[0], 0), "over the span")
    )
    empty = "the window is empty"
    return {
        "rank": key[0],
        "device": key[1],
        "label": v["label"],
        "reason": v["reason"],
        "steps": figure(len(durations), COUNT),
        "step_mean": stat(statistics.fmean),
        "step_p50": stat(lambda d: quantile(d, 0.5)),
        "step_p90": stat(lambda d: quantile(d, 0.9)),
        "step_max": stat(max),
        "compute": figure(t.share(t.compute_busy_ns) if t.span_ns else None, FRACTION, empty),
        "exposed_comm": figure(t.share(t.exposed_comm_ns) if t.span_ns else None, FRACTION, empty),
        "copy_only": figure(t.share(t.copy_only_ns) if t.span_ns else None, FRACTION, empty),
        "idle": figure(t.share(t.idle_ns) if t.span_ns else None, FRACTION, empty),
        "waited": figure(
            waited if key[0] in run.waited else None,
            NS,
            "no cross-rank waits (one rank, or no matched collective)",
        ),
        "waited_basis": basis,
    }


def quantile(sorted_values: list, q: float) -> float:
    """The q-quantile of sorted values by linear interpolation (as DuckDB's quantile_cont)."""
    pos = q * (len(sorted_values) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def _host_steps(report: dict, run: _Run) -> list[dict]:
    """Per rank, its host step times and phases (NVTX ranges) when no GPU work was
    captured: the step statistics leave out the steps the window set apart."""
    if run.totals:
        return []
    steps: dict[int, list[int]] = {}
    for r in rows(report, "single_rank", "host_steps"):
        if r["step"] not in run.set_apart:
            steps.setdefault(r["rank"], []).append(value(r["duration"], 0))
    phases: dict[int, list[dict]] = {}
    for r in rows(report, "single_rank", "host_phases"):
        phases.setdefault(r["rank"], []).append(
            {"phase": r["phase"], "mean": r["mean"], "share": r["share_of_step"]}
        )
    out = []
    few = f"fewer than {MIN_STEPS} steps"
    for rank, durations in sorted(steps.items()):
        durations.sort()
        stat = (
            (lambda f, d=durations: figure(f(d), NS))
            if len(durations) >= MIN_STEPS
            else (lambda f: figure(None, NS, few))
        )
        out.append(
            {
                "rank": rank,
                "steps": figure(len(durations), COUNT),
                "step_mean": stat(statistics.fmean),
                "step_p50": stat(lambda d: quantile(d, 0.5)),
                "step_p90": stat(lambda d: quantile(d, 0.9)),
                "step_max": stat(max),
                "phases": phases.get(rank, []),
            }
        )
    return out


def _worst_steps(run: _Run) -> list[dict]:
    every = [(d, key, step) for key, steps in run.usual.items() for step, d in steps]
    every.sort(key=lambda x: (-x[0], x[1], x[2]))
    return [
        {"rank": key[0], "device": key[1], "step": step, "duration": figure(d, NS)}
        for d, key, step in every[:WORST_STEPS]
    ]


def _headline(findings: list, labels: dict, run: _Run) -> str:
    if findings:
        f = findings[0]
        return (
            f["label"].upper()
            if f["scope"] == "cross-rank"
            else (
                f"{f['label'].upper()}"
                + ("" if len(labels) == 1 else f" ({len(f['devices'])} of {len(labels)} GPUs)")
            )
        )
    if not labels:
        return "NOTHING IN THE WINDOW" if run.activities else "NO GPU ACTIVITY"
    found = {v["label"] or "no verdict" for v in labels.values()}
    return (found.pop() if len(found) == 1 else "mixed").upper()


def _cannot_answer(report: dict, run: _Run) -> list[dict]:
    out = [
        c
        for c in section(report, "crossrank").get("cannot_answer") or []
        if c["what"].startswith("what a fix would save")
    ]
    if not run.totals:
        out.append(
            {
                "what": "where the GPU time goes",
                "reason": "no report has GPU activity in the window (no CUDA kernel, memcpy "
                "or memset); capture with nsys profile --trace=cuda"
                if not rows(report, "trace", "activity")
                else "no GPU activity falls in the window",
            }
        )
    return out


def _reconcile(report: dict, run: _Run, labels: dict, findings: list[dict]) -> None:
    """Make the single-rank section's per-device labels and advice those of the diagnosis."""
    for r in rows(report, "single_rank", "shares"):
        key = (r["rank"], r["device"])
        if key in labels:
            r["verdict"] = labels[key]["label"]
    single = section(report, "single_rank")
    advice = [
        f["recommendation"]
        if len(findings) == 1
        else f"On {_devices([tuple(k) for k in f['devices']], run.per_rank)} ({f['label']}): "
        f"{f['recommendation']}"
        for f in findings
        if f.get("recommendation")
    ]
    if single:
        single["recommendations"] = advice + single.get("recommendations", [])
    if not run.totals or not single.get("verdict"):
        return
    overall = sum(run.totals.values(), Totals())
    activities = sum(run.activities.values()) if run.activities else None
    v = verdict(overall, activities)
    waiting = [k for k, x in labels.items() if x["label"] == "waiting-for-peers"]
    if v["label"] in ("communication-bound", "balanced") and 2 * len(waiting) >= len(labels):
        v = {
            "label": "waiting-for-peers",
            "reason": f"{len(waiting)} of {len(labels)} GPUs mostly wait for slower ranks in "
            f"collectives; {v['reason']}",
        }
    single["verdict"] = v
    if v["label"] == NOT_ENOUGH:
        single["recommendations"] = []
