"""`nsyswrap diff BASE NEW` (`nsyswrap.diff`): did the change help? Two runs compared figure
by figure.

`diff(base, new)` checks that the runs can be compared (nsyswrap.comparison.comparability),
computes each run's per-step samples (nsyswrap.comparison.samples), compares their medians with
a bootstrap interval (nsyswrap.comparison.significance) and leads with a headline
(nsyswrap.comparison.headline); with two ranks or more, the replay of BASE against what
NEW measured, by each rank's own work (nsyswrap.comparison.fix_check), names who changed.
`nsyswrap.comparison.gate` is the CI gate,
`nsyswrap.comparison.render` the output.
"""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from nsyswrap.comparison import comparability, compare, fix_check, headline
from nsyswrap.comparison.samples import add_samples, identify, run_inputs
from nsyswrap.comparison.significance import METHOD
from nsyswrap.engine.opener import DEFAULT_OPENER, Opener
from nsyswrap.report.options import ReportOptions

SPLIT_NOTE = (
    "time in matched collectives is split into `waited` (before the last rank "
    "arrived) and `transfer` (the rest), as crossrank.comm_split; `beyond_wait` is "
    "exposed communication minus waited, at least 0"
)

RunArg = str | Path | list
"""A run: a directory, glob, manifest.json or report file, or a list of them."""


@dataclass
class DiffResult:
    """What `diff` returns: named frames, the headline first."""

    base: str
    new: str
    headline: list[str]
    warnings: list[str]
    method: str
    checks: pd.DataFrame
    figures: pd.DataFrame
    stragglers: pd.DataFrame
    notes: list[str]
    step_times: pd.DataFrame
    """Every step's time (the slowest rank's): run (BASE or NEW), step, step_time_ns."""
    fix_check: fix_check.FixCheck | None = None
    """The replay of BASE against what NEW measured, by own work (two ranks or more)."""

    def section(self, name: str) -> pd.DataFrame:
        """The figures of one section: step_time, share, exposed_comm, idle, phase, kernel,
        range or collective."""
        return self.figures[self.figures["section"] == name].reset_index(drop=True)

    def figure(self, figure_id: str) -> pd.Series:
        """One figure by id (e.g. "step_time", "kernel:<name>"); KeyError if absent."""
        rows = self.figures[self.figures["id"] == figure_id]
        if rows.empty:
            raise KeyError(figure_id)
        return rows.iloc[0]


def diff(
    base: RunArg,
    new: RunArg,
    options: ReportOptions | None = None,
    *,
    force: bool = False,
    opener: Opener = DEFAULT_OPENER,
) -> DiffResult:
    """Compare run NEW against run BASE (each a run directory, glob, manifest.json or report
    file, or a list of them). Raises NsysWrapError naming what differs when the runs cannot
    be compared, unless `force`."""
    options = options or ReportOptions()
    base_label, new_label = _label(base), _label(new)
    with ExitStack() as stack:
        runs = [stack.enter_context(opener.open(run_inputs(r))) for r in (base, new)]
        b, n = (identify(r, label, options) for r, label in zip(runs, (base_label, new_label)))
        checks = comparability.check(b, n)
        comparability.refuse_unless_forced(checks, base_label, new_label, force)
        for run, found in zip(runs, (b, n)):
            add_samples(run, found, options)
        checked = None
        if len(runs[0].reports) > 1:
            params = fix_check.window(runs, options)
            checked = fix_check.check(*(fix_check.replay_of(r, params) for r in runs))
    figs = compare.figures(b, n)
    notes = (
        [SPLIT_NOTE]
        if not figs[figs["metric"] == "beyond_wait"].empty
        else [
            "exposed communication waiting vs transfer: not available (no collective is "
            "matched across ranks)"
        ]
    )
    lines = headline.headline(figs)
    significant = (figs["significant"] & (figs["id"] == "step_time")).any()
    if checked is not None and (significant or checked.stands_out):  # stalls a median hides
        lines = with_check(lines, checked)
    return DiffResult(
        base_label,
        new_label,
        lines,
        headline.warnings(figs),
        METHOD,
        checks,
        figs,
        compare.stragglers(b, n),
        notes,
        compare.step_times(b, n),
        checked,
    )


def with_check(lines: list[str], checked: fix_check.FixCheck) -> list[str]:
    """The headline with the check against the fix: after the median step's explanations,
    but right before them where it names a change in some steps only that they do not
    name (stalls a median hides: the change is credited first to the rank and phase whose
    own work changed), the median's explanations then said to be the median step's."""
    named = checked.named
    phase = None if named is None else (named["phase"] or "work outside phases")
    if checked.in_steps_ns is None or any(line.startswith(f"{phase} on ") for line in lines[1:]):
        return lines + checked.lines
    return lines[:1] + checked.lines + [f"in the median step: {line}" for line in lines[1:]]


def _label(run: RunArg) -> str:
    return " ".join(map(str, run)) if isinstance(run, list) else str(run)
