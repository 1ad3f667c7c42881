"""BASE vs NEW, figure by figure: medians per step, delta, relative delta, CI, significance."""

from __future__ import annotations

import pandas as pd

from nsyswrap.comparison.samples import META, RunSamples
from nsyswrap.comparison.significance import compare_medians

SECTIONS = (
    "step_time",
    "share",
    "exposed_comm",
    "idle",
    "phase",
    "own_work",
    "kernel",
    "range",
    "collective",
)
ADDITIVE = {"idle", "own_work", "kernel", "range"}
"""Sections where a figure missing from a run means 0 per step (a kernel that no longer
runs); elsewhere such a figure is left out."""
MOVERS = ("kernel", "range")
"""Sections listed top movers first (largest absolute delta)."""


def figures(base: RunSamples, new: RunSamples) -> pd.DataFrame:
    """One row per figure in both runs: META columns, base, new, delta, rel_delta,
    ci_low, ci_high, significant, n_base, n_new, worse (the change is in the bad direction)."""
    meta = pd.concat([base.meta, new.meta])
    meta = meta[~meta.index.duplicated()]
    mb, mn = base.matrix(), new.matrix()
    for ids, other in (
        (set(mb.columns) - set(mn.columns), mn),
        (set(mn.columns) - set(mb.columns), mb),
    ):
        for fid in ids:
            if meta.at[fid, "section"] in ADDITIVE:
                other[fid] = 0.0
    out = compare_medians(mb, mn).merge(meta.reset_index(), on="id")
    out["worse"] = (out["delta"] > 0) == (out["better"] == "lower")
    out.loc[out["delta"] == 0, "worse"] = False
    out["order"] = out["section"].map({s: i for i, s in enumerate(SECTIONS)})
    out["size"] = out["delta"].abs().where(out["section"].isin(MOVERS), 0)
    out = out.sort_values(["order", "size", "id"], ascending=[True, False, True], kind="stable")
    cols = [
        *META,
        "base",
        "new",
        "delta",
        "rel_delta",
        "ci_low",
        "ci_high",
        "significant",
        "worse",
        "n_base",
        "n_new",
    ]
    return out[cols].reset_index(drop=True)


def stragglers(base: RunSamples, new: RunSamples) -> pd.DataFrame:
    """The straggler of each run: who, how late, at what cost, in which phase."""
    rows = []
    for run in (base, new):
        for r in run.stragglers.itertuples(index=False):
            # no phase longer than on the median rank: no phase, no steps (NA) and no excess
            known = isinstance(r.phase, str) and pd.notna(r.phase_steps) and r.phase_steps > 0
            per_step = r.phase_excess_ns / r.phase_steps if known else None
            rows.append(
                {
                    "run": run.label,
                    "rank": int(r.rank),
                    "last": int(r.last_count),
                    "collectives": int(r.collectives),
                    "lag_ns": r.lag_ns,
                    "imposed_wait_ns": r.imposed_wait_ns,
                    "share_of_wait": r.imposed_wait_ns / r.total_wait_ns
                    if r.total_wait_ns
                    else None,
                    "phase": r.phase if isinstance(r.phase, str) else None,
                    "phase_excess_per_step_ns": per_step,
                }
            )
    return pd.DataFrame(
        rows,
        columns=[
            "run",
            "rank",
            "last",
            "collectives",
            "lag_ns",
            "imposed_wait_ns",
            "share_of_wait",
            "phase",
            "phase_excess_per_step_ns",
        ],
    )


def step_times(base: RunSamples, new: RunSamples) -> pd.DataFrame:
    """Every step's time (slowest rank) in each run: run (BASE / NEW), step, step_time_ns."""
    frames = [
        run.samples.loc[run.samples["id"] == "step_time", ["step", "value"]].assign(run=side)
        for side, run in (("BASE", base), ("NEW", new))
    ]
    out = pd.concat(frames, ignore_index=True).rename(columns={"value": "step_time_ns"})
    return out[["run", "step", "step_time_ns"]]
