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

from nsyswrap.engine.opener import DEFAULT_OPENER, Opener
from nsyswrap.errors import shown
from nsyswrap.report import answers
from nsyswrap.report.document import finish
from nsyswrap.report.options import ReportOptions
from nsyswrap.report.render import ReportFormat, write_report
from nsyswrap.storage.cache_keys import nsyswrap_version
from nsyswrap.storage.reports import expand

if TYPE_CHECKING:
    from nsyswrap.engine.run import Run

__all__ = [
    "ReportFormat",
    "ReportOptions",
    "build_report",
    "explain",
    "planned",
    "report",
    "report_of",
    "wanted",
    "sections",
    "write_report",
]


def sections() -> list:
    """Every section, in order (imported when a report is built: they load pandas and DuckDB)."""
    from nsyswrap.report.compute import compute_section
    from nsyswrap.report.cross_rank import crossrank_section
    from nsyswrap.report.data_quality import data_quality_section
    from nsyswrap.report.host import host_section
    from nsyswrap.report.memory import memory_section
    from nsyswrap.report.single_rank import single_rank_section
    from nsyswrap.report.trace_facts import trace_section

    return [
        single_rank_section,
        compute_section,
        crossrank_section,
        memory_section,
        host_section,
        trace_section,
        data_quality_section,
    ]


def build_report(run: Run, options: ReportOptions) -> dict:
    """Every section for an open run over the window `options` ask for (by default the
    steps: nsyswrap.report.window), and the diagnosis drawn from them."""
    from nsyswrap.crossrank.ranks import rank_rows
    from nsyswrap.engine import planner
    from nsyswrap.report.window import choose_window

    window = choose_window(run, options)
    options = window.options
    if run.cached:  # the window's per-report work, for every section, in one pass of the pool
        planner.fill(run, wanted(options))
    report = {
        "tool": "nsyswrap",
        "version": nsyswrap_version(),
        "reports": [
            {"rank": r.rank, "path": shown(r.path), "rank_source": r.rank_source}
            for r in run.reports
        ],
        "ranks": rank_rows(run, options.step_pattern),
        "options": options.window_params(),
        "mfu_inputs": options.mfu_params(),
        "window": window.as_json(),
        "sections": [section(run, options) for section in sections()],
    }
    return finish(report)


def report(
    inputs: list[str | Path],
    options: ReportOptions | None = None,
    *,
    opener: Opener = DEFAULT_OPENER,
) -> dict:
    """The report dict of a run: the stored answer when this report was asked before
    (`nsyswrap.report.answers`), else the reports opened, the report built and stored."""
    options = options or ReportOptions()
    entry = answers.answer_entry(
        expand(inputs), options, opener.rank_pattern, opener.allow_unrelated
    )
    stored = answers.load(entry)
    if stored is not None:
        return stored
    with planned(opener, options).open(inputs) as run:
        result = build_report(run, options)
        answers.save(entry, result)  # before the run closes and the store is held to its cap
    return result


def report_of(
    inputs: list[str | Path],
    options: ReportOptions | None = None,
    *,
    opener: Opener = DEFAULT_OPENER,
    html: Path | None = None,
    force: bool = False,
) -> dict:
    """What `nsyswrap report` answers for `inputs`: the report of exports (`report`), of
    the sampler's sample files, or of both (nsyswrap.report.samples); `html`: also write
    the page (`force`: over an existing file)."""
    from nsyswrap.sample.inputs import split_inputs

    options = options or ReportOptions()
    exports, samples = split_inputs(inputs)
    if samples:
        from nsyswrap.report.samples import report_with_samples

        return report_with_samples(exports, samples, options, opener=opener, html=html, force=force)
    if html is None:
        return report(inputs, options, opener=opener)
    from nsyswrap.html_report import report_with_html

    return report_with_html(inputs, options, html, opener=opener, force=force)


