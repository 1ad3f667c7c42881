"""Rule step_window: which steps are warm-up or outliers, set apart from the window and
the step statistics (nsyswrap.report.window applies it), and the diagnosis' `window`
paragraph, which says what was analysed and what was not."""

from __future__ import annotations

from collections.abc import Mapping

from nsyswrap.report.diagnosis.facts import Facts
from nsyswrap.report.diagnosis.rule import Limits, Rule, Threshold
from nsyswrap.report.diagnosis.words import listed, ms
from nsyswrap.report.figures import value
from nsyswrap.report.options import ReportOptions

CAPTURE = "Window: first to last GPU activity of each device, as given{held}."
HELD = "; it holds {steps} (NVTX ranges like {pattern!r}), none set apart"
NO_STEPS = (
    "Window: {where}. No step ranges were found (NVTX 'step:<i>', 'ProfilerStep#<i>' or a "
    "range repeated with a growing number), so every figure is over the window, none divided "
    "by steps (--step-pattern names yours)."
)
NVTX = "NVTX ranges like {nvtx!r}, as given"
ACTIVITY = "first to last GPU activity of each device"
SAMPLED = "Window: {n} sampled steps{of}, {first} to {last}{given}."
STEPS = "Window: {steps}{of} ({where}){given}."
LIKE = "NVTX ranges like {pattern!r}"
HOW = {
    "found": "; found by themselves: no 'step:<i>' range; --step-pattern to choose others",
    "given": "; --step-pattern",
}
OUTLIER = "Step {step} is {what} ({duration}, {times:g}x the median step of {median}): {fate}."
LEFT_OUT = "left out"
LEFT_OUT_REPLAYED = "left out (the replay, what a fix would save, still counts it)"
LEFT_OUT_OF_STATISTICS = "left out of the step statistics (its time is in the window)"
KEPT = "kept, as the window was given"
NOT_ANALYSED = " Not analysed{most}: {parts}."
BEFORE = "{time} of wall time before step {step}{busy}"  # from the first GPU activity
AFTER = "{time} after step {step}{busy}"  # to the last
BUSY = ", the GPU busy {busy} of it"
MOST = " (on the {unit} with the most)"


def outliers(durations: Mapping[int, float], median: float | None, limits: Limits) -> list:
    """The steps longer than outlier_x x the median step ({step, duration_ns, times, why}:
    warm-up when no usual step is before); `durations`: step -> its duration."""
    if median is None or len(durations) < limits.min_steps or median <= 0:
        return []
    out, usual_seen = [], False
    for step, ns in durations.items():
        if ns > limits.outlier_x * median:
            times = round(ns / median, 1)
            why = "warm-up" if not usual_seen else "outlier"
            out.append({"step": int(step), "duration_ns": int(ns), "times": times, "why": why})
        else:
            usual_seen = True
    return out


