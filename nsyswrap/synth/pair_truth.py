"""What a fault pair's truth says besides step times: which fault it is (ranks, phase or
stage, steps, (rank, step) pairs, the link) and which joins the fault run's trace does
not record. From the scenarios and the generator's own simulation only."""

from __future__ import annotations

from nsyswrap.synth.program import AUTOGRAD_TID_OFFSET, ON_COMPUTE
from nsyswrap.synth.scenario import Scenario
from nsyswrap.synth.simulate import Simulation

HIDDEN = {
    "unrecorded_wait": "at the end of each step the host waits until its GPU has drained "
    "(it spins on a flag a kernel writes to pinned memory, say) and no call records it: "
    "it resumes sync_wake_ns after the last kernel ends (truth.hidden: per rank and step "
    "the idle host interval and the completion it waited for)",
    "autograd_join": "backward's launches are made by the autograd thread (TID = PID + "
    f"{AUTOGRAD_TID_OFFSET}); the main thread waits for it to finish, and no call records "
    "that join (truth.hidden: the autograd thread's last call end and the main thread's "
    "resumption)",
    "stream_order": "NCCL kernels run on the compute stream: each kernel after one waits for "
    "it by stream order alone (no event, no synchronising call)",
}


def _steps(sc: Scenario, steps) -> list[int]:
    return list(range(sc.steps)) if steps is None else sorted(steps)


def _slow_phases(sc: Scenario) -> list[dict]:
    return [
        {
            "kind": "slow_phase",
            "rank": s.rank,
            "phase": s.phase,
            "where": "host" if s.phase == "data_loading" else "gpu",
            "extra_ns": s.extra_ns,
            "steps": _steps(sc, s.steps),
        }
        for s in sc.planted()
    ]


def _plants(sc: Scenario) -> list[dict]:
    """Every planted fault of ``sc``, described, with the (rank, step) pairs it acts in."""
    out = _slow_phases(sc)
    out += [
        {
            "kind": "host_pause",
            "rank": p.rank,
            "phase": p.phase,
            "module": p.module,
            "dur_ns": p.dur_ns,
            "steps": [p.step],
        }
        for p in sc.pauses
    ]
    if sc.slow_stage:
        s = sc.slow_stage
        out.append(
            {
                "kind": "slow_stage",
                "stage": s.stage,
                "ranks": [r for r in range(sc.ranks) if sc.stage_of(r) == s.stage],
                "phases": ["forward", "backward"] if s.backward else ["forward"],
                "extra_ns_per_microbatch": {"forward": s.extra_ns, "backward": 2 * s.extra_ns}
                if s.backward
                else {"forward": s.extra_ns},
                "steps": _steps(sc, None),
            }
        )
    if sc.slow_attention:
        a = sc.slow_attention
        out.append(
            {
                "kind": "slow_attention",
                "rank": a.rank,
                "factor": a.factor,
                "phases": ["forward", "backward"] if a.backward else ["forward"],
                "steps": _steps(sc, None),
            }
        )
    if sc.slow_link:
        out.append(_slow_link(sc))
    return out


def _slow_link(sc: Scenario) -> dict:
    """The slow NIC: its host, the links (pairs of hosts) through it, and the links'
    bandwidth (bytes per ns, = GB/s) and latency as the simulation uses them: a ring
    all-reduce's bus bandwidth is the bandwidth of its slowest link (links.ring_transfer_ns)."""
    node, factor = sc.slow_link.node, sc.slow_link.factor
    nodes = (sc.ranks - 1) // sc.ranks_per_node + 1
    inside, across = sc.link_bytes_per_ns
    return {
        "kind": "slow_link",
        "node": node,
        "host": f"node{node}",
        "factor": factor,
        "links": [
            sorted([f"node{node}", f"node{other}"]) for other in range(nodes) if other != node
        ],
        "ranks_behind_it": [r for r in range(sc.ranks) if r // sc.ranks_per_node == node],
        "bytes_per_ns": {"inside_a_host": inside, "across": across, "slow_link": across / factor},
        "latency_ns": {
            "inside_a_host": sc.link_latency_ns[0],
            "across": sc.link_latency_ns[1],
            "slow_link": sc.link_latency_ns[1] * factor,
        },
        "steps": _steps(sc, None),
    }


def fault_identity(fault: Scenario, fixed: Scenario) -> dict:
    """The fault run's plants that the fixed run does not have as they are (a straggler the
    fix only shrinks is listed with ``fixed_extra_ns``), their ranks and steps, and the
    (rank, step) pairs a rank-bound plant acts in."""
    kept = _plants(fixed)
    plants = []
    for p in _plants(fault):
        if p in kept:
            continue
        same = [
            q
            for q in kept
            if q["kind"] == p["kind"] == "slow_phase"
            and (q["rank"], q["phase"]) == (p["rank"], p["phase"])
        ]
        plants.append({**p, "fixed_extra_ns": same[0]["extra_ns"]} if same else p)
    ranks = sorted(
        {p["rank"] for p in plants if "rank" in p} | {r for p in plants for r in p.get("ranks", ())}
    )
    pairs = sorted(
        {(p["rank"], s) for p in plants if "rank" in p for s in p["steps"]}
        | {(r, s) for p in plants for r in p.get("ranks", ()) for s in p["steps"]}
    )
    return {
        "plants": plants,
        "ranks": ranks,
        "steps": sorted({s for p in plants for s in p["steps"]}),
        "rank_steps": [list(p) for p in pairs],
    }


def hidden_joins(sim: Simulation) -> list[dict]:
    """The kinds of join the fault run's reports record no call for, with the ranks and how
    many (each one's interval is in truth.hidden)."""
    sc = sim.scenario
    counts: dict[str, dict[int, int]] = {}
    for tr in sim.traces:
        for kind, *_ in tr.hidden:
            counts.setdefault(kind, {}).setdefault(tr.rank, 0)
            counts[kind][tr.rank] += 1
    out = [
        {
            "kind": kind,
            "what": HIDDEN[kind],
            "ranks": sorted(by_rank),
            "count": sum(by_rank.values()),
        }
        for kind, by_rank in counts.items()
    ]
    plain = not (sc.moe or sc.pipeline or sc.ring)
    if plain and sc.collectives_per_step and any(o in ON_COMPUTE for o in sc.comm_overlap):
        out.append(
            {"kind": "stream_order", "what": HIDDEN["stream_order"], "ranks": list(range(sc.ranks))}
        )
    return out
