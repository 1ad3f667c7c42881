"""A rank's own work per step and phase, as the replay holds it (nsyswrap.crossrank.lanes):
its segments' host time between its events and the GPU work they launched, split by
phase. The waits are not in it: the replay re-creates them from the dependencies, so a
rank that waits less for a peer does not do less work, and a rank whose work changed does.

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
    """Per rank, step and phase: the work of the rank's segments in that phase, its host
    time between its events and the GPU work it launched (ns; phase lanes.NO_PHASE where
    no phase range covers it), rows with work only; and the rank's pipeline stage
    (nsyswrap.crossrank.fixes.stages; NaN outside pipelines)."""
    parts = model.before_parts + model.after_parts + model.gpu_parts
    frame = pd.DataFrame(parts, columns=model.phases)
    frame["rank"] = model.segs["rank"].to_numpy()
    frame["step"] = model.segs["step"].to_numpy(np.float64)
    long = frame.melt(id_vars=["rank", "step"], var_name="phase", value_name="work_ns")
    out = long.groupby(["rank", "step", "phase"], as_index=False, dropna=False)["work_ns"].sum()
    out = out[out["work_ns"] > 0].sort_values(["rank", "step", "phase"], kind="stable")
    out["stage"] = out["rank"].map(stages(model))
    return out[COLUMNS].reset_index(drop=True)
