"""The candidate fixes of the replay (nsyswrap.crossrank.whatif): which time each takes
off the segments of the lanes (nsyswrap.crossrank.lanes). A fix never adds time, so
idealising more never makes the replay slower.

* `rank` R: R's work in each phase since its step began is compared, at each of its
  events, with the other ranks' by the same event (the issue of, or the wait for, the
  same collective, not a point-to-point pair, whose two ends do different work; the
  step's start or end, among the ranks of one pipeline stage); R loses, from the segments
  up to the event, what it is behind the median there (kept from shrinking along the
  lane): `excess`. `rank_phase` (R, P): that of phase P alone (rank NULL: P on every
  rank, e.g. stalls that move between ranks); `all`: every rank, every phase.
* `stage` S (point-to-point pairs chained into pipelines, `stages`): each phase range of
  S's ranks (the k-th of the phase in the step: a microbatch's forward) no slower, in its
  GPU's busy time, than the median rank of the other stages' same range (`stage_excess`).
* `collective` (pg, op): every collective of that op in that group hidden (each member
  ends at its own arrival: no transfer, no wait).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from nsyswrap.crossrank.lanes import NO_PHASE, P2P_OPS, Model, instance_parts


def others_median(values: np.ndarray, group: np.ndarray) -> np.ndarray:
    """Per row and column: the median of the other rows of its group (ns, rounded half to
    even); a row alone in its group keeps its own value."""
    out = values.copy()
    order = np.lexsort((np.arange(len(group)), group))
    g = group[order]
    first = np.r_[True, g[1:] != g[:-1]]
    start = np.maximum.accumulate(np.where(first, np.arange(len(g)), 0))
    size = np.bincount(np.cumsum(first) - 1)[np.cumsum(first) - 1]
    others = size - 1
    for col in range(values.shape[1]):
        v = values[order, col]
        by_value = np.lexsort((v, g))  # rows sorted by group, then value
        sv = v[by_value]
        k = np.empty(len(g), np.int64)  # each row's place among its group's sorted values
        k[by_value] = np.arange(len(g)) - start[by_value]
        # the middle one or two of the others (skipping the row itself), as sorted indexes
        lo = np.maximum((others - 1) // 2, 0)
        hi = np.maximum(others // 2, 0)
        at_lo = np.minimum(start + lo + (lo >= k), len(g) - 1)
        at_hi = np.minimum(start + hi + (hi >= k), len(g) - 1)
        med = (sv[at_lo] + sv[at_hi]) / 2
        out[order, col] = np.where(others > 0, np.round(med), v).astype(np.int64)
    return out


@dataclass(frozen=True)
class Candidate:
    kind: str  # rank, rank_phase, stage, collective, all
    rank: int | None = None
    phase: str | None = None
    pg: str | None = None
    op: str | None = None
    stage: int | None = None


def excess(model: Model) -> np.ndarray:
    """(lane segments x phases): how much shorter each segment's phase part gets when its
    rank is, at each of its events, no further behind the median other rank than it is
    anywhere before. A rank's work in a phase since its step began (its parts summed along
    its lane) is compared at each event with the other ranks' at the same event (the issue
    of, or the join on, the same collective; the step's start or end); the excess, kept
    from shrinking along the lane, is what the rank's segments up to that event lose.
    Comparing work done by an event, not single segments, keeps ranks whose events split
    the same work differently (one waits at a join the last arriver passes) comparable,
    and puts the cut where the time was lost."""
    ev = model.events
    rank = ev["rank"].to_numpy()[model.lane]
    step = np.nan_to_num(ev["step"].to_numpy(np.float64)[model.lane], nan=-1).astype(np.int64)
    cid = ev["cid"].to_numpy()[model.lane]
    kind = ev["kind"].to_numpy()[model.lane]
    stage = pd.Series(rank).map(stages(model)).fillna(-1).to_numpy(np.int64)
    p2p = np.zeros(len(cid), bool)
    p2p[cid >= 0] = point_to_point(model)[cid[cid >= 0]]
    # compared at: the same collective (not a point-to-point pair, whose two ends do
    # different work), the same step start or end among the ranks of one pipeline stage
    key = pd.Series(
        list(
            zip(
                kind,
                np.where(cid >= 0, cid, step),
                np.where(cid >= 0, 0, stage),
                np.where(p2p, np.arange(len(cid)), -1),
            )
        )
    ).factorize()[0]
    order = np.lexsort((model.lane, step, rank))  # each rank's step, along its lane
    group = pd.Series(list(zip(rank[order], step[order]))).factorize()[0]
    cum = pd.DataFrame(model.parts[order]).groupby(group).cumsum().to_numpy(np.int64)
    behind = np.maximum(cum - others_median(cum, key[order]), 0)
    kept = pd.DataFrame(behind).groupby(group).cummax().to_numpy(np.int64)
    first = np.r_[True, group[1:] != group[:-1]]
    cut = np.diff(np.vstack([np.zeros((1, kept.shape[1]), np.int64), kept]), axis=0)
    cut[first] = kept[first]
    out = np.zeros_like(model.parts)
    out[order] = np.minimum(cut, model.parts[order])
    return out


def point_to_point(model: Model) -> np.ndarray:
    """Per collective: whether it is a point-to-point pair (send, recv or both, two members)."""
    members = model.events[model.events["kind"] == "A"].groupby("cid").size()
    members = members.reindex(model.collectives["cid"]).fillna(0).to_numpy()
    ops = model.collectives["op"].astype(str).str.lower()
    return (ops.isin(P2P_OPS) | ops.str.startswith("send")).to_numpy() & (members == 2)


def stages(model: Model) -> dict[int, int]:
    """Rank -> pipeline stage, where point-to-point pairs chain ranks into pipelines: each
    chain's stage 0 is the end of its earliest pair, the stage a rank's place along it;
    {} without pipelines (or where pairs do not chain)."""
    ev = model.events
    pairs = np.flatnonzero(point_to_point(model))
    if not len(pairs):
        return {}
    a = ev[(ev["kind"] == "A") & ev["cid"].isin(pairs)].sort_values(["cid", "rank"])
    first = ev[(ev["kind"] == "M") & ev["cid"].isin(pairs)].set_index("cid")["t"]  # last arrival
    links = a.groupby("cid")["rank"].agg(lambda r: tuple(sorted(r)))
    neighbours: dict[int, set[int]] = {}
    start: dict[tuple, int] = {}
    for cid, (x, y) in links.items():
        neighbours.setdefault(x, set()).add(y)
        neighbours.setdefault(y, set()).add(x)
        start[(x, y)] = min(start.get((x, y), first[cid]), first[cid])
    if any(len(n) > 2 for n in neighbours.values()):
        return {}
    out: dict[int, int] = {}
    for root in sorted(neighbours):
        if root in out:
            continue
        ends = [r for r in _chain(root, neighbours) if len(neighbours[r]) == 1]
        if len(ends) != 2:
            return {}
        head = min(ends, key=lambda r: start[tuple(sorted((r, next(iter(neighbours[r])))))])
        for position, r in enumerate(_walk(head, neighbours)):
            out[r] = position
    return out


def _chain(root: int, neighbours: dict[int, set[int]]) -> set[int]:
    seen, todo = {root}, [root]
    while todo:
        for n in neighbours[todo.pop()] - seen:
            seen.add(n)
            todo.append(n)
    return seen


def _walk(head: int, neighbours: dict[int, set[int]]) -> list[int]:
    path, previous = [head], None
    while True:
        nxt = [n for n in neighbours[path[-1]] if n != previous]
        if not nxt:
            return path
        previous = path[-1]
        path.append(nxt[0])


def stage_excess(model: Model, stage_of: dict[int, int]) -> np.ndarray:
    """(lane segments x phases): how much shorter each segment of a pipeline stage's ranks
    gets when the stage does each of its phase ranges as fast as the median rank of the
    other stages does the same one (the k-th range of the phase in the step: a
    microbatch's forward), where it is slower; a range's work is its GPU's busy time where
    it ran kernels (the waits inside a range differ between stages: they are the
    pipeline's, not the range's work), else its time; a range's excess is taken off the
    segments that hold its time in proportion to it."""
    ev = model.events
    parts = instance_parts(model)
    parts = parts[parts["phase"] != 0]  # outside phases: where a stage sits, not its work
    parts["rank"] = ev["rank"].to_numpy()[model.lane][parts["seg"].to_numpy()]
    step = np.nan_to_num(ev["step"].to_numpy(np.float64)[model.lane], nan=-1).astype(np.int64)
    parts["step"] = step[parts["seg"].to_numpy()]
    parts["stage"] = parts["rank"].map(stage_of)
    per = parts.groupby(["rank", "step", "phase", "instance"], as_index=False)["ns"].sum()
    per["work"] = per["ns"]
    if "range_busy_ns" in model.stretches:  # compared by the GPU's work, not its waits
        busy = model.stretches.groupby(["rank", "instance"])["range_busy_ns"].first()
        key = pd.MultiIndex.from_frame(per[["rank", "instance"]])
        busy = busy.reindex(key).to_numpy(np.float64)
        per["work"] = np.where(np.isnan(busy), per["ns"], busy)
    per["k"] = per.groupby(["rank", "step", "phase"])["instance"].rank(method="first")
    per["stage"] = per["rank"].map(stage_of)
    out = np.zeros_like(model.parts)
    for s in sorted(set(stage_of.values())):
        other = per[(per["stage"] != s) & per["stage"].notna()]
        median = other.groupby(["step", "phase", "k"])["work"].median().round().rename("median")
        mine = per[per["stage"] == s].join(median, on=["step", "phase", "k"])
        mine["over"] = (
            (mine["work"] - np.minimum(mine["work"], mine["median"]))
            .clip(upper=mine["ns"])
            .fillna(0)
        )
        cut = parts[parts["stage"] == s].merge(
            mine[["rank", "step", "phase", "instance", "ns", "over"]].rename(
                columns={"ns": "total"}
            ),
            on=["rank", "step", "phase", "instance"],
        )
        cut = cut[cut["over"] > 0].sort_values(["rank", "step", "phase", "instance", "seg"])
        group = cut.groupby(["rank", "step", "phase", "instance"])
        share = np.round(group["ns"].cumsum() * cut["over"] / cut["total"]).astype(np.int64)
        cut["cut"] = share - share.groupby(
            [cut[c] for c in ("rank", "step", "phase", "instance")]
        ).shift().fillna(0)
        np.add.at(
            out,
            (cut["seg"].to_numpy(np.int64), cut["phase"].to_numpy(np.int64)),
            cut["cut"].to_numpy(np.int64),
        )
    return out


def candidates(model: Model) -> list[tuple[Candidate, np.ndarray | None, np.ndarray | None]]:
    """Every candidate fix with what it does: (candidate, ns taken off each lane segment,
    collectives hidden); those that change nothing are left out."""
    cut = excess(model)
    rank = model.events["rank"].to_numpy()[model.lane]
    out = []
    for r in sorted(set(rank.tolist())):
        mine = rank == r
        out.append((Candidate("rank", rank=r), np.where(mine, cut.sum(1), 0), None))
        for p, name in enumerate(model.phases):
            if name != NO_PHASE:
                out.append(
                    (
                        Candidate("rank_phase", rank=r, phase=name),
                        np.where(mine, cut[:, p], 0),
                        None,
                    )
                )
    for p, name in enumerate(model.phases):
        if name != NO_PHASE:
            out.append((Candidate("rank_phase", phase=name), cut[:, p], None))
    out.append((Candidate("all"), cut.sum(1), None))
    stage_of = stages(model)
    if stage_of:
        stage_cut = stage_excess(model, stage_of).sum(1)
        stage = pd.Series(rank).map(stage_of).to_numpy()
        out += [
            (Candidate("stage", stage=s), np.where(stage == s, stage_cut, 0), None)
            for s in sorted(set(stage_of.values()))
        ]
    out = [c for c in out if c[1].any()]
    coll = model.collectives
    for (pg, op), g in coll.groupby(["pg", "op"], sort=True):
        hidden = np.zeros(len(coll), bool)
        hidden[g["cid"].to_numpy()] = True
        out.append((Candidate("collective", pg=pg, op=op), None, hidden))
    return out
