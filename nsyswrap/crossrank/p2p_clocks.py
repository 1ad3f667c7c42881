"""Clocks from point-to-point transfers: hosts that no true barrier joins to the reference
(Megatron's layout: data parallelism inside a host, pipeline stages across hosts) aligned
within the bounds their send/recv pairs set.

**The bound.** A receive cannot complete before its send started: for a pair whose sender
and receiver read different clocks, the receiver's aligned end is at or after the sender's
aligned start. Let clock component C be the unaligned ranks that true barriers join among
themselves (solved among themselves as the reference's component is, nsyswrap.crossrank.
alignment; one host's ranks read one clock), its times known up to one offset `delta`
against the aligned ranks. A pair with the send on an aligned rank and the receive on C
bounds `delta` from below (delta >= send start - receive end); one the other way round,
from above. A pipeline sends both ways (activations forward, their gradients back), so
`delta` lies in an interval: C takes its midpoint, and half its width (plus the
uncertainty of the clocks it was bound against) is its `uncertainty_ns`. Components are
bound one after the other, each against every rank aligned so far (a chain of hosts).

**Which pairs.** Pairs matched by a key (`coll:` ranges, NCCL payloads, MPI) whose times
are transfers: NCCL kernels, or a completion mark, or MPI's blocking calls (a range around
an asynchronous call ends when it was enqueued, not done). Where the trace does not say
which member sends (a `send_recv` group, each member both sends and receives; a kernel
only run's `ncclDevKernel_SendRecv`), each member is taken to run over the other's start,
as the exchange grouping assumes (nsyswrap.crossrank.streams): both bounds. A kernel-only
run has no key: streams of an aligned rank and of C with the same operations are a
candidate pair where one `delta` makes every k-th kernel of the two overlap (for
OVERLAP_SHARE of them); `delta` is then where the most candidate pairs fit at once (two
pipeline replicas in lockstep fit about the same `delta`), and C stays unaligned where two
places tie (ambiguous).

A component with bounds on one side only, or none, stays unaligned; its method says why.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from nsyswrap.crossrank.alignment import to_run_time
from nsyswrap.crossrank.matching import P2P
from nsyswrap.crossrank.streams import OVERLAP_SHARE, same_ops

CLEAR = 0.5  # a pair is told apart when its ends' spread is at most this x its rivals'
SENDS = {"send", "isend", "send_recv", "sendrecv", "p2p"}
RECEIVES = {"recv", "irecv", "send_recv", "sendrecv", "p2p"}


def directed_bounds(pairs: pd.DataFrame, mine: set[int]) -> tuple[float, float, int]:
    """(lowest delta, highest delta, pairs used) for clock component `mine` (ranks) from
    keyed point-to-point calls `pairs` (pg, seq, rank, op, start_ns, end_ns: aligned ranks
    in run time, `mine` at delta 0), two members each, one in `mine`."""
    key = ["pg", "seq"]
    calls = pairs.assign(inside=pairs["rank"].isin(mine), op=pairs["op"].map(_op))
    size = calls.groupby(key)["inside"].transform("size")
    ours = calls.groupby(key)["inside"].transform("sum")
    calls = calls[(size == 2) & (ours == 1)]
    m = calls[calls["inside"]].merge(calls[~calls["inside"]], on=key, suffixes=("_c", "_a"))
    # the member on `mine` (c) receives after the other (a) began to send: from below
    up = m["op_a"].isin(SENDS) & m["op_c"].isin(RECEIVES)
    down = m["op_c"].isin(SENDS) & m["op_a"].isin(RECEIVES)
    lo = (m["start_ns_a"] - m["end_ns_c"])[up].max() if up.any() else -np.inf
    hi = (m["end_ns_a"] - m["start_ns_c"])[down].min() if down.any() else np.inf
    return float(lo), float(hi), len(m)


def _op(op) -> str:
    """A point-to-point call's op, lower case; one the trace names otherwise: `p2p`."""
    op = str(op).lower()
    return op if op in P2P or op in SENDS else "p2p"


