"""What would a fix save? The run replayed (nsyswrap.crossrank.replay) over the
dependencies of its ranks' hosts, GPU lanes and matched collectives (the model:
nsyswrap.crossrank.lanes, from nsyswrap.crossrank.segments' per-report rows), then again
with each candidate fix (nsyswrap.crossrank.fixes); the planner's builder of the run
objects `xr_whatif`, `xr_critical_path`, `xr_replay_check`, `xr_assumed_waits`,
`xr_own_work` and `xr_links` (nsyswrap.crossrank.own_work, nsyswrap.crossrank.links).

The window's steps are replayed (`step_from`, `step_to`), each rank starting at its
recorded start of the first. The run's step time: a step ends when its last rank ends
it; it takes from the previous step's end (the first step: from its latest start). A
candidate's gain per step is the replayed step time minus the step time replayed with
the fix; the replay of the recorded weights reproduces the recorded times (the residual
is where it does not: an end before the last arrival, from clock error). Where the model
assumed waits the trace does not show (silent segments), every candidate is replayed
twice, with and without them: the gain is the one with them, the range both. A candidate
that idealises ranks is replayed again with only their steady excess removed (their
step-to-step noise kept, as a fix of what is slow in them leaves it:
nsyswrap.crossrank.fixes.steady_candidates): `gain_steady_ns`. The
critical path of a step walks back from the step's end through the edge each event
rested on: at a collective to its last arriver, charging each edge's parts to the work of
a (rank, phase, side: host or GPU) and a collective's transfer to (pg, op); the charges
add up to the step time.

Assumptions (where they hold the gains are exact, as on the generator's `same_work`
runs with collectives ending together): a rank's own work (its host's time between two
boundaries, the GPU work it launched) takes the same time whatever the others do (no
contention); the threads of a process hand work to each other in order (one host chain)
and its streams on its lane device are one lane (a cross-stream wait inside it is
sequencing); within a segment, the host's extra time comes before the launch its lane
rests on and GPU work shrinks evenly over its activities; a blocking call that waited
would, with nothing to wait for, take the median length of its process's calls of that
API that did not; a transfer is the collective's, not its members' (a hot expert's
longer all_to_all is not its rank's work); what a rank waited for is among the events
the model sees, or a silence the replay states.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from nsyswrap.crossrank.fixes import Cut, candidates, steady_candidates
from nsyswrap.crossrank.lanes import NO_PHASE, Model, build_model, with_calls
from nsyswrap.crossrank.lanes import inputs as read_inputs
from nsyswrap.crossrank.links import link_whatif
from nsyswrap.crossrank.own_work import own_work
from nsyswrap.engine import sql_objects

OBJECTS = {
    "whatif": "xr_whatif",
    "critical_path": "xr_critical_path",
    "check": "xr_replay_check",
    "assumed": "xr_assumed_waits",
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


def replay_fixes(model: Model, replay, cands) -> np.ndarray:
    """(steps x candidates): the step times replayed on `replay` (a lanes.Replay of the
    model) with each candidate fix."""
    g = replay.graph
    e_nodes = np.flatnonzero(model.events["kind"].to_numpy() == "E")
    e_cid = model.events["cid"].to_numpy()[e_nodes]
    columns = []
    for i in range(0, len(cands), COLUMNS_PER_REPLAY):
        chunk = cands[i : i + COLUMNS_PER_REPLAY]
        d = np.repeat(g.d[:, None], len(chunk), axis=1)
        hidden = np.zeros((g.n_hideable, len(chunk)), bool)
        cuts = [(j, cut) for j, (_, cut, _) in enumerate(chunk) if cut is not None]
        for j, (_, _, hide) in enumerate(chunk):
            if hide is not None:
                hidden[:, j] = hide
                d[e_nodes[hide[e_cid]], j] = 0
        w = replay.weights(_columns(cuts, len(chunk)), model.gpu_ns) if cuts else None
        columns.append(step_times(model, g.replay(d, hidden, w)).to_numpy())
    n = len(_step_nodes(model)[0])
    return np.hstack(columns) if columns else np.zeros((n, 0), np.int64)


def _columns(cuts: list[tuple[int, Cut]], n: int) -> Cut:
    """The cuts of some columns of a chunk of `n` as one Cut of (rows x columns), for the
    union of their rows."""
    rows = np.unique(np.concatenate([c.rows for _, c in cuts]))
    out = Cut(*(np.zeros((len(rows), n), np.int64) for _ in range(3)), rows=rows)
    for j, c in cuts:
        at = np.searchsorted(rows, c.rows)
        out.before[at, j], out.after[at, j], out.gpu[at, j] = c.before, c.after, c.gpu
    return out


def analyse(model: Model) -> dict[str, pd.DataFrame]:
    """The frames of the replay: `whatif` (per candidate and step), `check` (per rank and
    step, replayed vs recorded), `critical_path` (per step and charge), `assumed` (the
    waits the replay assumed) and `work` (each rank's own work per step and phase,
    nsyswrap.crossrank.own_work)."""
    g = model.graph
    base = g.replay(g.d[:, None])[:, 0]
    recorded = step_times(model, g.t[:, None])[0]
    replayed = step_times(model, base[:, None])[0]
    cands = candidates(model)
    whatif = replay_fixes(model, model.replay, cands)
    gains = replayed.to_numpy()[:, None] - whatif
    steady = gains.copy()
    partial = steady_candidates(model, cands)
    kept = [(j, cut) for j, cut in partial if cut.any()]
    steady[:, [j for j, cut in partial if not cut.any()]] = 0
    if kept:
        again = replay_fixes(model, model.replay, [(cands[j][0], cut, None) for j, cut in kept])
        steady[:, [j for j, _ in kept]] = replayed.to_numpy()[:, None] - again
    low = high = gains
    if model.unassumed is not None:
        u = model.unassumed.graph
        other = step_times(model, u.replay(u.d[:, None]))[0].to_numpy()[:, None]
        other_gains = other - replay_fixes(model, model.unassumed, cands)
        low, high = np.minimum(gains, other_gains), np.maximum(gains, other_gains)
    n = len(replayed)
    meta = pd.DataFrame(
        [c for c, _, _ in cands], columns=["kind", "rank", "phase", "pg", "op", "stage"]
    )
    rows = meta.loc[np.repeat(np.arange(len(cands)), n)].reset_index(drop=True)
    rows["step"] = np.tile(replayed.index.to_numpy(), len(cands))
    rows["recorded_ns"] = np.tile(recorded.to_numpy(), len(cands))
    rows["replayed_ns"] = np.tile(replayed.to_numpy(), len(cands))
    rows["whatif_ns"] = whatif.T.reshape(-1)
    rows["gain_ns"] = rows["replayed_ns"] - rows["whatif_ns"]
    rows["gain_low_ns"] = low.T.reshape(-1)
    rows["gain_high_ns"] = high.T.reshape(-1)
    rows["gain_steady_ns"] = steady.T.reshape(-1)
    rows["residual_ns"] = (rows["recorded_ns"] - rows["replayed_ns"]).abs()
    check = model.steps.copy()
    check["recorded_ns"] = g.t[check["end"]] - g.t[check["start"]]
    check["replayed_ns"] = base[check["end"]] - base[check["start"]]
    check["residual_ns"] = (check["replayed_ns"] - check["recorded_ns"]).abs()
    return {
        "whatif": rows,
        "check": check[["rank", "step", "recorded_ns", "replayed_ns", "residual_ns"]],
        "critical_path": critical_path(model, base),
        "assumed": assumed_waits(model),
        "work": own_work(model),
    }


def assumed_waits(model: Model) -> pd.DataFrame:
    """The waits the replay assumed (lanes.Model.assumed) with their collective's pg, seq
    and op."""
    a = model.assumed.merge(model.collectives[["cid", "pg", "seq", "op"]], on="cid", how="left")
    return a.assign(phase=a["phase"].where(a["phase"] != NO_PHASE, None))


CHARGES = (("host", "host"), ("launch", "host"), ("fixed", "host"), ("gpu", "gpu"))
"""An edge's weight's parts, in time order along it, and the side each is charged to: the
host's time, a launch's offset, its latency (or a join's), then the GPU's work."""


def critical_path(model: Model, times: np.ndarray) -> pd.DataFrame:
    """Per step: the replayed step time charged along the path it rests on (module doc)."""
    g = model.graph
    columns = _walk_columns(model)
    charged = []
    lower = None
    for s, ends, starts in _steps_of(model):
        cur = int(ends[np.argmax(times[ends])])  # the latest end; ties: the lowest rank
        if lower is None:
            lower = int(times[starts].max())
        charged += _walk(model, columns, times, cur, lower, s)
        lower = int(times[cur])
    out = pd.DataFrame(charged, columns=["step", "kind", "rank", "phase", "side", "cid", "ns"])
    out = out[out["ns"] > 0].merge(model.collectives[["cid", "pg", "op"]], on="cid", how="left")
    out["phase"] = out["phase"].map(dict(enumerate(model.phases)))
    del g
    return (
        out.groupby(
            ["step", "kind", "rank", "phase", "side", "pg", "op"], dropna=False, sort=False
        )["ns"]
        .sum()
        .reset_index()
    )


def _steps_of(model: Model):
    """Per step in order: the step, its ranks' end and start nodes (by rank)."""
    st = model.steps.sort_values(["step", "rank"])
    step = st["step"].to_numpy()
    ends, starts = st["end"].to_numpy(np.int64), st["start"].to_numpy(np.int64)
    steps, first = np.unique(step, return_index=True)  # the rows are sorted by step
    for s, lo, hi in zip(steps, first, [*first[1:], len(step)], strict=True):
        yield s, ends[lo:hi], starts[lo:hi]


def _walk_columns(model: Model) -> tuple[np.ndarray, ...]:
    """What `_walk` reads of the events (kind, rank, cid, seg) and of the segments (rank,
    phase index), as arrays: taken once for every step's walk."""
    ev, segs = model.events, model.segs
    return (
        *(ev[c].to_numpy() for c in ("kind", "rank", "cid", "seg")),
        segs["rank"].to_numpy(),
        segs["phase_index"].to_numpy(),
    )


def _walk(
    model: Model, columns: tuple, times: np.ndarray, cur: int, stop: int, step
) -> list[tuple]:
    """The charges of the path from node `cur` back to time `stop`: per binding edge its
    weight's parts and the node's duration, each to the work of the segment it belongs to
    (rank, phase, side) or, at a collective's end, to its transfer (`columns`:
    `_walk_columns`)."""
    g = model.graph
    kind, rank, cid, seg, seg_rank, seg_phase = columns
    rep = model.replay
    out = []
    while times[cur] > stop:
        e = g.binding_edge(cur, times)
        start = int(times[g.pred[e]]) if e >= 0 else stop
        left = int(times[cur]) - max(start, stop)  # what this step of the walk charges
        own = int(times[cur]) - (start + (int(g.w[e]) if e >= 0 else 0))
        pieces = [(own, _node_side(kind[cur]), seg[cur])]  # the node's own time, last
        if e >= 0:
            s_e = int(rep.seg[e])
            for part, side in reversed(CHARGES):
                pieces.append((int(getattr(rep, part)[e]), side, s_e))
        for ns, side, s_row in pieces:
            ns = min(max(ns, 0), left)
            left -= ns
            if kind[cur] == "E" and s_row < 0:
                out.append((step, "transfer", None, None, None, cid[cur], ns))
            else:
                r = rank[cur] if s_row < 0 else seg_rank[s_row]
                ph = 0 if s_row < 0 else int(seg_phase[s_row])
                out.append((step, "work", r, ph, side, -1, ns))
        if e < 0 or start <= stop:
            break
        cur = int(g.pred[e])
    return out


def _node_side(kind: str) -> str:
    return "gpu" if kind in ("G", "A") else "host"


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
    their frames, by object name, from what `inputs` declares; none where the reports are
    not one run (xr_unrelated) or nothing is matched."""
    columns = {name: [c.name for c in sql_objects.get(name).columns] for name in OBJECTS.values()}
    empty = {
        name: pd.DataFrame({c: pd.Series(dtype=object) for c in cols})
        for name, cols in columns.items()
    }
    if not inputs.frame("xr_unrelated").empty:
        return empty
    coll, segs, calls, steps = read_inputs(inputs.frame)
    if not steps.empty:
        coll, steps = _window(coll, steps, inputs.params["step_from"], inputs.params["step_to"])
    if coll.empty:
        return empty
    if steps.empty:
        steps = spans(coll, calls)
    model = build_model(coll, segs, calls, steps)
    if model.steps.empty:  # no rank's step starts and ends at an event of the model
        return empty
    out = analyse(model)
    out["links"] = link_whatif(model, inputs.frame("xr_link_collectives"), step_times)
    for frame in out.values():
        if "phase" in frame:
            frame["phase"] = frame["phase"].where(frame["phase"] != NO_PHASE, None)
        if "step" in frame:
            frame["step"] = frame["step"].where(frame["step"] != NO_STEP, None)
    return {name: out[frame].reindex(columns=columns[name]) for frame, name in OBJECTS.items()}


def spans(coll: pd.DataFrame, calls: pd.DataFrame) -> pd.DataFrame:
    """A run without step ranges: per rank one step (NO_STEP) from its first collective's
    call (its NCCL kernel's launch; a collective timed by its range: the range's start; an
    NCCL kernel whose launch the trace lacks has no call) to its last collective's end."""
    m = with_calls(coll, calls)
    on_gpu = m["on_gpu"].astype(bool)
    call = m["launch_ns"].where(on_gpu, m["start_ns"])
    out = (
        m.assign(call=call).groupby("rank").agg(start_ns=("call", "min"), end_ns=("end_ns", "max"))
    )
    out = out.reset_index().dropna(subset=["start_ns"])
    return out.assign(step=NO_STEP).astype({"start_ns": np.int64})
