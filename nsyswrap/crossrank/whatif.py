"""What would a fix save? The run replayed (nsyswrap.crossrank.replay) from its ranks'
work and its matched collectives (the model: nsyswrap.crossrank.lanes), then again with
each candidate fix (nsyswrap.crossrank.fixes); the planner's builder of the run objects
`xr_whatif`, `xr_critical_path`, `xr_replay_check`, `xr_own_work` and `xr_links`
(nsyswrap.crossrank.links).

The window's steps are replayed (`step_from`, `step_to`), each rank starting at its
recorded start of the first. The run's step time: a step ends when its last rank ends
it; it takes from the previous step's end (the first step: from its latest start). A
candidate's gain per step is the replayed step time minus the step time replayed with
the fix; the replay of the recorded durations reproduces the recorded times (the
residual is where it does not: an end before the last arrival, from clock error or an
unseen wait). The critical path of a step walks back from the step's end through the
events each one rested on: at a collective to its last arriver, charging work to (rank,
phase) and transfer to (pg, op); the charges add up to the step time.

Assumptions (where they hold the gains are exact, as on the generator's `same_work`
runs with collectives ending together): a rank's work between two of its events takes
the same time whatever the others do (no contention, the same side - host or GPU -
holding it up); host and GPU of a rank are one lane; what it waited for is among the
events the model sees; a transfer is the collective's, not its members' (a hot expert's
longer all_to_all is not its rank's work).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from nsyswrap.crossrank.fixes import candidates
from nsyswrap.crossrank.lanes import NO_PHASE, Model, build_model, phase_parts
from nsyswrap.crossrank.lanes import inputs as read_inputs
from nsyswrap.crossrank.links import link_whatif
from nsyswrap.crossrank.own_work import own_work
from nsyswrap.engine import sql_objects

OBJECTS = {
    "whatif": "xr_whatif",
    "critical_path": "xr_critical_path",
    "check": "xr_replay_check",
    "work": "xr_own_work",
    "links": "xr_links",
}
"""The run objects the builder makes, by the frame of `analyse` that holds each."""
NO_STEP = -1  # the step of a run without step ranges: each rank's span from its first collective
COLUMNS_PER_REPLAY = 32  # candidates replayed at once (memory: events x columns x 16 bytes)


def step_times(model: Model, times: np.ndarray) -> pd.DataFrame:
    """Per step (rows) and column: the run's step time (see the module doc)."""
    steps, ends, offsets, first = _step_nodes(model)
    end = np.maximum.reduceat(times[ends], offsets, axis=0)
    lower = np.vstack([times[first].max(0)[None, :], end[:-1]])
    return pd.DataFrame(end - lower, index=steps)


