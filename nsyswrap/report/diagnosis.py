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

from nsyswrap.report.figures import COUNT, FRACTION, NS, figure, rows, section, value
from nsyswrap.report.metric_findings import metric_findings
from nsyswrap.report.options import ReportOptions
from nsyswrap.report.verdict import NOT_ENOUGH, Evidence, Totals, ms, recommendations, verdict

WAIT_DOMINATES = 0.5   # waits >= this share of a device's NCCL time: waiting-for-peers,
WAIT_NOTABLE = 0.05    # when its exposed communication is at least this share of the span
MIN_STEPS = 2
MPI_WAIT = ("the collectives are MPI calls on the host: a wait in one blocks the host, not "
            "the GPU's communication")
WORST_STEPS = 3
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
    parts = [p for run in runs
             for p in ([f"{run[0]}-{run[-1]}"] if len(run) > 2 else map(str, run))]
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
                span_ns=value(r["span"], 0), compute_busy_ns=value(r["compute_busy"], 0),
                comm_busy_ns=value(r["comm_busy"], 0), both_ns=value(r["both"], 0),
                exposed_comm_ns=value(r["comm_only"], 0), copy_only_ns=value(r["copy_only"], 0),
                idle_ns=value(r["idle"], 0), gap_ns=gaps.get((r["rank"], r["device"]), {}))
            for r in rows(report, "single_rank", "ledger")}
        self.activities = {(r["rank"], r["device"]): value(r["activities"], 0)
                           for r in rows(report, "trace", "activity")}
        window = report.get("window") or {}
        self.set_apart = frozenset(o["step"] for o in window.get("outliers", [])
                                   if o.get("set_apart"))
        self.steps: dict[tuple, list[tuple[int, int]]] = {}  # every step in the window
        for r in rows(report, "single_rank", "steps"):
            self.steps.setdefault((r["rank"], r["device"]), []).append(
                (r["step"], value(r["duration"], 0)))
        self.usual = {key: [(s, d) for s, d in steps if s not in self.set_apart]
                      for key, steps in self.steps.items()}  # what step statistics are of
        # figures are per step only over a window of steps (not the whole capture, not NVTX)
        self.of_steps = window.get("source") in (None, "steps") or (
            window.get("source") == "given" and not (report.get("options") or {}).get(
                "window_nvtx") and (window.get("step_from"), window.get("step_to")) != (
                None, None))
        self.waited = {r["rank"]: value(r["waited"], 0)
                       for r in rows(report, "crossrank", "rank_waits")}
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
        """The devices' totals as one GPU's per step (over the window without steps), the
        factor and the basis in words."""
        n = self.step_count(keys[0])
        factor = 1 / (len(keys) * (n or 1))
        group = sum((self.totals[k] for k in keys), Totals())
        return group.scaled(factor), factor, "per step" if n else "over the window"

    def label(self, key) -> dict:
        t = self.totals[key]
        v = verdict(t, self.activities.get(key))
        waited = self.waited.get(key[0], 0)
        if (v["label"] in ("communication-bound", "balanced") and t.comm_busy_ns
                and waited >= WAIT_DOMINATES * t.comm_busy_ns
                and t.exposed_comm_ns >= WAIT_NOTABLE * t.span_ns):
            return {"label": "waiting-for-peers",
                    "reason": f"it waits {ms(waited)} in collectives for slower ranks, "
                              f"{waited / t.comm_busy_ns:.0%} of its NCCL time; "
                              f"{v['reason']}"}
        return v

    def evidence(self, keys: list, factor: float = 1.0, basis: str = "") -> Evidence:
        """What the advice on devices `keys` cites, from the report's tables; times of the
        devices scaled by `factor` as their totals are (basis says how)."""
        ranks = {k[0] for k in keys}

        def mine(table: str) -> list[dict]:
            return [r for r in rows(self.report, "single_rank", table)
                    if (r["rank"], r.get("device")) in keys]

        copies = [r for r in rows(self.report, "trace", "copies")
                  if r["rank"] in ranks and r["kind"] in ("HtoD", "DtoH")]
        pageable = [r for r in copies if "Pageable" in (r["src"], r["dst"])]
        known = any(r["src"] != "Unknown" for r in copies)
        e = Evidence(
            ranks=len(ranks), frameworks=self.frameworks, basis=basis, gpus=len(keys),
            host_copies=sum(value(r["copies"], 0) for r in copies),
            host_copy_bytes=sum(value(r.get("bytes"), 0) for r in copies),
            pageable_copies=sum(value(r["copies"], 0) for r in pageable) if known else None,
            pageable_bytes=sum(value(r.get("bytes"), 0) for r in pageable) if known else None,
            host_alloc_calls=sum(value(r["calls"], 0)
                                 for r in rows(self.report, "trace", "host_alloc")
                                 if r["rank"] in ranks),
            graph_launches=sum(value(r["graph_launches"], 0)
                               for r in rows(self.report, "trace", "graphs") if r["rank"] in ranks),
            kernels=sum(value(r["kernels"], 0) for r in mine("launches")),
            tiny_kernels=sum(value(r["tiny_kernels"], 0) for r in mine("launches")))
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
            e.top_exposed = (f"{r['kernel']} on rank {r['rank']} device {r['device']}{where}"
                             f"{step}, {ms(value(r['exposed'], 0))} exposed")
            e.same_stream = sorted({f"rank {r['rank']} device {r['device']}" for r in exposed
                                    if r.get("compute_stream")})
        return e


