"""The one report flow over an open run: the window (nsyswrap.report.window), every
section of the registry (nsyswrap.report.registry) from its inputs, the diagnosis and its
decisions placed (nsyswrap.report.document), and, where the page is asked for, what its
plots draw (nsyswrap.report.plots). Only here are a run's modules computed for a report:
a section reads its `Inputs`."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from nsyswrap.errors import shown
from nsyswrap.report.document import finish
from nsyswrap.report.options import ReportOptions
from nsyswrap.report.registry import Section, plots, sections
from nsyswrap.storage.cache_keys import nsyswrap_version

if TYPE_CHECKING:
    import pandas as pd

    from nsyswrap.engine.run import Run


class Frames(Mapping):
    """A section's modules' rows by key, computed when first read (nsyswrap.report.registry:
    its `modules` together unless it reads them one by one, each of its `asked` alone)."""

    def __init__(self, run: Run, section: Section, options: ReportOptions):
        self._run, self._together = run, not section.one_by_one
        self._planned = section.modules(options)
        self._wanted = {**self._planned, **section.asked(options)}
        self._rows: dict[str, pd.DataFrame] = {}

    def __getitem__(self, key: str) -> pd.DataFrame:
        from nsyswrap.engine.queries import run_modules

        if key not in self._rows:
            keys = [key]
            if self._together and key in self._planned:
                keys = [k for k in self._planned if k not in self._rows]
            self._rows.update(run_modules(self._run, {k: self._wanted[k] for k in keys}))
        return self._rows[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._wanted)

    def __len__(self) -> int:
        return len(self._wanted)


@dataclass(frozen=True)
class Inputs:
    """What a section is built from: its modules' rows (`frames`), the report's options
    (the window chosen), the run's reports (rank, path) and the ranks each holds."""

    frames: Mapping[str, pd.DataFrame]
    options: ReportOptions
    reports: tuple
    held: Mapping[int, list[int]]  # report rank -> the ranks it holds


@dataclass(frozen=True)
class Answer:
    """What `nsyswrap report` answers: the report's document (its JSON) and what the HTML
    page's plots draw (None where not asked for, or for sample files alone)."""

    document: dict
    plots: dict | None = None


def build(run: Run, options: ReportOptions, with_plots: bool = False) -> Answer:
    """The report of an open run over the window `options` ask for (by default the steps)."""
    from nsyswrap.crossrank.metrics import unrelated
    from nsyswrap.crossrank.ranks import rank_rows, ranks_by_report
    from nsyswrap.engine import planner
    from nsyswrap.report import wanted
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
    }
    refused = unrelated(run)  # their captures are far apart: not one run
    if refused is not None:
        raise refused
    held = ranks_by_report(run)

    def inputs(section: Section) -> Inputs:
        return Inputs(Frames(run, section, options), options, tuple(run.reports), held)

    document = finish({**report, "sections": [s.build(inputs(s)) for s in sections()]})
    drawn = plots().build(inputs(plots()), document) if with_plots else None
    return Answer(document, drawn)


def section_of(run: Run, section_id: str, options: ReportOptions) -> dict:
    """One section of the registry built alone over the window `options` give (none
    chosen, no diagnosis placed): the quick way to look at one."""
    from nsyswrap.crossrank.ranks import ranks_by_report

    section = next(s for s in sections() if s.id == section_id)
    frames = Frames(run, section, options)
    return section.build(Inputs(frames, options, tuple(run.reports), ranks_by_report(run)))
