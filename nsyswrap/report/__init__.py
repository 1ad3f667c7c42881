"""`nsyswrap report`: a run summarized in sections, for the terminal or as JSON.

A section is a function `(run, options) -> dict` listed in `sections()`; more sections
are appended there. A section dict has:

* `id`, `title`;
* `verdict`: `{"label": ..., "reason": ...}` or null;
* `recommendations`: list of sentences;
* `tables`: list of `{"id", "title", "rows"}`; a row maps column names to plain values
  (rank, names) or figures `{"value", "unit"}`, where a null value carries a `reason`;
* `cannot_answer`: list of `{"what", "reason"}`.

`nsyswrap.report.render` draws any section following this layout. A report asked before
is read back (`nsyswrap.report.answers`) without loading pandas or DuckDB.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from nsyswrap.cache_keys import nsyswrap_version
from nsyswrap.opener import DEFAULT_OPENER, Opener
from nsyswrap.report import answers
from nsyswrap.report.diagnosis import diagnose
from nsyswrap.report.options import ReportOptions
from nsyswrap.report.render import ReportFormat, write_report
from nsyswrap.reports import expand

if TYPE_CHECKING:
    from nsyswrap.run import Run

__all__ = ["ReportFormat", "ReportOptions", "build_report", "planned", "report", "sections", "write_report"]


def sections() -> list:
    """Every section, in order (imported when a report is built: they load pandas and DuckDB)."""
    from nsyswrap.report.compute import compute_section
    from nsyswrap.report.cross_rank import crossrank_section
    from nsyswrap.report.data_quality import data_quality_section
    from nsyswrap.report.host import host_section
    from nsyswrap.report.memory import memory_section
    from nsyswrap.report.single_rank import single_rank_section
    from nsyswrap.report.trace_facts import trace_section

    return [single_rank_section, compute_section, crossrank_section, memory_section,
            host_section, trace_section, data_quality_section]


def build_report(run: Run, options: ReportOptions) -> dict:
    """Every section for an open run, and the diagnosis drawn from them."""
    from nsyswrap.crossrank.ranks import rank_rows

    report = {
        "tool": "nsyswrap",
        "version": nsyswrap_version(),
        "reports": [{"rank": r.rank, "path": str(r.path), "rank_source": r.rank_source}
                    for r in run.reports],
        "ranks": rank_rows(run, options.step_pattern),
        "options": options.window_params(),
        "mfu_inputs": options.mfu_params(),
        "sections": [section(run, options) for section in sections()],
    }
    return {**report, "diagnosis": diagnose(report)}


def report(inputs: list[str | Path], options: ReportOptions = ReportOptions(), *,
           opener: Opener = DEFAULT_OPENER) -> dict:
    """The report dict of a run: the stored answer when this report was asked before
    (`nsyswrap.report.answers`), else the reports opened, the report built and stored."""
    key = answers.answer_key(expand(inputs), options, opener.rank_pattern, opener.allow_unrelated)
    stored = answers.load(key)
    if stored is not None:
        return stored
    with planned(opener, options).open(inputs) as run:
        result = build_report(run, options)
    answers.store(key, result)
    return result


def planned(opener: Opener, options: ReportOptions) -> Opener:
    """`opener` that computes each report's share of the report in the pass that normalizes
    it (see nsyswrap.run.open_run): the modules the sections ask for, with their
    parameters (what they miss is computed when asked for, in a later pass)."""
    from nsyswrap.queries import bind, get
    from nsyswrap.report.compute import compute_modules
    from nsyswrap.report.host import host_modules
    from nsyswrap.report.memory import memory_modules
    from nsyswrap.report.single_rank import single_rank_modules
    from nsyswrap.report.trace_facts import TABLES

    pattern = {"step_pattern": options.step_pattern}
    wanted = [*single_rank_modules(options).values(), *compute_modules(options).values(),
              *memory_modules(options).values(), *host_modules(options).values(),
              *((f"trace.{t}", {}) for t in TABLES),
              ("trace.data_quality", {}), ("crossrank.clock_offsets", pattern)]
    return replace(opener, plan=tuple((name, bind(get(name), params)) for name, params in wanted))
