"""Build every rank's timeline for a scenario (in memory; nothing is written here)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nsyswrap.synth.interleaved import InterleavedProgram
from nsyswrap.synth.links import slowdown
from nsyswrap.synth.lockstep import Collectives, Links, Resolved, run_lockstep
from nsyswrap.synth.moe import MoEProgram
from nsyswrap.synth.pipeline import PipelineProgram
from nsyswrap.synth.program import Device, RankProgram
from nsyswrap.synth.ring import RingProgram
from nsyswrap.synth.scenario import Scenario
from nsyswrap.synth.timeline import Timeline
from nsyswrap.synth.trace import RankTrace, Stream, recorded

PID_BASE = 144  # rank processes are PIDs 144, 145, ... on each node (as in a container)
CAPTURE_TAIL_NS = 1_000_000
HIGH_PRIORITY = 4294967295  # stream priority -1, stored as unsigned 32-bit like real exports


@dataclass
class Simulation:
    scenario: Scenario
    traces: list[RankTrace]
    collectives: list[Resolved]


def program_of(sc: Scenario) -> type[RankProgram]:
    """The training loop of the scenario's shape."""
    if sc.ring:
        return RingProgram
    if sc.pipeline and sc.pipeline.chunks > 1:
        return InterleavedProgram
    return MoEProgram if sc.moe else PipelineProgram if sc.pipeline else RankProgram


def make_devices(trace: RankTrace, sc: Scenario) -> list[Device]:
    """Per GPU: a compute stream (the null stream, id 7 + 8*(context-1)), a high-priority
    NCCL stream, side streams and (other shapes) a high-priority NCCL stream per group of
    its own (program_of(sc).extra_groups)."""
    devices = []
    other_ids = iter(range(24, 1 << 31, 4))

    def stream(device: int, sid: int, flag: int = 2, priority: int = 0) -> Stream:
        s = Stream(len(trace.streams), device, device + 1, sid, priority=priority, flag=flag)
        trace.streams.append(s)
        return s

    for device in trace.devices:
        compute = stream(device, 7 + 8 * device, flag=3)
        nccl = stream(device, next(other_ids), priority=HIGH_PRIORITY)
        sides = [stream(device, next(other_ids)) for _ in range(sc.side_streams)]
        tp_nccl = stream(device, next(other_ids), priority=HIGH_PRIORITY) if sc.tp else None
        comms = {
            pg: stream(device, next(other_ids), priority=HIGH_PRIORITY)
            for pg in program_of(sc).extra_groups(sc, trace.rank)
        }
        devices.append(Device(device, compute, sides, nccl, tp_nccl, comms))
    return devices


def simulate(sc: Scenario) -> Simulation:
    """Run all ranks in lockstep; raise NsysWrapError if the scenario is inconsistent."""
    sc.validate()
    rng = np.random.default_rng([sc.seed, 0])
    errors = sc.clock_errors(lambda lo, hi: int(rng.integers(lo, hi + 1)))
    links = Links(
        lambda r: r // sc.ranks_per_node,
        sc.link_bytes_per_ns,
        sc.link_latency_ns,
        (lambda nodes: slowdown(sc, nodes)) if sc.slow_link else None,
    )
    colls = Collectives(sc.ranks, sc.seed, sc.group_members, sc.end_jitter_ns, links)
    traces, timelines, programs = [], [], []
    for rank in range(sc.ranks):
        node, local = divmod(rank, sc.ranks_per_node)
        session_start = int(rng.integers(0, sc.start_stagger_ns + 1))
        if rank % sc.ranks_per_report:  # one capture: its first rank's session and clock
            session_start, errors[rank] = traces[-1].session_start, errors[rank - 1]
        elif local and sc.drift_ppb(rank):  # the host clock gained since its first report started
            elapsed = session_start - traces[rank - local].session_start
            errors[rank] += recorded(elapsed, sc.drift_ppb(rank)) - elapsed
        trace = RankTrace(
            rank=rank,
            node=node,
            local_rank=local,
            pid=PID_BASE + local,
            hostname=f"node{node}",
            session_start=session_start,
            clock_error=errors[rank],
            drift_ppb=sc.drift_ppb(rank),
            devices=[local * sc.devices_per_rank + j for j in range(sc.devices_per_rank)],
        )
        devices = make_devices(trace, sc)
        start = session_start + sc.startup_ns + int(rng.integers(0, sc.startup_ns // 10 + 1))
        tl = Timeline(trace, sc, start)
        traces.append(trace)
        timelines.append(tl)
        programs.append(program_of(sc)(tl, sc, devices, colls).run())
    run_lockstep(programs, timelines, colls)
    for tl in timelines:
        tl.trace.end = max(tl.t, *(s.free_at for s in tl.trace.streams)) + CAPTURE_TAIL_NS
    jump = sc.clock_jump
    if jump is not None:  # the node's clock steps when its lowest rank starts that step
        on_node = [tr for tr in traces if tr.node == jump.node]
        at = next(start for step, start, _ in on_node[0].steps if step == jump.step)
        for tr in on_node:
            tr.jump_at, tr.jump_ns = at, jump.size_ns
    return Simulation(sc, traces, colls.resolved)
