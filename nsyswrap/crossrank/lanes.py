"""The replay's model of a run (nsyswrap.crossrank.whatif): each aligned rank's lane of
events and its collectives as a graph of nsyswrap.crossrank.replay, from the run's objects.

* A rank's **lane**: one chain of its events in time order: step starts and ends (the step
  ranges), the issue point of each matched collective it takes part in, and each point
  where its work waited for a collective (a join: its arrival, then the join). Between two
  consecutive events the rank did its own work (a *segment*), which takes the time it took
  whatever the others do. A collective's issue point is when the rank could have started
  it had its stream been free: the later of its NCCL kernel's launch call and the end of
  the work queued before it on the device (`xr_issues`); a collective timed by its ranges
  (no NCCL kernel: gloo, MPI) is issued at its range start.
* Its **arrival** at a collective: the issue point, or the end of the previous collective
  on the same communication stream (CUDA stream of the NCCL kernel; pg for range-timed
  ones) if later, plus the launch latency seen.
* Each collective ends, on each member, at its **last arrival** plus that member's
  transfer time (its end minus the last arrival): the wait is not a duration, the replay
  re-creates it. A member of an exchange (all_to_all, send/recv) that ended before the
  last arrival needed nothing from it: its end rests on its own arrival. Several groups
  at once and point-to-point pairs (two-member groups) are collectives like the others.
* A **join**: a GPU activity whose stream waited (cudaStreamWaitEvent) for a collective's
  end (`xr_joins`), or a call that returned after its collective ended (a blocking call;
  every range-timed collective): the rank arrived when its stream went idle (the call
  started) and went on at the later of that and the collective's end, plus the gap seen.
  An asynchronous call on the host (gloo, MPI: its end is its completion mark) is waited
  for at the blocking OS call that its completion woke (`xr_host_waits`: DDP's wait for
  its buckets at the end of backward), else nowhere.
  Joins of a rank at one instant (a stage waiting for a receive and a send at once) are
  one wait for all their collectives: the work after it follows the last of them.
  Waits outside a collective's range (DDP's comm-hook futures, async_op=True) are thus
  where they really are; so is work between steps (data loading before the first
  forward): a segment.

Each segment is split by phase and phase range (`xr_lane_phases`, `merge_labels`): the
phase whose GPU work ran; where the GPU waited for the host, the host's phase then (in a
step before its first phase range: `before_forward`); else the phase of the work that
ended the idleness.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from nsyswrap.crossrank.ranks import MEMBER_COLUMNS, to_member_ranks
from nsyswrap.crossrank.replay import Graph, ranges
from nsyswrap.crossrank.solve import to_run_time

CHAIN_ORDER = {"X": 0, "S": 1, "Ja": 2, "J": 3, "W": 4}  # at one instant: a step ends first
CHAINED = ("S", "X", "W", "Ja")  # events that follow the rank's previous event on its lane
# (their durations, and a join's after the collective it waited for, are the rank's own work)
NO_PHASE = ""  # a segment's time outside every phase
BEFORE_FORWARD = "before_forward"  # a step's host time before its first phase range
PHASE_GLOSS = {  # the phases the model makes up, in words for a finding that names them
    BEFORE_FORWARD: "the step's time before its first forward, where data loading falls when "
    "a step is found from its forward",
}
P2P_OPS = ("send", "recv", "isend", "irecv", "send_recv", "p2p")


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
    # or a collective timed by its ranges): it arrived at the call's start, went on at its
    # end; for an asynchronous call (its end: the completion mark), at the blocking call that
    # was woken by its completion (xr_host_waits), or nowhere: nothing waited for it
    later = m.get("waited_later", pd.Series(False, index=m.index)).fillna(False).astype(bool)
    later &= ~gpu
    waited = m[later & m["wait_start_ns"].notna()] if "wait_start_ns" in m else m.iloc[:0]
    host = (
        m[~later & m["cpu_end_ns"].notna() & (m["cpu_end_ns"] >= m["end_ns"])]
        if "cpu_end_ns" in m
        else m.iloc[:0]
    )
    host = pd.concat(
        [
            host,
            m[~gpu & ~later & ~m.index.isin(host.index)].assign(
                cpu_start_ns=lambda f: f["start_ns"],
                cpu_end_ns=lambda f: np.maximum(f["end_ns"], f["start_ns"]),
            ),
            waited.assign(
                cpu_start_ns=waited.get("wait_start_ns"), cpu_end_ns=waited.get("wait_end_ns")
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
    # joins of one rank at one instant are one wait for all their collectives: one join
    # event (the collective that ended last's) with an edge from each of their ends, so the
    # work after it follows the last of them and no join holds another's wait as work
    j = j.merge(m[["rank", "cid", "end_ns"]], on=["rank", "cid"]).sort_values(
        ["rank", "start_ns", "end_ns", "cid"], ascending=[True, True, False, True]
    )
    lead = j.groupby(["rank", "start_ns"])["cid"].transform("first")
    also = j[j["cid"] != lead]  # (rank, cid) the join of (rank, lead) also waited for
    j = j[j["cid"] == lead].drop(columns="end_ns")
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
    also_member = member.reindex(pd.MultiIndex.from_frame(also[["rank", "cid"]])).to_numpy(np.int64)
    j_also = (
        jn.set_index(["rank", "cid"])["node"]
        .reindex(pd.MultiIndex.from_arrays([also["rank"], lead[also.index]]))
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
        (j_also, e_node[also_member], None, None),
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


def inputs(read) -> tuple[pd.DataFrame, ...]:
    """The model's frames, `read(name)` giving each object it reads as a DataFrame
    (xr_aligned, xr_clock, xr_keys, xr_member_steps, xr_member_phases, xr_members and the
    per-report xr_issues, xr_joins, xr_host_waits, xr_lane_phases), on the run clock and
    by member rank; unaligned ranks are left out."""
    members = read("xr_members")[MEMBER_COLUMNS].drop_duplicates(ignore_index=True)
    clock = read("xr_clock")
    coll = read("xr_aligned")[["pg", "seq", "op", "rank", "step", "start_ns", "end_ns", "on_gpu"]]
    keys = read("xr_keys")
    keys = keys[keys["matches"].eq(True)]
    calls = to_run_time(
        keys.dropna(subset=["cpu_start_ns", "cpu_end_ns"])[
            ["rank", "pg", "seq", "cpu_start_ns", "cpu_end_ns"]
        ],
        clock,
        ["cpu_start_ns", "cpu_end_ns"],
    )
    calls = calls.merge(
        keys.loc[keys["done_ns"].notna(), ["rank", "pg", "seq"]].assign(waited_later=True),
        on=["rank", "pg", "seq"],
        how="left",
    )
    waits = to_run_time(
        to_member_ranks(read("xr_host_waits").drop(columns="report"), members),
        clock,
        ["wait_start_ns", "wait_end_ns"],
    )
    calls = calls.merge(
        waits[["rank", "pg", "seq", "wait_start_ns", "wait_end_ns"]],
        on=["rank", "pg", "seq"],
        how="left",
    )
    coll = coll.merge(calls, on=["rank", "pg", "seq"], how="left")
    steps = to_run_time(
        read("xr_member_steps")[["rank", "step", "start_ns", "end_ns"]],
        clock,
        ["start_ns", "end_ns"],
    )
    issues = to_run_time(
        to_member_ranks(read("xr_issues").drop(columns="report"), members),
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
        to_member_ranks(read("xr_joins").drop(columns="report"), members),
        clock,
        ["start_ns", "idle_from_ns", "nccl_start_ns"],
    )
    labels = to_member_ranks(read("xr_lane_phases").drop(columns="report"), members)
    lane_device = _lane_devices(issues, labels)
    labels = labels.merge(lane_device, on=["rank", "device"])
    owned = labels["phase_start_ns"].notna()
    labels = labels.assign(busy_end_ns=labels["start_ns"] + labels["busy_ns"])  # drift-scaled
    labels = pd.concat(
        [
            to_run_time(
                labels[owned], clock, ["start_ns", "end_ns", "phase_start_ns", "busy_end_ns"]
            ),
            to_run_time(labels[~owned], clock, ["start_ns", "end_ns", "busy_end_ns"]),
        ],
        ignore_index=True,
    )
    labels["busy_ns"] = labels.pop("busy_end_ns") - labels["start_ns"]
    host = to_run_time(
        read("xr_member_phases")[["rank", "start_ns", "end_ns", "phase"]],
        clock,
        ["start_ns", "end_ns"],
    )
    return (
        coll,
        issues[["rank", "start_ns", "end_ns", "stream", "launch_ns", "ready_ns"]],
        joins[["rank", "start_ns", "idle_from_ns", "nccl_start_ns"]],
        steps,
        merge_labels(labels, host, steps),
    )


def merge_labels(
    gpu: pd.DataFrame, host: pd.DataFrame, steps: pd.DataFrame | None = None
) -> pd.DataFrame:
    """Per rank, one phase per instant (`xr_lane_phases`): where its GPU was busy, the phase
    of the work it ran; where it waited for the host to launch work, the host's phase range
    open then (`xr_member_phases`) if any, else BEFORE_FORWARD in a step of `steps` (rank,
    start_ns, end_ns) before its first phase range (a zero-code step's data loading, before
    its first forward's module range); elsewhere the phase of the work that ended the
    GPU's idleness. Rows: rank, start_ns, end_ns, phase, instance (the start of the phase
    range the time belongs to: which of the phase's ranges), range_busy_ns (the GPU's busy
    time in that whole range, NaN where it ran nothing)."""
    busy = (
        gpu.dropna(subset=["phase_start_ns"]).groupby(["rank", "phase_start_ns"])["busy_ns"].sum()
        if "busy_ns" in gpu
        else pd.Series(dtype=np.float64)
    )
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
            if steps is not None:
                before = _before_first_phase(a, steps[steps["rank"] == rank], h)
                before &= host_time & ~ok
                phase[before] = BEFORE_FORWARD
                instance[before] = -1.0  # (one per step: steps set them apart)
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
        return pd.DataFrame(
            columns=["rank", "start_ns", "end_ns", "phase", "instance", "range_busy_ns"]
        )
    merged = pd.concat(out, ignore_index=True)
    key = pd.MultiIndex.from_arrays([merged["rank"], merged["instance"]])
    return merged.assign(range_busy_ns=busy.reindex(key).to_numpy(np.float64))


def _before_first_phase(a: np.ndarray, steps: pd.DataFrame, host: pd.DataFrame) -> np.ndarray:
    """Whether each instant `a` lies in a step (of one rank) before the step's first host
    phase range starts (`host` sorted by start)."""
    if steps.empty:
        return np.zeros(len(a), bool)
    steps = steps.sort_values("start_ns")
    s0, s1 = steps["start_ns"].to_numpy(np.int64), steps["end_ns"].to_numpy(np.int64)
    h0 = host["start_ns"].to_numpy(np.int64)
    first = h0[np.minimum(np.searchsorted(h0, s0), len(h0) - 1)]  # first phase at or after
    first = np.where(first >= s0, np.minimum(first, s1), s1)
    i = np.searchsorted(s0, a, side="right") - 1
    j = np.maximum(i, 0)
    return (i >= 0) & (a < s1[j]) & (a < first[j])


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