def _step_nodes(model: Model) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(steps, every rank's step-end node by step, where each step's start in it, the first
    step's start nodes)."""
    st = model.steps.dropna(subset=["start", "end"]).sort_values(["step", "rank"])
    steps, offsets = np.unique(st["step"].to_numpy(), return_index=True)
    first = st.loc[st["step"] == steps[0], "start"].to_numpy(np.int64)
    return steps, st["end"].to_numpy(np.int64), offsets, first


def analyse(model: Model) -> dict[str, pd.DataFrame]:
    """The frames of the replay: `whatif` (per candidate and step), `check` (per rank and
    step, replayed vs recorded), `critical_path` (per step and charge) and `work` (each
    rank's own work per step and phase, nsyswrap.crossrank.own_work)."""
    g = model.graph
    base = g.replay(g.d[:, None])[:, 0]
    recorded = step_times(model, g.t[:, None])[0]
    replayed = step_times(model, base[:, None])[0]
    cands = candidates(model)
    e_nodes = np.flatnonzero(model.events["kind"].to_numpy() == "E")
    e_cid = model.events["cid"].to_numpy()[e_nodes]
    columns = []
    for i in range(0, len(cands), COLUMNS_PER_REPLAY):
        chunk = cands[i : i + COLUMNS_PER_REPLAY]
        d = np.repeat(g.d[:, None], len(chunk), axis=1)
        hidden = np.zeros((g.n_hideable, len(chunk)), bool)
        for j, (_, cut, hide) in enumerate(chunk):
            if cut is not None:
                d[model.lane, j] -= cut
            if hide is not None:
                hidden[:, j] = hide
                d[e_nodes[hide[e_cid]], j] = 0
        columns.append(step_times(model, g.replay(d, hidden)).to_numpy())
    n = len(replayed)
    whatif = np.hstack(columns) if columns else np.zeros((n, 0), np.int64)
    meta = pd.DataFrame(
        [c for c, _, _ in cands], columns=["kind", "rank", "phase", "pg", "op", "stage"]
    )
    rows = meta.loc[np.repeat(np.arange(len(cands)), n)].reset_index(drop=True)
    rows["step"] = np.tile(replayed.index.to_numpy(), len(cands))
    rows["recorded_ns"] = np.tile(recorded.to_numpy(), len(cands))
    rows["replayed_ns"] = np.tile(replayed.to_numpy(), len(cands))
    rows["whatif_ns"] = whatif.T.reshape(-1)
    rows["gain_ns"] = rows["replayed_ns"] - rows["whatif_ns"]
    rows["residual_ns"] = (rows["recorded_ns"] - rows["replayed_ns"]).abs()
    check = model.steps.dropna(subset=["start", "end"]).copy()
    s_idx, e_idx = check["start"].astype(np.int64), check["end"].astype(np.int64)
    check["recorded_ns"] = g.t[e_idx] - g.t[s_idx]
    check["replayed_ns"] = base[e_idx] - base[s_idx]
    check["residual_ns"] = (check["replayed_ns"] - check["recorded_ns"]).abs()
    return {
        "whatif": rows,
        "check": check[["rank", "step", "recorded_ns", "replayed_ns", "residual_ns"]],
        "critical_path": critical_path(model, base),
        "work": own_work(model),
    }


def critical_path(model: Model, times: np.ndarray) -> pd.DataFrame:
    """Per step: the replayed step time charged along the path it rests on (module doc)."""
    g, ev = model.graph, model.events
    kind, rank, cid = ev["kind"].to_numpy(), ev["rank"].to_numpy(), ev["cid"].to_numpy()
    st = model.steps.dropna(subset=["start", "end"])
    steps = np.sort(st["step"].unique())
    work, transfer = [], []  # (step, rank, t0, t1) and (step, cid, ns)
    lower = None
    for s in steps:
        mine = st[st["step"] == s]
        ends = mine["end"].astype(np.int64).to_numpy()
        cur = int(ends[np.argmax(times[ends])])  # the latest end; ties: the lowest rank
        if lower is None:
            lower = int(times[mine["start"].astype(np.int64).to_numpy()].max())
        stop = lower
        lower = int(times[cur])
        while times[cur] > stop:
            p = g.binding(cur, times)
            t0 = max(stop, int(times[p])) if p >= 0 else stop
            if kind[cur] == "E":
                transfer.append((s, cid[cur], int(times[cur]) - t0))
            elif kind[cur] != "M":
                work.append((s, rank[cur], t0, int(times[cur])))
            if p < 0:
                break
            cur = p
    w = pd.DataFrame(work, columns=["step", "rank", "t0", "t1"])
    parts = phase_parts(
        model.labels,
        len(model.phases),
        w["rank"].to_numpy(),
        w["t0"].to_numpy(np.int64),
        w["t1"].to_numpy(np.int64),
    )
    charged = [
        pd.DataFrame(
            {
                "step": w["step"],
                "kind": "work",
                "rank": w["rank"],
                "phase": name,
                "pg": None,
                "op": None,
                "ns": parts[:, p],
            }
        )
        for p, name in enumerate(model.phases)
    ]
    tr = pd.DataFrame(transfer, columns=["step", "cid", "ns"]).merge(
        model.collectives[["cid", "pg", "op"]], on="cid"
    )
    charged.append(
        pd.DataFrame(
            {
                "step": tr["step"],
                "kind": "transfer",
                "rank": None,
                "phase": None,
                "pg": tr["pg"],
                "op": tr["op"],
                "ns": tr["ns"],
            }
        )
    )
    out = pd.concat(charged, ignore_index=True)
    out = out[out["ns"] > 0]
    return (
        out.groupby(["step", "kind", "rank", "phase", "pg", "op"], dropna=False, sort=False)["ns"]
        .sum()
        .reset_index()
    )


def _window(
    coll: pd.DataFrame, steps: pd.DataFrame, step_from, step_to
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The steps from step_from up to step_to (None: no bound) and the collectives in them:
    those issued in one of them (their members' first step), and those issued in none
    within their span. The replay starts at the window: each rank at its recorded start of
    the first step, so what happened before (a warm-up's skews) does not carry into it."""
    if step_from is None and step_to is None:
        return coll, steps

    def inside(step: pd.Series) -> pd.Series:
        step = step.astype(np.float64)  # no step: NaN, outside
        return (step >= (-np.inf if step_from is None else step_from)) & (
            step < (np.inf if step_to is None else step_to)
        )

    steps = steps[inside(steps["step"])]
    per = coll.groupby(["pg", "seq"]).agg(
        step=("step", "min"), start_ns=("start_ns", "min"), end_ns=("end_ns", "max")
    )
    within = (per["start_ns"] >= steps["start_ns"].min()) & (per["end_ns"] <= steps["end_ns"].max())
    keep = per.index[inside(per["step"]) | (per["step"].isna() & within)]
    return coll[pd.MultiIndex.from_frame(coll[["pg", "seq"]]).isin(keep)], steps


def build(inputs) -> dict[str, pd.DataFrame]:
    """Builder of the replay's run objects (their headers name it, see nsyswrap.engine.builders):
    the three frames, by object name, from what `inputs` declares; none where the reports
    are not one run (xr_unrelated) or nothing is matched."""
    columns = {name: [c.name for c in sql_objects.get(name).columns] for name in OBJECTS.values()}
    empty = {
        name: pd.DataFrame({c: pd.Series(dtype=object) for c in cols})
        for name, cols in columns.items()
    }
    if not inputs.frame("xr_unrelated").empty:
        return empty
    coll, issues, joins, steps, labels = read_inputs(inputs.frame)
    if not steps.empty:
        coll, steps = _window(coll, steps, inputs.params["step_from"], inputs.params["step_to"])
    if coll.empty:
        return empty
    if steps.empty:  # no step ranges: each rank's span, from its first collective to its last end
        steps = (
            coll.groupby("rank")
            .agg(start_ns=("start_ns", "min"), end_ns=("end_ns", "max"))
            .reset_index()
        )
        steps["step"] = NO_STEP
    model = build_model(coll, issues, joins, steps, labels)
    out = analyse(model)
    out["links"] = link_whatif(model, inputs.frame("xr_link_collectives"), step_times)
    for frame in out.values():
        if "phase" in frame:
            frame["phase"] = frame["phase"].where(frame["phase"] != NO_PHASE, None)
        if "step" in frame:
            frame["step"] = frame["step"].where(frame["step"] != NO_STEP, None)
    return {name: out[frame].reindex(columns=columns[name]) for frame, name in OBJECTS.items()}
