"""The what-if stage at scale: nsyswrap.crossrank.whatif's model and analysis (the replay
of every candidate fix, the critical path, the replay check) on the frames of a synthetic
data-parallel run, made here with the replay's own max-plus rules (no SQLite: the stage
alone is measured, from the run objects it reads to the frames it writes).

Per rank and step, segments of its host time (xr_segments' rows) each launching GPU work
that starts after its launch (5 us) and the lane's previous work: data loading, then
COLLECTIVES / STEPS all-reduces over all ranks, each launched after some forward or
backward work and waiting for the work before it (its arrival: the later of that and the
previous all-reduce's end; it ends at the last arrival plus its transfer), the rest of
backward, the optimizer (its GPU work waits for the last all-reduce), then a
synchronising call that waits for the GPU: the step's end. Work durations are drawn per
rank, step and segment; one rank is slow in data loading.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from nsyswrap.crossrank.lanes import segment_frame

PHASES = ("data_loading", "forward", "backward", "optimizer")
LATENCY_NS = 5_000


class _Rank:
    """One rank's host and GPU lane as the frames are made: its rows so far."""

    def __init__(self, rank: int):
        self.rank, self.host, self.gpu, self.rows = rank, 0, 0, []

    def work(self, step, phase, host_ns, gpu_ns=0, join=None) -> None:
        """A work segment launching `gpu_ns` of GPU work at its start (after `join`: the
        NCCL kernel (its call number, its end) its first kernel waits for)."""
        start, before = self.host, self.gpu
        ready = max(before, start + LATENCY_NS, join[1] if join else 0)
        end = ready + gpu_ns if gpu_ns else before
        row = {
            "rank": self.rank,
            "seg": len(self.rows),
            "kind": "work",
            "start_ns": start,
            "end_ns": start + host_ns,
            "step": step,
            "phase": phase,
            "phase_start_ns": start,
            "host_ns": host_ns,
            "gpu_ns": gpu_ns,
            "gpu_from_ns": before or np.nan,
            "gpu_end_ns": end or np.nan,
            "lane_ns": gpu_ns,
            "lane_idle_ns": 0,
        }
        if gpu_ns:
            row.update(bound_launch_ns=start, bound_start_ns=ready, bound_latency_ns=LATENCY_NS)
        if join:
            row.update(
                join_start_ns=ready,
                join_call=join[0],
                join_nccl_end_ns=join[1],
                join_busy_ns=gpu_ns,
                join_idle_ns=0,
            )
        self.rows.append(row)
        self.host, self.gpu = start + host_ns, end

    def sync(self, step) -> None:
        """A blocking call waiting for the lane's end (its return 2 us after)."""
        start, end = self.host, max(self.host + 3_000, self.gpu + 2_000)
        self.rows.append(
            {
                "rank": self.rank,
                "seg": len(self.rows),
                "kind": "wait",
                "start_ns": start,
                "end_ns": end,
                "step": step,
                "phase": "optimizer",
                "phase_start_ns": start,
                "host_ns": 0,
                "waits_for": "gpu",
                "for_seg": len(self.rows) - 1,
                "for_end_ns": self.gpu,
                "call_ns": 3_000,
                "wake_ns": end - self.gpu,
                "gpu_ns": 0,
                "gpu_from_ns": self.gpu,
                "gpu_end_ns": self.gpu,
                "lane_ns": 0,
                "lane_idle_ns": 0,
            }
        )
        self.host = end


def frames(ranks: int, collectives: int, steps: int, seed: int = 0) -> tuple[pd.DataFrame, ...]:
    """(coll, segs, calls, steps) as nsyswrap.crossrank.lanes.inputs gives them."""
    rng = np.random.default_rng(seed)
    per_step = max(1, collectives // steps)
    lanes = [_Rank(r) for r in range(ranks)]
    coll, calls, step_rows, seq, ended = [], [], [], 0, 0
    for s in range(steps):
        starts = [lane.host for lane in lanes]
        loading = rng.integers(150_000, 250_000, ranks)
        loading[ranks // 3] += 300_000
        for lane, ns in zip(lanes, loading):
            lane.work(s, "data_loading", int(ns), 20_000)
        for k in range(per_step):
            phase = "forward" if k < per_step // 2 else "backward"
            for lane, ns in zip(lanes, rng.integers(20_000, 60_000, ranks)):
                lane.work(s, phase, 5_000, int(ns))
            arrive = [max(lane.gpu, lane.host + LATENCY_NS, ended) for lane in lanes]
            ended = max(arrive) + 40_000
            for lane, at in zip(lanes, arrive):
                coll.append(
                    {
                        "pg": "0",
                        "seq": seq,
                        "op": "all_reduce",
                        "rank": lane.rank,
                        "step": s,
                        "start_ns": at,
                        "end_ns": ended,
                        "on_gpu": True,
                    }
                )
                calls.append(
                    {
                        "rank": lane.rank,
                        "call": seq,
                        "stream": 24,
                        "start_ns": at,
                        "end_ns": ended,
                        "launch_ns": lane.host,
                        "ready_ns": lane.gpu,
                        "seg": len(lane.rows),
                    }
                )
            seq += 1
        for lane, ns in zip(lanes, rng.integers(50_000, 80_000, ranks)):
            lane.work(s, "backward", 5_000, int(ns))
            lane.work(s, "optimizer", 5_000, int(rng.integers(20_000, 30_000)), (seq - 1, ended))
            lane.sync(s)
            step_rows.append(
                {"rank": lane.rank, "step": s, "start_ns": starts[lane.rank], "end_ns": lane.host}
            )
            lane.work(np.nan, None, 2_000)
    segs = segment_frame([row for lane in lanes for row in lane.rows])
    return pd.DataFrame(coll), segs, pd.DataFrame(calls), pd.DataFrame(step_rows)


def stage(ranks: int, collectives: int, steps: int) -> dict:
    """Time the what-if stage on a synthetic run of this size."""
    import time

    from nsyswrap.crossrank import lanes, whatif

    inputs = frames(ranks, collectives, steps)
    started = time.perf_counter()
    model = lanes.build_model(*inputs)
    built = time.perf_counter()
    out = whatif.analyse(model)
    done = time.perf_counter()
    return {
        "model_s": built - started,
        "analyse_s": done - built,
        "whatif_s": done - started,
        "events": len(model.graph.t),
        "levels": len(model.graph.levels),
        "candidates": int(
            out["whatif"].groupby(["kind", "rank", "phase", "pg", "op"], dropna=False).ngroups
        ),
        "residual_max_ns": int(out["check"]["residual_ns"].max()),
    }
