"""What would a fix save? The run replayed (nsyswrap.crossrank.replay) from its ranks' work
and its matched collectives, then again with candidate fixes.

The model, per aligned rank (times on the run clock, see nsyswrap.crossrank.solve):

* Its **lane**: the rank's own progress, one chain of its events in time order: step
  starts and ends (the step ranges), the issue point of each matched collective it takes
  part in, and each point where its work waited for a collective (a join). Between two
  consecutive events the rank did its own work (a *segment*), which takes the time it took
  whatever the others do. A collective's issue point is when the rank could have started
  it had its stream been free: the later of its NCCL kernel's launch call and the end of
  the work queued before it on the device (`xr_issues`); a collective timed by its ranges
  (no NCCL kernel: gloo, MPI) is issued at its range start and its rank waits for its end.
* Its **arrival** at a collective: the issue point, or the end of the previous collective
  on the same communication stream (CUDA stream of the NCCL kernel; pg for range-timed
  ones) if later, plus the launch latency seen.
* Each collective ends, on each member, at its **last arrival** plus that member's
  transfer time (its end minus the last arrival): the wait is not a duration, the replay
  re-creates it. Several groups at once, point-to-point pairs (two-member groups) and
  all_to_all are collectives like the others.
* A **join** (`xr_joins`): a GPU activity whose stream waited (cudaStreamWaitEvent) for a
  collective's end: the rank reached it when its stream went idle and went on at the
  later of that and the collective's end (plus the gap seen). Waits outside a
  collective's range (DDP's comm-hook futures, async_op=True) are thus where they really
  are; so is work between steps (data loading before the first forward): a segment.

Each segment is split by phase (`xr_lane_phases`: the phase whose GPU work ran, and while
the GPU idled the phase of the work that ended the idleness). The **same segment** on
another rank is the one ending at the same event: the issue of, or join on, the same
collective, or the same step's start or end.

A candidate fix idealises some segments' phase parts: each part set to the median of the
other ranks' same part, where that is shorter (a fix never slows a rank down, so
idealising more never makes the replay slower):

* `rank` R: every part of its segments; `rank_phase` (R, P): its P parts (rank NULL: P
  on every rank, e.g. stalls that move between ranks); `all`: every part of every rank;
* `collective` (pg, op): every collective of that op in that group hidden (each member
  ends at its own arrival: no transfer, no wait).

The run's step time: a step ends when its last rank ends it; it takes from the previous
step's end (the first step: from its latest start). A candidate's gain per step is the
replayed step time minus the step time replayed with the fix; the replay of the recorded
durations reproduces the recorded times (the residual is where it does not: an end
before the last arrival, from clock error). The critical path of a step walks back from
the step's end through the events each one rested on: at a collective to its last
arriver, charging work to (rank, phase) and transfer to (pg, op); the charges add up to
the step time.

Assumptions (where they hold the gains are exact, as on the generator's `same_work`
runs with collectives ending together): a rank's work between two of its events takes
the same time whatever the others do (no contention, the same side - host or GPU -
holding it up); host and GPU of a rank are one lane; what it waited for is among the
events above.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from nsyswrap.crossrank.ranks import MEMBER_COLUMNS, run_members, to_member_ranks
from nsyswrap.crossrank.replay import Graph, ranges
from nsyswrap.crossrank.solve import to_run_time

CHAIN_ORDER = {"X": 0, "S": 1, "Ja": 2, "J": 3, "W": 4}  # at one instant: a step ends first
CHAINED = ("S", "X", "W", "Ja")  # events that follow the rank's previous event on its lane
# (their durations, and a join's after the collective it waited for, are the rank's own work)
RUN_SCOPE_TABLES = frozenset({"xr_whatif", "xr_critical_path", "xr_replay_check"})
COLUMNS = {
    "xr_whatif": {
        "kind": "VARCHAR",
        "rank": "INTEGER",
        "phase": "VARCHAR",
        "stage": "INTEGER",
        "pg": "VARCHAR",
        "op": "VARCHAR",
        "step": "BIGINT",
        "recorded_ns": "BIGINT",
        "replayed_ns": "BIGINT",
        "whatif_ns": "BIGINT",
        "gain_ns": "BIGINT",
        "residual_ns": "BIGINT",
    },
    "xr_critical_path": {
        "step": "BIGINT",
        "kind": "VARCHAR",
        "rank": "INTEGER",
        "phase": "VARCHAR",
        "pg": "VARCHAR",
        "op": "VARCHAR",
        "ns": "BIGINT",
    },
    "xr_replay_check": {
        "rank": "INTEGER",
        "step": "BIGINT",
        "recorded_ns": "BIGINT",
        "replayed_ns": "BIGINT",
        "residual_ns": "BIGINT",
    },
}
NO_STEP = -1  # the step of a run without step ranges: each rank's span from its first collective
COLUMNS_PER_REPLAY = 32  # candidates replayed at once (memory: events x columns x 16 bytes)
NO_PHASE = ""
P2P_OPS = (
    "send",
    "recv",
    "isend",
    "irecv",
    "send_recv",
    "p2p",
)  # a segment's time outside every phase


@dataclass
class Model:
    graph: Graph
    events: pd.DataFrame  # per node: kind, rank, key, step, cid (collective), t
    collectives: pd.DataFrame  # per cid: pg, seq, op, step
    phases: list[str]  # phase names (NO_PHASE: outside every phase)
    parts: np.ndarray  # (lane nodes x phases): each segment's time per phase
    lane: np.ndarray  # node ids of the lane nodes (rows of parts)
    labels: dict  # rank -> (boundaries, phase index per stretch)
    stretches: pd.DataFrame  # rank, start_ns, end_ns, phase, instance: the labels
    steps: pd.DataFrame  # rank, step, start node, end node


def _labels(labels: pd.DataFrame, phases: list[str]) -> dict:
    out = {}
    index = {p: i for i, p in enumerate(phases)}
    for rank, g in labels.sort_values(["rank", "start_ns"]).groupby("rank"):
        bounds = np.concatenate(
            [g["start_ns"].to_numpy(np.int64), g["end_ns"].to_numpy(np.int64)[-1:]]
        )
        out[int(rank)] = (
            bounds,
            g["phase"].fillna(NO_PHASE).map(index).to_numpy(np.int64),
            g["end_ns"].to_numpy(np.int64),
        )
    return out


def phase_parts(
    labels: dict, n_phases: int, rank: np.ndarray, t0: np.ndarray, t1: np.ndarray
) -> np.ndarray:
    """(len(t0) x n_phases): the time of each [t0, t1) of `rank` in each phase; time no
    stretch covers is phase 0 (NO_PHASE)."""
    out = np.zeros((len(t0), n_phases), np.int64)
    for r in np.unique(rank):
        rows = np.flatnonzero(rank == r)
        a, b = t0[rows], t1[rows]
        if int(r) not in labels:
            out[rows, 0] = b - a
            continue
        starts, phase, ends = labels[int(r)]
        starts, ends = starts[:-1].copy(), ends.copy()
        starts[0], ends[-1] = np.iinfo(np.int64).min // 4, np.iinfo(np.int64).max // 4  # the first
        # phase from the start, the last to the end
        covered = np.zeros(len(rows), np.int64)
        for p in np.unique(phase):
            s, e = starts[phase == p], ends[phase == p]
            cum = np.concatenate(([0], np.cumsum(e - s)))

            def upto(x, s=s, e=e, cum=cum):
                i = np.searchsorted(s, x, side="right")  # stretches starting at or before x
                last = np.clip(i - 1, 0, len(s) - 1)
                inside = np.where(i > 0, np.clip(x - s[last], 0, e[last] - s[last]), 0)
                return cum[np.maximum(i - 1, 0)] * (i > 0) + inside

            part = upto(b) - upto(a)
            out[rows, p] += part
            covered += part
        out[rows, 0] += (b - a) - covered
    return out


def _with_issues(coll: pd.DataFrame, issues: pd.DataFrame) -> pd.DataFrame:
    """Each member with its NCCL kernel's issue data: the kernel of its rank that starts and
    ends with it (a rank with several GPUs: the kernel that starts with it)."""
    loose = coll.merge(
        issues.drop(columns=["end_ns"], errors="ignore").drop_duplicates(["rank", "start_ns"]),
        on=["rank", "start_ns"],
        how="left",
    )
    if "end_ns" not in issues:
        return loose
    exact = coll.merge(
        issues.drop_duplicates(["rank", "start_ns", "end_ns"]),
        on=["rank", "start_ns", "end_ns"],
        how="left",
    )
    return exact.where(exact["stream"].notna(), loose)


def build_model(
    coll: pd.DataFrame,
    issues: pd.DataFrame,
    joins: pd.DataFrame,
    steps: pd.DataFrame,
    labels: pd.DataFrame,
) -> Model:
    """The replay model from the run's frames (run time, member ranks): coll = xr_aligned's
    pg, seq, op, rank, step, start_ns, end_ns, on_gpu; issues = rank, start_ns, end_ns (the NCCL
    kernel's, = the arrival), stream, launch_ns, ready_ns; joins = rank, start_ns,
    idle_from_ns, nccl_start_ns; steps = rank, step, start_ns, end_ns; labels = rank,
    start_ns, end_ns, phase."""
    coll = coll.sort_values(["pg", "seq", "rank"]).reset_index(drop=True)
    keys = coll[["pg", "seq"]].drop_duplicates().reset_index(drop=True)
    keys["cid"] = np.arange(len(keys))
    coll = coll.merge(keys, on=["pg", "seq"])
    collectives = (
        coll.groupby("cid")
        .agg(pg=("pg", "first"), seq=("seq", "first"), op=("op", "first"), step=("step", "min"))
        .reset_index()
    )
    m = _with_issues(coll, issues)
    m = m.drop_duplicates(["rank", "cid"]).reset_index(drop=True)
    gpu = m["on_gpu"].astype(bool) & m["launch_ns"].notna()
    issue = np.maximum(
        m["launch_ns"].fillna(m["start_ns"]), m["ready_ns"].fillna(m["launch_ns"]).fillna(0)
    )
    m["w"] = np.where(gpu, np.minimum(issue, m["start_ns"]), m["start_ns"]).astype(np.int64)
    m["stream_key"] = np.where(
        gpu,
        m["rank"].astype(str) + "/" + m["stream"].astype(str),
        m["rank"].astype(str) + ":" + m["pg"].astype(str),
    )
    # joins: GPU waits found in the trace; a range-timed collective is waited for at once
    j = joins.merge(
        m[["rank", "start_ns", "cid", "end_ns"]].rename(
            columns={"start_ns": "nccl_start_ns", "end_ns": "e"}
        ),
        on=["rank", "nccl_start_ns"],
    )
    j = j[(j["start_ns"] >= j["e"]) & (j["idle_from_ns"] <= j["start_ns"])]
    # the host waited for a collective whose call returned after it ended (a blocking call,
    # or a collective timed by its ranges): it arrived at the call's start, went on at its end
    host = (
        m[m["cpu_end_ns"].notna() & (m["cpu_end_ns"] >= m["end_ns"])]
        if "cpu_end_ns" in m
        else m.iloc[:0]
    )
    host = pd.concat(
        [
            host,
            m[~gpu & ~m.index.isin(host.index)].assign(
                cpu_start_ns=lambda f: f["start_ns"],
                cpu_end_ns=lambda f: np.maximum(f["end_ns"], f["start_ns"]),
            ),
        ]
    )
    j = pd.concat(
        [
            j[["rank", "cid", "idle_from_ns", "start_ns"]],
            pd.DataFrame(
                {
                    "rank": host["rank"],
                    "cid": host["cid"],
                    "idle_from_ns": host["cpu_start_ns"],
                    "start_ns": host["cpu_end_ns"],
                }
            ),
        ],
        ignore_index=True,
    )
    j = j.astype({"idle_from_ns": np.int64, "start_ns": np.int64})
    j = j.sort_values(["start_ns", "idle_from_ns"]).drop_duplicates(["rank", "cid"])
    j = j.merge(collectives[["cid", "step"]], on="cid")
    lane = pd.concat(
        [
            pd.DataFrame(
                {
                    "kind": "S",
                    "rank": steps["rank"],
                    "t": steps["start_ns"],
                    "step": steps["step"],
                    "cid": -1,
                }
            ),
            pd.DataFrame(
                {
                    "kind": "X",
                    "rank": steps["rank"],
                    "t": steps["end_ns"],
                    "step": steps["step"],
                    "cid": -1,
                }
            ),
            pd.DataFrame(
                {"kind": "W", "rank": m["rank"], "t": m["w"], "step": m["step"], "cid": m["cid"]}
            ),
            pd.DataFrame(
                {
                    "kind": "Ja",
                    "rank": j["rank"],
                    "t": j["idle_from_ns"],
                    "step": j["step"],
                    "cid": j["cid"],
                }
            ),
            pd.DataFrame(
                {
                    "kind": "J",
                    "rank": j["rank"],
                    "t": j["start_ns"],
                    "step": j["step"],
                    "cid": j["cid"],
                }
            ),
        ],
        ignore_index=True,
    )
    lane["t"] = lane["t"].astype(np.int64)
    lane["order"] = lane["kind"].map(CHAIN_ORDER)
    lane = lane.sort_values(["rank", "t", "order", "cid"], kind="stable").reset_index(drop=True)
    lane["node"] = np.arange(len(lane))
    # the chain: each event follows the rank's previous event (what comes after a join
    # follows the join; what comes between a join's arrival and the join, the arrival), so
    # the segments share no time
    lane["prev"] = lane["node"].groupby(lane["rank"]).shift()
    n_lane = len(lane)
    # collective members: arrival A, last arrival M (one per collective), end E
    a_node = n_lane + np.arange(len(m))
    m_node = n_lane + len(m) + np.arange(len(collectives))
    e_node = n_lane + len(m) + len(collectives) + np.arange(len(m))
    member = pd.Series(np.arange(len(m)), index=pd.MultiIndex.from_frame(m[["rank", "cid"]]))
    by_kind = {k: lane[lane["kind"] == k] for k in ("W", "Ja", "J")}
    w_of = by_kind["W"].set_index(["rank", "cid"])["node"].reindex(member.index).to_numpy(np.int64)
    order = np.lexsort((m["cid"].to_numpy(), m["start_ns"].to_numpy(), m["stream_key"].to_numpy()))
    same = np.r_[
        False, m["stream_key"].to_numpy()[order][1:] == m["stream_key"].to_numpy()[order][:-1]
    ]
    stream_prev = np.full(len(m), -1, np.int64)
    stream_prev[order[same]] = e_node[order[np.flatnonzero(same) - 1]]
    chain = lane[lane["kind"].isin(CHAINED) & lane["prev"].notna()]
    jn = by_kind["J"]
    j_member = member.reindex(pd.MultiIndex.from_frame(jn[["rank", "cid"]])).to_numpy(np.int64)
    ja_of = (
        by_kind["Ja"]
        .set_index(["rank", "cid"])["node"]
        .reindex(pd.MultiIndex.from_frame(jn[["rank", "cid"]]))
        .to_numpy(np.int64)
    )
    cids = m["cid"].to_numpy(np.int64)
    with_prev = stream_prev >= 0
    # a member of an exchange (all_to_all, send/recv) that ended before the last member
    # arrived needed nothing from it: its end rests on its own arrival alone
    last = m.groupby("cid")["start_ns"].transform("max").to_numpy(np.int64)
    op = m["op"].astype(str).str.lower()
    early = (m["end_ns"].to_numpy(np.int64) < last) & (
        op.str.startswith("all_to_all") | op.isin(P2P_OPS)
    ).to_numpy()
    edges = [  # (node, predecessor, hideable collective, side)
        (chain["node"].to_numpy(np.int64), chain["prev"].to_numpy(np.int64), None, None),
        (jn["node"].to_numpy(np.int64), ja_of, None, None),
        (jn["node"].to_numpy(np.int64), e_node[j_member], None, None),
        (a_node, w_of, None, None),
        (a_node[with_prev], stream_prev[with_prev], None, None),
        (m_node[cids], a_node, None, None),
        (e_node[~early], m_node[cids[~early]], cids[~early], 0),
        (e_node[~early], a_node[~early], cids[~early], 1),
        (e_node[early], a_node[early], None, None),
    ]
    node = np.concatenate([e[0] for e in edges])
    pred = np.concatenate([e[1] for e in edges])
    hideable = np.concatenate(
        [np.full(len(e[0]), -1, np.int64) if e[2] is None else e[2] for e in edges]
    )
    side = np.concatenate(
        [np.full(len(e[0]), -1 if e[3] is None else e[3], np.int64) for e in edges]
    )
    by_node = np.argsort(node, kind="stable")
    n_nodes = n_lane + 2 * len(m) + len(collectives)
    ptr = np.concatenate(([0], np.cumsum(np.bincount(node, minlength=n_nodes)))).astype(np.int64)
    pred, hideable, side = pred[by_node], hideable[by_node], side[by_node]
    t = np.concatenate(
        [
            lane["t"].to_numpy(np.int64),
            m["start_ns"].to_numpy(np.int64),
            coll.groupby("cid")["start_ns"].max().to_numpy(np.int64),
            m["end_ns"].to_numpy(np.int64),
        ]
    )
    graph = Graph(t, ptr, pred, hideable, side, n_hideable=len(collectives))
    events = pd.concat(
        [
            lane[["kind", "rank", "t", "step", "cid"]],
            pd.DataFrame(
                {
                    "kind": "A",
                    "rank": m["rank"],
                    "t": m["start_ns"],
                    "step": m["step"],
                    "cid": m["cid"],
                }
            ),
            pd.DataFrame(
                {
                    "kind": "M",
                    "rank": -1,
                    "t": t[m_node],
                    "step": collectives["step"],
                    "cid": collectives["cid"],
                }
            ),
            pd.DataFrame(
                {
                    "kind": "E",
                    "rank": m["rank"],
                    "t": m["end_ns"],
                    "step": m["step"],
                    "cid": m["cid"],
                }
            ),
        ],
        ignore_index=True,
    )
    phases = [NO_PHASE] + sorted(set(labels["phase"].dropna()))
    label_map = _labels(labels, phases)
    lane_nodes = lane.loc[
        (lane["kind"].isin(CHAINED) & lane["prev"].notna()) | (lane["kind"] == "J"), "node"
    ].to_numpy(np.int64)
    seg_end = t[lane_nodes]
    seg_start = seg_end - graph.d[lane_nodes]
    parts = phase_parts(
        label_map, len(phases), events["rank"].to_numpy()[lane_nodes], seg_start, seg_end
    )
    step_nodes = lane[lane["kind"].isin(("S", "X"))].pivot_table(
        index=["rank", "step"], columns="kind", values="node", aggfunc="first"
    )
    return Model(
        graph,
        events,
        collectives,
        phases,
        parts,
        lane_nodes,
        label_map,
        labels.assign(instance=labels["instance"] if "instance" in labels else labels["start_ns"]),
        step_nodes.reset_index().rename(columns={"S": "start", "X": "end"}),
    )


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


def instance_parts(model: Model) -> pd.DataFrame:
    """Each lane segment's time per phase range (instance): rows seg (row of model.parts),
    phase (index), instance, ns; time before a rank's first stretch and after its last takes
    theirs, as phase_parts does."""
    ev = model.events
    rank = ev["rank"].to_numpy()[model.lane]
    t1 = model.graph.t[model.lane]
    t0 = t1 - model.graph.d[model.lane]
    index = {p: i for i, p in enumerate(model.phases)}
    out = []
    for r, st in model.stretches.sort_values(["rank", "start_ns"]).groupby("rank"):
        rows = np.flatnonzero(rank == r)
        if not len(rows) or st.empty:
            continue
        starts = st["start_ns"].to_numpy(np.int64).copy()
        ends = st["end_ns"].to_numpy(np.int64).copy()
        starts[0], ends[-1] = np.iinfo(np.int64).min // 4, np.iinfo(np.int64).max // 4
        lo = np.maximum(np.searchsorted(ends, t0[rows], side="right"), 0)
        hi = np.searchsorted(starts, t1[rows], side="left")
        counts = np.maximum(hi - lo, 0)
        seg = np.repeat(rows, counts)
        k = ranges(lo, counts)
        ns = np.minimum(t1[seg], ends[k]) - np.maximum(t0[seg], starts[k])
        keep = ns > 0
        phase = st["phase"].fillna(NO_PHASE).map(index).to_numpy(np.int64)
        out.append(
            pd.DataFrame(
                {
                    "seg": seg[keep],
                    "phase": phase[k[keep]],
                    "instance": st["instance"].to_numpy(np.float64)[k[keep]],
                    "ns": ns[keep],
                }
            )
        )
    return (
        pd.concat(out, ignore_index=True)
        if out
        else pd.DataFrame(columns=["seg", "phase", "instance", "ns"])
    )


def stage_excess(model: Model, stage_of: dict[int, int]) -> np.ndarray:
    """(lane segments x phases): how much shorter each segment of a pipeline stage's ranks
    gets when the stage does each of its phase ranges as fast as the median rank of the
    other stages does the same one (the k-th range of the phase in the step: a
    microbatch's forward), where it is slower; a range's excess is taken off the segments
    that hold its time in proportion to it."""
    ev = model.events
    parts = instance_parts(model)
    parts = parts[parts["phase"] != 0]  # outside phases: where a stage sits, not its work
    parts["rank"] = ev["rank"].to_numpy()[model.lane][parts["seg"].to_numpy()]
    step = np.nan_to_num(ev["step"].to_numpy(np.float64)[model.lane], nan=-1).astype(np.int64)
    parts["step"] = step[parts["seg"].to_numpy()]
    parts["stage"] = parts["rank"].map(stage_of)
    per = parts.groupby(["rank", "step", "phase", "instance"], as_index=False)["ns"].sum()
    per["k"] = per.groupby(["rank", "step", "phase"])["instance"].rank(method="first")
    per["stage"] = per["rank"].map(stage_of)
    out = np.zeros_like(model.parts)
    for s in sorted(set(stage_of.values())):
        other = per[(per["stage"] != s) & per["stage"].notna()]
        median = other.groupby(["step", "phase", "k"])["ns"].median().round().rename("median")
        mine = per[per["stage"] == s].join(median, on=["step", "phase", "k"])
        mine["over"] = (mine["ns"] - np.minimum(mine["ns"], mine["median"])).fillna(0)
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
    step, replayed vs recorded) and `critical_path` (per step and charge)."""
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


def inputs(run) -> tuple[pd.DataFrame, ...]:
    """The model's frames from the objects bound on `run` (xr_aligned, xr_clock,
    xr_member_steps and the per-report xr_issues, xr_joins, xr_lane_phases), on the run
    clock and by member rank; unaligned ranks are left out."""
    members = run_members(run)[MEMBER_COLUMNS].drop_duplicates(ignore_index=True)
    clock = run.df("SELECT * FROM xr_clock")
    coll = run.df("SELECT pg, seq, op, rank, step, start_ns, end_ns, on_gpu FROM xr_aligned")
    calls = to_run_time(
        run.df("SELECT rank, pg, seq, cpu_start_ns, cpu_end_ns FROM xr_keys WHERE matches").dropna(
            subset=["cpu_start_ns", "cpu_end_ns"]
        ),
        clock,
        ["cpu_start_ns", "cpu_end_ns"],
    )
    coll = coll.merge(calls, on=["rank", "pg", "seq"], how="left")
    steps = to_run_time(
        run.df("SELECT rank, step, start_ns, end_ns FROM xr_member_steps"),
        clock,
        ["start_ns", "end_ns"],
    )
    issues = to_run_time(
        to_member_ranks(run.df("SELECT * EXCLUDE (report) FROM xr_issues"), members),
        clock,
        ["start_ns", "end_ns", "launch_ns", "ready_ns"],
    )
    issues["stream"] = (
        issues["pid"].astype(str)
        + ":"
        + issues["device"].astype(str)
        + ":"
        + issues["stream"].astype(str)
    )
    joins = to_run_time(
        to_member_ranks(run.df("SELECT * EXCLUDE (report) FROM xr_joins"), members),
        clock,
        ["start_ns", "idle_from_ns", "nccl_start_ns"],
    )
    labels = to_member_ranks(run.df("SELECT * EXCLUDE (report) FROM xr_lane_phases"), members)
    lane_device = _lane_devices(issues, labels)
    labels = labels.merge(lane_device, on=["rank", "device"])
    owned = labels["phase_start_ns"].notna()
    labels = pd.concat(
        [
            to_run_time(labels[owned], clock, ["start_ns", "end_ns", "phase_start_ns"]),
            to_run_time(labels[~owned], clock, ["start_ns", "end_ns"]),
        ],
        ignore_index=True,
    )
    host = to_run_time(
        run.df("SELECT rank, start_ns, end_ns, phase FROM xr_member_phases"),
        clock,
        ["start_ns", "end_ns"],
    )
    return (
        coll,
        issues[["rank", "start_ns", "end_ns", "stream", "launch_ns", "ready_ns"]],
        joins[["rank", "start_ns", "idle_from_ns", "nccl_start_ns"]],
        steps,
        merge_labels(labels, host),
    )


def merge_labels(gpu: pd.DataFrame, host: pd.DataFrame) -> pd.DataFrame:
    """Per rank, one phase per instant (`xr_lane_phases`): where its GPU was busy, the phase
    of the work it ran; where it waited for the host to launch work, the host's phase range
    open then (`xr_member_phases`) if any; elsewhere the phase of the work that ended the
    GPU's idleness. Rows: rank, start_ns, end_ns, phase, instance (the start of the phase
    range the time belongs to: which of the phase's ranges)."""
    out = []
    for rank in sorted(set(gpu["rank"]) | set(host["rank"])):
        g = gpu[gpu["rank"] == rank].sort_values("start_ns")
        h = host[host["rank"] == rank].sort_values("start_ns")
        bounds = np.unique(
            np.concatenate([g["start_ns"], g["end_ns"], h["start_ns"], h["end_ns"]]).astype(
                np.int64
            )
        )
        if len(bounds) < 2:
            continue
        a, b = bounds[:-1], bounds[1:]
        phase = np.full(len(a), None, object)
        instance = np.full(len(a), np.nan)
        host_time = np.ones(len(a), bool)  # outside the GPU's span: the host's
        if len(g):
            i = np.clip(
                np.searchsorted(g["start_ns"].to_numpy(np.int64), a, side="right") - 1,
                0,
                len(g) - 1,
            )
            inside = (a >= g["start_ns"].to_numpy(np.int64)[i]) & (
                a < g["end_ns"].to_numpy(np.int64)[i]
            )
            phase[:] = g["phase"].to_numpy(object)[i]  # else the nearest stretch's
            instance[:] = g["phase_start_ns"].to_numpy(np.float64)[i]
            host_time = ~inside | (g["state"].to_numpy(object)[i] == "host")
        if len(h):
            k = np.searchsorted(h["start_ns"].to_numpy(np.int64), a, side="right") - 1
            ok = (k >= 0) & (a < h["end_ns"].to_numpy(np.int64)[np.maximum(k, 0)])
            use = ok & host_time
            phase[use] = h["phase"].to_numpy(object)[k[use]]
            instance[use] = h["start_ns"].to_numpy(np.float64)[k[use]]
        frame = pd.DataFrame(
            {"rank": rank, "start_ns": a, "end_ns": b, "phase": phase, "instance": instance}
        )
        change = (
            frame["phase"].ne(frame["phase"].shift())
            | frame["instance"].ne(frame["instance"].shift())
            | (frame.index == 0)
        )
        frame["island"] = change.cumsum()
        out.append(
            frame.groupby("island").agg(
                rank=("rank", "first"),
                start_ns=("start_ns", "min"),
                end_ns=("end_ns", "max"),
                phase=("phase", "first"),
                instance=("instance", "first"),
            )
        )
    if not out:
        return pd.DataFrame(columns=["rank", "start_ns", "end_ns", "phase", "instance"])
    return pd.concat(out, ignore_index=True)


def _lane_devices(issues: pd.DataFrame, labels: pd.DataFrame) -> pd.DataFrame:
    """Per rank, the device whose phases its lane takes: where its NCCL kernels ran (the
    most of them), else where it ran the most."""
    busy = (
        labels.assign(ns=labels["end_ns"] - labels["start_ns"])
        .groupby(["rank", "device"])["ns"]
        .sum()
    )
    nccl = (
        issues.assign(device=issues["stream"].str.split(":").str[1].astype(int))
        .groupby(["rank", "device"])
        .size()
    )
    score = pd.concat([nccl.rename("nccl"), busy.rename("ns")], axis=1).fillna(0).reset_index()
    score = score.sort_values(
        ["rank", "nccl", "ns", "device"], ascending=[True, False, False, True]
    )
    return score.drop_duplicates("rank")[["rank", "device"]]


def build(run, name: str, params: dict, table: str) -> None:
    """Planner builder (nsyswrap.planner.python_built) of run object `name` (one of
    RUN_SCOPE_TABLES) into table `table`: the replay runs once per run and step_pattern,
    its three frames kept on the run."""
    key = ("whatif", params.get("step_pattern", "step:%"))
    if key not in run.solved or not run.cached:  # hand-made tables may change
        run.solved[key] = frames(run)
    frame = run.solved[key][name]
    types = COLUMNS[name]
    con = run.connection
    view = f"nsyswrap_frame_{name}"
    con.register(view, frame.astype(object).where(frame.notna(), None) if len(frame) else frame)
    columns = ", ".join(f'CAST("{c}" AS {t}) AS "{c}"' for c, t in types.items())
    con.execute(f'CREATE OR REPLACE TABLE "{table}" AS SELECT {columns} FROM {view}')
    con.unregister(view)


def frames(run) -> dict[str, pd.DataFrame]:
    """The three run objects' frames over the objects bound on `run` now."""
    empty = {
        name: pd.DataFrame({c: pd.Series(dtype=object) for c in cols})
        for name, cols in COLUMNS.items()
    }
    coll, issues, joins, steps, labels = inputs(run)
    if run.unrelated is not None or coll.empty:
        return empty
    if steps.empty:  # no step ranges: each rank's span, from its first collective to its last end
        steps = (
            coll.groupby("rank")
            .agg(start_ns=("start_ns", "min"), end_ns=("end_ns", "max"))
            .reset_index()
        )
        steps["step"] = NO_STEP
    out = analyse(build_model(coll, issues, joins, steps, labels))
    for frame in out.values():
        if "phase" in frame:
            frame["phase"] = frame["phase"].where(frame["phase"] != NO_PHASE, None)
        if "step" in frame:
            frame["step"] = frame["step"].where(frame["step"] != NO_STEP, None)
    return {
        "xr_whatif": out["whatif"].reindex(columns=list(COLUMNS["xr_whatif"])),
        "xr_critical_path": out["critical_path"].reindex(columns=list(COLUMNS["xr_critical_path"])),
        "xr_replay_check": out["check"].reindex(columns=list(COLUMNS["xr_replay_check"])),
    }
