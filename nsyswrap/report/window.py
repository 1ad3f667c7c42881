"""The part of a capture a report analyses: its steps, unless the command line says otherwise.

* **Steps** are the NVTX ranges LIKE the step pattern (`--step-pattern`; by default
  `step:<i>`, else a process's `ProfilerStep#<i>`). When the default finds none, the
  steps are found by themselves (module `steps.candidates`): an outermost range of the
  program's own domains repeated with a number one more each time (`iteration 3`,
  `step_3`, `Step 3`) or, named without a number, repeated under a name holding "step"
  or "iter" (`train_step`), never overlapping. Of several such, the one covering the
  most time; the report says which pattern it used and how to choose another.
* **Warm-up and outliers** (rule step_window: its thresholds and words): a step much
  longer than the median step (durations of the step ranges, each step's the median over
  the ranks) is set apart: leading ones are warm-up, others outliers.
  They are named in a note and left out of the per-step statistics (mean, p90, max,
  the longest steps).
* **Uneven captures**: when the ranks' captures hold different steps (one rank's profiler
  started late or stopped early), the default window is the steps every rank captured,
  so cutting one rank's first steps changes no per-step figure of the steps that
  remain; and a rank's own leading steps much longer than its own median step (rule
  step_window; its first captured steps slowed by the profiler starting, while the
  others' are not) are its warm-up, set apart as the common warm-up is. `captured` says
  per rank which steps it holds and which of them are its warm-up.
* **The window** by default runs from the first analysed step's start to the last
  one's end (a window of steps, `step_from`/`step_to`): warm-up steps before it and
  outliers after the last usual step are outside it, so out of every figure and
  verdict but the replay's (the what-if and its stall findings still count them,
  `ReportOptions.outliers_after`: two stalls in the last two steps are stalls too); an
  outlier between usual steps stays inside (its time is in the window's totals). Time
  before and after the window is reported on its own line, never divided by the step
  count. Without steps the window is each device's first to last GPU activity, and no
  figure is per step.
* `--steps A:B` selects any window of steps that exist (one that selects none is
  refused, naming the steps there are); `--window-nvtx` any NVTX window;
  `--whole-capture` each device's first to last GPU activity. Outliers inside a window
  given so are named, not set apart.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

import pandas as pd

from nsyswrap.engine.queries import run_module
from nsyswrap.engine.run import Run
from nsyswrap.errors import NsysWrapError
from nsyswrap.report.diagnosis.rules import step_window
from nsyswrap.report.diagnosis.words import listed
from nsyswrap.report.figures import NS, figure
from nsyswrap.report.options import DEFAULT_STEP_PATTERN, ReportOptions

LIKELY_WINDOW = (0, None)  # (step_from, step_to) of a capture whose steps are all usual
STEP_WORDS = re.compile(r"step|iter", re.IGNORECASE)


@dataclass(frozen=True)
class Window:
    """What a report analyses: `options` (the window every section is given) and how
    they were chosen."""

    options: ReportOptions
    source: str  # steps (the default), given (--steps, --window-nvtx),
    #                              capture (--whole-capture) or activity (no steps)
    pattern_source: str  # default, given, found, none or samples (sampled steps)
    steps: tuple[int, ...] = ()  # every step number of the capture
    median_ns: float | None = None
    outliers: tuple[dict, ...] = field(default_factory=tuple)  # {step, duration_ns, times, why}
    captured: tuple[dict, ...] = ()  # uneven captures: {rank, first_step, last_step, warm_up}

    @property
    def set_apart(self) -> frozenset[int]:
        """The steps left out of the per-step statistics: the outliers, unless the window
        was given."""
        if self.source != "steps":
            return frozenset()
        return frozenset(o["step"] for o in self.outliers)

    def as_json(self) -> dict:
        """The report's `window` key (README, "The report as JSON")."""
        return {
            "source": self.source,
            "step_pattern": self.options.step_pattern,
            "pattern_source": self.pattern_source,
            "steps": list(self.steps),
            "step_from": self.options.step_from,
            "step_to": self.options.step_to,
            "median_step": figure(self.median_ns, NS, "no steps"),
            "outliers": [
                {
                    "step": o["step"],
                    "duration": figure(o["duration_ns"], NS),
                    "times_median": o["times"],
                    "why": o["why"],
                    "set_apart": o["step"] in self.set_apart,
                }
                for o in self.outliers
            ],
            **({"captured": [dict(c) for c in self.captured]} if self.captured else {}),
        }


def choose_window(run: Run, options: ReportOptions) -> Window:
    """The window of a report asked with `options` (see the module doc); refuses a
    `--steps` window that selects no step of the capture."""
    pattern, pattern_source = options.step_pattern, "given"
    steps = _steps(run, pattern)
    if options.step_pattern == DEFAULT_STEP_PATTERN:
        pattern_source = "default"
        if steps.empty:
            found = find_step_pattern(run)
            if found is not None:
                pattern, pattern_source = found, "found"
                steps = _steps(run, pattern)
    if steps.empty:
        pattern_source = "none"
    return window_of_steps(steps, replace(options, step_pattern=pattern), pattern_source)


