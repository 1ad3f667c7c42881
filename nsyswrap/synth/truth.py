"""Ground truth of a generated run, by brute force over the simulated intervals (no SQL).

Times are integer ns on each report's session clock unless named ``aligned``:
``aligned = utcEpochNs[r] + t + offset_ns[r]`` (true time on rank 0's clock).
Per (rank, device) and window the GPU time splits exactly into
``compute_only + comm_only + both + other_only + idle = span``, where compute = kernels
that are not NCCL, comm = NCCL kernels and peer-to-peer copies, other = the remaining
copies and memsets, idle = no GPU activity at all.
"""

from __future__ import annotations

import json
from bisect import bisect_left, bisect_right
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from nsyswrap.errors import NsysWrapError
from nsyswrap.synth.catalog import API_INDEX
from nsyswrap.synth.intervals import Intervals, Measure, gaps, intersect, union
from nsyswrap.synth.simulate import Simulation
from nsyswrap.synth.trace import RankTrace

PTOP = 10
STREAM_SYNC = API_INDEX["cudaStreamSynchronize_v3020"]
OPTIONAL = ("exchanges", "clock_jumps", "planted_gain", "hidden", "pauses", "pair")
TRUE_CAUSE = {"stream_wait": "host_bound"}  # a planted mechanism -> the gap's cause


@dataclass(frozen=True)
class Truth:
    """What a correct analysis of the generated reports must find (JSON: see to_dict)."""

    scenario: dict
    ranks: list[dict]  # rank, report, pid, hostname, node, local_rank, devices, utc_epoch_ns, ...
    offset_ns: list[int]  # per rank: utcEpochNs + t + offset_ns is aligned time
    devices: list[dict]  # per (rank, device): window + ledger + per-step ledgers
    idle_gaps: list[dict]  # rank, device, start_ns, end_ns, dur_ns, cause, planted
    nccl_kernels: list[
        dict
    ]  # rank, device, correlation_id, start_ns, end_ns, pg, seq, op, bytes, overlap_ns
    collectives: list[
        dict
    ]  # matched (pg, seq): per rank aligned start/end + wait, last rank, transfer
    unmatched_collectives: list[dict]
    straggler: dict | None
    mismatches: list[dict]  # planted extra collectives: rank, step, pg, seq, op, bytes
    planted_gain: dict | None = None  # what removing the plant saves per step (planted_gain())
    # only in runs that have them (left out of the JSON otherwise, so older truths stay):
    exchanges: list[dict] | None = None  # all_to_all and send/recv: members end apart
    clock_jumps: list[dict] | None = None  # node, host, ranks, at_aligned_ns, at_session_ns, size
    hidden: list[dict] | None = None  # joins no call records: rank, kind, step, start/end, ...
    pauses: list[dict] | None = None  # planted host pauses: rank, step, phase, start_ns, end_ns
    pair: dict | None = None  # a fault pair's truth (nsyswrap.synth.pairs.pair_truth)

    def to_dict(self) -> dict:
        data = asdict(self)
        return {k: v for k, v in data.items() if v is not None or k not in OPTIONAL}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1) + "\n"

    @classmethod
    def from_dict(cls, data: dict) -> Truth:
        return cls(**data)

    @classmethod
    def load(cls, path: str | Path) -> Truth:
        return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))


def ledger(m: dict[str, Measure], lo: int, hi: int) -> dict[str, int]:
    """Exact split of [lo, hi) into compute/comm/both/other/idle ns."""
    c, k, b, a = m["compute"](lo, hi), m["comm"](lo, hi), m["both"](lo, hi), m["any"](lo, hi)
    return {
        "span_ns": hi - lo,
        "compute_only_ns": c - b,
        "comm_only_ns": k - b,
        "both_ns": b,
        "other_only_ns": a - (c + k - b),
        "idle_ns": (hi - lo) - a,
        "compute_busy_ns": c,
        "comm_busy_ns": k,
    }