def explain(
    inputs: list[str | Path],
    options: ReportOptions | None = None,
    *,
    opener: Opener = DEFAULT_OPENER,
) -> dict:
    """What `report` would compute for `inputs` and what is stored (`nsyswrap plan`):
    `summary` lines (the stored answer, the reports' views) and `steps`, the compiled plan
    of what the sections ask for (nsyswrap.engine.plan.rows), as a DataFrame."""
    import pandas as pd

    from nsyswrap.engine import plan
    from nsyswrap.engine.opening import plan_of

    options = options or ReportOptions()
    entry = answers.answer_entry(
        expand(inputs), options, opener.rank_pattern, opener.allow_unrelated
    )
    compiled, cached = plan_of(
        inputs,
        wanted(options),
        rank_pattern=opener.rank_pattern,
        allow_unrelated=opener.allow_unrelated,
    )
    views = sum((c.views_dir / "session.parquet").exists() for c in cached)
    stored = entry is not None and (entry / answers.FILE).exists()
    summary = [
        f"{len(cached)} report(s); the answer is "
        + (
            "stored: nsyswrap report reads it and computes nothing below"
            if stored
            else "not stored: nsyswrap report computes what is not stored below, then stores it"
        ),
        f"views (read and normalized once per report): {views} of {len(cached)} stored",
        "steps, in order: per report (each report alone, in the worker pool), connection "
        "(macros), run (over every report); stored: entries stored of those it has",
    ]
    return {"summary": summary, "steps": pd.DataFrame(plan.rows(compiled))}


WINDOW_VARS = frozenset({"window_nvtx", "step_from", "step_to"})
"""The request variables of the window (sql/_request.sql)."""


def wanted(options: ReportOptions) -> list[tuple[str, dict]]:
    """What the sections read, `(name, params)` typed, and the rank identity every
    per-report result takes (nsyswrap.engine.rank_labels): over `options`' window, or, for
    one still to be chosen from the steps, over the likely one (every step usual: the one
    chosen unless a step is set apart, nsyswrap.report.window)."""
    from nsyswrap.engine import rank_labels
    from nsyswrap.engine.queries import bind, get
    from nsyswrap.report.compute import compute_modules
    from nsyswrap.report.cross_rank import crossrank_modules
    from nsyswrap.report.host import host_modules
    from nsyswrap.report.memory import memory_modules
    from nsyswrap.report.single_rank import single_rank_modules
    from nsyswrap.report.trace_facts import TABLES
    from nsyswrap.report.window import LIKELY_WINDOW

    pattern = {"step_pattern": options.step_pattern}
    if not (options.limits_window or options.whole_capture):
        options = replace(options, step_from=LIKELY_WINDOW[0], step_to=LIKELY_WINDOW[1])
    items = [
        *single_rank_modules(options).values(),
        *compute_modules(options).values(),
        *memory_modules(options).values(),
        *host_modules(options).values(),
        ("steps.spans", pattern),
        ("ledger.devices", pattern),
        *((f"trace.{t}", {}) for t in TABLES),
        ("trace.data_quality", {}),
        ("trace.left_out", {}),
        ("trace.gpus", {}),
        ("trace.capture", {}),
        ("steps.repairs", pattern),
        *crossrank_modules(options).values(),
    ]
    return [(name, bind(get(name), params)) for name, params in items] + [(rank_labels.MAP, {})]


def planned(opener: Opener, options: ReportOptions) -> Opener:
    """`opener` that computes each report's share of the report in the pass that normalizes
    it (see nsyswrap.engine.opening.open_run): what the sections read (`wanted`). When the
    window is still to be chosen from the steps, only what does not depend on it: the
    per-report modules of the window are computed once it is chosen (`build_report`, one
    more pass of the pool), so none is computed for a window that is not the one chosen."""
    items = wanted(options)
    if not (options.limits_window or options.whole_capture):
        items = _window_free(items)
    return replace(opener, plan=tuple(items))


def _window_free(items: list[tuple[str, dict]]) -> list[tuple[str, dict]]:
    """`items` without the per-report modules that take the window, each replaced by the
    per-report objects it reads that do not (the device timeline, each NCCL kernel's
    context...), so those are still computed in the pass that normalizes the report."""
    from nsyswrap.engine import sql_objects

    def takes_window(name: str) -> bool:
        return any(p.name in WINDOW_VARS for p in sql_objects.get(name).params)

    out: dict[tuple, tuple[str, dict]] = {}
    for name, params in items:
        if not (sql_objects.get(name).per_report and takes_window(name)):
            out.setdefault((name, repr(sorted(params.items()))), (name, params))
            continue
        for need in sql_objects.needs(name)[:-1]:
            obj = sql_objects.get(need)
            if obj.per_report and not takes_window(need):
                values = obj.values(params)
                out.setdefault((need, repr(sorted(values.items()))), (need, values))
    return list(out.values())
