"""Groups from NCCL kernels alone: which CUDA streams of different ranks are one group.

Without nsyswrap's `coll:` ranges or NCCL's payloads nothing records a collective's group:
each NCCL stream of a process is a candidate member sequence (PyTorch gives every process
group, and every peer of a send/recv, a stream of its own), its k-th kernel the group's
k-th operation. Streams are never merged on a guess: a set that could be two groups is
left out and the groups table says why.

**True barriers** (streams whose every kernel is an all_reduce, all_gather or
reduce_scatter: nsyswrap.crossrank.matching.is_barrier) end at one instant on all members:

1. On one clock (the reports of one host; a report without a host is a clock of its own)
   streams are one group when their ends are equal (within AGREE_NS, for AGREE_SHARE of
   their kernels): streams on one host that end apart are different groups, whatever
   their rhythm.
2. Across two clocks, two such local groups agree when the difference of their ends is a
   line in time (the clocks' offset and drift) within AGREE_NS for AGREE_SHARE of their
   kernels: groups in lockstep that are not one (a pipeline's per-stage all-reduces, one
   per step) end apart by amounts that wander from step to step.
3. The two clocks have one offset: of the links between their local groups, those at the
   offset most links share (within OFFSET_NS) are kept, the rest dropped; when two
   offsets are shared by as many links, no link between the two clocks is kept (it cannot
   tell which pairing is right).
4. A clock that jumps mid-run (nsyswrap.crossrank.jumps) bends no line but steps it once:
   where the ends are no line, a line plus one step (a jump: at least JUMP_MIN_NS and
   JUMP_SCALES robust scales, holding for the medians on both sides, as the clock solve
   asks) is tried, and the groups agree when their ends fit it as in 2.; the offset is
   the line's before the step. The clock solve then finds and reports the jump.

**Exchanges** (streams with an all_to_all, send/recv or another operation whose members
end apart) cannot be told by their ends. They are grouped after the clocks are solved
(`group_exchanges`): streams of different ranks with the same operations are one group
when every k-th kernel of every member overlaps every other member's in aligned time (an
exchange's members all run over the last member's arrival), within the members' clock
uncertainty. A chain of overlapping streams that is not all-with-all (two pipeline
replicas running in lockstep: each channel's streams overlap the other replica's too) is
split into such groups when exactly one split exists (each stream in one group of two or
more streams of different ranks), else left out as ambiguous. A stream with the same
operations as one left out for an unaligned clock is left out too: its group may be
that one. Groups in perfect lockstep whose streams all overlap all cannot be told from
one group: nothing in the kernels tells them apart.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from nsyswrap.crossrank.graph import components
from nsyswrap.crossrank.jumps import jump_step

AGREE_NS = 2_000  # ends of one group agree within this (after the clocks' line) ...
AGREE_SHARE = 0.9  # ... for at least this share of the kernels
OFFSET_NS = 5_000  # links between two clocks at offsets this close are one offset
OVERLAP_SHARE = 0.99  # exchanges: every member's k-th kernels overlap for this share of k
SPLIT_MAX = 12  # a chain of overlapping exchange streams is split only up to this size
GROUP_COLUMNS = [
    "pg",
    "found_by",
    "members",
    "captured",
    "group_size",
    "status",
    "calls",
    "left_out",
]
FOUND_BY = {
    "barrier": "NCCL kernels per stream: true barriers with equal ends on one host and one "
    "clock offset between hosts",
    "exchange": "NCCL kernels per stream: exchanges (all_to_all, send/recv) whose every "
    "k-th kernel overlaps on all members once the clocks are aligned",
}


class Stream:
    """One candidate member sequence: a stream of one rank, its kernels in order."""

    def __init__(self, name: str, calls: pd.DataFrame, clock: str, utc: int):
        self.name, self.calls, self.clock = name, calls.sort_values("seq"), clock
        self.rank = int(calls["rank"].iloc[0])
        self.ops = self.calls["op"].astype(str).to_numpy()
        # host clock time, since the run's earliest UTC start (small: exact in float64)
        self.ends = (utc + self.calls["kernel_end_ns"].astype("int64")).to_numpy(np.float64)

    def comparable(self, other: Stream) -> int:
        """The common length when the two streams run the same operations (lengths within
        a tenth: a capture may cut a few off), else 0."""
        n = min(len(self.ops), len(other.ops))
        if n < 2 or abs(len(self.ops) - len(other.ops)) > max(1, n // 10):
            return 0
        return n if (self.ops[:n] == other.ops[:n]).all() else 0


def _same_ends(a: Stream, b: Stream) -> bool:
    """Two streams on one clock end together (one group)."""
    n = a.comparable(b)
    return bool(n) and float(np.mean(np.abs(a.ends[:n] - b.ends[:n]) <= AGREE_NS)) >= AGREE_SHARE


def _offset_line(a: Stream, b: Stream, t0: float) -> float | None:
    """a's ends less b's as a line over b's host time: its value at t0 when the ends agree
    with the line (module doc, 2.), or with a line and one clock jump (module doc, 4.),
    else None."""
    n = a.comparable(b)
    if not n:
        return None
    t, d = b.ends[:n] - t0, a.ends[:n] - b.ends[:n]
    slope, intercept = np.polyfit(t, d, 1)
    off = d - (intercept + slope * t)
    if float(np.mean(np.abs(off) <= AGREE_NS)) >= AGREE_SHARE:
        return float(intercept)
    order = np.argsort(t, kind="stable")
    t, d = t[order], d[order]
    found = jump_step(t, d)
    if found is None:
        return None
    design = np.column_stack([np.ones(n), t, (np.arange(n) >= found[0]).astype(np.float64)])
    coef, *_ = np.linalg.lstsq(design, d, rcond=None)
    off = d - design @ coef
    return float(coef[0]) if float(np.mean(np.abs(off) <= AGREE_NS)) >= AGREE_SHARE else None


def _local_groups(streams: list[Stream]) -> list[list[Stream]]:
    """Streams of one clock that end together (module doc, 1.)."""
    same = [
        (a.name, b.name)
        for i, a in enumerate(streams)
        for b in streams[i + 1 :]
        if a.clock == b.clock and _same_ends(a, b)
    ]
    root = components([s.name for s in streams], same)
    out: dict[str, list[Stream]] = {}
    for s in streams:
        out.setdefault(root[s.name], []).append(s)
    return list(out.values())


def _clusters(offsets: list[float]) -> list[list[int]]:
    """Indices of `offsets` grouped where sorted neighbours are within OFFSET_NS."""
    order = sorted(range(len(offsets)), key=offsets.__getitem__)
    out: list[list[int]] = []
    for i in order:
        if out and offsets[i] - offsets[out[-1][-1]] <= OFFSET_NS:
            out[-1].append(i)
        else:
            out.append([i])
    return out


def _links(local: list[list[Stream]]) -> tuple[list[tuple[int, int]], dict[int, str]]:
    """Accepted links between local groups of different clocks (module doc, 2. and 3.),
    and why a local group was left unlinked where two pairings were as likely."""
    by_pair: dict[tuple[str, str], list[tuple[int, int, float]]] = {}
    t0: dict[str, float] = {}
    for g in local:
        t0[g[0].clock] = min(t0.get(g[0].clock, np.inf), float(g[0].ends[0]))
    for i, a in enumerate(local):
        for j, b in enumerate(local):
            if a[0].clock < b[0].clock:
                off = _offset_line(a[0], b[0], t0[b[0].clock])
                if off is not None:
                    by_pair.setdefault((a[0].clock, b[0].clock), []).append((i, j, off))
    kept, unsure = [], {}
    for (ca, cb), links in by_pair.items():
        clusters = _clusters([o for _, _, o in links])
        best = max(len(c) for c in clusters)
        chosen = [links[k][:2] for c in clusters if len(c) == best for k in c]
        lefts, rights = [i for i, _ in chosen], [j for _, j in chosen]
        if sum(len(c) == best for c in clusters) > 1:
            why = f"its streams and {cb}'s pair up at several clock offsets alike"
        elif len(set(lefts)) < len(lefts) or len(set(rights)) < len(rights):
            why = f"a stream pairs with two of {cb}'s at one clock offset"
        else:
            kept += chosen
            continue
        for i, j, _ in links:
            unsure[i] = unsure[j] = f"ambiguous: {ca} and {why}; left out"
    return kept, unsure


def infer_barrier_groups(
    calls: pd.DataFrame, clock_of: dict[int, tuple[str, int]]
) -> tuple[pd.DataFrame, list[dict]]:
    """Barrier streams grouped (module doc): (calls renamed to their group 'nccl:<k>', one
    member per rank; group rows). Streams left out keep no call; their rows say why.
    `clock_of`: rank -> (its clock, its report's UTC start less the run's earliest)."""
    if calls.empty:
        return calls, []
    streams = [
        Stream(pg, g, *clock_of[int(g["rank"].iloc[0])]) for pg, g in calls.groupby("pg", sort=True)
    ]
    streams.sort(key=lambda s: (s.rank, s.name))
    local = _local_groups(streams)
    kept, unsure = _links(local)
    root = components(range(len(local)), kept)
    grouped: dict[int, list[int]] = {}
    for i in range(len(local)):
        grouped.setdefault(root[i], []).append(i)
    renamed, rows, k = {}, [], 0
    for parts in sorted(
        grouped.values(), key=lambda ps: (local[ps[0]][0].rank, local[ps[0]][0].name)
    ):
        members = [s for i in parts for s in local[i]]
        ranks = sorted({s.rank for s in members})
        split = any(len({i for i in parts for s in local[i] if s.rank == r}) > 1 for r in ranks)
        calls_n = sum(len(s.ops) for s in members)
        if split:
            status = "ambiguous: two streams of one rank end apart; left out"
        elif len(ranks) < 2:
            status = next((unsure[i] for i in parts if i in unsure), "one rank only")
        else:
            status = "matched"
        name = f"nccl:{k}" if status == "matched" else f"unmatched:{members[0].name}"
        k += status == "matched"
        renamed.update(dict.fromkeys((s.name for s in members), name))
        rows.append(
            {
                "pg": name,
                "found_by": FOUND_BY["barrier"],
                "members": ",".join(map(str, ranks)),
                "captured": len(ranks),
                "group_size": None,
                "status": status,
                "calls": calls_n,
                "left_out": 0 if status == "matched" else calls_n,
            }
        )
    out = calls.assign(pg=calls["pg"].map(renamed))
    return _one_member_per_rank(out[out["pg"].str.startswith("nccl:")]), rows


def _one_member_per_rank(calls: pd.DataFrame) -> pd.DataFrame:
    """A rank's streams of one group (several GPUs) as one call per collective: from its
    first kernel start to its last end."""
    return calls.groupby(["rank", "pg", "seq"], as_index=False).agg(
        op=("op", "first"),
        bytes=("bytes", "first"),
        group_size=("group_size", "first"),
        cpu_start_ns=("cpu_start_ns", "min"),
        cpu_end_ns=("cpu_end_ns", "max"),
        kernel_start_ns=("kernel_start_ns", "min"),
        kernel_end_ns=("kernel_end_ns", "max"),
        barrier=("barrier", "all"),
    )


def _overlap(a: pd.DataFrame, b: pd.DataFrame, tol: float) -> bool:
    """Every k-th kernel of two aligned streams overlaps (module doc: exchanges)."""
    if not same_ops(a, b):
        return False
    n = min(len(a), len(b))
    start = np.maximum(a["start_ns"].to_numpy()[:n], b["start_ns"].to_numpy()[:n])
    end = np.minimum(a["end_ns"].to_numpy()[:n], b["end_ns"].to_numpy()[:n])
    return float(np.mean(start <= end + tol)) >= OVERLAP_SHARE


def _cliques(
    members: list[str], fits: set, rank: dict[str, int], limit: int = 2
) -> list[list[list[str]]]:
    """Up to `limit` ways to split `members` into groups of two or more streams of
    different ranks that all overlap one another (a small set only)."""
    if len(members) > SPLIT_MAX:
        return [[], []]
    fit = lambda a, b: (a, b) in fits or (b, a) in fits  # noqa: E731
    found: list[list[list[str]]] = []

    def extend(rest: list[str], done: list[list[str]]) -> None:
        if len(found) >= limit:
            return
        if not rest:
            found.append(done)
            return
        first, others = rest[0], rest[1:]
        mates = [m for m in others if fit(first, m) and rank[m] != rank[first]]
        for n in range(1, 1 << len(mates)):
            group = [first] + [m for i, m in enumerate(mates) if n >> i & 1]
            if len({rank[m] for m in group}) == len(group) and all(
                fit(a, b) for i, a in enumerate(group) for b in group[i + 1 :]
            ):
                extend([m for m in others if m not in group], [*done, group])

    extend(members, [])
    return found


def _left_out(pg: str, calls: pd.DataFrame, status: str) -> dict:
    return {
        "pg": f"unmatched:{pg}",
        "found_by": FOUND_BY["exchange"],
        "members": str(int(calls["rank"].iloc[0])),
        "captured": 1,
        "group_size": None,
        "status": status,
        "calls": len(calls),
        "left_out": len(calls),
    }


def same_ops(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    """Two exchange streams run the same operations: the same op at each k, their lengths
    within a fiftieth (a capture may cut one or two off; neighbouring channels of a
    pipeline differ by a few per step)."""
    n = min(len(a), len(b))
    return (
        n >= 2
        and abs(len(a) - len(b)) <= max(1, n // 50)
        and bool((a["op"].to_numpy()[:n] == b["op"].to_numpy()[:n]).all())
    )


def group_exchanges(
    aligned: pd.DataFrame,
    unplaced: pd.DataFrame,
    uncertainty: dict[int, float],
    first: int,
    paired: list[tuple[str, str]] = (),
    within: dict[int, tuple[str, float]] | None = None,
) -> tuple[dict[str, str], list[dict]]:
    """Exchange streams grouped after the clocks are solved (module doc). `aligned`: their
    calls with start_ns / end_ns in run time (ranks with an aligned clock); `unplaced`:
    those of ranks without (left out); returns (stream -> group 'nccl:x<k>', numbered from
    `first`; group rows). A set of streams that overlap is one group when all overlap all;
    else it is split into such groups when exactly one split exists, and left out when
    none or several do. A stream with the same operations as one left out unaligned is
    left out too: its group may be that one (two halves of two send/recv pairs in lockstep
    overlap as well as a pair does). `paired`: pairs of streams already told apart (by
    the bounds of their clocks, nsyswrap.crossrank.p2p_clocks), one group each;
    `within`: rank -> (its clock component, its uncertainty within it)."""
    rows = [
        _left_out(pg, g, "left out: its rank's clock is not aligned")
        for pg, g in unplaced.groupby("pg", sort=True)
    ]
    seqs = {pg: g.sort_values("seq") for pg, g in aligned.groupby("pg", sort=True)}
    renamed, first = _paired(seqs, paired, first, rows)
    _like_unplaced(seqs, unplaced, rows)
    rank = {pg: int(g["rank"].iloc[0]) for pg, g in seqs.items()}
    names = sorted(seqs, key=lambda pg: (rank[pg], pg))
    fits = {
        (a, b)
        for i, a in enumerate(names)
        for b in names[i + 1 :]
        if rank[a] != rank[b]
        and _overlap(seqs[a], seqs[b], _tolerance(rank[a], rank[b], uncertainty, within))
    }
    root = components(names, fits)
    grouped: dict[str, list[str]] = {}
    for pg in names:
        grouped.setdefault(root[pg], []).append(pg)
    _split_groups(grouped, seqs, fits, rank, first, renamed, rows)
    return renamed, rows


def _split_groups(
    grouped: dict[str, list[str]],
    seqs: dict[str, pd.DataFrame],
    fits: set,
    rank: dict[str, int],
    first: int,
    renamed: dict[str, str],
    rows: list[dict],
) -> None:
    """Each set of overlapping streams as one group, or split into groups that all overlap
    where exactly one split exists, or left out (group_exchanges): their names into
    `renamed` (numbered from `first`), their rows into `rows`."""
    k = first
    for members in grouped.values():
        ranks = {rank[pg] for pg in members}
        clique = len(ranks) == len(members) and all(
            (a, b) in fits for i, a in enumerate(members) for b in members[i + 1 :]
        )
        splits = [[members]] if clique or len(members) < 2 else _cliques(members, fits, rank)
        if len(splits) != 1:
            calls_n = sum(len(seqs[pg]) for pg in members)
            why = "no" if not splits else "more than one"
            rows.append(
                {
                    "pg": f"unmatched:{members[0]}",
                    "found_by": FOUND_BY["exchange"],
                    "members": ",".join(map(str, sorted(ranks))),
                    "captured": len(ranks),
                    "group_size": None,
                    "status": f"ambiguous: its streams overlap in a chain, and {why} split of "
                    "them into groups that all overlap exists; left out",
                    "calls": calls_n,
                    "left_out": calls_n,
                }
            )
            continue
        for group in splits[0]:
            calls_n = sum(len(seqs[pg]) for pg in group)
            matched = len(group) >= 2
            name = f"nccl:x{k}" if matched else f"unmatched:{group[0]}"
            k += matched
            if matched:
                renamed.update(dict.fromkeys(group, name))
            rows.append(
                {
                    "pg": name,
                    "found_by": FOUND_BY["exchange"],
                    "members": ",".join(map(str, sorted(rank[pg] for pg in group))),
                    "captured": len(group),
                    "group_size": None,
                    "status": "matched"
                    if matched
                    else "one rank only: no other rank's stream overlaps it at every operation",
                    "calls": calls_n,
                    "left_out": 0 if matched else calls_n,
                }
            )


def _like_unplaced(seqs: dict[str, pd.DataFrame], unplaced: pd.DataFrame, rows: list[dict]) -> None:
    """Streams of `seqs` with the same operations as one of an unaligned rank taken out,
    each left out with its row (its group may hold that stream)."""
    away = {pg: g.sort_values("seq") for pg, g in unplaced.groupby("pg", sort=True)}
    for pg in list(seqs):
        like = next((o for o, g in away.items() if same_ops(seqs[pg], g)), None)
        if like is not None:
            rows.append(
                _left_out(
                    pg,
                    seqs.pop(pg),
                    "ambiguous: the same operations as a stream of rank "
                    f"{int(away[like]['rank'].iloc[0])}, whose clock is not aligned: its "
                    "group may hold that stream; left out",
                )
            )


def _tolerance(a: int, b: int, uncertainty: dict[int, float], within: dict | None) -> float:
    """How far apart (ns) two ranks' aligned times may be off: their clocks' uncertainty
    (within one component bound by point-to-point transfers, their uncertainty against
    each other: the bound's is common to both), and 1 us."""
    ca, cb = (within or {}).get(a), (within or {}).get(b)
    if ca is not None and cb is not None and ca[0] == cb[0]:
        return ca[1] + cb[1] + 1_000
    return uncertainty.get(a, 0) + uncertainty.get(b, 0) + 1_000


def _paired(
    seqs: dict[str, pd.DataFrame], paired: list[tuple[str, str]], first: int, rows: list[dict]
) -> tuple[dict[str, str], int]:
    """The streams of `paired` taken out of `seqs`, one group per pair (its row added to
    `rows`): (stream -> group, the next group number)."""
    renamed, k = {}, first
    for a, b in paired:
        if a not in seqs or b not in seqs:
            continue
        name, calls = f"nccl:x{k}", len(seqs[a]) + len(seqs[b])
        k += 1
        renamed.update({a: name, b: name})
        members = sorted(int(seqs.pop(pg)["rank"].iloc[0]) for pg in (a, b))
        rows.append(
            {
                "pg": name,
                "found_by": FOUND_BY["exchange"] + "; paired across hosts by their ends",
                "members": ",".join(map(str, members)),
                "captured": 2,
                "group_size": None,
                "status": "matched",
                "calls": calls,
                "left_out": 0,
            }
        )
    return renamed, k