COMPUTE, COMM, OTHER = 0, 1, 2


@dataclass(frozen=True)
class DeviceActivity:
    """All GPU activity of one device, sorted by start: ends, class, launch-call start."""

    start: list[int]
    end: list[int]
    cls: list[int]
    launch: list[int]

    def intervals(self, cls: int | None = None) -> Intervals:
        return [
            (s, e) for s, e, c in zip(self.start, self.end, self.cls) if cls is None or c == cls
        ]

    def launches_at(self, t: int) -> list[int]:
        """Launch-call starts of the activities that start at ``t``."""
        i = bisect_left(self.start, t)
        j = bisect_right(self.start, t)
        return self.launch[i:j]


def _column(a) -> np.ndarray:
    return np.frombuffer(a, dtype=np.int64) if len(a) else np.zeros(0, dtype=np.int64)


class RankView:
    """One rank's trace on its session clock, grouped by device."""

    def __init__(self, trace: RankTrace):
        off = trace.session_start
        if list(trace.r_corr[-1:]) != [len(trace.r_corr)]:
            raise RuntimeError("correlationIds must be 1..n in call order")
        launch = _column(trace.r_start) - off
        self.syncs = union(
            [
                (s - off, e - off)
                for s, e, a in zip(trace.r_start, trace.r_end, trace.r_api)
                if a == STREAM_SYNC
            ]
        )
        stream_device = np.array([s.device for s in trace.streams], dtype=np.int64)
        type_class = np.array([COMM if k.is_nccl else COMPUTE for k in trace.kernel_types] or [0])
        copies = [
            (s, e, st, corr, COMM if kind == PTOP else OTHER)
            for s, e, st, corr, _b, kind, *_ in trace.memcpys
        ]
        copies += [(s, e, st, corr, OTHER) for s, e, st, corr, _b in trace.memsets]
        c = np.array(copies, dtype=np.int64).reshape(-1, 5)
        start = np.concatenate([_column(trace.k_start), c[:, 0]]) - off
        end = np.concatenate([_column(trace.k_end), c[:, 1]]) - off
        device = stream_device[np.concatenate([_column(trace.k_stream), c[:, 2]])]
        corr = np.concatenate([_column(trace.k_corr), c[:, 3]])
        cls = np.concatenate([type_class[_column(trace.k_type)], c[:, 4]])
        self.devices: dict[int, DeviceActivity] = {}
        for d in trace.devices:
            idx = np.flatnonzero(device == d)
            idx = idx[np.argsort(start[idx], kind="stable")]
            self.devices[d] = DeviceActivity(
                start[idx].tolist(),
                end[idx].tolist(),
                cls[idx].tolist(),
                launch[corr[idx] - 1].tolist(),
            )

    def measures(self, device: int) -> dict[str, Measure]:
        act = self.devices[device]
        compute = union(act.intervals(COMPUTE))
        comm = union(act.intervals(COMM))
        return {
            "compute": Measure(compute),
            "comm": Measure(comm),
            "both": Measure(intersect(compute, comm)),
            "any": Measure(union(act.intervals())),
        }


def classify_gap(start: int, end: int, syncs: Measure, launches_at_end: list[int]) -> str:
    """Why the device idled over [start, end): ``other`` if the op ending the gap was launched
    before the gap began; else ``sync`` if cudaStreamSynchronize calls cover at least half of
    the gap; else ``host_bound``."""
    if min(launches_at_end) < start:
        return "other"
    return "sync" if 2 * syncs(start, end) >= end - start else "host_bound"


