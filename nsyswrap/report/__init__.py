"""`nsyswrap report`: a run summarized in sections, for the terminal or as JSON.

The sections are declared once, in nsyswrap.report.registry (each with the modules it
reads); nsyswrap.report.flow builds them, the diagnosis and the document. A section dict
has:

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
from nsyswrap.report import answers
from nsyswrap.report.options import ReportOptions
from nsyswrap.report.render import ReportFormat, write_report
from nsyswrap.storage.reports import expand

if TYPE_CHECKING:
    from nsyswrap.engine.run import Run
    from nsyswrap.report.flow import Answer

__all__ = [
    "ReportFormat",
    "ReportOptions",
    "answer",
    "build_report",
    "explain",
    "planned",
    "report",
    "report_of",
    "wanted",
    "write_report",
]


def build_report(run: Run, options: ReportOptions) -> dict:
    """Every section for an open run over the window `options` ask for (by default the
    steps: nsyswrap.report.window), and the diagnosis drawn from them."""
    from nsyswrap.report.flow import build

    return build(run, options).document


def _exports_answer(
    inputs: list[str | Path], options: ReportOptions, opener: Opener, plots: bool
) -> Answer:
    """The answer of exports: the stored one when this report was asked before (and its
    plots, where `plots`), else the reports opened, the report built and stored."""
    from nsyswrap.report.flow import Answer, build

    entry = answers.answer_entry(
        expand(inputs), options, opener.rank_pattern, opener.allow_unrelated
    )
    stored = answers.load(entry)
    drawn = answers.load_plots(entry) if stored is not None and plots else None
    if stored is not None and (drawn is not None or not plots):
        return Answer(stored, drawn)
    with planned(opener, options).open(inputs) as run:
        found = build(run, options, with_plots=plots)
        answers.save(entry, found)  # before the run closes and the store is held to its cap
    return found


def report(
    inputs: list[str | Path],
    options: ReportOptions | None = None,
    *,
    opener: Opener = DEFAULT_OPENER,
) -> dict:
    """The report dict of exports: the stored answer when this report was asked before
    (`nsyswrap.report.answers`), else the reports opened, the report built and stored."""
    return _exports_answer(inputs, options or ReportOptions(), opener, plots=False).document


def answer(
    inputs: list[str | Path],
    options: ReportOptions | None = None,
    *,
    opener: Opener = DEFAULT_OPENER,
    plots: bool = False,
) -> Answer:
    """What `nsyswrap report` answers for `inputs`: the report of exports (`report`), of
    the sampler's sample files, or of both (nsyswrap.report.samples); `plots`: with what
    the HTML page's plots draw (nsyswrap.report.plots: exports only)."""
    from nsyswrap.report.flow import Answer
    from nsyswrap.sample.inputs import split_inputs

    options = options or ReportOptions()
    exports, samples = split_inputs(inputs)
    if not samples:
        return _exports_answer(inputs, options, opener, plots)
    from nsyswrap.report.samples import add_samples, sample_report

    if not exports:
        return Answer(sample_report(samples, options))
    return Answer(add_samples(report(exports, options, opener=opener), samples, options))


def report_of(
    inputs: list[str | Path],
    options: ReportOptions | None = None,
    *,
    opener: Opener = DEFAULT_OPENER,
) -> dict:
    """The report dict `nsyswrap report` prints for `inputs` (`answer`'s document)."""
    return answer(inputs, options, opener=opener).document


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
    from nsyswrap.report.registry import sections
    from nsyswrap.report.window import LIKELY_WINDOW

    pattern = {"step_pattern": options.step_pattern}
    if not (options.limits_window or options.whole_capture):
        options = replace(options, step_from=LIKELY_WINDOW[0], step_to=LIKELY_WINDOW[1])
    items = [("steps.spans", pattern)]  # the window's
    items += [m for s in sections() for m in s.modules(options).values()]
    typed: list[tuple[str, dict]] = []
    for name, params in items:
        bound = (name, bind(get(name), params))
        if bound not in typed:
            typed.append(bound)
    return [*typed, (rank_labels.MAP, {})]


def planned(opener: Opener, options: ReportOptions) -> Opener:
    """`opener` that computes each report's share of the report in the pass that normalizes
    it (see nsyswrap.engine.opening.open_run): what the sections read (`wanted`). When the
    window is still to be chosen from the steps, only what does not depend on it: the
    per-report modules of the window are computed once it is chosen (nsyswrap.report.flow,
    one more pass of the pool), so none is computed for a window that is not the one chosen."""
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