def diagnose(report: dict) -> dict:
    """The diagnosis dict (layout in README, "The report as JSON"); also sets the report's
    per-device labels (shares.verdict, the single-rank verdict) to the diagnosis' labels."""
    run = _Run(report)
    labels = {key: run.label(key) for key in run.totals}
    ranked, context = metric_findings(report, run, labels)
    findings = _crossrank_findings(report, run)
    device_findings = _device_findings(run, labels)
    findings += sorted(device_findings + ranked, key=lambda f: -f["share"]["value"])
    findings += context
    _reconcile(report, run, labels, sorted(device_findings, key=lambda f: -f["share"]["value"]))
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
        held = (f"; it holds {listed('step', steps)} (NVTX ranges like {pattern!r}), none set "
                "apart") if steps else ""
        return f"Window: first to last GPU activity of each device, as given{held}."
    if not steps and not rows(report, "trace", "activity"):
        return ""  # nothing captured to window: the cannot-answer lines say so
    if w.get("source") == "activity" or not steps:
        nvtx = (report.get("options") or {}).get("window_nvtx")
        where = f"NVTX ranges like {nvtx!r}, as given" if nvtx else \
            "first to last GPU activity of each device"
        return (f"Window: {where}. No step ranges were found (NVTX 'step:<i>', "
                "'ProfilerStep#<i>' or a range repeated with a growing number), so every figure "
                "is over the window, none divided by steps (--step-pattern names yours).")
    window = ReportOptions.from_params(w)
    inside = [s for s in steps if window.selects(s)]
    how = {"found": "found by themselves: no 'step:<i>' range; --step-pattern to choose others",
           "given": "--step-pattern"}.get(w.get("pattern_source"))
    text = (f"Window: {listed('step', inside)}" + (f" of {len(steps)}" if len(inside) < len(steps)
                                                   else "")
            + f" (NVTX ranges like {pattern!r}" + (f"; {how}" if how else "") + ")"
            + ("" if w.get("source") == "steps" else " as given") + ".")
    median = value(w.get("median_step"))
    for o in w.get("outliers", []):
        what = "warm-up" if o["why"] == "warm-up" else "an outlier"
        fate = ("left out" if o["set_apart"] and not window.selects(o["step"]) else
                "left out of the step statistics (its time is in the window)" if o["set_apart"]
                else "kept, as the window was given")
        text += (f" Step {o['step']} is {what} ({ms(value(o['duration'], 0))}, "
                 f"{o['times_median']:g}x the median step of {ms(median or 0)}): {fate}.")
    outside = rows(report, "single_rank", "window")
    if outside:
        before = max(value(r["before"], 0) for r in outside)
        after = max(value(r["after"], 0) for r in outside)
        parts = ([f"{ms(before)} before step {inside[0]}"] if before >= 5e3 else []) + (
            [f"{ms(after)} after step {inside[-1]}"] if after >= 5e3 else [])
        if parts:
            text += (" Not analysed: the GPU activity " + " and ".join(parts)
                     + (" (the most of any GPU)" if len(outside) > 1 else "") + ".")
    return text