def compute_truth(
    sim: Simulation,
    report_names: list[str],
    unplanted: Simulation | None = None,
    balanced: Simulation | None = None,
) -> Truth:
    """The truth of ``sim``; its planted gain against ``unplanted`` and, for a hot expert,
    ``balanced`` (the run with the hot expert's routing removed altogether)."""
    sc = sim.scenario
    traces = sim.traces
    offsets = [traces[0].clock_error - t.clock_error for t in traces]
    devices, idle, nccl = [], [], []
    for tr in traces:
        for rows, found in zip((devices, idle, nccl), _rank_truth(tr, sc)):
            rows.extend(found)
    collectives, unmatched = _collectives(sim, offsets)
    exchanges = [c for c in collectives if not c["barrier"]]
    collectives = [
        {k: v for k, v in c.items() if k != "barrier"} for c in collectives if c["barrier"]
    ]
    return Truth(
        scenario=sc.to_dict(),
        ranks=[
            _rank_info(tr, name, offsets[tr.rank], traces[0].drift_ppb)
            for tr, name in zip(traces, report_names)
        ],
        offset_ns=offsets,
        devices=devices,
        idle_gaps=idle,
        nccl_kernels=nccl,
        collectives=collectives,
        unmatched_collectives=unmatched,
        straggler=sc.to_dict()["straggler"],
        mismatches=[
            {"rank": tr.rank, "step": step, "pg": pg, "seq": seq, "op": op, "bytes": nbytes}
            for tr in traces
            for step, pg, seq, op, nbytes in tr.extras
        ],
        exchanges=exchanges or None,
        clock_jumps=_clock_jumps(sim, offsets),
        planted_gain=None if unplanted is None else planted_gain(sim, unplanted, balanced),
        hidden=_session_rows(traces, "hidden", HIDDEN_FIELDS),
        pauses=_session_rows(traces, "pauses", PAUSE_FIELDS),
    )


def _rank_truth(tr: RankTrace, sc) -> tuple[list[dict], list[dict], list[dict]]:
    """One rank's device ledgers, idle gaps and NCCL kernels, device by device."""
    view = RankView(tr)
    sync_measure = Measure(view.syncs)
    off = tr.session_start
    planted = {(d, s - off, e - off): cause for d, s, e, cause in tr.planted_gaps}
    devices, idle, nccl = [], [], []
    for device in tr.devices:
        act = view.devices[device]
        if not act.start:
            continue
        m = view.measures(device)
        lo, hi = act.start[0], max(act.end)
        steps = [
            {"step": i, "start_ns": s - off, "end_ns": e - off, **ledger(m, s - off, e - off)}
            for i, s, e in tr.steps
        ]
        devices.append(
            {
                "rank": tr.rank,
                "device": device,
                "start_ns": lo,
                "end_ns": hi,
                **ledger(m, lo, hi),
                "steps": steps,
            }
        )
        idle += _idle_gaps(tr, sc, device, act, sync_measure, planted)
        nccl += _nccl_kernels(tr, device, m["compute"])
    if planted:
        raise NsysWrapError(
            f"scenario {sc.name!r}",
            f"planted gaps {sorted(planted)} on rank {tr.rank} are not idle gaps",
            "plant gaps where no other stream is busy",
        )
    return devices, idle, nccl


def _idle_gaps(
    tr: RankTrace, sc, device: int, act: DeviceActivity, syncs: Measure, planted: dict
) -> list[dict]:
    """The device's idle gaps of at least min_gap_ns and the planted ones (which it takes
    out of ``planted``), with their causes; a planted gap of another cause is an error."""
    out = []
    for gs, ge in gaps(act.intervals(), act.start[0], max(act.end)):
        key = (device, gs, ge)
        if ge - gs < sc.min_gap_ns and key not in planted:
            continue
        cause = classify_gap(gs, ge, syncs, act.launches_at(ge))
        out.append(
            {
                "rank": tr.rank,
                "device": device,
                "start_ns": gs,
                "end_ns": ge,
                "dur_ns": ge - gs,
                "cause": cause,
                "planted": key in planted,
            }
        )
        want = planted.pop(key, cause)
        if TRUE_CAUSE.get(want, want) != cause:
            raise NsysWrapError(
                f"scenario {sc.name!r}",
                f"the gap planted on rank {tr.rank} at {gs} ns came out as {cause!r}",
                "plant it later in the phase (the host must run ahead of the GPU)",
            )
    return out


