"""The host section of `nsyswrap report`: what the host's threads do while the GPU works,
so that launch-bound and host-blocked steps show their cause. A CUDA API summary (calls,
total, median by function: long synchronize calls are the host waiting for the GPU,
long launch calls launch overhead) and, when nsys traced it, an OS runtime summary
(with the time on the threads that call CUDA) per rank. Layout: see nsyswrap.report."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from nsyswrap.report.captured import TRACED_MODULES, traced, traced_note
from nsyswrap.report.figures import COUNT, FRACTION, NS, figure, table
from nsyswrap.report.options import ReportOptions

if TYPE_CHECKING:
    from nsyswrap.report.flow import Inputs

TOP_CALLS = 8  # functions per rank in each table
UNTRACED = {
    "cuda": "no CUDA API call was traced in the window (capture with nsys profile --trace=cuda)",
    "osrt": "the OS runtime was not traced "
    "(nsys profile --trace=osrt; nsyswrap launch traces it by default)",
}
"""Why the window has no CUDA API (cuda) or OS runtime (osrt) call, when not known traced."""
CALLS = {"cuda": "CUDA API", "osrt": "OS runtime"}


def host_modules(options: ReportOptions) -> dict[str, tuple[str, dict]]:
    """The section's modules, `key: (module, params)`."""
    window = options.window_params()
    return {"api": ("host.cuda_api", window), "osrt": ("host.osrt", window), **TRACED_MODULES}


def host_section(inputs: Inputs) -> dict:
    """Build the section dict: tables cuda_api and osrt."""
    frames = inputs.frames
    tables, cannot = [], []
    captured = traced(inputs)
    if frames["api"].empty:
        cannot.append({"what": "the CUDA API summary", "reason": _no_calls(captured, "cuda")})
    else:
        tables.append(_api_table(_top(frames["api"])))
    if frames["osrt"].empty:
        cannot.append({"what": "the OS runtime summary", "reason": _no_calls(captured, "osrt")})
    else:
        tables.append(_osrt_table(_top(frames["osrt"])))
    return {
        "id": "host",
        "title": "The host: CUDA API and OS runtime calls",
        "verdict": None,
        "recommendations": [],
        "tables": tables,
        "cannot_answer": cannot,
    }


def _top(calls: pd.DataFrame) -> pd.DataFrame:
    """The TOP_CALLS functions with the longest total per rank (the rows come longest first)."""
    return calls.groupby("rank", sort=True, group_keys=False).head(TOP_CALLS)


def _process(calls: pd.DataFrame):
    """A row's process column: shown only when some rank has several processes."""
    several = calls.groupby("rank").pid.nunique().max() > 1
    return (lambda r: {"pid": int(r.pid)}) if several else (lambda r: {})


def _api_table(api: pd.DataFrame) -> dict:
    pid = _process(api)
    rows = [
        {
            "rank": int(r.rank),
            **pid(r),
            "api": r.api,
            "calls": figure(r.calls, COUNT),
            "total": figure(r.total_ns, NS),
            "share": figure(r.share, FRACTION),
            "median": figure(r.median_ns, NS),
            "p90": figure(r.p90_ns, NS),
            "max": figure(r.max_ns, NS),
        }
        for r in api.itertuples(index=False)
    ]
    return table(
        "cuda_api",
        f"CUDA API calls per rank (top {TOP_CALLS} by total time; share of "
        "the process's CUDA call time): long synchronize calls wait for the GPU, long "
        "launch calls are launch overhead",
        rows,
        ("max", "p90"),
    )


def _osrt_table(osrt: pd.DataFrame) -> dict:
    pid = _process(osrt)
    rows = [
        {
            "rank": int(r.rank),
            **pid(r),
            "api": r.api,
            "calls": figure(r.calls, COUNT),
            "threads": figure(r.threads, COUNT),
            "total": figure(r.total_ns, NS),
            "cuda_threads": figure(r.cuda_thread_ns, NS),
            "median": figure(r.median_ns, NS),
            "max": figure(r.max_ns, NS),
        }
        for r in osrt.itertuples(index=False)
    ]
    return table(
        "osrt",
        f"OS runtime calls per rank (top {TOP_CALLS} by total time; cuda "
        "threads = the part on threads that launch GPU work, where a wait holds back "
        "the next launch)",
        rows,
        ("max", "threads", "median"),
    )


def _no_calls(captured: list[dict], what: str) -> str:
    """Why the window has no call of `what` (cuda, osrt): not traced (the hint to capture
    it), or traced and none made (captured: nsyswrap.report.captured.traced)."""
    note = traced_note(captured, what)
    if note is None:
        return UNTRACED[what]
    return f"no {CALLS[what]} call in the window, though {note}: the program made none there"
