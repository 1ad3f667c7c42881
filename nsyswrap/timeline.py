"""An aligned multi-rank Chrome/Perfetto trace (JSON) of a window: steps, NVTX ranges.

One process per rank, one track per NVTX thread, per GPU stream and for the
waits inside collectives; timestamps are run time (see crossrank.clock_offsets),
so the same instant lines up across ranks.
"""

from __future__ import annotations

import json
from pathlib import Path

from nsyswrap.engine.opener import DEFAULT_OPENER, Opener
from nsyswrap.engine.queries import run_module
from nsyswrap.engine.run import Run
from nsyswrap.errors import NsysWrapError
from nsyswrap.output import check_writable
from nsyswrap.report.options import ReportOptions

DEFAULT_MAX_EVENTS = 100_000


def _track_order(track: str) -> tuple[int, str]:
    kind = 0 if track.startswith("thread") else 1 if track.startswith("GPU") else 2
    return kind, track


def chrome_trace(
    run: Run,
    options: ReportOptions | None = None,
    *,
    max_events: int = DEFAULT_MAX_EVENTS,
) -> dict:
    """The trace of the window `options` selects (steps found by its step pattern, NVTX
    ranges) as a Chrome trace-event dict (`traceEvents`, times in µs)."""
    options = options or ReportOptions()
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
    out = []
    for rank, group in events.groupby("rank", sort=True):
        rank = int(rank)
        out.append(
            {"ph": "M", "name": "process_name", "pid": rank, "args": {"name": f"rank {rank}"}}
        )
        out.append(
            {"ph": "M", "name": "process_sort_index", "pid": rank, "args": {"sort_index": rank}}
        )
        tids = {
            track: i for i, track in enumerate(sorted(group["track"].unique(), key=_track_order), 1)
        }
        for track, tid in tids.items():
            out.append(
                {"ph": "M", "name": "thread_name", "pid": rank, "tid": tid, "args": {"name": track}}
            )
            out.append(
                {
                    "ph": "M",
                    "name": "thread_sort_index",
                    "pid": rank,
                    "tid": tid,
                    "args": {"sort_index": tid},
                }
            )
        for e in group.sort_values(["start_ns", "dur_ns"], ascending=[True, False]).itertuples(
            index=False
        ):
            out.append(
                {
                    "ph": "X",
                    "pid": rank,
                    "tid": tids[e.track],
                    "name": e.name,
                    "cat": e.category,
                    "ts": e.start_ns / 1_000,
                    "dur": e.dur_ns / 1_000,
                }
            )
    return {
        "traceEvents": out,
        "displayTimeUnit": "ns",
        "otherData": {
            "time": "µs since the lowest rank's aligned session start",
            "events": len(events),
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
) -> int:
    """Write the aligned trace of the reports to `output`; returns the number of events."""
    check_writable(output, force)
    with opener.open(reports) as run:
        trace = chrome_trace(run, options, max_events=max_events)
    output.write_text(json.dumps(trace, separators=(",", ":")))
    return trace["otherData"]["events"]