def _nccl_kernels(tr: RankTrace, device: int, compute: Measure) -> list[dict]:
    """The device's NCCL kernels with their overlap with compute."""
    off = tr.session_start
    out = []
    for index, pg, seq, op, nbytes in tr.nccl:
        st = tr.streams[tr.k_stream[index]]
        if st.device != device:
            continue
        s, e = tr.k_start[index] - off, tr.k_end[index] - off
        out.append(
            {
                "rank": tr.rank,
                "device": device,
                "correlation_id": tr.k_corr[index],
                "start_ns": s,
                "end_ns": e,
                "pg": pg,
                "seq": seq,
                "op": op,
                "bytes": nbytes,
                "overlap_ns": compute(s, e),
            }
        )
    return out


HIDDEN_FIELDS = ("kind", "step", "start_ns", "end_ns", "completion_ns")
PAUSE_FIELDS = ("step", "phase", "start_ns", "end_ns")


def _session_rows(traces: list[RankTrace], attr: str, fields: tuple[str, ...]) -> list | None:
    """Every rank's RankTrace.<attr> tuples as rows named by ``fields`` (after ``rank``),
    the ``_ns`` ones in session ns (None stays None); None when there are none."""
    rows = [
        {
            "rank": tr.rank,
            **{
                f: v - tr.session_start if f.endswith("_ns") and v is not None else v
                for f, v in zip(fields, values)
            },
        }
        for tr in traces
        for values in getattr(tr, attr)
    ]
    return rows or None


def run_step_times(sim: Simulation) -> dict[int, int]:
    """Per step, the run's step time in true ns: a step ends when its last rank ends it, and
    takes from the previous step's end (the first step: from its latest start on any rank)."""
    ends: dict[int, int] = {}
    starts: dict[int, int] = {}
    for tr in sim.traces:
        for step, start, end in tr.steps:
            ends[step] = max(ends.get(step, end), end)
            starts[step] = max(starts.get(step, start), start)
    out, previous = {}, None
    for step in sorted(ends):
        out[step] = ends[step] - (starts[step] if previous is None else previous)
        previous = ends[step]
    return out


def planted_gain(sim: Simulation, unplanted: Simulation, balanced: Simulation | None) -> dict:
    """What the planted slow-downs cost: per step, the run's step time (run_step_times) as
    generated, the same scenario's step time simulated again without them, and the gain;
    for a hot expert also ``balanced_routing``, the same against ``balanced``."""
    gain = _gain_by_step(sim, unplanted)
    out = {
        "definition": "run step time = latest end of the step on any rank - latest end of the "
        "previous step (first step: its latest start); gain = step time - step time "
        "simulated again without the plant",
        **gain,
    }
    if balanced is not None:
        out["definition"] += (
            "; a hot expert's plant: its rank's extra expert work (the run again with its "
            "experts taking as long as for the median other expert's tokens, routing as "
            "planted); balanced_routing: the run again without its routing factor"
        )
        out["balanced_routing"] = _gain_by_step(sim, balanced)
    return out


def _gain_by_step(sim: Simulation, unplanted: Simulation) -> dict:
    recorded, clean = run_step_times(sim), run_step_times(unplanted)
    steps = [
        {
            "step": s,
            "recorded_ns": recorded[s],
            "unplanted_ns": clean[s],
            "gain_ns": recorded[s] - clean[s],
        }
        for s in sorted(recorded)
    ]
    total = sum(r["gain_ns"] for r in steps)
    return {"steps": steps, "gain_ns_total": total}  # per step: gain_ns_total / len(steps)