def window_of_steps(steps: pd.DataFrame, options: ReportOptions, pattern_source: str) -> Window:
    """The window of a report asked with `options` over `steps` (step, rank, duration_ns;
    a step's duration: the median over the ranks; see the module doc)."""
    durations = steps.groupby(["step", "rank"]).duration_ns.max().groupby("step").median()
    numbers = tuple(int(s) for s in durations.index)
    median = float(durations.median()) if len(durations) else None
    outliers = step_window.outliers(durations, median, step_window.RULE.limits())
    if options.step_from is not None or options.step_to is not None:
        _refuse_empty(options, numbers)
    if options.whole_capture:
        return Window(options, "capture", pattern_source, numbers, median, tuple(outliers))
    if options.limits_window:
        inside = tuple(o for o in outliers if options.selects(o["step"]))
        return Window(
            options,
            "given",
            pattern_source,
            numbers,
            median,
            inside if options.window_nvtx is None else (),
        )
    if not numbers:
        return Window(options, "activity", pattern_source)
    captured = _uneven(steps, numbers)
    usual = [
        s
        for s in numbers
        if s not in {o["step"] for o in outliers}
        and all(c["first_step"] + c["warm_up"] <= s <= c["last_step"] for c in captured)
    ] or [s for s in numbers if s not in {o["step"] for o in outliers}]
    # written as LIKELY_WINDOW where it selects the same steps (what the first pass of the
    # engine computed: nsyswrap.report.planned)
    first = LIKELY_WINDOW[0] if usual[0] == numbers[0] >= LIKELY_WINDOW[0] else usual[0]
    last = LIKELY_WINDOW[1] if usual[-1] == numbers[-1] else usual[-1] + 1
    after = () if last is None else tuple(s for s in numbers if s >= last)
    return Window(
        replace(options, step_from=first, step_to=last, outliers_after=after),
        "steps",
        pattern_source,
        numbers,
        median,
        tuple(outliers),
        captured,
    )


def find_step_pattern(run: Run) -> str | None:
    """The LIKE pattern of the steps the capture has by itself (module doc), or None."""
    found = run_module(run, "steps.candidates")
    if found.empty:
        return None
    per = found.groupby("pattern").agg(
        ranges=("ranges", "max"),
        numbered=("numbered", "all"),
        consecutive=("consecutive", "all"),
        covered=("covered_ns", "sum"),
    )
    fit = per[
        (per.ranges >= 2)
        & per.consecutive
        & (per.numbered | per.index.to_series().str.contains(STEP_WORDS))
    ]
    if fit.empty:
        return None
    return str(fit.sort_values(["covered", "ranges"], ascending=False, kind="stable").index[0])


def _steps(run: Run, pattern: str) -> pd.DataFrame:
    return run_module(run, "steps.spans", step_pattern=pattern)


def _uneven(steps: pd.DataFrame, numbers: tuple[int, ...]) -> tuple[dict, ...]:
    """Per rank with steps, the steps its capture holds (first_step, last_step) and how
    many of its leading ones are its own warm-up (rule step_window: much longer than its
    own median step), when the ranks differ in either; () when every rank holds the run's
    steps alike."""
    per_rank = []
    for rank, mine in steps.groupby("rank", sort=True):
        durations = mine.groupby("step").duration_ns.max()
        leading = step_window.leading_warm_up(durations.tolist(), step_window.RULE.limits())
        per_rank.append(
            {
                "rank": int(rank),
                "first_step": int(durations.index[0]),
                "last_step": int(durations.index[-1]),
                "warm_up": leading,
            }
        )
    spans = {(c["first_step"], c["last_step"]) for c in per_rank}
    started = {c["first_step"] + c["warm_up"] for c in per_rank}
    even = spans <= {(numbers[0], numbers[-1])} and len(started) <= 1 if numbers else True
    return () if even else tuple(per_rank)


def _refuse_empty(options: ReportOptions, numbers: tuple[int, ...]) -> None:
    lo = "" if options.step_from is None else options.step_from
    hi = "" if options.step_to is None else options.step_to
    if not numbers:
        raise NsysWrapError(
            f"--steps {lo}:{hi}",
            f"selects no step: these reports have no NVTX "
            f"step ranges like {options.step_pattern!r}",
            "leave --steps out, or pass --step-pattern with the ranges that mark your steps",
        )
    if not any(options.selects(s) for s in numbers):
        raise NsysWrapError(
            f"--steps {lo}:{hi}",
            f"selects none of the steps these reports have "
            f"({listed('step', numbers)}, ranges like "
            f"{options.step_pattern!r})",
            "choose a window among them",
        )
