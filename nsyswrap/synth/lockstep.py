"""Cross-rank physics: match collectives by (pg, seq) and run rank programs in lockstep.

An NCCL kernel starts on each rank when that rank gets to it. A collective (a post without
``send``: all_reduce, all_gather, ...) is a true barrier: it ends on every rank at the
same true instant, last arrival + transfer time, plus a seeded jitter below the
scenario's end_jitter_ns per member (0: ends exactly together). An exchange (posts with
``send``: all_to_all, send/recv) is not: each member ends when its own sends and receives
are done (exchange_ends), so members end apart.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from math import ceil

import numpy as np

from nsyswrap.synth.timeline import Timeline
from nsyswrap.synth.trace import Stream


@dataclass
class Post:
    """One rank/device's NCCL kernel for a collective, waiting for its end."""

    timeline: Timeline
    device: int
    stream: Stream
    index: int  # kernel index in the rank's trace
    start: int
    transfer: int
    send: dict[int, int] | None = None  # exchanges: bytes this member sends to each rank


@dataclass(frozen=True)
class Resolved:
    """A collective after resolution: per participant (rank, device, kernel index, start, end).
    ``barrier``: all members end at one instant (+ jitter); False for exchanges."""

    pg: int
    seq: int
    participants: tuple[tuple[int, int, int, int, int], ...]
    transfer: int
    barrier: bool = True


@dataclass(frozen=True)
class Links:
    """Transfer figures of exchanges: bytes per ns and latency (ns), within a node and across."""

    node_of: object  # rank -> node
    bytes_per_ns: tuple[int, int]
    latency_ns: tuple[int, int]
    slowdown: object = None  # {nodes} -> factor (links.slowdown); None: every link healthy

    def time(self, a: int, b: int, nbytes: int) -> tuple[int, int]:
        """(ns to push ``nbytes`` from rank a to rank b, latency until they have arrived)."""
        across = int(self.node_of(a) != self.node_of(b))
        if a == b:  # a copy inside the GPU
            return -(-nbytes // (4 * self.bytes_per_ns[0])), 0
        push, latency = -(-nbytes // self.bytes_per_ns[across]), self.latency_ns[across]
        factor = self.slowdown({self.node_of(a), self.node_of(b)}) if self.slowdown else 1
        return (push, latency) if factor == 1 else (ceil(push * factor), ceil(latency * factor))


def exchange_ends(
    arrivals: dict[int, int], sends: dict[int, dict[int, int]], links: Links
) -> dict[int, int]:
    """Per member: when its kernel ends. The bytes from i to j start flowing when both have
    arrived (max of their arrivals) and take bytes / bandwidth; the sender is done with
    them then, the receiver a link latency later. A member ends when all its sends and
    receives are done (at least one latency after its arrival: the handshake)."""
    ends = {r: a + min(links.latency_ns) for r, a in arrivals.items()}
    for i, row in sends.items():
        for j, nbytes in row.items():
            if not nbytes or j not in arrivals:
                continue
            push, latency = links.time(i, j, nbytes)
            begin = max(arrivals[i], arrivals[j])
            ends[i] = max(ends[i], begin + push)
            ends[j] = max(ends[j], begin + push + latency)
    return ends


class Collectives:
    """Collectives issued but not yet ended, and the ones already resolved."""

    def __init__(
        self,
        ranks: int,
        seed: int,
        members=None,
        end_jitter_ns: int = 200,
        links: Links | None = None,
    ):
        self.ranks = ranks
        self.links = links
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
        if any(p.send is not None for p in posts):
            self._end_exchange(key, posts)
            return
        last = max(p.start for p in posts)
        transfer = max(p.transfer for p in posts)
        jitter = (
            self._jitter.integers(0, self.end_jitter_ns, len(posts)).tolist()
            if self.end_jitter_ns
            else [0] * len(posts)
        )
        rows = []
        for p, j in zip(posts, jitter):
            end = last + transfer + j
            p.timeline.trace.k_end[p.index] = end
            p.stream.free_at = end
            p.timeline.unresolved -= 1
            rows.append((p.timeline.trace.rank, p.device, p.index, p.start, end))
        self.resolved.append(Resolved(key[0], key[1], tuple(rows), transfer))

    def _end_exchange(self, key: tuple[int, int], posts: list[Post]) -> None:
        """Each member's end from exchange_ends (one GPU per rank in exchanging shapes)."""
        rank = {id(p): p.timeline.trace.rank for p in posts}
        ends = exchange_ends(
            {rank[id(p)]: p.start for p in posts},
            {rank[id(p)]: p.send or {} for p in posts},
            self.links,
        )
        rows = []
        for p in posts:
            end = ends[rank[id(p)]]
            p.timeline.trace.k_end[p.index] = end
            p.stream.free_at = end
            p.timeline.unresolved -= 1
            rows.append((rank[id(p)], p.device, p.index, p.start, end))
        transfer = max(ends.values()) - max(p.start for p in posts)
        self.resolved.append(Resolved(key[0], key[1], tuple(rows), transfer, barrier=False))


def run_lockstep(
    programs: list[Iterator[None]], timelines: list[Timeline], colls: Collectives
) -> None:
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
