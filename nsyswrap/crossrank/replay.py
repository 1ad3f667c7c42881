"""The replay: a run as a graph of events, each at the latest of its predecessors plus its
own duration, replayed in topological order with other durations (what-if analysis).

An event (node) happens at ``max(t[p] + w[p -> n] for its predecessors p) + d[n]``: the
max-plus model of Lin et al., "Understanding Stragglers in Large Model Training Using
What-if Analysis" (OSDI '25): a collective ends at its last member's arrival plus its
transfer time, a rank's work between two of its events takes the time it took. An edge's
weight `w` is the work that separates the two events (the host's own time, the GPU's
work, a launch's offset and latency: nsyswrap.crossrank.lanes), recorded; a node's
duration `d` is what is left: its recorded time less the latest predecessor plus weight,
so replaying the recorded weights gives the recorded times back (where a duration would
be negative, e.g. an end before the last arrival from clock error, it is 0 and the replay
differs: the residual).

The graph is replayed level by level (a node's level: one more than its predecessors'
highest), each level one vectorised numpy step over its nodes, for many candidate
duration vectors at once (columns): the levels are as many as the longest chain of a
rank's events, not the number of events. What nsyswrap.crossrank.whatif builds and asks
is in that module; this one knows nodes, edges and durations only.

Hideable edges: a collective member's end has two predecessors, the collective's last
arrival (weight 0) and the member's own arrival (weight -HIDDEN); a candidate that hides
the collective swaps the two, so the member ends at its own arrival (no wait, and with a
0 duration no transfer).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

HIDDEN = np.int64(1 << 60)  # an edge this much lighter never binds


@dataclass
class Graph:
    """Nodes 0..n-1 with their recorded times and predecessors (CSR: pred[ptr[i]:ptr[i+1]],
    each edge with its recorded weight `w`, 0 where none is given).

    `hideable[e]` is -1 for an ordinary edge, else the collective it belongs to;
    `hide_side[e]` is 0 on the last-arrival edge and 1 on the own-arrival edge."""

    t: np.ndarray
    ptr: np.ndarray
    pred: np.ndarray
    hideable: np.ndarray
    hide_side: np.ndarray
    n_hideable: int = 0
    w: np.ndarray | None = None
    d: np.ndarray = field(init=False)
    levels: list[np.ndarray] = field(init=False)
    clamped: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        if self.w is None:
            self.w = np.zeros(len(self.pred), np.int64)
        self.levels = _levels(self.ptr, self.pred, len(self.t))
        self._plan = [self._plan_level(nodes) for nodes in self.levels]
        self._edge_level = np.full(len(self.pred), -1)  # each edge's level, and place there
        self._edge_place = np.full(len(self.pred), -1)
        for i, plan in enumerate(self._plan):
            self._edge_level[plan[2]] = i
            self._edge_place[plan[2]] = np.arange(len(plan[2]))
        latest = self._latest(self.t[:, None], np.zeros((self.n_hideable, 1), bool))[:, 0]
        gap = self.t - latest
        first = np.diff(self.ptr) == 0  # a first event keeps its time (which may be < 0)
        self.clamped = (gap < 0) & ~first
        self.d = np.where(first, gap, np.maximum(gap, 0))

    def _weights(self, edges: np.ndarray, hidden: np.ndarray) -> np.ndarray:
        """Per edge of `edges` and column: 0, or -HIDDEN where the edge does not count."""
        w = np.zeros((len(edges), hidden.shape[1]), np.int64)
        on = self.hideable[edges] >= 0
        if on.any():
            hid = hidden[self.hideable[edges[on]]]  # is the edge's collective hidden, per column
            w[on] = np.where(hid == (self.hide_side[edges[on]] == 0)[:, None], -HIDDEN, 0)
        return w

    def _latest(self, times: np.ndarray, hidden: np.ndarray) -> np.ndarray:
        """Per node and column: the latest predecessor time plus edge weight (0 for none)."""
        out = np.zeros(times.shape, np.int64)
        has = np.diff(self.ptr) > 0
        if len(self.pred):
            edges = np.arange(len(self.pred))
            vals = times[self.pred] + self.w[:, None] + self._weights(edges, hidden)
            out[has] = np.maximum.reduceat(vals, self.ptr[:-1][has], axis=0)
        return out

    def _plan_level(self, nodes: np.ndarray) -> tuple:
        """What replaying one level needs, computed once: its nodes, those with predecessors,
        their predecessors in order and where each node's start, the hideable edges among them
        (position, collective, side)."""
        starts = self.ptr[nodes]
        lengths = self.ptr[nodes + 1] - starts
        some = lengths > 0
        edges = ranges(starts, lengths)
        offsets = (np.cumsum(lengths) - lengths)[some]
        hide = np.flatnonzero(self.hideable[edges] >= 0)
        return (
            nodes,
            nodes[some],
            edges,
            offsets,
            hide,
            self.hideable[edges[hide]],
            self.hide_side[edges[hide]] == 0,
        )

    def replay(
        self,
        d: np.ndarray,
        hidden: np.ndarray | None = None,
        w: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> np.ndarray:
        """Times of every node (rows) for each column of durations `d` (nodes x columns);
        `w`: (edges, their weights: edges x columns) where they differ from the recorded
        ones (None: none does); `hidden` (hideable collectives x columns) hides collectives
        per column."""
        hidden = np.zeros((self.n_hideable, d.shape[1]), bool) if hidden is None else hidden
        any_hidden = bool(hidden.any())
        changed = self._by_level(w)
        t = d.copy()
        for i, (_, with_preds, edges, offsets, hide, hide_cid, last_side) in enumerate(self._plan):
            if not len(with_preds):
                continue
            preds = self.pred[edges]
            vals = t[preds] + self.w[edges, None]
            if i in changed:
                place, weights = changed[i]
                vals[place] = t[preds[place]] + weights
            if len(hide) and any_hidden:
                vals[hide] -= np.where(hidden[hide_cid] == last_side[:, None], HIDDEN, 0)
            elif len(hide):
                vals[hide[~last_side]] -= HIDDEN
            t[with_preds] += np.maximum.reduceat(vals, offsets, axis=0)
        return t

    def _by_level(self, w: tuple[np.ndarray, np.ndarray] | None) -> dict:
        """Changed weights (edges, weights) by level: {level: (places there, weights)}."""
        if w is None or not len(w[0]):
            return {}
        level = self._edge_level[w[0]]
        order = np.argsort(level, kind="stable")
        bounds = np.flatnonzero(np.r_[True, level[order][1:] != level[order][:-1]])
        out = {}
        for rows in np.split(order, bounds[1:]):
            out[int(level[rows[0]])] = (self._edge_place[w[0][rows]], w[1][rows])
        return out

    def binding(self, node: int, times: np.ndarray | None = None) -> int:
        """The predecessor `node`'s time rests on in the replay of `times` (default: the
        recorded times): see binding_edge; -1 for none."""
        edge = self.binding_edge(node, times)
        return int(self.pred[edge]) if edge >= 0 else -1

    def binding_edge(self, node: int, times: np.ndarray | None = None) -> int:
        """The edge `node`'s time rests on in the replay of `times` (default: the recorded
        times) with the recorded weights: the latest predecessor plus weight, ties to the
        first listed; -1 for none."""
        lo, hi = self.ptr[node], self.ptr[node + 1]
        if lo == hi:
            return -1
        t = self.t if times is None else times
        w = self.w[lo:hi] + np.where(self.hide_side[lo:hi] == 1, -HIDDEN, 0)  # nothing hidden
        return int(lo + int(np.argmax(t[self.pred[lo:hi]] + w)))


def ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The concatenated index ranges [start, start + length) (vectorised)."""
    total = int(lengths.sum())
    if not total:
        return np.zeros(0, np.int64)
    offsets = np.repeat(np.cumsum(lengths) - lengths, lengths)
    return np.repeat(starts, lengths) + (np.arange(total) - offsets)


def _levels(ptr: np.ndarray, pred: np.ndarray, n: int) -> list[np.ndarray]:
    """Kahn's algorithm, one level at a time (vectorised); a cycle is a bug in the model."""
    node_of_edge = np.repeat(np.arange(n), np.diff(ptr))
    order = np.argsort(pred, kind="stable")
    succ_ptr = np.concatenate(([0], np.cumsum(np.bincount(pred, minlength=n))))
    succ = node_of_edge[order]
    indegree = np.diff(ptr).copy()
    frontier = np.flatnonzero(indegree == 0)
    levels, done = [], 0
    while len(frontier):
        levels.append(frontier)
        done += len(frontier)
        lengths = succ_ptr[frontier + 1] - succ_ptr[frontier]
        nxt = succ[ranges(succ_ptr[frontier], lengths)]
        np.subtract.at(indegree, nxt, 1)
        frontier = np.unique(nxt[indegree[nxt] == 0])
    if done != n:
        raise RuntimeError(
            f"replay graph has a cycle through {n - done} events (a bug in nsyswrap)"
        )
    return levels
