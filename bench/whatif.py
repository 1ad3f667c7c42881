"""The what-if stage at scale: nsyswrap.crossrank.whatif's model and analysis (the replay
of every candidate fix, the critical path, the replay check) on the frames of a synthetic
data-parallel run, made here with the replay's own max-plus rules (no SQLite: the stage
alone is measured, from the run objects it reads to the frames it writes).

Per rank and step: data loading, then COLLECTIVES / STEPS all-reduces over all ranks, each
issued after some work (its arrival: its issue point or the previous one's end, whichever
is later; it ends at the last arrival plus its transfer), the rest of backward, the
optimizer waiting for the last all-reduce, the step's end. Work durations are drawn per
rank, step and segment; one rank is slow in data loading.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

PHASES = ("data_loading", "forward", "backward", "optimizer")


def frames(ranks: int, collectives: int, steps: int, seed: int = 0) -> tuple[pd.DataFrame, ...]:
    """(coll, issues, joins, steps, labels) as nsyswrap.crossrank.lanes.inputs gives them."""
    rng = np.random.default_rng(seed)
    per_step = max(1, collectives // steps)
    lane = np.zeros(ranks, np.int64)
    coll, issues, joins, step_rows, labels = [], [], [], [], []
    seq = 0
    for s in range(steps):
        start = lane.copy()
        loading = rng.integers(150_000, 250_000, ranks)
        loading[ranks // 3] += 300_000
        lane = lane + loading
        labels.append((start, lane.copy(), "data_loading"))
        ended = np.zeros(ranks, np.int64)
        for k in range(per_step):
            before = lane.copy()
            lane = lane + rng.integers(20_000, 60_000, ranks)
            labels.append((before, lane.copy(), "forward" if k < per_step // 2 else "backward"))
            arrive = np.maximum(lane, ended)
            end = arrive.max() + 40_000
            coll.append(
                pd.DataFrame(
                    {
                        "pg": "0",
                        "seq": seq,
                        "op": "all_reduce",
                        "rank": np.arange(ranks),
                        "step": s,
                        "start_ns": arrive,
                        "end_ns": end,
                        "on_gpu": True,
                        "cpu_start_ns": np.nan,
                        "cpu_end_ns": np.nan,
                    }
                )
            )
            issues.append(
                pd.DataFrame(
                    {
                        "rank": np.arange(ranks),
                        "start_ns": arrive,
                        "stream": "1:0:24",
                        "launch_ns": lane - 5_000,
                        "ready_ns": lane,
                    }
                )
            )
            ended = np.full(ranks, end)
            seq += 1
        before = lane.copy()
        lane = lane + rng.integers(50_000, 80_000, ranks)
        labels.append((before, lane.copy(), "backward"))
        join = np.maximum(lane, ended) + 1_000
        joins.append(
            pd.DataFrame(
                {
                    "rank": np.arange(ranks),
                    "start_ns": join,
                    "idle_from_ns": lane,
                    "nccl_start_ns": coll[-1]["start_ns"].to_numpy(),
                }
            )
        )
        end = join + rng.integers(20_000, 30_000, ranks)
        labels.append((lane.copy(), end, "optimizer"))
        step_rows.append(
            pd.DataFrame({"rank": np.arange(ranks), "step": s, "start_ns": start, "end_ns": end})
        )
        lane = end + 2_000
    label = pd.concat(
        [
            pd.DataFrame({"rank": np.arange(ranks), "start_ns": a, "end_ns": b, "phase": p})
            for a, b, p in labels
        ],
        ignore_index=True,
    )
    return (
        pd.concat(coll, ignore_index=True),
        pd.concat(issues, ignore_index=True),
        pd.concat(joins, ignore_index=True),
        pd.concat(step_rows, ignore_index=True),
        label,
    )


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
