"""Cross-rank physics: match collectives by (pg, seq) and run rank programs in lockstep.

An NCCL kernel starts on each rank when that rank gets to it and ends on every rank
at the same true instant, last arrival + transfer time, plus a seeded jitter below the
scenario's end_jitter_ns per member (0: ends exactly together).
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from nsyswrap.synth.timeline import Timeline
from nsyswrap.synth.trace import Stream


@dataclass
class Post:
    """One rank/device's NCCL kernel for a collective, waiting for its end."""

    timeline: Timeline
    device: int
    stream: Stream
    index: int       # kernel index in the rank's trace
    start: int
    transfer: int


@dataclass(frozen=True)
class Resolved:
    """A collective after resolution: per participant (rank, device, kernel index, start, end)."""

    pg: int
    seq: int
    participants: tuple[tuple[int, int, int, int, int], ...]
    transfer: int


class Collectives:
    """Collectives issued but not yet ended, and the ones already resolved."""

    def __init__(self, ranks: int, seed: int, members=None, end_jitter_ns: int = 200):
        self.ranks = ranks
        self.members = members or (lambda pg: range(ranks))  # ranks of a process group
        self.pending: dict[tuple[int, int], list[Post]] = {}
        self.resolved: list[Resolved] = []
        self._jitter = np.random.default_rng([seed, 1_000_003])
        self.end_jitter_ns = end_jitter_ns

    def post(self, pg: int, seq: int, posts: list[Post]) -> None:
        self.pending.setdefault((pg, seq), []).extend(posts)

    def resolve(self, finished: set[int]) -> bool:
        """End every collective that all unfinished ranks have issued; True if any ended."""
        done = []
        for key in sorted(self.pending):
            posts = self.pending[key]
            waiting = set(self.members(key[0])) - finished
            if waiting <= {p.timeline.trace.rank for p in posts}:
                done.append(key)
                self._end(key, posts)
        for key in done:
            del self.pending[key]
        return bool(done)

    def _end(self, key: tuple[int, int], posts: list[Post]) -> None:
        last = max(p.start for p in posts)
        transfer = max(p.transfer for p in posts)
        jitter = (self._jitter.integers(0, self.end_jitter_ns, len(posts)).tolist() if self.end_jitter_ns
                  else [0] * len(posts))
        rows = []
        for p, j in zip(posts, jitter):
            end = last + transfer + j
            p.timeline.trace.k_end[p.index] = end
            p.stream.free_at = end
            p.timeline.unresolved -= 1
            rows.append((p.timeline.trace.rank, p.device, p.index, p.start, end))
        self.resolved.append(Resolved(key[0], key[1], tuple(rows), transfer))


def run_lockstep(programs: list[Iterator[None]], timelines: list[Timeline], colls: Collectives) -> None:
    """Advance each rank's program until it waits for a collective, resolve, repeat."""
    finished: set[int] = set()
    while len(finished) < len(programs):
        moved = False
        for rank, program in enumerate(programs):
            if rank in finished or timelines[rank].unresolved:
                continue
            moved = True
            try:
                next(program)
            except StopIteration:
                finished.add(rank)
        if not (colls.resolve(finished) or moved):
            raise RuntimeError("collectives deadlocked; the rank programs disagree on order")
