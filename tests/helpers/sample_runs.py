"""`planted_samples`: sample files of a small data-parallel run with a planted straggler,
written as the sampler writes them, and the truth they were made from.

Every step on every rank is data_loading, forward, backward, then a blocking all_reduce
(pg 0) that ends on every rank at once (the last arrival plus TRANSFER_NS), then the
optimizer; the next step starts when the optimizer ends. `slow` makes one rank's data
loading longer in steps [first, stop). Times are chosen on one true clock; each host reads
it with its own offset (its monotonic clock and its wall clock are off by HOST_OFFSET_NS
per host index), so aligning the ranks must take the offsets back out.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

PHASES = {"data_loading": 200_000, "forward": 300_000, "backward": 400_000}
OPTIMIZER_NS = 100_000
TRANSFER_NS = 50_000
UTC0 = 1_800_000_000_000_000_000
MONO0 = 5_000_000_000_000
HOST_OFFSET_NS = 3_000_123  # host k's clocks read k times this much ahead of the truth
JITTER_NS = (0, 1_000, 2_000, 3_000, 500, 1_500, 2_500, 3_500)  # per rank, so ranks differ a little


@dataclass
class Planted:
    waits: dict[int, int] = field(default_factory=dict)  # rank -> waited ns over sampled steps
    sampled: list[int] = field(default_factory=list)


def planted_samples(
    out: Path,
    ranks: int = 4,
    steps: int = 60,
    every: int = 2,
    slow: tuple[int, int, int, int] | None = (2, 20, 30, 5_000_000),
    hosts: int = 1,
    cut_last: bool = False,
    timer: str = "host",
) -> Planted:
    """Write samples.rank<R>.jsonl for `ranks` ranks on `hosts` hosts into `out`; `slow` is
    (rank, first step, stop step, extra data-loading ns)."""
    out.mkdir(parents=True, exist_ok=True)
    host_of = {r: r * hosts // ranks for r in range(ranks)}
    lines: dict[int, list[dict]] = {r: [] for r in range(ranks)}
    for r in range(ranks):
        k = host_of[r]
        lines[r].append(
            {
                "v": 1,
                "kind": "run",
                "rank": r,
                "host": f"node{k}",
                "pid": 100 + r,
                "utc_epoch_ns": UTC0 + k * HOST_OFFSET_NS,
                "monotonic_ns": MONO0 + r * 7,
                "every": every,
                "start": 0,
                "end": None,
                "ranks": None,
                "flush_every": 50,
                "nsyswrap": "test",
            }
        )
    truth, t = Planted(), 1_000_000
    for i in range(steps):
        arrivals, records = {}, {}
        for r in range(ranks):
            own = t + host_of[r] * HOST_OFFSET_NS - r * 7  # this rank's clock reads the truth so
            edge, phases = own, []
            for name, ns in PHASES.items():
                ns += JITTER_NS[r % len(JITTER_NS)] if name == "forward" else 0
                if slow and name == "data_loading" and r == slow[0] and slow[1] <= i < slow[2]:
                    ns += slow[3]
                phases.append({"name": name, "start_ns": edge, "end_ns": edge + ns, "host_ns": ns})
                edge += ns
            arrivals[r] = edge - own + t
            records[r] = (own, phases)
        end = max(arrivals.values()) + TRANSFER_NS
        if i % every == 0:
            truth.sampled.append(i)
            for r, (own, phases) in records.items():
                to_own = own - t
                truth.waits[r] = truth.waits.get(r, 0) + max(arrivals.values()) - arrivals[r]
                coll = {
                    "op": "all_reduce",
                    "pg": "0",
                    "size": ranks,
                    "bytes": 4096,
                    "seq": i,
                    "start_ns": arrivals[r] + to_own,
                    "end_ns": end + to_own,
                    "async": False,
                }
                lines[r].append(
                    {
                        "v": 1,
                        "kind": "step",
                        "step": i,
                        "timer": timer,
                        "utc_ns": UTC0 + own,
                        "start_ns": own,
                        "end_ns": end + OPTIMIZER_NS + to_own,
                        "phases": [
                            *phases,
                            {
                                "name": "optimizer",
                                "start_ns": end + to_own,
                                "end_ns": end + to_own + OPTIMIZER_NS,
                                "host_ns": OPTIMIZER_NS,
                            },
                        ],
                        "collectives": [coll],
                        "dropped": 0,
                    }
                )
        t = end + OPTIMIZER_NS
    for r in range(ranks):
        killed = cut_last and r == ranks - 1  # killed while writing its last step: no end record
        if not killed:
            lines[r].append(
                {
                    "v": 1,
                    "kind": "end",
                    "sampled": len(truth.sampled),
                    "skipped": 0,
                    "unresolved": 0,
                }
            )
        text = "".join(json.dumps(x) + "\n" for x in lines[r])
        if killed:
            text = text[: -len(json.dumps(lines[r][-1])) // 2]
        (out / f"samples.rank{r}.jsonl").write_text(text)
    return truth
