"""The single-rank section: time ledger, collective exposure, idle gaps (and the host work
behind the long ones), launches, steps and NVTX GPU time per (rank, device). Its verdict,
the `verdict` column of its `shares` table and the first of its recommendations are the
diagnosis' (nsyswrap.report.diagnosis reads these tables; nsyswrap.report.document
places what it decides); its own recommendation is the note on the usual overlap
estimate (rule naive_overlap)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import pandas as pd

from nsyswrap.report.captured import NO_GPU_WORK, TRACED_MODULES, traced, traced_note
from nsyswrap.report.diagnosis.facts import Totals
from nsyswrap.report.diagnosis.rules import host_idle_advice, naive_overlap
from nsyswrap.report.figures import COUNT, FRACTION, NS, figure, share
from nsyswrap.report.figures import table as _table
from nsyswrap.report.options import ReportOptions

if TYPE_CHECKING:
    from nsyswrap.report.flow import Inputs

TOP_EXPOSED = 10
TOP_RANGES = 15
LONG_GAP_NS = host_idle_advice.RULE.default("long_gap_ns")  # gaps.host_work's long gaps
TINY_KERNEL_NS = host_idle_advice.RULE.default("tiny_kernel_ns")  # gaps.launch_summary's
CAUSES = ("host_bound", "sync", "other", "unknown")
NO_COMM = "no NCCL kernel or peer-to-peer copy in the window on this device"
NO_LAUNCHES = "no CUDA launch calls were traced for these kernels (capture with --trace=cuda)"
NO_GPU_ACTIVITY = "the report has no GPU activity (no CUDA kernel, memcpy or memset rows)"


def single_rank_section(inputs: Inputs) -> dict:
    """Build the section dict (see nsyswrap.report for the layout) from the modules of
    `single_rank_modules` (and of `asked_modules` without GPU work)."""
    frames, options = inputs.frames, inputs.options
    ledger, gaps, steps, by_text, launch = (
        frames[k] for k in ("ledger", "gaps", "steps", "by_text", "launch")
    )
    exposure = frames["exposure"].sort_values(  # collectives.exposure's order, over all ranks
        ["exposed_ns", "rank", "device", "start_ns", "correlation_id"],
        ascending=[False, True, True, True, True],
        kind="stable",
        ignore_index=True,
    )
    totals = {key: _totals(row, gaps) for key, row in _by_device(ledger).items()}
    overall = sum(totals.values(), Totals())
    note = naive_overlap.find(overall) if totals else None
    captured = traced(inputs)
    tables = [
        _window_table(ledger, frames.get("active"), steps),
        _ledger_table(ledger),
        _shares_table(ledger),
        _collectives_table(frames["summary"]),
        _top_exposed_table(exposure),
        _gaps_table(gaps, ledger),
        _host_work_table(frames["host_work"]),
        _histogram_table(frames["histogram"]),
        _launch_table(launch, _no_launches(captured)),
        _steps_table(steps, options),
        _periodic_table(frames["periodic"]),
        _ranges_table(by_text, frames["step_texts"]),
    ]
    if frames.get("active", ledger).empty:  # no GPU work: the host's steps and phases
        tables += _host_tables(frames, options)
    cannot = _cannot_answer(
        inputs, (ledger, frames.get("active", ledger), exposure, gaps, steps), captured
    )
    if tables[-1] is None:
        why = _why_no_ranges(by_text, frames["quality"], captured)
        cannot.append({"what": "the GPU time of NVTX ranges", "reason": why})
    if ledger.empty:  # tables of nothing: the cannot-answer lines say why
        tables = [t for t in tables if t is not None and t["rows"]]
    return {
        "id": "single_rank",
        "title": f"Where the GPU time goes (window: {options.describe()})",
        "verdict": None,  # the diagnosis' (rule run_label)
        "recommendations": [note] if note else [],
        "tables": [t for t in tables if t is not None],
        "cannot_answer": cannot,
    }


def single_rank_modules(options: ReportOptions) -> dict[str, tuple[str, dict]]:
    """The section's modules, `key: (module, params)`: ledger, gaps (per cause), steps,
    histogram, exposure summary, NVTX GPU time by text, collective exposure (context:
    nsyswrap's ranges where a report has them, else any range), launch summary and, when
    the window is limited, the ledger of the whole activity (active)."""
    window = options.window_params()
    wanted = {
        "ledger": ("ledger.devices", window),
        "gaps": ("gaps.by_cause", window),
        "steps": ("steps.ledger", window),
        "histogram": ("gaps.histogram", window),
        "summary": ("collectives.exposure_summary", window),
        "by_text": ("nvtx.gpu_time_by_text", {}),
        "step_texts": ("steps.ranges", {"step_pattern": options.step_pattern}),
        "exposure": ("collectives.exposure", {**window, "context_regex": None}),
        "launch": ("gaps.launch_summary", {**window, "tiny_kernel_ns": TINY_KERNEL_NS}),
        "host_work": ("gaps.host_work", {**window, "long_gap_ns": LONG_GAP_NS}),
        "periodic": (
            "steps.periodic",
            {k: window[k] for k in ("step_pattern", "step_from", "step_to")},
        ),
        **TRACED_MODULES,
    }
    if options.limits_window:
        wanted["active"] = ("ledger.devices", {"step_pattern": options.step_pattern})
    return wanted


def asked_modules(options: ReportOptions) -> dict[str, tuple[str, dict]]:
    """What it reads on some paths only: without GPU work, the host's steps and their
    phases; without NVTX GPU time, the reports' data quality (why)."""
    pattern = {"step_pattern": options.step_pattern}
    return {
        "host_steps": ("steps.spans", pattern),
        "host_phases": (
            "crossrank.phase_lag",
            {**pattern, "step_from": options.step_from, "step_to": options.step_to},
        ),
        "quality": ("trace.data_quality", {}),
    }


def _by_device(df: pd.DataFrame) -> dict[tuple[int, int], pd.Series]:
    return {(int(r["rank"]), int(r.device)): r for _, r in df.iterrows()}


def _totals(row: pd.Series, gaps: pd.DataFrame) -> Totals:
    mine = gaps[(gaps["rank"] == row["rank"]) & (gaps.device == row.device)]
    return Totals(
        span_ns=int(row.span_ns),
        compute_busy_ns=int(row.compute_busy_ns),
        comm_busy_ns=int(row.comm_busy_ns),
        both_ns=int(row.both_ns),
        exposed_comm_ns=int(row.exposed_comm_ns),
        copy_only_ns=int(row.copy_only_ns),
        idle_ns=int(row.idle_ns),
        compute_sum_ns=int(row.compute_sum_ns),
        comm_sum_ns=int(row.comm_sum_ns),
        gap_ns={c: int(n) for c, n in mine.groupby("cause").dur_ns.sum().items()},
    )


def _key(row) -> dict:
    return {"rank": int(row["rank"]), "device": int(row["device"])}


def _window_table(
    ledger: pd.DataFrame, active: pd.DataFrame | None, steps: pd.DataFrame
) -> dict | None:
    """Per device, the GPU time outside a limited window: before its start and after its
    end, from the first to the last GPU activity (not analysed, never divided by steps)."""
    if active is None or ledger.empty:
        return None
    whole = _by_device(active)
    counts = steps.groupby(["rank", "device"]).size() if not steps.empty else pd.Series(dtype=int)
    rows = []
    for key, r in _by_device(ledger).items():
        a = whole.get(key)
        if a is None:
            continue
        rows.append(
            {
                **_key(r),
                "before": figure(max(r.window_start_ns - a.window_start_ns, 0), NS),
                "window": figure(r.span_ns, NS),
                "after": figure(max(a.window_end_ns - r.window_end_ns, 0), NS),
                "steps": figure(int(counts.get(key, 0)), COUNT),
                "busy_before": figure(r.busy_before_ns, NS),
                "busy_after": figure(r.busy_after_ns, NS),
            }
        )
    return _table(
        "window",
        "The window and the GPU time outside it (first to last GPU activity):"
        " before and after are not analysed; busy = the GPU's busy time in them",
        rows,
        ("busy_after", "busy_before"),
    )


def _host_tables(frames: Mapping[str, pd.DataFrame], options: ReportOptions) -> list[dict]:
    """A capture without GPU work: per rank its steps on the host (their NVTX ranges) and
    the phases inside them (crossrank.phase_lag: host time without waits)."""
    steps = frames["host_steps"]
    steps = steps[[options.selects(s) for s in steps.step]]
    if steps.empty:
        return []
    per_rank = steps.groupby(["rank", "step"], as_index=False).duration_ns.max()
    out = [
        _table(
            "host_steps",
            f"Steps on the host (NVTX ranges like {options.step_pattern!r};"
            " no GPU work was captured)",
            [
                {"rank": int(r.rank), "step": int(r.step), "duration": figure(r.duration_ns, NS)}
                for r in per_rank.itertuples(index=False)
            ],
        )
    ]
    phases = frames["host_phases"]
    if phases.empty:
        return out
    step_ns = per_rank.groupby("rank").duration_ns.sum()
    counts = per_rank.groupby("rank").size()
    mean = phases.groupby(["rank", "phase"], as_index=False).host_ns.sum()
    mean = mean.sort_values(["rank", "host_ns", "phase"], ascending=[True, False, True])
    rows = [
        {
            "rank": int(r.rank),
            "phase": r.phase,
            "mean": figure(r.host_ns / counts.get(r.rank, 1), NS),
            "share_of_step": share(r.host_ns, step_ns.get(r.rank), "no step time"),
        }
        for r in mean.itertuples(index=False)
    ]
    return out + [
        _table(
            "host_phases",
            "Phases of the host steps (ranges directly inside "
            "them): mean host time per step without waits, and its share",
            rows,
        )
    ]


def _ledger_table(ledger: pd.DataFrame) -> dict:
    rows = [
        {
            **_key(r),
            "span": figure(r.span_ns, NS),
            "compute_only": figure(r.compute_only_ns, NS),
            "both": figure(r.both_ns, NS),
            "comm_only": figure(r.comm_only_ns, NS),
            "copy_only": figure(r.copy_only_ns, NS),
            "idle": figure(r.idle_ns, NS),
            "compute_busy": figure(r.compute_busy_ns, NS),
            "comm_busy": figure(r.comm_busy_ns, NS),
            "copy_busy": figure(r.copy_busy_ns, NS),
        }
        for _, r in ledger.iterrows()
    ]
    return _table(
        "ledger",
        "Time ledger: compute_only + both + comm_only + copy_only + idle = span",
        rows,
        ("copy_busy", "comm_busy", "compute_busy"),
    )


def _shares_table(ledger: pd.DataFrame) -> dict:
    """Per device, the shares of its span (its verdict is the diagnosis': rule
    device_label)."""
    rows = []
    for _, r in ledger.iterrows():
        empty = "the window is empty"
        rows.append(
            {
                **_key(r),
                "compute_only": share(r.compute_only_ns, r.span_ns, empty),
                "both": share(r.both_ns, r.span_ns, empty),
                "exposed_comm": share(r.exposed_comm_ns, r.span_ns, empty),
                "copy_only": share(r.copy_only_ns, r.span_ns, empty),
                "idle": share(r.idle_ns, r.span_ns, empty),
                "overlap_ratio": figure(r.overlap_ratio, FRACTION, NO_COMM),
                "naive_overlap_ratio": figure(r.naive_overlap_ratio, FRACTION, NO_COMM),
            }
        )
    return _table(
        "shares",
        "Shares of the span; overlap = both / comm busy (exact), beside it where it fits "
        "the naive (compute + comm - span) / comm",
        rows,
        ("naive_overlap_ratio",),
    )


def _collectives_table(summary: pd.DataFrame) -> dict | None:
    if summary.empty:
        return None
    rows = [
        {
            **_key(r),
            "collectives": figure(r.collectives, COUNT),
            "hidden": figure(r.hidden, COUNT),
            "partly_hidden": figure(r.partly_hidden, COUNT),
            "exposed": figure(r.exposed, COUNT),
            "nccl_time": figure(r.total_ns, NS),
            "overlapped": figure(r.overlap_ns, NS),
            "exposed_time": figure(r.exposed_ns, NS),
        }
        for _, r in summary.iterrows()
    ]
    return _table(
        "collectives",
        "NCCL kernels hidden behind compute on the same device",
        rows,
        ("overlapped", "nccl_time"),
    )


def _top_exposed_table(exposure: pd.DataFrame) -> dict | None:
    top = exposure[exposure.exposed_ns > 0].head(TOP_EXPOSED)
    if top.empty:
        return None
    no_launch = "no launch call traced for this kernel"
    rows = [
        {
            **_key(r),
            "kernel": r["name"] if isinstance(r["name"], str) else None,  # (no name string)
            "step": figure(
                r.step,
                COUNT,
                "launch call outside every step range" if pd.notna(r.launch_ns) else no_launch,
            ),
            "context": r.context if isinstance(r.context, str) else None,
            "duration": figure(r.dur_ns, NS),
            "exposed": figure(r.exposed_ns, NS),
            "exposure": r.exposure,
            "compute_stream": bool(r.compute_stream),
        }
        for _, r in top.iterrows()
    ]
    return _table(
        "top_exposed",
        f"Most exposed NCCL kernels (top {TOP_EXPOSED}); context = "
        "innermost NVTX range around the launch call",
        rows,
        ("compute_stream", "duration", "exposure"),
    )


def _gaps_table(gaps: pd.DataFrame, ledger: pd.DataFrame) -> dict | None:
    """`gaps`: gaps.by_cause."""
    if gaps.empty:
        return None
    rows = []
    idle = {k: r.idle_ns for k, r in _by_device(ledger).items()}
    for (rank, device), mine in gaps.groupby(["rank", "device"]):
        for cause in CAUSES:
            part = mine[mine.cause == cause]
            if part.empty:
                continue
            rows.append(
                {
                    "rank": int(rank),
                    "device": int(device),
                    "cause": cause,
                    "gaps": figure(part.gaps.sum(), COUNT),
                    "total": figure(part.dur_ns.sum(), NS),
                    "longest": figure(part.longest_ns.max(), NS),
                    "share_of_idle": share(
                        part.dur_ns.sum(), idle.get((rank, device)), "no idle time"
                    ),
                }
            )
    return _table(
        "idle_gaps",
        "Idle gaps (nothing on any stream) by cause: other = the next "
        "kernel was already queued, else sync = host syncs cover half the gap, else "
        "host_bound = the next kernel was launched after the GPU went idle",
        rows,
        ("longest", "gaps"),
    )


def _host_work_table(work: pd.DataFrame) -> dict | None:
    """`work`: gaps.host_work (the long host-caused gaps by the host work covering them)."""
    if work.empty:
        return None
    rows = [
        {
            **_key(r),
            "source": r.source,
            "host_work": r["name"] if isinstance(r["name"], str) else None,
            "gaps": figure(r.gaps, COUNT),
            "idle": figure(r.idle_ns, NS),
            "longest": figure(r.longest_ns, NS),
        }
        for _, r in work.iterrows()
    ]
    return _table(
        "host_work",
        f"Host work the GPU waited for: host-caused idle gaps of "
        f"{LONG_GAP_NS / 1000:g} us or more by the NVTX range, MPI call or CUDA call "
        "covering at least half of each, else the OS runtime call on a thread that "
        "launches (source none: nothing does)",
        rows,
        ("longest", "gaps"),
    )


def _histogram_table(hist: pd.DataFrame) -> dict | None:
    if hist.empty:
        return None
    rows = []
    for (rank, device, lo), part in hist.groupby(["rank", "device", "bucket_lo_ns"]):
        hi = part.bucket_hi_ns.iloc[0]
        label = f">= {_duration(lo)}" if pd.isna(hi) else f"{_duration(lo)} - {_duration(hi)}"
        counts = dict(zip(part.cause, part.gaps))
        rows.append(
            {
                "rank": int(rank),
                "device": int(device),
                "length": label,
                **{c: figure(counts.get(c, 0), COUNT) for c in CAUSES},
                "total": figure(part.total_ns.sum(), NS),
            }
        )
    return _table("gap_histogram", "Idle gaps by length and cause (counts)", rows, ("total",))


def _duration(ns: float) -> str:
    ns = int(ns)
    for unit, size in (("s", 10**9), ("ms", 10**6), ("us", 10**3)):
        if ns >= size:
            return f"{ns / size:g} {unit}"
    return f"{ns} ns"


def _no_launches(captured: list[dict]) -> str:
    """Why kernels have no launch call (captured: nsyswrap.report.captured.traced)."""
    note = traced_note(captured, "cuda")
    if note is None:
        return NO_LAUNCHES
    return (
        f"no CUDA launch calls were recorded for these kernels, though {note}: the export "
        "holds none for them (a sliced or filtered report)"
    )


def _launch_table(launch: pd.DataFrame, no_launches: str) -> dict | None:
    if launch.empty:
        return None
    rows = [
        {
            **_key(r),
            "kernels": figure(r.kernels, COUNT),
            "launched": figure(r.launched, COUNT),
            "latency_p50": figure(r.latency_p50_ns, NS, no_launches),
            "latency_p90": figure(r.latency_p90_ns, NS, no_launches),
            "latency_max": figure(r.latency_max_ns, NS, no_launches),
            "kernel_p50": figure(r.kernel_p50_ns, NS),
            "tiny_kernels": figure(r.tiny_kernels, COUNT),
            "tiny_share": share(r.tiny_kernels, r.kernels, "no kernels"),
        }
        for _, r in launch.iterrows()
    ]
    return _table(
        "launches",
        f"Launch latency (kernel start - launch call start); tiny = shorter "
        f"than {TINY_KERNEL_NS / 1000:g} us",
        rows,
        ("latency_max", "kernel_p50", "launched", "tiny_kernels", "kernels"),
    )


def _steps_table(steps: pd.DataFrame, options: ReportOptions) -> dict | None:
    if steps.empty:
        return None
    rows = [
        {
            "rank": int(r.rank),
            "device": int(r.device),
            "step": int(r.step),
            "duration": figure(r.duration_ns, NS),
            "compute": figure(r.compute_busy_ns, NS),
            "comm": figure(r.comm_busy_ns, NS),
            "exposed_comm": figure(r.exposed_comm_ns, NS),
            "copy_only": figure(r.copy_only_ns, NS),
            "idle": figure(r.idle_ns, NS),
        }
        for r in steps.itertuples(index=False)  # one row per step: thousands
    ]
    return _table(
        "steps",
        f"Steps (NVTX ranges like {options.step_pattern!r}); compute and comm are busy unions",
        rows,
        ("copy_only",),
    )


def _periodic_table(periodic: pd.DataFrame) -> dict | None:
    """Long steps that recur with a period (steps.periodic), when some do."""
    if periodic.empty:
        return None
    several = periodic.groupby("rank")["pid"].nunique().max() > 1
    rows = [
        {
            "rank": int(r.rank),
            **({"pid": int(r.pid)} if several else {}),
            "period": figure(r.period, COUNT),
            "steps": r.steps,
            "stalls": figure(r.stalls, COUNT),
            "median_step": figure(r.median_step_ns, NS),
            "noise": figure(r.noise_ns, NS),
            "extra": figure(r.extra_ns, NS),
            "phase": r.phase if isinstance(r.phase, str) else None,
            "phase_extra": figure(r.phase_extra_ns, NS, "no phase range holds half the extra time"),
        }
        for r in periodic.itertuples(index=False)
    ]
    return _table(
        "periodic_steps",
        "Long steps that recur every `period` steps (longer than the median step by more "
        "than 3 x the step-to-step noise); extra = their time above the median step; phase "
        "= the phase range holding most of it",
        rows,
        ("noise", "median_step", "stalls", "phase_extra"),
    )


def _ranges_table(by_text: pd.DataFrame, step_texts: pd.DataFrame) -> dict | None:
    """The ranges other than the steps (steps.ranges: what the step pattern matched)."""
    steps = set(zip(step_texts["rank"], step_texts["pid"], step_texts["text"]))
    is_step = [key in steps for key in zip(by_text["rank"], by_text["pid"], by_text["text"])]
    ranges = by_text[(by_text.gpu_ns > 0) & ~pd.Series(is_step, index=by_text.index, dtype=bool)]
    if ranges.empty:
        return None
    top = ranges.sort_values(["gpu_ns", "rank", "text"], ascending=[False, True, True])
    rows = [
        {
            "rank": int(r["rank"]),
            "range": r.text,
            "ranges": figure(r.ranges, COUNT),
            "range_time": figure(r.range_ns, NS),
            "kernels": figure(r.kernels, COUNT),
            "gpu_time": figure(r.gpu_ns, NS),
            "compute": figure(r.compute_ns, NS),
            "nccl": figure(r.nccl_ns, NS),
            "copies": figure(r.copy_ns, NS),
        }
        for _, r in top.head(TOP_RANGES).iterrows()
    ]
    return _table(
        "nvtx_gpu_time",
        f"GPU time launched inside NVTX ranges, whole capture (top "
        f"{TOP_RANGES}; summed kernel time; nested ranges include their children)",
        rows,
        ("copies", "nccl", "compute", "ranges", "kernels", "range_time"),
    )


def _why_no_ranges(by_text: pd.DataFrame, quality: pd.DataFrame, captured: list[dict]) -> str:
    ranges, untexted = int(quality.nvtx_ranges.sum()), int(quality.nvtx_ranges_without_text.sum())
    if ranges and ranges == untexted:
        return f"the reports' {ranges} NVTX ranges all have no text, so none can be named"
    if by_text.empty and not ranges:
        note = traced_note(captured, "nvtx")
        return (
            "the reports have no NVTX ranges; annotate the model (nsyswrap launch "
            "--annotate all) and capture with --trace=nvtx"
            if note is None
            else f"the reports have no NVTX ranges, though {note}: annotate the model "
            "(nsyswrap launch --annotate all)"
        )
    return "no GPU work was launched inside an NVTX range other than the steps"


def _cannot_answer(
    inputs: Inputs, frames: tuple[pd.DataFrame, ...], captured: list[dict]
) -> list[dict]:
    """What the section cannot answer, and why; frames: ledger, active, exposure, gaps and
    steps; captured: what each report traced (nsyswrap.report.captured)."""
    ledger, active, exposure, gaps, steps = frames
    out, options, held = [], inputs.options, inputs.held  # a report may hold several ranks
    with_gpu = set(active["rank"])
    in_window = set(ledger["rank"])
    for report in inputs.reports:
        if not with_gpu & set(held[report.rank]):
            out.append(
                {
                    "what": "the time ledger, collective exposure, idle gaps and launch latency "
                    f"of rank {report.rank} ({report.path.name})",
                    "reason": _no_gpu_activity([c for c in captured if c["rank"] == report.rank]),
                }
            )
        elif not in_window & set(held[report.rank]):
            out.append(
                {
                    "what": f"the metrics of rank {report.rank} ({report.path.name})",
                    "reason": f"its window is empty: nothing matches {options.describe()}",
                }
            )
    if not ledger.empty and exposure.empty:
        out.append(
            {
                "what": "collective exposure",
                "reason": "no NCCL kernels in the window (communication, if any, is "
                "peer-to-peer copies only)"
                if ledger.comm_kernels.sum()
                else "no NCCL kernels or peer-to-peer copies in the window",
            }
        )
    if not gaps.empty and (gaps.cause == "unknown").all():
        out.append({"what": "the causes of idle gaps", "reason": _no_launches(captured)})
    if steps.empty:
        out.append(
            {
                "what": "the step breakdown",
                "reason": "no report has GPU activity (the breakdown is GPU time per step)"
                if active.empty
                else f"no NVTX range matches the step pattern {options.step_pattern!r} "
                "in the window; pass --step-pattern, e.g. 'ProfilerStep#%'",
            }
        )
    return out


def _no_gpu_activity(captured: list[dict]) -> str:
    """Why a report has no GPU activity, and what to do (captured: its trace.capture row)."""
    note = traced_note(captured, "cuda")
    if note is None:
        return f"{NO_GPU_ACTIVITY}; capture with nsys profile --trace=cuda"
    return f"{NO_GPU_ACTIVITY}, though {note}: {NO_GPU_WORK}"