def stream_bounds(streams: pd.DataFrame, mine: set[int]) -> tuple:
    """(lowest delta, highest delta, candidate pairs, the pairs told apart) for clock
    component `mine` from kernel-only exchange streams (pg, seq, rank, op, start_ns, end_ns
    as in directed_bounds), or (None, why, 0, []) where no place or two places fit best
    (module doc)."""
    seqs = {pg: g.sort_values("seq") for pg, g in streams.groupby("pg", sort=True)}
    ours = [pg for pg, g in seqs.items() if g["rank"].iloc[0] in mine]
    theirs = [pg for pg, g in seqs.items() if g["rank"].iloc[0] not in mine]
    fits = []
    for b in ours:
        for a in theirs:
            if not same_ops(seqs[a], seqs[b]):
                continue
            n = min(len(seqs[a]), len(seqs[b]))
            sa, ea = (seqs[a][c].to_numpy(np.float64)[:n] for c in ("start_ns", "end_ns"))
            sb, eb = (seqs[b][c].to_numpy(np.float64)[:n] for c in ("start_ns", "end_ns"))
            lo = float(np.quantile(sa - eb, OVERLAP_SHARE))
            hi = float(np.quantile(ea - sb, 1 - OVERLAP_SHARE))
            if lo <= hi:
                apart = ea - eb
                fits.append((a, b, lo, hi, float(np.median(np.abs(apart - np.median(apart))))))
    told = told_apart(fits)
    if told:
        lo, hi = max(f[2] for f in told), min(f[3] for f in told)
        if lo <= hi:
            return lo, hi, len(told), [(a, b) for a, b, *_ in told]
    return (*deepest([(lo, hi) for _, _, lo, hi, _ in fits]), [])


def told_apart(fits: list[tuple]) -> list[tuple]:
    """Of candidate stream pairs (a, b, lo, hi, spread of their end differences), those
    where each is the other's partner beyond doubt: its ends' spread is the smallest of
    either stream's candidates, at most CLEAR x the next (a send and its receive end a
    constant time apart, a replica in lockstep by its own jitter)."""
    out = []
    for f in fits:
        rivals = sorted(g[4] for g in fits if g is not f and (g[0] == f[0] or g[1] == f[1]))
        if not rivals or f[4] <= CLEAR * rivals[0]:
            out.append(f)
    return out


def deepest(spans: list[tuple[float, float]]) -> tuple[float, float, int] | tuple[None, str, int]:
    """The interval where the most of `spans` overlap, and how many; (None, why, 0) where
    none is given or two disjoint places tie."""
    if not spans:
        return None, "no stream of it overlaps a stream of an aligned rank at any offset", 0
    edges = sorted([(lo, 0) for lo, _ in spans] + [(hi, 1) for _, hi in spans])
    depth, best, places = 0, 0, []
    for i, (t, kind) in enumerate(edges):
        depth += 1 if kind == 0 else -1
        if kind == 0 and depth >= best:
            nxt = edges[i + 1][0]
            places = [*places, (t, nxt)] if depth == best else [(t, nxt)]
            best = depth
    if len(places) > 1:
        return None, f"its streams fit the aligned ranks' at {len(places)} offsets equally well", 0
    return places[0][0], places[0][1], best


def bind_unaligned(
    clock: pd.DataFrame, matched: pd.DataFrame, pending: pd.DataFrame, solve_part
) -> tuple[pd.DataFrame, list[tuple[str, str]], dict[int, tuple[str, float]]]:
    """(`clock`, the clock table per member rank, with every unaligned clock component
    that point-to-point pairs bound on both sides aligned (module doc); the kernel-only
    streams paired across clocks on the way; per rank of a bound component, the component
    and its uncertainty within it). `matched`: the keyed calls with their times
    (solve.timed), `pending`: kernel-only exchange streams; `solve_part(ranks)`: the clock
    rows of those ranks solved among themselves (the component of the lowest aligned, the
    rest unaligned)."""
    pairs, paired, within = _transfers(matched), [], {}
    progress = True
    while progress and not clock["aligned"].astype(bool).all():
        progress = False
        rest = set(clock.loc[~clock["aligned"].astype(bool), "rank"].astype(int))
        while rest:
            part = solve_part(sorted(rest))
            comp = part[part["aligned"].astype(bool)]
            rest -= set(comp["rank"].astype(int))
            *bound, told = _bound(clock, comp, pairs, pending)
            clock = _place(clock, comp, bound)
            progress |= bound[0] is not None
            paired += told
            name = f"bound {comp['rank'].min()}"
            within |= {
                int(r): (name, float(u or 0))
                for r, u in zip(comp["rank"], comp["uncertainty_ns"].fillna(0))
            }
    return clock, paired, within


