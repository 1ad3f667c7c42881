"""`nsyswrap report`: a run summarized in sections, for the terminal or as JSON.

A section is a function `(run, options) -> dict` listed in SECTIONS; more sections are
appended there. A section dict has:

* `id`, `title`;
* `verdict`: `{"label": ..., "reason": ...}` or null;
* `recommendations`: list of sentences;
* `tables`: list of `{"id", "title", "rows"}`; a row maps column names to plain values
  (rank, names) or figures `{"value", "unit"}`, where a null value carries a `reason`;
* `cannot_answer`: list of `{"what", "reason"}`.

`nsyswrap.report.render` draws any section following this layout.
"""
from __future__ import annotations

from pathlib import Path

from nsyswrap.crossrank.ranks import rank_rows
from nsyswrap.planner import nsyswrap_version
from nsyswrap.report.cross_rank import crossrank_section
from nsyswrap.report.data_quality import data_quality_section
from nsyswrap.report.diagnosis import diagnose
from nsyswrap.report.options import ReportOptions
from nsyswrap.report.render import ReportFormat, write_report
from nsyswrap.report.single_rank import single_rank_section
from nsyswrap.report.trace_facts import trace_section
from nsyswrap.run import DEFAULT_OPENER, Opener, Run

SECTIONS = [single_rank_section, crossrank_section, trace_section, data_quality_section]

__all__ = ["SECTIONS", "ReportFormat", "ReportOptions", "build_report", "report",
           "write_report"]


def build_report(run: Run, options: ReportOptions) -> dict:
    """Every section of SECTIONS for an open run, and the diagnosis drawn from them."""
    report = {
        "tool": "nsyswrap",
        "version": nsyswrap_version(),
        "reports": [{"rank": r.rank, "path": str(r.path), "rank_source": r.rank_source}
                    for r in run.reports],
        "ranks": rank_rows(run, options.step_pattern),
        "options": options.window_params(),
        "sections": [section(run, options) for section in SECTIONS],
    }
    return {**report, "diagnosis": diagnose(report)}


def report(inputs: list[str | Path], options: ReportOptions = ReportOptions(), *,
           opener: Opener = DEFAULT_OPENER) -> dict:
    """Open the reports of a run and build the report dict."""
    with opener.open(inputs) as run:
        return build_report(run, options)