def _crossrank_findings(report: dict, run: _Run) -> list[dict]:
    v = section(report, "crossrank").get("verdict") or {}
    if not str(v.get("label") or "").startswith("straggler"):
        return []
    strag = rows(report, "crossrank", "stragglers")
    total = next((r for r in strag if r["step"] == "all"), None)
    if total is None:
        return []
    rank = total["rank"]
    stepped = len({r["step"] for r in strag if r["step"] != "all"})
    n, basis = (stepped, "per step") if stepped else (1, "over the run")
    lag = value(total["lag"], 0) / n
    others = {r: w for r, w in run.waited.items() if r != rank and w > 0}
    wait = statistics.fmean(others.values()) / n if others else 0.0
    on_host = _mpi_only(report)
    other_keys = [] if on_host else [k for k in run.totals if k[0] in others]
    nccl = sum(run.totals[k].comm_busy_ns for k in other_keys) / max(len(other_keys), 1) / n
    exposed = sum(run.totals[k].exposed_comm_ns for k in other_keys) / max(len(other_keys), 1) / n
    phase = total.get("phase")
    excess = value(total.get("phase_excess"), 0) / n
    ops = sorted({r["op"] for r in rows(report, "crossrank", "bandwidth")})
    where = " and ".join(ops) if ops else "MPI collectives" if on_host else "collectives"
    text = (f"Rank {rank} is the straggler: it arrives last at {value(total['last'], 0)} of "
            f"{value(total['collectives'], 0)} collectives, {ms(lag)} {basis} after the median rank"
            + (f"; its lag is in `{phase}` (+{ms(excess)} {basis})" if phase else "") + ".")
    if others:
        who = _ranks(list(others), of=len(run.per_rank))
        verb, their = ("waits", "its") if len(others) == 1 else ("wait", "their")
        each = "" if len(others) == 1 else " each"  # the mean of the waiting ranks
        text += (f" {who[0].upper()}{who[1:]} {verb} {ms(wait)} {basis}{each} for it in "
                 f"{where}")
        if on_host:
            inside = [value(r["in_collectives"], 0) for r in rows(report, "crossrank", "comm_split")
                      if r["step"] == "all" and r["rank"] in others]
            mpi = statistics.fmean(inside) / n if inside else 0
            text += (f": {min(wait / mpi, 1):.0%} of {their} MPI time" if mpi else "") + (
                "; a wait inside an MPI call blocks the host, not the GPU, so it is not "
                f"part of {their} GPU's exposed communication")
        if nccl:
            text += f": {min(wait / nccl, 1):.0%} of {their} NCCL time"
        if exposed:
            text += (f", {min(wait / exposed, 1):.0%} of {their} exposed communication "
                     f"({ms(exposed)} {basis}{each})" if wait < exposed else
                     f", more than {their} exposed communication ({ms(exposed)} {basis}{each}),"
                     " so all of it is waiting")
        text += "."
    step_ns = _median_step(run)
    share = wait / step_ns if step_ns else None
    advice = (f"Make `{phase}` on rank {rank} as fast as on the others (+{ms(excess)} {basis} "
              "now); every other rank waits for it in the next collective." if phase else
              f"Find what makes rank {rank} slower (`nsyswrap query crossrank.stragglers`): the "
              "others wait for it in every collective.")
    return [{
        "id": "straggler", "scope": "cross-rank", "label": f"straggler: rank {rank}",
        "ranks": [rank], "cost": figure(wait or lag, NS), "cost_basis": basis,
        "share": figure(share, FRACTION, "no step ranges to compare with"),
        "text": text, "recommendation": advice,
        "evidence": {"rank": rank, "phase": phase, "lag_per_step": figure(lag, NS),
                     "phase_excess_per_step": figure(excess, NS),
                     "waiting_ranks": sorted(others), "wait_per_step": figure(wait, NS),
                     "share_of_nccl_time": figure(min(wait / nccl, 1) if nccl else None, FRACTION,
                                                  MPI_WAIT if on_host else "no NCCL time"),
                     "share_of_exposed_comm": figure(min(wait / exposed, 1) if exposed else None, FRACTION,
                                                     MPI_WAIT if on_host else "no exposed communication"),
                     "exposed_comm_per_step": figure(exposed, NS),
                     "steps": figure(n, COUNT)},
    }]


def _mpi_only(report: dict) -> bool:
    """Whether every matched collective is an MPI call (found by MPI ranges, timed on the
    host) rather than NCCL work on the GPU."""
    found = {r["found_by"] for r in rows(report, "crossrank", "groups") if r.get("status") == "matched"}
    return bool(found) and all(f.startswith("MPI") for f in found)


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
        evidence = run.evidence(keys, factor, basis)
        cost = getattr(per, attr)
        share = per.share(cost)
        names = _devices(keys, run.per_rank)
        text = (f"{names[0].upper()}{names[1:]} {'is' if len(keys) == 1 else 'are'} {label}: "
                f"{share:.0%} of the GPU time {what} ({evidence.amount(cost)}).")
        advice = recommendations(per, evidence, label)
        said = [advice[t] for t in ADVICE_TOPICS[label] if t in advice]
        basis = "per step" if basis == "per step" else "over the span"
        out.append({
            "id": label, "scope": "device", "label": label,
            "devices": [list(k) for k in sorted(keys)], "cost": figure(cost, NS),
            "cost_basis": basis, "share": figure(share, FRACTION), "text": text,
            "recommendation": " ".join(said) or None,
            "evidence": {"reason": reason},
        })
    return out


