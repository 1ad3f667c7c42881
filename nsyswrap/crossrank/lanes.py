"""The replay's model of a run (nsyswrap.crossrank.whatif): each aligned rank's host and
GPU lane and its collectives as a graph of nsyswrap.crossrank.replay, from the run's
objects. Every dependency below is a max-plus edge: an event happens at the latest of its
predecessors plus the work between (the edge's weight), plus what is left of its
recorded time (its duration: latency, or a wait the model does not know).

* A rank's **host** is one chain of its segments (`xr_segments`, nsyswrap.crossrank.segments:
  its host time cut at its step and phase ranges, collective calls, joins and waits; the
  threads of a process hand work to each other in order, so one chain). A work segment's
  end follows the previous one's plus the host's own time in it; a **wait** (a blocking
  CUDA call, a collective call that returned after its collective ended, a blocking OS
  call woken by an asynchronous collective's completion) ends at the later of its start
  and the completion it names (the lane's end after a segment, an NCCL kernel's end, a
  collective's end on this rank), plus the time it took to return.
* Its **GPU lane** (the activities of its lane device, every stream together, NCCL kernels
  apart) has a node per segment: the lane's end after the work the segment launched, at
  the latest of the lane's end before plus that work, the host at the segment's start plus
  the offset of the launch the lane's end rests on, its latency and the work after it
  (GPU work starts no earlier than its launch), and the end of the NCCL kernel its first
  activity waited for (stream order, or a cudaStreamWaitEvent) plus the work after it. So
  idealising GPU work saves time only where the lane is on the path that sets the step:
  where the host's launches set the pace, the lane's slack absorbs it.
* Each **collective** member arrives at the latest of the host at its kernel's launch
  (a collective timed by its ranges: at its call), the lane's end if its kernel waited for
  the work queued before it, and the end of the previous collective on its stream (pg for
  range-timed ones); it ends at its collective's **last arrival** plus its transfer (its
  end minus that last arrival): the wait is not a duration, the replay re-creates it. A
  member of an exchange (all_to_all, send/recv) that ended before the last arrival needed
  nothing from it: its end rests on its own arrival. Point-to-point pairs are two-member
  collectives, whatever graph they form (chains, rings, interleaved pipelines).
* A step starts and ends on the host, at its step range's start and end.

Waits the trace does not show are stated, not guessed: a **silent** segment (the host made
no CUDA call, then resumed right after a completion of its own: an untraced wait, or its
own work ending then) is replayed twice: with the wait assumed (the model's graph) and
without it (`unassumed`: its time is the host's own); every figure that depends on it is
a range between the two (nsyswrap.crossrank.whatif).

Each segment has a phase: the phase range open on the host at its start (in a step
before its first phase range: `before_forward`); its host time and the GPU work it
launched are that phase's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from nsyswrap.crossrank.ranks import MEMBER_COLUMNS, to_member_ranks
from nsyswrap.crossrank.replay import Graph, ranges
from nsyswrap.crossrank.segments import JOIN_SLACK_NS
from nsyswrap.crossrank.solve import to_run_time

NO_PHASE = ""  # a segment's time outside every phase
BEFORE_FORWARD = "before_forward"  # a step's host time before its first phase range
PHASE_GLOSS = {  # the phases the model makes up, in words for a finding that names them
    BEFORE_FORWARD: "the step's time before its first forward, where data loading falls when "
    "a step is found from its forward",
}
P2P_OPS = ("send", "recv", "isend", "irecv", "send_recv", "p2p")
BOTH, ASSUMED, UNASSUMED = 0, 1, 2
"""Which graph an edge belongs to: both, the one with the silent waits assumed, the other."""
KEY_ORDER = {"X": 0, "S": 1, "J": 2, "W": 3}  # of keys at one boundary, the one compared
SEGMENT_DURATIONS = {  # a duration: (the time it is anchored at, whether it ends there)
    "gpu_ns": ("gpu_end_ns", True),
    "lane_ns": ("gpu_end_ns", True),
    "lane_idle_ns": ("gpu_end_ns", True),  # (converted with lane_ns: see _run_durations)
    "join_busy_ns": ("gpu_end_ns", True),
    "join_idle_ns": ("gpu_end_ns", True),
    "bound_latency_ns": ("bound_launch_ns", False),
    "call_ns": ("start_ns", False),
    "wake_ns": ("end_ns", True),
}
STACKED = {"lane_idle_ns": "lane_ns", "join_idle_ns": "join_busy_ns"}
"""Durations that follow another on the lane: converted as their sum less it."""
SEGMENT_TIMES = [
    "start_ns",
    "end_ns",
    "phase_start_ns",
    "for_end_ns",
    "gpu_from_ns",
    "gpu_end_ns",
    "bound_launch_ns",
    "bound_start_ns",
    "join_start_ns",
    "join_nccl_end_ns",
]


@dataclass
class Replay:
    """One graph of the model with what each edge's weight is made of, so that it can be
    replayed with less work: per edge the segment (row of Model.segs; -1: none) whose work
    it carries, and its parts: host (the segment's host time: any host cut comes off it),
    launch (the offset of the launch the lane rests on: the host's cut before that launch
    comes off it), fixed, and GPU (a GPU cut comes off it in proportion to the segment's
    GPU work)."""

    graph: Graph
    seg: np.ndarray
    host: np.ndarray
    launch: np.ndarray
    fixed: np.ndarray
    gpu: np.ndarray

    def __post_init__(self) -> None:
        on = np.flatnonzero(self.seg >= 0)
        order = on[np.argsort(self.seg[on], kind="stable")]
        counts = np.bincount(self.seg[on], minlength=int(self.seg.max(initial=-1)) + 1)
        self._by_seg = order  # edges by the segment whose work they carry
        self._seg_ptr = np.concatenate(([0], np.cumsum(counts)))

    def weights(self, cut, gpu_ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The edges a cut changes and their weights (edges x columns), for Graph.replay:
        `cut` a fixes.Cut of (rows x columns) arrays, for `cut.rows` (None: every segment
        row); `gpu_ns`: each segment's GPU work. A host cut comes off the host part, the
        part before the binding launch also off its offset; a GPU cut off the GPU part in
        proportion to the segment's GPU work."""
        rows = np.arange(len(cut.gpu)) if cut.rows is None else cut.rows
        rows_ok = rows < len(self._seg_ptr) - 1
        starts = self._seg_ptr[rows[rows_ok]]
        lengths = self._seg_ptr[rows[rows_ok] + 1] - starts
        edges = self._by_seg[ranges(starts, lengths)]
        at = np.repeat(np.flatnonzero(rows_ok), lengths)  # each edge's place in rows
        before = cut.before[at]
        share = np.minimum(cut.gpu[at] / np.maximum(gpu_ns[rows[at]], 1)[:, None], 1.0)
        gpu = self.gpu[edges, None]
        weights = (
            np.maximum(self.host[edges, None] - before - cut.after[at], 0)
            + np.maximum(self.launch[edges, None] - before, 0)
            + self.fixed[edges, None]
            + gpu
            - np.round(gpu * share).astype(np.int64)
        )
        return edges, weights


@dataclass
class Model:
    replay: Replay  # the graph with the silent waits assumed
    unassumed: Replay | None  # the same without them (None: nothing assumed)
    events: pd.DataFrame  # per node: kind (H, G, A, M, E, X), rank, step, cid, seg, t
    collectives: pd.DataFrame  # per cid: pg, seq, op, step
    segs: pd.DataFrame  # per segment row: rank, step, phase (index), instance, kind, key, ...
    phases: list[str]  # phase names (NO_PHASE: outside every phase)
    before_parts: np.ndarray  # (segments x phases): host time before the launch its lane rests on
    after_parts: np.ndarray  # (segments x phases): the rest of its host time
    gpu_parts: np.ndarray  # (segments x phases): the GPU work it launched, by its phase
    steps: pd.DataFrame  # rank, step, start node, end node
    assumed: pd.DataFrame  # the silent waits assumed: rank, step, seg, cid, for_end_ns, ...

    @property
    def graph(self) -> Graph:
        return self.replay.graph

    @property
    def gpu_ns(self) -> np.ndarray:
        return self.segs["gpu_ns"].to_numpy(np.int64)


def build_model(
    coll: pd.DataFrame, segs: pd.DataFrame, calls: pd.DataFrame, steps: pd.DataFrame
) -> Model:
    """The replay model from the run's frames (run time, member ranks): coll = xr_aligned's
    pg, seq, op, rank, step, start_ns, end_ns, on_gpu; segs = xr_segments by rank; calls =
    xr_nccl_calls by rank (rank, stream, start_ns, end_ns, launch_ns, ready_ns, seg); steps =
    rank, step, start_ns, end_ns (the window's: a rank's segments outside them are left
    out)."""
    members, collectives = number_collectives(coll)
    segs = window_segments(segs, steps)
    members = with_launch_rows(members, calls, segs)
    nodes = Nodes(segs, members, collectives)
    edges = pd.concat(
        [
            host_edges(segs, nodes),
            gpu_edges(segs, nodes),
            arrival_edges(members, nodes),
            collective_edges(members, nodes),
        ],
        ignore_index=True,
    )
    events = nodes.events()
    phases = [NO_PHASE] + sorted(set(segs["phase"].dropna()))
    segs["phase_index"] = segs["phase"].fillna(NO_PHASE).map({p: i for i, p in enumerate(phases)})
    before_parts, after_parts, gpu_parts = _parts(segs, len(phases))
    any_assumed = bool(edges["variant"].ne(BOTH).any())
    return Model(
        replay=replay_of(edges, events, len(collectives), UNASSUMED),
        unassumed=replay_of(edges, events, len(collectives), ASSUMED) if any_assumed else None,
        events=events,
        collectives=collectives,
        segs=with_keys(segs, members, nodes, steps),
        phases=phases,
        before_parts=before_parts,
        after_parts=after_parts,
        gpu_parts=gpu_parts,
        steps=nodes.step_nodes(steps),
        assumed=nodes.assumed_waits(),
    )


SEGMENT_DEFAULTS = {  # xr_segments' columns the model reads, and what a row without one holds
    "kind": "work",
    "step": np.nan,
    "phase": None,
    "phase_start_ns": np.nan,
    "host_ns": 0,
    "waits_for": None,
    "for_seg": np.nan,
    "for_call": np.nan,
    "for_pg": None,
    "for_seq": np.nan,
    "for_end_ns": np.nan,
    "call_ns": np.nan,
    "wake_ns": np.nan,
    "gpu_ns": 0,
    "gpu_from_ns": np.nan,
    "gpu_end_ns": np.nan,
    "lane_ns": 0,
    "lane_idle_ns": 0,
    "bound_launch_ns": np.nan,
    "bound_start_ns": np.nan,
    "bound_latency_ns": np.nan,
    "join_start_ns": np.nan,
    "join_call": np.nan,
    "join_nccl_end_ns": np.nan,
    "join_busy_ns": np.nan,
    "join_idle_ns": np.nan,
}


def segment_frame(rows) -> pd.DataFrame:
    """Segment rows (rank, seg, start_ns, end_ns and any of SEGMENT_DEFAULTS) with every
    column the model reads (for frames made by hand: tests, the bench)."""
    out = pd.DataFrame(rows)
    for column, default in SEGMENT_DEFAULTS.items():
        out[column] = out[column].where(out[column].notna(), default) if column in out else default
    return out


def number_collectives(coll: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The members (one per rank and collective, with `cid`) and the collectives (cid: pg,
    seq, op, the lowest step of their members)."""
    coll = coll.sort_values(["pg", "seq", "rank"]).reset_index(drop=True)
    keys = coll[["pg", "seq"]].drop_duplicates().reset_index(drop=True)
    keys["cid"] = np.arange(len(keys))
    members = coll.merge(keys, on=["pg", "seq"]).drop_duplicates(["rank", "cid"])
    collectives = (
        members.groupby("cid")
        .agg(pg=("pg", "first"), seq=("seq", "first"), op=("op", "first"), step=("step", "min"))
        .reset_index()
    )
    return members.reset_index(drop=True), collectives


def window_segments(segs: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """Each rank's segments within its steps (all of them for a rank without steps), in
    order, with their phase names (BEFORE_FORWARD: a step's time before its first phase
    range) and phase range (`instance`: its start; -1 before the first)."""
    span = steps.groupby("rank").agg(first=("start_ns", "min"), last=("end_ns", "max"))
    segs = segs.merge(span, left_on="rank", right_index=True, how="left")
    inside = ~(segs["start_ns"] < segs["first"]) & ~(segs["end_ns"] > segs["last"])
    segs = segs[inside].drop(columns=["first", "last"])
    segs = segs.sort_values(["rank", "seg"]).reset_index(drop=True)
    stepped = segs["step"].notna()
    phased = segs["phase"].notna() & stepped
    first = segs[phased].groupby(["rank", "step"])["start_ns"].min().rename("first_phase")
    segs = segs.join(first, on=["rank", "step"])
    before = stepped & segs["phase"].isna() & ~(segs["start_ns"] >= segs["first_phase"])
    segs["phase"] = segs["phase"].where(~before, BEFORE_FORWARD)
    segs["instance"] = segs["phase_start_ns"].astype(np.float64).where(~before, -1.0)
    return segs.drop(columns="first_phase")


def lookup(frame: pd.DataFrame, columns: list[str]):
    """A function from arrays of `columns` values to the positions of the rows of `frame`
    holding them (the first of equal ones; NaN for none). Numbers compare as floats (exact
    below 2**53 ns), so NULL matches nothing."""
    keys = [_key(frame[c]) for c in columns]
    known = ~np.any([pd.isna(k) for k in keys], axis=0) if len(frame) else np.zeros(0, bool)
    index = pd.MultiIndex.from_arrays(keys)
    first = ~index.duplicated() & known
    positions = pd.Series(np.flatnonzero(first), index=index[first])

    def find(*values) -> np.ndarray:
        keys = pd.MultiIndex.from_arrays([_key(pd.Series(v)) for v in values])
        return positions.reindex(keys).to_numpy(np.float64)

    return find


def _key(values: pd.Series) -> np.ndarray:
    if pd.api.types.is_numeric_dtype(values.dtype) or values.dtype == bool:
        return pd.to_numeric(values, errors="coerce").astype(np.float64).to_numpy()
    return values.astype(object).where(values.notna(), None).to_numpy()


def with_launch_rows(
    members: pd.DataFrame, calls: pd.DataFrame, segs: pd.DataFrame
) -> pd.DataFrame:
    """Each member with `row`, the segment row that starts at its call (its NCCL kernel's
    launch; a range-timed one's call start; NaN outside the window), `ready_ns` (its
    kernel's: the end of the lane's work queued before it) and `stream_key` (its NCCL
    stream; a range-timed one's group): the order its rank's arrivals follow."""
    m = with_calls(members, calls)
    gpu = m["on_gpu"].astype(bool).to_numpy() & m["launch_ns"].notna().to_numpy()
    by_seg = lookup(segs, ["rank", "seg"])(m["rank"], m["seg"].fillna(-1).astype(np.int64))
    by_start = lookup(segs, ["rank", "start_ns"])(m["rank"], m["start_ns"])
    m["row"] = np.where(gpu, by_seg, by_start)
    rank = m["rank"].astype(str)
    m["stream_key"] = np.where(
        gpu, rank + "/" + m["stream"].astype(str), rank + ":" + m["pg"].astype(str)
    )
    m["gpu"] = gpu
    return m


def with_calls(members: pd.DataFrame, calls: pd.DataFrame) -> pd.DataFrame:
    """Each member with its NCCL kernel's call (call, stream, launch_ns, ready_ns, seg): of
    its rank's kernels that start with it, the one launched within its call (cpu_start_ns to
    cpu_end_ns, where the members have them: kernels of one group start and end together),
    else the one that also ends with it, else the first."""
    keep = ["rank", "call", "start_ns", "end_ns", "stream", "launch_ns", "ready_ns", "seg"]
    calls = calls.reindex(columns=keep)
    m = members.reset_index(drop=True).reset_index(names="member")
    pairs = m.merge(calls.rename(columns={"end_ns": "kernel_end_ns"}), on=["rank", "start_ns"])
    within = pd.Series(False, index=pairs.index)
    if "cpu_start_ns" in pairs:
        upper = pairs["cpu_end_ns"].fillna(pairs["cpu_start_ns"])
        within = (pairs["launch_ns"] >= pairs["cpu_start_ns"]) & (pairs["launch_ns"] <= upper)
    ends = pairs["kernel_end_ns"] == pairs["end_ns"]
    pairs = pairs.assign(rank_of=np.select([within, ends], [0, 1], 2))
    best = pairs.sort_values(["member", "rank_of", "launch_ns"]).drop_duplicates("member")
    found = best.set_index("member")[["call", "stream", "launch_ns", "ready_ns", "seg"]]
    return m.join(found, on="member").drop(columns="member")


class Nodes:
    """The graph's nodes: per segment row its host node H (the host at its end) and, where
    the lane has run anything by then, its GPU node G (the lane's end after its work); per
    rank a host source (its first row's start) and a GPU source (the lane's end before its
    first row, if any); per member its arrival A and end E, per collective its last
    arrival M."""

    def __init__(self, segs: pd.DataFrame, members: pd.DataFrame, collectives: pd.DataFrame):
        self.segs, self.members = segs, members
        n = len(segs)
        rank = segs["rank"].to_numpy()
        first = np.r_[True, rank[1:] != rank[:-1]] if n else np.zeros(0, bool)
        self.first = first
        self.ranks = rank[first]
        # a row whose lane runs nothing of its own has the lane's node before it
        has_g = (
            segs["gpu_end_ns"].notna().to_numpy()
            & ((segs["gpu_ns"].fillna(0) > 0) | segs["bound_launch_ns"].notna()).to_numpy()
        )
        g_source = first & segs["gpu_from_ns"].notna().to_numpy()
        sizes = [n, len(self.ranks), int(has_g.sum()), int(g_source.sum()), len(members)]
        base = np.cumsum([0] + sizes)
        self.h = np.arange(n)
        self.h_source = base[1] + np.arange(len(self.ranks))
        self.own_g = has_g
        self.g_source = np.full(n, -1)  # per row: its rank's GPU source, on first rows
        self.g_source[g_source] = base[3] + np.arange(sizes[3])
        own = np.where(has_g, 0, np.nan)
        own[has_g] = base[2] + np.arange(sizes[2])
        own = np.where(first & ~has_g, self.g_source, own)
        self.g = pd.Series(own).groupby(rank).ffill().fillna(-1).to_numpy(np.int64) if n else own
        self.a = base[4] + np.arange(len(members))
        self.m = base[5] + np.arange(len(collectives))
        self.e = base[5] + len(collectives) + np.arange(len(members))
        self.count = int(self.e[-1] + 1) if len(members) else int(base[5] + len(collectives))
        self.collectives = collectives

    def h_before(self, rows: np.ndarray) -> np.ndarray:
        """The host node at the start of each row (-1: none; rows may be NaN)."""
        r = np.nan_to_num(np.asarray(rows, np.float64), nan=-1).astype(np.int64)
        if not len(self.h):
            return np.full(len(r), -1)
        ok = r >= 0
        rs = np.maximum(r, 0)
        rank_source = self.h_source[np.cumsum(self.first) - 1][rs] if len(self.first) else rs
        return np.where(
            ok, np.where(self.first[rs], rank_source, self.h[np.maximum(rs - 1, 0)]), -1
        )

    def g_before(self, rows: np.ndarray) -> np.ndarray:
        """The GPU node at the start of each row: the previous row's, or its rank's source
        (-1: none)."""
        r = np.nan_to_num(np.asarray(rows, np.float64), nan=-1).astype(np.int64)
        if not len(self.g):
            return np.full(len(r), -1)
        ok = r >= 0
        rs = np.maximum(r, 0)
        prev = self.g[np.maximum(rs - 1, 0)]
        return np.where(ok, np.where(self.first[rs], self.g_source[rs], prev), -1)

    def events(self) -> pd.DataFrame:
        """Per node: kind (H, G, A, M, E), rank, step, cid, seg (its segment row; -1), t and
        op (a member's own)."""
        s, m, c = self.segs, self.members, self.collectives
        firsts = s[self.first]
        has_g = self.own_g
        g_src = self.g_source >= 0
        last = m.groupby("cid")["start_ns"].max().reindex(c["cid"]).to_numpy(np.int64)
        parts = [
            ("H", s["rank"], s["step"], -1, np.arange(len(s)), s["end_ns"]),
            (
                "H",
                firsts["rank"],
                firsts["step"],
                -1,
                np.flatnonzero(self.first),
                firsts["start_ns"],
            ),
            (
                "G",
                s["rank"][has_g],
                s["step"][has_g],
                -1,
                np.flatnonzero(has_g),
                s["gpu_end_ns"][has_g],
            ),
            (
                "G",
                s["rank"][g_src],
                s["step"][g_src],
                -1,
                np.flatnonzero(g_src),
                s["gpu_from_ns"][g_src],
            ),
            ("A", m["rank"], m["step"], m["cid"], m["row"].fillna(-1), m["start_ns"]),
            ("M", -1, c["step"], c["cid"], -1, last),
            ("E", m["rank"], m["step"], m["cid"], -1, m["end_ns"]),
        ]
        frames = [
            pd.DataFrame(
                {"kind": k, "rank": r, "step": st, "cid": cid, "seg": seg, "t": t}
            ).reset_index(drop=True)
            for k, r, st, cid, seg, t in parts
        ]
        out = pd.concat(frames, ignore_index=True)
        out["op"] = None  # a member's own op (send or recv of a point-to-point pair)
        out.loc[out["kind"].isin(["A", "E"]), "op"] = np.tile(m["op"].to_numpy(object), 2)
        return out.astype({"t": np.int64, "seg": np.int64})

    def member_e(self, rank, *key: str, values) -> np.ndarray:
        """The end node of each member of `rank` whose `key` columns hold `values` (-1: none)."""
        at = lookup(self.members, ["rank", *key])(rank, *values)
        return np.where(np.isnan(at), -1, self.e[np.nan_to_num(at, nan=0).astype(np.int64)])

    def kernel_e(self, rank, call) -> np.ndarray:
        """The end node of the member whose NCCL kernel is `call` of its rank's process
        (xr_nccl_calls.call; -1: none)."""
        return self.member_e(rank, "call", values=[call])

    def wait_targets(self) -> np.ndarray:
        """Per segment row: the node its wait or silence waits for (-1: none)."""
        s = self.segs
        rank = s["rank"].to_numpy()
        row = lookup(s, ["rank", "seg"])(rank, s["for_seg"].fillna(-1).astype(np.int64))
        gpu = np.where(np.isnan(row), -1, self.g[np.nan_to_num(row, nan=0).astype(np.int64)])
        nccl = self.kernel_e(rank, s["for_call"])
        seq = pd.to_numeric(s["for_seq"], errors="coerce")
        coll = self.member_e(rank, "pg", "seq", values=[s["for_pg"].astype(object), seq])
        waits_for = s["waits_for"].to_numpy()
        out = np.where(waits_for == "gpu", gpu, np.where(waits_for == "nccl", nccl, coll))
        return np.where(s["kind"].isin(["wait", "silent"]).to_numpy(), out, -1)

    def join_sources(self) -> np.ndarray:
        """Per segment row: the end node of the NCCL kernel its first activity waited for."""
        s = self.segs
        return self.kernel_e(s["rank"].to_numpy(), s["join_call"])

    def assumed_waits(self) -> pd.DataFrame:
        """The silences the model's graph takes as waits: rank, step, seg (row), phase,
        waits_for (gpu: its lane draining; collective), cid (the collective waited for; -1),
        resumed_ns (when the host resumed), silent_ns (how long it had made no CUDA call),
        after_ns (how long after the completion it resumed)."""
        s = self.segs
        target = self.wait_targets()
        rows = np.flatnonzero((s["kind"] == "silent").to_numpy() & (target >= 0))
        ev = self.events()
        mine = s.iloc[rows]
        return pd.DataFrame(
            {
                "rank": mine["rank"].to_numpy(),
                "step": mine["step"].to_numpy(),
                "seg": rows,
                "phase": mine["phase"].to_numpy(),
                "waits_for": np.where(mine["waits_for"] == "gpu", "gpu", "collective"),
                "cid": ev["cid"].to_numpy()[target[rows]],
                "resumed_ns": mine["end_ns"].to_numpy(),
                "silent_ns": (mine["end_ns"] - mine["start_ns"]).to_numpy(),
                "after_ns": (mine["end_ns"] - ev["t"].to_numpy()[target[rows]]).to_numpy(),
            }
        )

    def step_nodes(self, steps: pd.DataFrame) -> pd.DataFrame:
        """Per rank and step: its start and end node, the host nodes at its range's start and
        end (a run without step ranges: from the host at its first call to the end of its
        last collective, an end node)."""
        ev = self.events()
        host, ends = _node_at(ev, "H"), _node_at(ev, "E")
        rank = steps["rank"].to_numpy()
        start = host(rank, steps["start_ns"])
        end = host(rank, steps["end_ns"])
        end = np.where(np.isnan(end), ends(rank, steps["end_ns"]), end)
        out = pd.DataFrame(
            {"rank": rank, "step": steps["step"].to_numpy(), "start": start, "end": end}
        )
        return out.dropna(subset=["start", "end"]).astype({"start": np.int64, "end": np.int64})


def _node_at(events: pd.DataFrame, kind: str):
    """A function from (rank, t) arrays to the node of `kind` of that rank at t (NaN: none)."""
    mine = events[events["kind"] == kind]
    find = lookup(mine, ["rank", "t"])
    nodes = mine.index.to_numpy()

    def at(rank, t) -> np.ndarray:
        pos = find(rank, t)
        return np.where(np.isnan(pos), np.nan, nodes[np.nan_to_num(pos, nan=0).astype(np.int64)])

    return at


def _edges(
    node, pred, variant=BOTH, seg=-1, host=0, launch=0, fixed=0, gpu=0, cid=-1, side=-1
) -> pd.DataFrame:
    """Edges pred -> node (those with a predecessor, pred >= 0) with their weight's parts."""
    out = pd.DataFrame(
        {
            "node": node,
            "pred": pred,
            "variant": variant,
            "seg": seg,
            "host": host,
            "launch": launch,
            "fixed": fixed,
            "gpu": gpu,
            "cid": cid,
            "side": side,
        }
    )
    out = out[out["pred"].to_numpy() >= 0]
    weights = ["node", "pred", "variant", "seg", "host", "launch", "fixed", "gpu", "cid", "side"]
    return out.astype({c: np.int64 for c in weights})


def host_edges(segs: pd.DataFrame, nodes: Nodes) -> pd.DataFrame:
    """Each row's host node after the host at its start: by its own time (work), by the
    time its call would take with nothing to wait for (a wait), or either (a silence: the
    assumed wait in one graph, the host's own time in the other); a wait or silence also
    after what it waits for, by the time it took to return after it."""
    rows = np.arange(len(segs))
    before = nodes.h_before(rows)
    kind = segs["kind"].to_numpy()
    target = nodes.wait_targets()
    length = (segs["end_ns"] - segs["start_ns"]).to_numpy(np.int64)
    call = segs["call_ns"].fillna(0).to_numpy(np.int64)
    wake = segs["wake_ns"].fillna(0).to_numpy(np.int64)
    work = kind == "work"
    waiting = (kind == "wait") & (target >= 0)
    assumed = (kind == "silent") & (target >= 0)
    own = ~work & ~waiting & ~assumed  # a wait whose completion is not in the window
    return pd.concat(
        [
            _edges(rows[work], before[work], seg=rows[work], host=segs["host_ns"].to_numpy()[work]),
            _edges(rows[waiting], before[waiting], fixed=call[waiting]),
            _edges(rows[waiting], target[waiting], fixed=wake[waiting]),
            _edges(rows[assumed], before[assumed], variant=ASSUMED, fixed=call[assumed]),
            _edges(rows[assumed], target[assumed], variant=ASSUMED, fixed=wake[assumed]),
            _edges(rows[assumed], before[assumed], variant=UNASSUMED, fixed=length[assumed]),
            _edges(rows[own], before[own], fixed=np.where(kind[own] == "silent", length[own], 0)),
        ],
        ignore_index=True,
    )


def gpu_edges(segs: pd.DataFrame, nodes: Nodes) -> pd.DataFrame:
    """Each row's GPU node after the lane's end before it plus the lane's work, after the
    host at its start plus the launch it rests on (offset, latency, work after it; a launch
    made while the host waited for a collective: after that collective's end),
    and after the NCCL kernel its first activity waited for plus the work after that."""
    rows = np.flatnonzero(nodes.own_g)
    s = segs.iloc[rows]
    g = nodes.g[rows]
    bound = s["bound_launch_ns"].notna().to_numpy()
    join = nodes.join_sources()[rows]
    joined = join >= 0
    num = lambda c: s[c].to_numpy(np.float64)  # noqa: E731
    # a launch made while the host waited for a collective is another thread's: it follows
    # that collective (its offset from the collective's end may be negative), not the host
    target = nodes.wait_targets()[rows]
    other = (target >= 0) & s["waits_for"].isin(["nccl", "collective"]).to_numpy()
    anchor = np.where(other, target, nodes.h_before(rows))
    offset = num("bound_launch_ns") - num("start_ns")
    moved = num("bound_launch_ns") - num("for_end_ns")
    return pd.concat(
        [
            _edges(
                g,
                nodes.g_before(rows),
                seg=rows,
                fixed=num("lane_idle_ns"),
                gpu=num("lane_ns"),
            ),
            _edges(
                g[bound],
                anchor[bound],
                seg=rows[bound],
                launch=np.where(other, 0, offset)[bound],
                fixed=(num("bound_latency_ns") + np.where(other, moved, 0))[bound],
                gpu=(num("gpu_end_ns") - num("bound_start_ns"))[bound],
            ),
            _edges(
                g[joined],
                join[joined],
                seg=rows[joined],
                fixed=(num("join_start_ns") - num("join_nccl_end_ns") + num("join_idle_ns"))[
                    joined
                ],
                gpu=num("join_busy_ns")[joined],
            ),
        ],
        ignore_index=True,
    )


def arrival_edges(members: pd.DataFrame, nodes: Nodes) -> pd.DataFrame:
    """Each member's arrival after the host at its call, the lane's end where its kernel
    waited for the work queued before it (its ready time is the lane's end), and the end
    of the previous member of its rank on its stream."""
    row = members["row"].to_numpy(np.float64)
    host = nodes.h_before(row)
    lane = nodes.g_before(row)
    t = nodes.events()["t"].to_numpy()
    ready = members["ready_ns"].to_numpy(np.float64)
    waited = members["gpu"].to_numpy() & (lane >= 0)
    waited &= ready >= np.where(lane >= 0, t[np.maximum(lane, 0)], np.inf)
    order = members.sort_values(["stream_key", "start_ns", "cid"]).index.to_numpy()
    same = np.r_[
        False,
        members["stream_key"].to_numpy()[order][1:] == members["stream_key"].to_numpy()[order][:-1],
    ]
    prev_end = np.full(len(members), -np.inf)
    prev_end[order[same]] = members["end_ns"].to_numpy(np.float64)[order[np.flatnonzero(same) - 1]]
    ready = np.where(waited, ready, -np.inf)
    held, by = held_back(members, np.fmax(np.nan_to_num(ready, nan=-np.inf), prev_end))
    return pd.concat(
        [
            _edges(nodes.a, host),
            _edges(nodes.a[waited], lane[waited]),
            _edges(nodes.a[order[same]], nodes.e[order[np.flatnonzero(same) - 1]]),
            _edges(nodes.a[held], nodes.e[by]),
        ],
        ignore_index=True,
    )


def held_back(members: pd.DataFrame, explained: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The members whose NCCL kernel waited for another NCCL kernel of its rank, on
    another stream (a stream wait on an event recorded after it, e.g. a ring's next send
    after the receive the compute stream waited for), and that kernel: it started within
    JOIN_SLACK_NS after that kernel's end, was launched before it, and neither its lane
    nor its stream's previous kernel (`explained`: their latest end) had held it so long.
    (rows of `members`, rows of the kernels they waited for)"""
    m = members.assign(member=np.arange(len(members)))[members["gpu"].to_numpy(bool)]
    m = m.astype({"start_ns": np.int64, "end_ns": np.int64})
    ends = m[["rank", "member", "stream_key", "end_ns"]].sort_values("end_ns")
    k = pd.merge_asof(
        m.sort_values("start_ns"),
        ends.rename(columns={"member": "by", "stream_key": "key_by", "end_ns": "end_by"}),
        left_on="start_ns",
        right_on="end_by",
        by="rank",
    ).dropna(subset=["by"])
    k = k[
        (k["stream_key"] != k["key_by"])
        & (k["start_ns"] - k["end_by"] <= JOIN_SLACK_NS)
        & (k["launch_ns"] < k["end_by"])
        & (k["end_by"].to_numpy(np.float64) > explained[k["member"].to_numpy()])
    ]
    return k["member"].to_numpy(np.int64), k["by"].to_numpy(np.int64)


def collective_edges(members: pd.DataFrame, nodes: Nodes) -> pd.DataFrame:
    """Each collective's last arrival after its members' arrivals; each member's end after
    it (hideable: a hidden collective's members end at their own arrival) or, for a member
    of an exchange that ended before the last arrival, after its own arrival alone."""
    cid = members["cid"].to_numpy(np.int64)
    last = members.groupby("cid")["start_ns"].transform("max").to_numpy(np.int64)
    op = members["op"].astype(str).str.lower()
    early = (members["end_ns"].to_numpy(np.int64) < last) & (
        op.str.startswith("all_to_all") | op.isin(P2P_OPS)
    ).to_numpy()
    a, e, m = nodes.a, nodes.e, nodes.m
    return pd.concat(
        [
            _edges(m[cid], a),
            _edges(e[~early], m[cid[~early]], cid=cid[~early], side=0),
            _edges(e[~early], a[~early], cid=cid[~early], side=1),
            _edges(e[early], a[early]),
        ],
        ignore_index=True,
    )


def replay_of(
    edges: pd.DataFrame, events: pd.DataFrame, n_collectives: int, without: int
) -> Replay:
    """The graph of the edges of every variant but `without`."""
    e = edges[edges["variant"] != without]
    e = e.iloc[np.argsort(e["node"].to_numpy(), kind="stable")]
    n = len(events)
    ptr = np.concatenate(([0], np.cumsum(np.bincount(e["node"].to_numpy(), minlength=n)))).astype(
        np.int64
    )
    col = lambda c: e[c].to_numpy(np.int64)  # noqa: E731
    graph = Graph(
        events["t"].to_numpy(np.int64),
        ptr,
        col("pred"),
        col("cid"),
        col("side"),
        n_hideable=n_collectives,
        w=col("host") + col("launch") + col("fixed") + col("gpu"),
    )
    return Replay(graph, col("seg"), col("host"), col("launch"), col("fixed"), col("gpu"))


def _parts(segs: pd.DataFrame, n_phases: int) -> tuple[np.ndarray, ...]:
    """(segments x phases), by each segment's phase: its host time before the launch its
    lane's end rests on, the rest of its host time (work segments only), its GPU work; as
    the run clock counts them unrounded where the frame has them (`_with_work`)."""
    if "gpu_work" not in segs:
        segs = _with_work(segs, pd.DataFrame({"rank": segs["rank"].unique(), "drift_ppb": 0}))
    rows = np.arange(len(segs))
    phase = segs["phase_index"].to_numpy(np.int64)
    before = segs["before_work"].to_numpy(np.float64)
    after = segs["host_work"].to_numpy(np.float64) - before
    out = []
    for values in (before, after, np.nan_to_num(segs["gpu_work"].to_numpy(np.float64))):
        parts = np.zeros((len(segs), n_phases))
        parts[rows, phase] = values
        out.append(parts)
    return tuple(out)


def with_keys(
    segs: pd.DataFrame, members: pd.DataFrame, nodes: Nodes, steps: pd.DataFrame
) -> pd.DataFrame:
    """Each row with the event its end is (`key_kind`, `key`; the ranks are compared there):
    X a step's end, S a step's start (key: the step), J a wait for a collective, W the call
    of a collective (key: its cid); of several, in that order; none: NaN."""
    rank = segs["rank"].to_numpy()
    end = segs["end_ns"].to_numpy()
    step_end = lookup(steps, ["rank", "end_ns"])(rank, end)
    step_start = lookup(steps, ["rank", "start_ns"])(rank, end)
    ev = nodes.events()
    target = nodes.wait_targets()
    waited = np.where(target >= 0, ev["cid"].to_numpy()[np.maximum(target, 0)], -1)
    waited = np.where(ev["kind"].to_numpy()[np.maximum(target, 0)] == "E", waited, -1)
    called = np.full(len(segs), -1)
    row = members["row"].to_numpy(np.float64)
    has = ~np.isnan(row) & (row >= 1)
    r = row[has].astype(np.int64) - 1
    same = rank[r] == rank[r + 1]
    called[r[same]] = members["cid"].to_numpy()[has][same]
    kind = np.select(
        [~np.isnan(step_end), ~np.isnan(step_start), waited >= 0, called >= 0],
        ["X", "S", "J", "W"],
        None,
    )
    key = np.select(
        [~np.isnan(step_end), ~np.isnan(step_start), waited >= 0, called >= 0],
        [
            steps["step"].to_numpy()[np.nan_to_num(step_end, nan=0).astype(np.int64)]
            if len(steps)
            else -1,
            steps["step"].to_numpy()[np.nan_to_num(step_start, nan=0).astype(np.int64)]
            if len(steps)
            else -1,
            waited,
            called,
        ],
        -1,
    )
    return segs.assign(key_kind=kind, key=key)


def inputs(read) -> tuple[pd.DataFrame, ...]:
    """The model's frames, `read(name)` giving each object it reads as a DataFrame
    (xr_aligned with its calls' host times from xr_keys, xr_clock, xr_members,
    xr_member_steps and the per-report xr_segments and xr_nccl_calls), on the run clock and
    by member rank; unaligned ranks, and processes that are no rank, are left out."""
    members = read("xr_members")[MEMBER_COLUMNS].drop_duplicates(ignore_index=True)
    clock = read("xr_clock")
    coll = read("xr_aligned")[["pg", "seq", "op", "rank", "step", "start_ns", "end_ns", "on_gpu"]]
    keys = read("xr_keys")
    keys = keys.loc[keys["matches"].eq(True), ["rank", "pg", "seq", "cpu_start_ns", "cpu_end_ns"]]
    calls_of = _run_times(keys, clock, ["cpu_start_ns", "cpu_end_ns"])
    coll = coll.merge(calls_of, on=["rank", "pg", "seq"], how="left")
    steps = to_run_time(
        read("xr_member_steps")[["rank", "step", "start_ns", "end_ns"]],
        clock,
        ["start_ns", "end_ns"],
    )
    segs = _with_work(_of_members(read("xr_segments"), members), clock)
    segs = _run_durations(segs, clock, SEGMENT_DURATIONS)
    segs = _run_times(segs, clock, SEGMENT_TIMES)
    segs["host_ns"] = np.where(segs["kind"] == "work", segs["end_ns"] - segs["start_ns"], 0)
    calls = _run_times(
        _of_members(read("xr_nccl_calls"), members),
        clock,
        ["start_ns", "end_ns", "launch_ns", "ready_ns"],
    )
    return coll, segs, calls, steps


def _with_work(segs: pd.DataFrame, clock: pd.DataFrame) -> pd.DataFrame:
    """Each segment's work as the run clock counts it, unrounded (the ranks are compared by
    their sums: rounding each would add up): `host_work` (a work segment's length),
    `before_work` (of it, the time before the launch its lane rests on), `gpu_work`."""
    scale = 1 + segs["rank"].map(clock.set_index("rank")["drift_ppb"]).astype(np.float64) / 1e9
    work = (segs["kind"] == "work").to_numpy()
    length = (segs["end_ns"] - segs["start_ns"]).to_numpy(np.float64)
    offset = (segs["bound_launch_ns"] - segs["start_ns"]).to_numpy(np.float64)
    host = np.where(work, length, 0)
    return segs.assign(
        host_work=host * scale,
        before_work=np.clip(np.nan_to_num(offset), 0, host) * scale,
        gpu_work=segs["gpu_ns"].to_numpy(np.float64) * scale,
    )


def _of_members(frame: pd.DataFrame, members: pd.DataFrame) -> pd.DataFrame:
    """Per-report rows (rank = report rank, pid) by member rank, the member's process only."""
    frame = to_member_ranks(frame.drop(columns="report"), members)
    known = members.dropna(subset=["pid"])
    mine = frame.merge(known[["rank", "pid"]].drop_duplicates(), on=["rank", "pid"])
    unknown = frame[~frame["rank"].isin(known["rank"])]
    return pd.concat([mine, unknown], ignore_index=True)


def _run_durations(frame: pd.DataFrame, clock: pd.DataFrame, durations: dict) -> pd.DataFrame:
    """Durations {column: (anchor, ends there)} of `frame` (session ns; one that ends at its
    anchor time, or starts there) as the run clock counts them: the difference of their two
    ends on it, so that they fit the run times of the nodes they separate."""
    out = frame.reset_index(drop=True)
    session = out.copy()
    for column, (anchor, ends_there) in durations.items():
        sign = -1 if ends_there else 1
        length = session[column] + (session[STACKED[column]] if column in STACKED else 0)
        pair = pd.DataFrame(
            {"rank": out["rank"], "a": out[anchor], "b": out[anchor] + sign * length}
        )
        pair["id"] = np.arange(len(out))
        pair = _run_times(pair, clock, ["a", "b"]).set_index("id").reindex(np.arange(len(out)))
        run = sign * (pair["b"] - pair["a"])
        if column in STACKED:  # its base was converted before it: its part of the sum
            run = run - out[STACKED[column]]
        out[column] = (
            run.where(session[column].notna()).fillna(session[column].astype(np.float64)).to_numpy()
        )
    return out


def _run_times(frame: pd.DataFrame, clock: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """`columns` of `frame` on the run clock (nsyswrap.crossrank.solve.to_run_time), NULLs
    kept; rows of unaligned ranks dropped."""
    columns = [c for c in columns if c in frame]
    null = frame[columns].isna()
    filled = frame.assign(**{c: frame[c].fillna(0).astype(np.int64) for c in columns})
    filled["_row"] = np.arange(len(frame))
    out = to_run_time(filled, clock, columns)
    kept = null.to_numpy()[out["_row"].to_numpy()]
    for i, c in enumerate(columns):
        if kept[:, i].any():
            out[c] = out[c].astype(np.float64).mask(kept[:, i])
    return out.drop(columns="_row").reset_index(drop=True)
