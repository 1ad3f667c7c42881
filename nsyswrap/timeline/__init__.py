"""An aligned multi-rank trace of a window for Perfetto or chrome://tracing: steps, NVTX
ranges, CUDA API calls, GPU activities and each rank's part in each matched collective,
with their args, launch and collective flows, and nesting lanes (nsyswrap.timeline.chrome);
when asked for, per rank, the steps as the replay times them with that rank idealised
(nsyswrap.timeline.ideal).

As one JSON file, every rank in run time (see crossrank.clock_offsets), so the same instant
lines up across ranks; or, with `per_rank`, a TAR archive of one file per rank on its own
clock and a Perfetto manifest that places each by its fitted offset
(nsyswrap.timeline.archive).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from nsyswrap.engine.opener import DEFAULT_OPENER, Opener
from nsyswrap.engine.queries import run_module
from nsyswrap.engine.run import Run
from nsyswrap.errors import NsysWrapError
from nsyswrap.report.options import ReportOptions
from nsyswrap.storage.safe_output import check_writable, save
from nsyswrap.timeline.archive import per_rank_archive
from nsyswrap.timeline.chrome import trace_events
from nsyswrap.timeline.ideal import ideal_events

DEFAULT_MAX_EVENTS = 100_000
TIME = "µs since the lowest rank's aligned session start"


def window_events(run: Run, options: ReportOptions, max_events: int) -> pd.DataFrame:
    """The rows of crossrank.trace_events of the window `options` selects."""
    if max_events < 1:
        raise NsysWrapError("--max-events", f"is {max_events}", "give a positive number of events")
    events = run_module(
        run, "crossrank.trace_events", **options.window_params(), max_events=max_events
    )
    if events.empty:
        where = "the run" if not options.limits_window else options.describe()
        raise NsysWrapError(
            where,
            "has no events",
            "check the step numbers with `nsyswrap query crossrank.step_phases` "
            "and the NVTX texts with `nsyswrap query nvtx.gpu_time_by_text`",
        )
    return events


def _with_ideal(run: Run, options: ReportOptions, events: pd.DataFrame, ideal: bool):
    """`events` and, with `ideal`, the ideal steps' rows (nsyswrap.timeline.ideal) after
    them; and how many of those."""
    if not ideal:
        return events, 0
    rows = ideal_events(run, options, events)
    return pd.concat([events, rows], ignore_index=True), len(rows)


def chrome_trace(
    run: Run,
    options: ReportOptions | None = None,
    *,
    max_events: int = DEFAULT_MAX_EVENTS,
    ideal: bool = False,
) -> dict:
    """The trace of the window `options` selects (steps found by its step pattern, NVTX
    ranges) as a Chrome trace-event dict (`traceEvents`, times in µs); with `ideal`, each
    rank's ideal steps too (beyond `max_events`)."""
    options = options or ReportOptions()
    events = window_events(run, options, max_events)
    laid, ideal_steps = _with_ideal(run, options, events, ideal)
    out, flows = trace_events(laid)
    return {
        "traceEvents": out,
        "displayTimeUnit": "ns",
        "otherData": {
            "time": TIME,
            "events": len(events),
            **({"ideal_steps": ideal_steps} if ideal else {}),
            "flows": flows,
            "max_events": max_events,
            "truncated": len(events) == max_events,
        },
    }


def write_timeline(
    reports: list[str | Path],
    output: Path,
    options: ReportOptions | None = None,
    *,
    max_events: int = DEFAULT_MAX_EVENTS,
    opener: Opener = DEFAULT_OPENER,
    force: bool = False,
    per_rank: bool = False,
    ideal: bool = False,
) -> int:
    """Write the aligned trace of the reports to `output` (with `per_rank`: a TAR archive
    of one trace per rank and a Perfetto manifest; with `ideal`, each rank's ideal steps
    too); returns the number of events (ideal steps not counted)."""
    check_writable(output, force, reports)
    options = options or ReportOptions()
    with opener.open(reports) as run:
        if per_rank:
            events = window_events(run, options, max_events)
            laid, _ = _with_ideal(run, options, events, ideal)
            archive = per_rank_archive(laid, run_module(run, "crossrank.clock_offsets"))
            save(output, archive)
            return len(events)
        trace = chrome_trace(run, options, max_events=max_events, ideal=ideal)
    save(output, json.dumps(trace, separators=(",", ":")))
    return trace["otherData"]["events"]