def _clock_jumps(sim: Simulation, offsets: list[int]) -> list[dict] | None:
    """The planted clock jump: its node's ranks, the true instant in aligned time (rank 0's
    clock) and on each rank's session clock (the first time read jump_ns later), its size."""
    on_node = [tr for tr in sim.traces if tr.jump_at is not None]
    if not on_node:
        return None
    first = on_node[0]
    align = first.utc_epoch_ns - first.session_start + offsets[first.rank]
    return [
        {
            "node": first.node,
            "host": first.hostname,
            "ranks": [tr.rank for tr in on_node],
            "at_aligned_ns": first.jump_at + align,
            "at_session_ns": [
                {"rank": tr.rank, "session_ns": tr.session_ns(tr.jump_at)} for tr in on_node
            ],
            "size_ns": first.jump_ns,
        }
    ]


def _rank_info(tr: RankTrace, report: str, offset: int, ref_ppb: int) -> dict:
    drift = {"drift_ppb": ref_ppb - tr.drift_ppb} if tr.drift_ppb or ref_ppb else {}
    return {
        **drift,
        "rank": tr.rank,
        "report": report,
        "pid": tr.pid,
        "hostname": tr.hostname,
        "node": tr.node,
        "local_rank": tr.local_rank,
        "devices": list(tr.devices),
        "utc_epoch_ns": tr.utc_epoch_ns,
        "clock_error_ns": tr.clock_error,
        "offset_ns": offset,
        "duration_ns": tr.end - tr.session_start,
        "kernels": len(tr.k_start),
        "api_calls": len(tr.r_start),
        "nvtx_ranges": len(tr.nvtx),
    }


def _collectives(sim: Simulation, offsets: list[int]) -> tuple[list[dict], list[dict]]:
    """Matched collectives (every rank took part) with waits; the rest as unmatched.

    A barrier (all members end at one instant, + jitter) has wait = last arrival - own
    arrival and transfer = the last rank's duration. An exchange (``barrier`` False:
    all_to_all, send/recv; each member ends when its own transfers are done) has, per
    member, wait = min(last arrival, own end) - own arrival and transfer_ns = the rest of
    its duration, and ``skew_ns`` = last - first arrival."""
    traces = sim.traces
    meta = [{index: (op, nbytes) for index, _pg, _seq, op, nbytes in tr.nccl} for tr in traces]
    matched, unmatched = [], []
    for c in sim.collectives:
        ranks = sorted({p[0] for p in c.participants})
        if ranks != sim.scenario.group_members(c.pg):
            unmatched.append({"pg": c.pg, "seq": c.seq, "ranks": ranks})
            continue
        rows = []
        for rank, device, index, start, end in c.participants:
            tr = traces[rank]
            align = tr.utc_epoch_ns - tr.session_start + offsets[rank]  # true -> aligned
            op, nbytes = meta[rank][index]
            rows.append(
                {
                    "rank": rank,
                    "device": device,
                    "op": op,
                    "bytes": nbytes,
                    "start_aligned_ns": start + align,
                    "end_aligned_ns": end + align,
                }
            )
        last = max(rows, key=lambda r: r["start_aligned_ns"])
        for r in rows:
            r["wait_ns"] = last["start_aligned_ns"] - r["start_aligned_ns"]
        entry = {
            "pg": c.pg,
            "seq": c.seq,
            "last_rank": last["rank"],
            "transfer_ns": last["end_aligned_ns"] - last["start_aligned_ns"],
            "same_content": len({(r["op"], r["bytes"]) for r in rows}) == 1,
            "per_rank": rows,
            "barrier": c.barrier,
        }
        if not c.barrier:
            first, latest = min(r["start_aligned_ns"] for r in rows), last["start_aligned_ns"]
            for r in rows:
                start, end = r["start_aligned_ns"], r["end_aligned_ns"]
                r["wait_ns"] = max(0, min(latest, end) - start)
                r["transfer_ns"] = end - start - r["wait_ns"]
            entry |= {"skew_ns": latest - first, "ops": sorted({r["op"] for r in rows})}
        matched.append(entry)
    return matched, unmatched
