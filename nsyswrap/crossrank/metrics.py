"""Cross-rank metrics, one function each: a thin call of its `sql/crossrank/` module.

Those with steps take `step_from` / `step_to` (half-open step numbers, default all);
those that read steps take `step_pattern` (LIKE pattern of the step ranges).
"""

from __future__ import annotations

import pandas as pd

from nsyswrap.engine.queries import object_rows, run_module
from nsyswrap.engine.run import Run
from nsyswrap.errors import NsysWrapError


def unrelated(run: Run, **params) -> NsysWrapError | None:
    """Why the reports cannot be one run (their captures are far apart), if they cannot
    (the solve's verdict, run object xr_unrelated); None with --allow-unrelated."""
    rows = object_rows(run, "xr_unrelated", **params)
    if rows.empty:
        return None
    return NsysWrapError(rows["report"][0], rows["problem"][0], rows["fix"][0])


def clock_offsets(run: Run, **params) -> pd.DataFrame:
    """Per rank: offset to rank 0's clock, shift to run time, uncertainty and source."""
    return run_module(run, "crossrank.clock_offsets", **params)


def matched_collectives(run: Run, **params) -> pd.DataFrame:
    """Per matched collective and rank: aligned arrival and end, wait, skew, transfer."""
    return run_module(run, "crossrank.collectives", **params)


def mismatches(run: Run) -> pd.DataFrame:
    """Per collective key that is not on every rank of its group exactly once."""
    return run_module(run, "crossrank.mismatches")


def stragglers(run: Run, **params) -> pd.DataFrame:
    """Per step and for the whole run: the straggler rank, its lag, cost and phase."""
    return run_module(run, "crossrank.stragglers", **params)


def phase_lag(run: Run, **params) -> pd.DataFrame:
    """Per (step, rank, phase): host and GPU time against the median rank."""
    return run_module(run, "crossrank.phase_lag", **params)


def comm_split(run: Run, **params) -> pd.DataFrame:
    """Per (step, rank): time in collectives split into waiting for peers and transfer."""
    return run_module(run, "crossrank.comm_split", **params)


def bandwidth(run: Run, **params) -> pd.DataFrame:
    """Per (op, bytes, group size, spans hosts): transfer time, algorithm and bus bandwidth."""
    return run_module(run, "crossrank.bandwidth", **params)