def _device_row(run: _Run, key, v: dict) -> dict:
    t = run.totals[key]
    durations = sorted(d for _, d in run.usual.get(key, []))
    few = f"fewer than {MIN_STEPS} steps"
    stat = (lambda f: figure(f(durations), NS)) if len(durations) >= MIN_STEPS else (
        lambda f: figure(None, NS, few))
    n = len(run.steps.get(key, []))  # waits are in the steps' collectives, whatever the window
    waited, basis = (run.waited.get(key[0], 0) / n, "per step") if n else (
        run.waited.get(key[0], 0), "over the span")
    empty = "the window is empty"
    return {
        "rank": key[0], "device": key[1], "label": v["label"], "reason": v["reason"],
        "steps": figure(len(durations), COUNT),
        "step_mean": stat(statistics.fmean), "step_p50": stat(lambda d: quantile(d, 0.5)),
        "step_p90": stat(lambda d: quantile(d, 0.9)), "step_max": stat(max),
        "compute": figure(t.share(t.compute_busy_ns) if t.span_ns else None, FRACTION, empty),
        "exposed_comm": figure(t.share(t.exposed_comm_ns) if t.span_ns else None, FRACTION, empty),
        "copy_only": figure(t.share(t.copy_only_ns) if t.span_ns else None, FRACTION, empty),
        "idle": figure(t.share(t.idle_ns) if t.span_ns else None, FRACTION, empty),
        "waited": figure(waited if key[0] in run.waited else None, NS,
                         "no cross-rank waits (one rank, or no matched collective)"),
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
            {"phase": r["phase"], "mean": r["mean"], "share": r["share_of_step"]})
    out = []
    few = f"fewer than {MIN_STEPS} steps"
    for rank, durations in sorted(steps.items()):
        durations.sort()
        stat = (lambda f, d=durations: figure(f(d), NS)) if len(durations) >= MIN_STEPS else (
            lambda f: figure(None, NS, few))
        out.append({"rank": rank, "steps": figure(len(durations), COUNT),
                    "step_mean": stat(statistics.fmean),
                    "step_p50": stat(lambda d: quantile(d, .5)),
                    "step_p90": stat(lambda d: quantile(d, .9)), "step_max": stat(max),
                    "phases": phases.get(rank, [])})
    return out


def _worst_steps(run: _Run) -> list[dict]:
    every = [(d, key, step) for key, steps in run.usual.items() for step, d in steps]
    every.sort(key=lambda x: (-x[0], x[1], x[2]))
    return [{"rank": key[0], "device": key[1], "step": step, "duration": figure(d, NS)}
            for d, key, step in every[:WORST_STEPS]]


def _headline(findings: list, labels: dict, run: _Run) -> str:
    if findings:
        f = findings[0]
        return f["label"].upper() if f["scope"] == "cross-rank" else (
            f"{f['label'].upper()}" + ("" if len(labels) == 1 else
                                       f" ({len(f['devices'])} of {len(labels)} GPUs)"))
    if not labels:
        return "NOTHING IN THE WINDOW" if run.activities else "NO GPU ACTIVITY"
    found = {v["label"] or "no verdict" for v in labels.values()}
    return (found.pop() if len(found) == 1 else "mixed").upper()


def _cannot_answer(report: dict, run: _Run) -> list[dict]:
    out = []
    if not run.totals:
        out.append({"what": "where the GPU time goes",
                    "reason": "no report has GPU activity in the window (no CUDA kernel, memcpy "
                              "or memset); capture with nsys profile --trace=cuda" if not
                              rows(report, "trace", "activity") else
                              "no GPU activity falls in the window"})
    return out


def _reconcile(report: dict, run: _Run, labels: dict, findings: list[dict]) -> None:
    """Make the single-rank section's per-device labels and advice those of the diagnosis."""
    for r in rows(report, "single_rank", "shares"):
        key = (r["rank"], r["device"])
        if key in labels:
            r["verdict"] = labels[key]["label"]
    single = section(report, "single_rank")
    advice = [f["recommendation"] if len(findings) == 1 else
              f"On {_devices([tuple(k) for k in f['devices']], run.per_rank)} ({f['label']}): "
              f"{f['recommendation']}" for f in findings if f.get("recommendation")]
    if single:
        single["recommendations"] = advice + single.get("recommendations", [])
    if not run.totals or not single.get("verdict"):
        return
    overall = sum(run.totals.values(), Totals())
    activities = sum(run.activities.values()) if run.activities else None
    v = verdict(overall, activities)
    waiting = [k for k, x in labels.items() if x["label"] == "waiting-for-peers"]
    if v["label"] in ("communication-bound", "balanced") and 2 * len(waiting) >= len(labels):
        v = {"label": "waiting-for-peers",
             "reason": f"{len(waiting)} of {len(labels)} GPUs mostly wait for slower ranks in "
                       f"collectives; {v['reason']}"}
    single["verdict"] = v
    if v["label"] == NOT_ENOUGH:
        single["recommendations"] = []
