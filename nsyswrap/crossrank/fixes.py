"""The candidate fixes of the replay (nsyswrap.crossrank.whatif): which time each takes
off the segments of the model (nsyswrap.crossrank.lanes): a `Cut` of each segment's host
time (before and after the launch its lane rests on) and GPU work. A fix never adds
time, so idealising more never makes the replay slower.

* `rank` R: R's work in each phase since its step began, on each side, is compared at
  each of its events with the other ranks' by the same event (the call of, or the wait
  for, the same collective, not a point-to-point pair, whose two ends do different work;
  the step's start or end, among the ranks of one pipeline stage); R loses, from the
  segments since its previous event, what it is behind the median there (kept from
  shrinking along its segments): `excess`. `rank_phase` (R, P): that of phase P alone
  (rank NULL: P on every rank, e.g. stalls that move between ranks); `all`: every rank,
  every phase.
* `stage` S (point-to-point pairs chained into pipelines or rings of stages, `stages`):
  each phase range of S's ranks (the k-th of the phase in the step: a microbatch's
  forward) no slower, in its GPU work (else its host time), than the median rank of the
  other stages' same range (`stage_excess`).
* `collective` (pg, op): every collective of that op in that group hidden (each member
  ends at its own arrival: no transfer, no wait).

Making a rank as fast as the median takes off its step-to-step noise too, which a fix of
what is slow in it leaves (a rank 250 us slower in every step still varies from step to
step): `steady_candidates` gives, for the candidates that idealise ranks, the cut of their
steady excess alone, the low end of their gain's range where it saves less.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from nsyswrap.crossrank.lanes import NO_PHASE, P2P_OPS, Model


def others_median(values: np.ndarray, group: np.ndarray) -> np.ndarray:
    """Per row and column: the median of the other rows of its group (ns; of integers,
    rounded half to even); a row alone in its group keeps its own value."""
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
        med = np.round(med) if np.issubdtype(values.dtype, np.integer) else med
        out[order, col] = np.where(others > 0, med, v)
    return out


@dataclass(frozen=True)
class Candidate:
    kind: str  # rank, rank_phase, stage, collective, all
    rank: int | None = None
    phase: str | None = None
    pg: str | None = None
    op: str | None = None
    stage: int | None = None


@dataclass(frozen=True)
class Cut:
    """What a fix takes off segments (ns): their host time before the launch their lane's
    end rests on, the rest of their host time, their GPU work; per segment (or segments x
    phases, or x columns), or, with `rows`, only for those segment rows (a candidate's)."""

    before: np.ndarray
    after: np.ndarray
    gpu: np.ndarray
    rows: np.ndarray | None = None

    def any(self) -> bool:
        return bool(self.before.any() or self.after.any() or self.gpu.any())

    def phase(self, p: int) -> Cut:
        return Cut(self.before[:, p], self.after[:, p], self.gpu[:, p])

    def total(self) -> Cut:
        return Cut(self.before.sum(1), self.after.sum(1), self.gpu.sum(1))

    def only(self, mask: np.ndarray | None = None) -> Cut:
        """This per-segment cut kept for the rows of `mask` (all: None) that it changes."""
        keep = (self.before != 0) | (self.after != 0) | (self.gpu != 0)
        rows = np.flatnonzero(keep if mask is None else keep & mask)
        return Cut(self.before[rows], self.after[rows], self.gpu[rows], rows)


def excess(model: Model, steady: bool = False) -> Cut:
    """(segments x phases) cuts: how much shorter each segment's host time (before and
    after the launch its lane's end rests on) and GPU work in its phase get when its rank
    is, at each of its events, no further behind
    the median other rank than it is anywhere before. A rank's work in a phase since its
    step began, on each side, is compared at each event with the other ranks' by the same
    event (the call of, or the wait for, the same collective; the step's start or end);
    the excess, kept from shrinking along the rank's segments, is taken off the segments
    since its previous event, in proportion to their work. Comparing work done by an
    event, not single segments, keeps ranks whose events split the same work differently
    comparable, and puts the cut where the time was lost. `steady`: only the part of the
    excess that persists across the rank's steps (`steady_part`): its step-to-step noise,
    which a fix of what is slow in it leaves, kept."""
    parts = np.hstack([model.before_parts, model.after_parts, model.gpu_parts])
    interval, group, key = _intervals(model)
    ends = np.flatnonzero(key >= 0)  # in rank order, along each rank
    sums = np.zeros_like(parts)
    np.add.at(sums, interval[interval >= 0], parts[interval >= 0])
    g = group[ends]
    cum = pd.DataFrame(sums[ends]).groupby(g).cumsum().to_numpy(np.float64)
    over = cum - others_median(cum, key[ends])
    behind = np.maximum(over, 0)
    if steady:
        behind = steady_part(over, model.segs["rank"].to_numpy()[ends], g)
    kept = pd.DataFrame(behind).groupby(g).cummax().to_numpy(np.float64)
    first = np.r_[True, g[1:] != g[:-1]] if len(g) else np.zeros(0, bool)
    cut = np.diff(np.vstack([np.zeros((1, parts.shape[1])), kept]), axis=0)
    cut[first] = kept[first]
    at_ends = np.zeros_like(parts)
    at_ends[ends] = np.minimum(cut, sums[ends])
    out = spread(at_ends, interval, parts)
    n = model.gpu_parts.shape[1]
    return Cut(out[:, :n], out[:, n : 2 * n], out[:, 2 * n :])


STALL_SPREADS = 3  # beyond its steady excess by this many of its spreads: a stall, kept whole


def steady_part(over: np.ndarray, rank: np.ndarray, group: np.ndarray) -> np.ndarray:
    """Of a rank's excess behind the median at each event (rows: its events in order, by
    group: rank and step), the part that persists across its steps: at most its median over
    the steps at the same place (its n-th event in the step), but whole
    where it exceeds that median by more than STALL_SPREADS of its median deviation (a
    stall); with fewer than 3 steps, all of it."""
    first = np.r_[True, group[1:] != group[:-1]] if len(group) else np.zeros(0, bool)
    nth = pd.Series(np.ones(len(group))).groupby(group).cumsum().to_numpy(np.int64)
    place = pd.Series(list(zip(rank, nth))).factorize()[0]
    behind = np.maximum(over, 0)
    frame = pd.DataFrame(over)
    steps = pd.Series(first.astype(np.int64)).groupby(rank).transform("sum").to_numpy()
    median = frame.groupby(place).transform("median").to_numpy()
    spread = (frame - median).abs().groupby(place).transform("median").to_numpy()
    stall = over - median > STALL_SPREADS * spread
    out = np.where(stall, behind, np.minimum(behind, np.maximum(median, 0)))
    return np.where((steps >= 3)[:, None], out, behind)


def _intervals(model: Model) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per segment row: its interval (the row of its rank, at or after it, that ends at an
    event the ranks are compared at; -1 after its rank's last), the comparison group of
    the interval ending there (its rank and step) and its key (its event: the same
    collective, not a point-to-point pair's, whose two ends do different work; the same
    step's start or end among the ranks of one pipeline stage; -1 where no event ends or
    no other rank has it)."""
    segs = model.segs
    n = len(segs)
    rank = segs["rank"].to_numpy()
    kind = segs["key_kind"].to_numpy(object)
    value = segs["key"].to_numpy(np.int64)
    on_step = np.isin(kind, ["S", "X"])
    step = np.where(on_step, value, np.nan_to_num(segs["step"].to_numpy(np.float64), nan=-1))
    stage = pd.Series(rank).map(stages(model)).fillna(-1).to_numpy(np.int64)
    on_call = np.isin(kind, ["J", "W"])
    p2p = np.zeros(n, bool)
    p2p[on_call] = point_to_point(model)[value[on_call]]
    key = pd.Series(
        list(
            zip(
                kind,
                value,
                np.where(on_call, 0, stage),
                np.where(p2p, np.arange(n), -1),
            )
        )
    ).factorize()[0]
    keyed = pd.notna(kind) & (np.bincount(key)[key] > 1)
    at = pd.Series(np.where(keyed, np.arange(n), n)[::-1])
    nxt = at.groupby(rank[::-1]).cummin().to_numpy()[::-1]
    interval = np.where(nxt < n, nxt, -1)
    group = pd.Series(list(zip(rank, step.astype(np.int64)))).factorize()[0]
    return interval, group, np.where(keyed, key, -1)


def spread(cut: np.ndarray, interval: np.ndarray, parts: np.ndarray) -> np.ndarray:
    """(rows x columns): the cut at each interval's end row taken off the interval's rows
    in proportion to their parts (rounded so that each interval's add up to its cut)."""
    out = np.zeros(parts.shape, np.int64)
    rows = np.flatnonzero(interval >= 0)
    if not len(rows):
        return out
    iv = interval[rows]
    p = parts[rows].astype(np.float64)
    total = np.zeros(parts.shape)
    np.add.at(total, iv, p)
    rate = np.where(total[iv] > 0, cut[iv] / np.maximum(total[iv], 1), 0)
    share = np.round(pd.DataFrame(p).groupby(iv).cumsum().to_numpy() * rate).astype(np.int64)
    before = pd.DataFrame(share).groupby(iv).shift().fillna(0).to_numpy(np.int64)
    out[rows] = share - before
    return out


def point_to_point(model: Model) -> np.ndarray:
    """Per collective: whether it is a point-to-point pair (send, recv or both, two members)."""
    members = model.events[model.events["kind"] == "A"].groupby("cid").size()
    members = members.reindex(model.collectives["cid"]).fillna(0).to_numpy()
    ops = model.collectives["op"].astype(str).str.lower()
    return (ops.isin(P2P_OPS) | ops.str.startswith("send")).to_numpy() & (members == 2)


def stages(model: Model) -> dict[int, int]:
    """Rank -> pipeline stage, where point-to-point pairs chain ranks into pipelines, or
    close them into rings (an interleaved pipeline's last stage sends to its first, fewer
    times than the others to their next): each chain's stage 0 is the end of its earliest
    pair (a ring's: the sender of its earliest pair, else its member that arrived first,
    the walk going on to the other), the stage a rank's place along it; {} without
    pipelines, where pairs neither chain nor ring, or for a ring of peers whose links carry
    as many pairs each (context parallelism's ring attention: its ranks do the same
    work)."""
    ev = model.events
    pairs = np.flatnonzero(point_to_point(model))
    if not len(pairs):
        return {}
    a = ev[(ev["kind"] == "A") & ev["cid"].isin(pairs)]
    a = a.assign(sends=~a.set_index(["rank", "cid"]).index.isin(_receivers(model)))
    a = a.sort_values(["cid", "sends", "t", "rank"], ascending=[True, False, True, True])
    last = ev[(ev["kind"] == "M") & ev["cid"].isin(pairs)].set_index("cid")["t"]
    neighbours: dict[int, set[int]] = {}
    start: dict[tuple, tuple] = {}  # link -> (its earliest pair's last arrival, its sender)
    count: dict[tuple, int] = {}  # link -> its pairs
    for cid, ranks in a.groupby("cid")["rank"]:
        first, other = int(ranks.iloc[0]), int(ranks.iloc[1])
        link = tuple(sorted((first, other)))
        count[link] = count.get(link, 0) + 1
        neighbours.setdefault(first, set()).add(other)
        neighbours.setdefault(other, set()).add(first)
        start[link] = min(start.get(link, (last[cid], first)), (last[cid], first))
    if any(len(n) > 2 for n in neighbours.values()):
        return {}
    out: dict[int, int] = {}
    for root in sorted(neighbours):
        if root in out:
            continue
        chain = _chain(root, neighbours)
        ends = [r for r in chain if len(neighbours[r]) == 1]
        if ends:
            if len(ends) != 2:
                return {}
            head = min(ends, key=lambda r: start[tuple(sorted((r, *neighbours[r])))])
            towards = None
        else:  # a ring: of peers (context parallelism) where every link carries as many pairs
            links = {k: n for k, n in count.items() if k[0] in chain}
            if len(set(links.values())) == 1:
                return {}
            link = min(links, key=start.get)
            head = start[link][1]
            towards = link[0] if link[1] == head else link[1]
        for position, r in enumerate(_walk(head, neighbours, towards)):
            out[r] = position
    return out


def _receivers(model: Model) -> pd.MultiIndex:
    """(rank, cid) of the members whose op is a receive alone (recv, irecv)."""
    ev = model.events[model.events["kind"] == "A"]
    op = ev["op"].astype(str).str.lower()
    return pd.MultiIndex.from_frame(ev.loc[op.isin(["recv", "irecv"]), ["rank", "cid"]])


def _chain(root: int, neighbours: dict[int, set[int]]) -> set[int]:
    seen, todo = {root}, [root]
    while todo:
        for n in neighbours[todo.pop()] - seen:
            seen.add(n)
            todo.append(n)
    return seen


def _walk(head: int, neighbours: dict[int, set[int]], towards: int | None = None) -> list[int]:
    """The ranks from `head` along its chain (round its ring, first to `towards`)."""
    path, previous = [head], None
    while True:
        nxt = (
            [towards]
            if towards is not None and previous is None
            else sorted(n for n in neighbours[path[-1]] if n != previous)
        )
        if not nxt or nxt[0] == head:
            return path
        previous = path[-1]
        path.append(nxt[0])


def stage_excess(model: Model, stage_of: dict[int, int]) -> Cut:
    """(segments x phases) cuts: how much shorter each segment of a pipeline
    stage's ranks gets when the stage does each of its phase ranges as fast as the median
    rank of the other stages does the same one (the k-th range of the phase in the step:
    a microbatch's forward), where it is slower. A range's work is the GPU work its
    segments launched where they launched any (the waits inside a range differ between
    stages: they are the pipeline's, not the range's work), else its host time; its
    excess is taken off that work in its segments, in proportion."""
    segs = model.segs
    gpu = model.gpu_parts.sum(1)
    host = model.before_parts.sum(1) + model.after_parts.sum(1)
    rows = pd.DataFrame(
        {
            "rank": segs["rank"].to_numpy(),
            "step": np.nan_to_num(segs["step"].to_numpy(np.float64), nan=-1),
            "phase": segs["phase_index"].to_numpy(),
            "instance": segs["instance"].to_numpy(np.float64),
            "gpu": gpu,
            "host": host,
        }
    )
    rows["stage"] = rows["rank"].map(stage_of)
    rows = rows[(rows["phase"] != 0) & rows["stage"].notna() & rows["instance"].notna()]
    per = rows.groupby(["rank", "step", "phase", "instance"], as_index=False)[["gpu", "host"]].sum()
    per["on_gpu"] = per["gpu"] > 0
    per["work"] = np.where(per["on_gpu"], per["gpu"], per["host"])
    per["k"] = per.groupby(["rank", "step", "phase"])["instance"].rank(method="first")
    per["stage"] = per["rank"].map(stage_of)
    over = np.zeros(len(per))
    for s in sorted(set(stage_of.values())):
        other = per[per["stage"] != s]
        median = other.groupby(["step", "phase", "k"])["work"].median().round().rename("median")
        mine = per["stage"] == s
        med = per[mine].join(median, on=["step", "phase", "k"])["median"].to_numpy()
        work = per.loc[mine, "work"].to_numpy(np.float64)
        over[mine.to_numpy()] = np.nan_to_num(work - np.minimum(work, med))
    per["over"] = np.round(over).astype(np.int64)
    return _range_cuts(model, per)


def _range_cuts(model: Model, per: pd.DataFrame) -> Cut:
    """Each phase range's excess (per: rank, step, phase, instance, on_gpu, over; at most
    its work) taken off its segments' GPU work, or host time, in proportion."""
    segs = model.segs
    key = ["rank", "step", "phase", "instance"]
    rows = pd.DataFrame(
        {
            "rank": segs["rank"].to_numpy(),
            "step": np.nan_to_num(segs["step"].to_numpy(np.float64), nan=-1),
            "phase": segs["phase_index"].to_numpy(),
            "instance": segs["instance"].to_numpy(np.float64),
            "row": np.arange(len(segs)),
        }
    )
    rows = rows.merge(per.loc[per["over"] > 0, [*key, "on_gpu", "over"]], on=key)
    host = np.hstack([model.before_parts, model.after_parts])
    n = model.gpu_parts.shape[1]
    out = []
    for on_gpu, parts in ((False, host), (True, model.gpu_parts)):
        mine = rows[rows["on_gpu"] == on_gpu].sort_values("row")
        mine = mine.assign(last=mine.groupby(key)["row"].transform("max"))
        interval = np.full(len(parts), -1)
        interval[mine["row"].to_numpy()] = mine["last"].to_numpy()
        ranges = mine.drop_duplicates(key)
        at_end = np.zeros_like(parts)
        last, phase = ranges["last"].to_numpy(), ranges["phase"].to_numpy()
        over = ranges["over"].to_numpy(np.int64)
        if on_gpu:
            at_end[last, phase] = over
        else:  # before and after the binding launch, in proportion to the range's
            totals = np.zeros_like(parts)
            np.add.at(totals, interval[interval >= 0], parts[interval >= 0])
            b, a = totals[last, phase], totals[last, phase + n]
            at_end[last, phase] = np.round(over * b / np.maximum(a + b, 1)).astype(np.int64)
            at_end[last, phase + n] = over - at_end[last, phase]
        out.append(spread(at_end, interval, parts))
    return Cut(out[0][:, :n], out[0][:, n:], out[1])


def candidates(model: Model) -> list[tuple[Candidate, Cut | None, np.ndarray | None]]:
    """Every candidate fix with what it does: (candidate, what it takes off each segment,
    collectives hidden); those that change nothing are left out."""
    out = _idealised(model, excess(model))
    rank = model.segs["rank"].to_numpy()
    stage_of = stages(model)
    if stage_of:
        by_stage = stage_excess(model, stage_of).total()
        stage = pd.Series(rank).map(stage_of).to_numpy()
        out += [
            (Candidate("stage", stage=s), by_stage.only(stage == s), None)
            for s in sorted(set(stage_of.values()))
        ]
    out = [c for c in out if c[1].any()]
    coll = model.collectives
    paired = coll["op"].where(~point_to_point(model), "send_recv")  # a pair's ends: one op
    for (pg, op), g in coll.assign(op=paired).groupby(["pg", "op"], sort=True):
        hidden = np.zeros(len(coll), bool)
        hidden[g["cid"].to_numpy()] = True
        out.append((Candidate("collective", pg=pg, op=op), None, hidden))
    return out


def _idealised(model: Model, cut: Cut) -> list[tuple[Candidate, Cut, None]]:
    """The candidates that idealise ranks (rank, rank_phase, all) with their part of `cut`
    (an `excess`)."""
    rank = model.segs["rank"].to_numpy()
    named = [(p, name) for p, name in enumerate(model.phases) if name != NO_PHASE]
    out = []
    for r in sorted(set(rank.tolist())):
        mine = rank == r
        out.append((Candidate("rank", rank=r), cut.total().only(mine), None))
        out += [
            (Candidate("rank_phase", rank=r, phase=name), cut.phase(p).only(mine), None)
            for p, name in named
        ]
    out += [(Candidate("rank_phase", phase=name), cut.phase(p).only(), None) for p, name in named]
    out.append((Candidate("all"), cut.total().only(), None))
    return out


def steady_candidates(model: Model, cands: list) -> list[tuple[int, Cut]]:
    """(index in `cands`, cut) of the candidates that idealise ranks, where removing only
    the ranks' steady excess (`excess(model, steady=True)`: their step-to-step noise kept)
    cuts less than making them as fast as the median."""
    at = {c: j for j, (c, _, _) in enumerate(cands)}
    out = []
    for c, cut, _ in _idealised(model, excess(model, steady=True)):
        j = at.get(c)
        if j is None:
            continue
        full = cands[j][1]
        same = len(cut.rows) == len(full.rows) and all(
            np.array_equal(getattr(cut, f), getattr(full, f))
            for f in ("rows", "before", "after", "gpu")
        )
        if not same:
            out.append((j, cut))
    return out