def leading_warm_up(durations: list[float], limits: Limits) -> int:
    """How many of a rank's own leading steps are its warm-up (uneven captures): longer
    than outlier_x x its own median step; `durations`: its steps' in order."""
    ordered = sorted(durations)
    n = len(ordered)
    if n < limits.min_steps:
        return 0
    median = (ordered[(n - 1) // 2] + ordered[n // 2]) / 2
    leading = 0
    while median > 0 and leading < n and durations[leading] > limits.outlier_x * median:
        leading += 1
    return leading


def _set_apart(w: Mapping, window: ReportOptions) -> str:
    """One sentence per step set apart or named: what it is, and its fate."""
    median = value(w.get("median_step"))
    said = []
    for o in w.get("outliers", []):
        fate = (
            LEFT_OUT_REPLAYED
            if o["set_apart"] and window.step_to is not None and o["step"] >= window.step_to
            else LEFT_OUT
            if o["set_apart"] and not window.selects(o["step"])
            else LEFT_OUT_OF_STATISTICS
            if o["set_apart"]
            else KEPT
        )
        said.append(
            OUTLIER.format(
                step=o["step"],
                what="warm-up" if o["why"] == "warm-up" else "an outlier",
                duration=ms(value(o["duration"], 0)),
                times=o["times_median"],
                median=ms(median or 0),
                fate=fate,
            )
        )
    return "".join(" " + s for s in said)


def _outside(facts: Facts, inside: list[int], limits: Limits) -> str:
    """The wall time before and after the window from the first and to the last GPU
    activity, with the GPU's busy time in it (of the GPU or rank with the most), where
    there is some."""
    outside = facts.rows("single_rank", "window")
    if not outside:
        return ""
    parts = []
    for side, said, step in (("before", BEFORE, inside[0]), ("after", AFTER, inside[-1])):
        row = max(outside, key=lambda r: value(r[side], 0))
        busy = value(row.get(f"busy_{side}"))
        if value(row[side], 0) >= limits.min_outside_ns:
            busy = BUSY.format(busy=ms(busy)) if busy is not None else ""
            parts.append(said.format(time=ms(value(row[side], 0)), step=step, busy=busy))
    if not parts:
        return ""
    keys = [(r["rank"], r["device"]) for r in outside]
    most = MOST.format(unit=facts.unit(keys)) if len(outside) > 1 else ""
    return NOT_ANALYSED.format(parts=" and ".join(parts), most=most)


def describe(facts: Facts, limits: Limits) -> str:
    """The `window` paragraph: the window, the steps set apart, the time outside it (per
    GPU, not analysed); empty where nothing was captured to window."""
    w = facts.window
    pattern, steps = w.get("step_pattern", "step:%"), w.get("steps") or []
    if w.get("source") == "capture":
        held = HELD.format(steps=listed("step", steps), pattern=pattern) if steps else ""
        return CAPTURE.format(held=held)
    if not steps and not facts.rows("trace", "activity"):
        return ""  # nothing captured to window: the cannot-answer lines say so
    if w.get("source") == "activity" or not steps:
        nvtx = (facts.report.get("options") or {}).get("window_nvtx")
        return NO_STEPS.format(where=NVTX.format(nvtx=nvtx) if nvtx else ACTIVITY)
    window = ReportOptions.from_params(w)
    inside = [s for s in steps if window.selects(s)]
    of = f" of {len(steps)}" if len(inside) < len(steps) else ""
    given = "" if w.get("source") == "steps" else " as given"
    if w.get("pattern_source") == "samples":
        text = SAMPLED.format(n=len(inside), of=of, first=inside[0], last=inside[-1], given=given)
    else:
        where = LIKE.format(pattern=pattern) + HOW.get(w.get("pattern_source"), "")
        text = STEPS.format(steps=listed("step", inside), of=of, where=where, given=given)
    return text + _set_apart(w, window) + _outside(facts, inside, limits)


RULE = Rule(
    id="step_window",
    kind="window",
    doc="""A step longer than {outlier_x} the median step (each step's duration the median
over the ranks; with {min_steps} steps or more) is set apart and named with its duration
and ratio: before the first usual step it is warm-up, else an outlier. Warm-up and
outliers after the last usual step are outside the window (out of every figure and
verdict but the replay's: what a fix would save still counts them); an outlier between
usual steps stays inside the window's totals but is left out of the step statistics. A
window given (--steps) names its outliers and keeps them. When
the ranks' captures hold different steps, a rank's own leading steps longer than
{outlier_x} its own median step are its warm-up (with {min_steps} steps or more). The
wall time before and after the window (from the first GPU activity, to the last) is said
where it is {min_outside_ns} or more, with the GPU's busy time in it (of the GPU, or the
rank where ranks share one, with the most), never divided by the steps.""",
    thresholds=(
        Threshold("outlier_x", 3.0, "a step this x the median step is warm-up or an outlier", "x"),
        Threshold("min_steps", 3, "steps the outlier rule needs", "count"),
        Threshold("min_outside_ns", 5_000, "time outside the window that is said", "ns"),
    ),
)
