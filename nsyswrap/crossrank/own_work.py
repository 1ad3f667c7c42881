"""A rank's own work per step and phase, as the replay holds it (nsyswrap.crossrank.lanes):
the time of its lane's segments, the work between two of its events, split by phase. The
waits are not in it: the replay re-creates them from the collectives, so a rank that
waits less for a peer does not do less work, and a rank whose work changed does.

It serves two rules: the run's step-to-step noise (`crossrank.whatif`: a step is affected
by a fix only where the fix saves more than that noise) and `nsyswrap diff`'s attribution
of a change to the rank and phase whose own work changed (nsyswrap.comparison.fix_check).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from nsyswrap.crossrank.fixes import stages
from nsyswrap.crossrank.lanes import Model

COLUMNS = ["rank", "step", "phase", "work_ns", "stage"]


def own_work(model: Model) -> pd.DataFrame:
    """Per rank, step and phase: the time of the rank's segments in that phase (ns; phase
    lanes.NO_PHASE where no phase range covers it), rows with time only; and the rank's
    pipeline stage (nsyswrap.crossrank.fixes.stages; NaN outside pipelines)."""
    ev = model.events
    frame = pd.DataFrame(model.parts, columns=model.phases)
    frame["rank"] = ev["rank"].to_numpy()[model.lane]
    frame["step"] = ev["step"].to_numpy(np.float64)[model.lane]
    long = frame.melt(id_vars=["rank", "step"], var_name="phase", value_name="work_ns")
    out = long.groupby(["rank", "step", "phase"], as_index=False, dropna=False)["work_ns"].sum()
    out = out[out["work_ns"] > 0].sort_values(["rank", "step", "phase"], kind="stable")
    out["stage"] = out["rank"].map(stages(model))
    return out[COLUMNS].reset_index(drop=True)