def _transfers(matched: pd.DataFrame) -> pd.DataFrame:
    """The keyed point-to-point calls whose times are transfers (module doc)."""
    op = matched["op"].astype(str).str.lower()
    timed = matched["on_gpu"].astype(bool) | matched["done_ns"].notna()
    timed |= matched["found_by"].eq("mpi")
    p2p = op.isin(P2P | SENDS) & ~matched["barrier"].astype(bool)
    return matched.loc[p2p & timed, ["pg", "seq", "rank", "op", "start_ns", "end_ns"]]


def _bound(clock: pd.DataFrame, comp: pd.DataFrame, pairs: pd.DataFrame, pending: pd.DataFrame):
    """(lowest delta, highest delta, what bounds it, kernel streams paired) of component
    `comp` against the aligned ranks of `clock`, or (None, why, None, [])."""
    both = pd.concat([clock[clock["aligned"].astype(bool)], comp], ignore_index=True)
    mine = set(comp["rank"].astype(int))
    known = set(both["rank"].astype(int))
    keyed = to_run_time(pairs[pairs["rank"].isin(known)], both, ["start_ns", "end_ns"])
    if len(keyed):
        lo, hi, n = directed_bounds(keyed, mine)
        if n:
            if not (np.isfinite(lo) and np.isfinite(hi)):
                why = f"its {n} point-to-point transfers bound its clock on one side only"
                return None, why, None, []
            if lo > hi:
                why = f"its point-to-point transfers contradict by {(lo - hi) / 1e3:,.1f} us"
                return None, why, None, []
            return lo, hi, f"{n} point-to-point transfers", []
    if pending.empty:
        why = "no matched collective or point-to-point transfer joins it to the others"
        return None, why, None, []
    times = pending.assign(start_ns=pending["kernel_start_ns"], end_ns=pending["kernel_end_ns"])
    times = times[times["rank"].isin(known)]
    lo, hi, n, told = stream_bounds(to_run_time(times, both, ["start_ns", "end_ns"]), mine)
    pairs_of = "1 pair" if n == 1 else f"{n} pairs"
    how = ", each paired by their ends" if told else ""
    return lo, hi, f"{pairs_of} of send/recv kernel streams with aligned ranks'{how}", told


def _place(clock: pd.DataFrame, comp: pd.DataFrame, bound: tuple) -> pd.DataFrame:
    """`clock` with the rows of `comp` aligned at the middle of `bound`, or their method
    saying why not."""
    rows = clock.set_index("rank")
    ranks = comp["rank"].astype(int).to_numpy()
    lo, hi, what = bound
    if lo is None:
        rows.loc[ranks, "method"] = f"unaligned: {hi}"
        return rows.reset_index()
    part = comp.set_index("rank")
    delta = int(round((lo + hi) / 2))
    half = int(np.ceil((hi - lo) / 2))
    aligned = rows[rows["aligned"].astype(bool)]
    base = int(aligned["uncertainty_ns"].fillna(0).max()) if len(aligned) else 0
    ref = aligned.iloc[0]
    ref_utc = int(ref["utc_epoch_ns"]) - int(ref["shift_ns"]) + int(ref["offset_ns"])
    for column in ("drift_ppb", "spread_ns", "max_residual_ns", "jump_at_ns", "jump_ns", "clock"):
        rows.loc[ranks, column] = part.loc[ranks, column]
    rows.loc[ranks, "shift_ns"] = part.loc[ranks, "shift_ns"].astype(np.int64) + delta
    rows.loc[ranks, "offset_ns"] = rows.loc[ranks, "shift_ns"] - (
        part.loc[ranks, "utc_epoch_ns"].astype(np.int64) - ref_utc
    )
    rows.loc[ranks, "uncertainty_ns"] = part.loc[ranks, "uncertainty_ns"].fillna(0) + half + base
    rows.loc[ranks, "aligned"] = True
    rows.loc[ranks, "source"] = "p2p"
    rows.loc[ranks, "method"] = part.loc[ranks, "method"].map(
        lambda m: f"bounded by {what}: its offset within +-{half / 1e3:,.1f} us; " + _relative(m)
    )
    return rows.reset_index()


def _relative(method: str) -> str:
    """A component's method from its own solve, its reference named as its own."""
    method = method.replace("the reference's clock", "the clock of its hosts' reference")
    return (
        "its hosts' reference" + method[len("reference") :]
        if method.startswith("reference")
        else method
    )
