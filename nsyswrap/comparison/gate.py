"""The CI gate: `--fail-on-regression PCT [--metric ID]`.

Fails (exit code REGRESSION, 3) only when the figure is significantly worse in NEW (its
95 % interval excludes 0, in the bad direction) and its median moved by more than PCT % of
BASE's; otherwise passes (0). Either way one line says why. A bad input is exit code 1
(one `Error:` line, as every command) and a usage error 2 (click's), so CI tells a
regression from a run it could not compare.
"""

from __future__ import annotations

import math

from nsyswrap.comparison import DiffResult
from nsyswrap.errors import NsysWrapError

DEFAULT_METRIC = "step_time"
REGRESSION = 3  # the exit code of a failed gate (1: bad input, 2: usage error)


def gate(result: DiffResult, pct: float, metric: str = DEFAULT_METRIC) -> tuple[int, str]:
    """(exit code, the line saying why)."""
    try:
        f = result.figure(metric)
    except KeyError:
        raise NsysWrapError(
            f"--metric {metric}",
            "names no figure of this diff",
            "use an id from the `id` column of --format csv, e.g. step_time, "
            "step_time:rank=2 or kernel:<name>",
        ) from None
    change = _pct(f.rel_delta)
    interval = f"95 % CI {_pct(_rel(f.ci_low, f.base))} .. {_pct(_rel(f.ci_high, f.base))}"
    moved = abs(f.rel_delta) * 100 if not math.isnan(f.rel_delta) else math.inf
    if f.significant and f.worse and moved > pct:
        return REGRESSION, (
            f"FAIL: {metric} {change} ({interval}, {f.better} is better): NEW is "
            f"significantly worse than BASE by more than {pct:g} %"
        )
    if not f.worse or f.delta == 0:
        why = "not worse" + (" (significantly better)" if f.significant else "")
    elif not f.significant:
        why = "worse but not significantly (the interval includes 0)"
    else:
        why = f"significantly worse, but by no more than {pct:g} %"
    return 0, f"PASS: {metric} {change} ({interval}): {why}"


def _rel(value: float, base: float) -> float:
    return value / abs(base) if base else math.nan


def _pct(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{x * 100:+.1f} %"
