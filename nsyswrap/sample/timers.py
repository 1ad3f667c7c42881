"""The sampler's clocks: host timers always, CUDA events while the step runs on a GPU.

`now()` is the rank's clock: ns since the sampler started (`perf_counter_ns`, monotonic).
`EventPool` lends CUDA timing events and takes them back once read: at most `size` exist
at a time, and when all are lent the sampler skips a step rather than wait for one. An
event is read only once `query()` says it has completed, so the training never waits
(no synchronize) for the sampler.
"""

from __future__ import annotations

import sys
import time
from time import perf_counter_ns

NS_PER_MS = 1_000_000
POOL_SIZE = 4096


def cuda_in_use() -> bool:
    """Whether this process has started CUDA (the step's work then runs on a GPU)."""
    torch = sys.modules.get("torch")
    return torch is not None and torch.cuda.is_initialized()


def timing_event():
    import torch

    return torch.cuda.Event(enable_timing=True)


class EventPool:
    """At most `size` CUDA timing events (made by `make`): `take()` one (None when all are
    lent), `give` them back once read."""

    def __init__(self, size: int = POOL_SIZE, make=timing_event):
        self.size, self.make, self.free, self.made = size, make, [], 0

    def take(self):
        if self.free:
            return self.free.pop()
        if self.made >= self.size:
            return None
        self.made += 1
        return self.make()

    def give(self, events) -> None:
        self.free.extend(e for e in events if e is not None)


class Clock:
    """The rank's clock: `utc_epoch_ns` is its zero as wall-clock UTC, `zero` the host's
    monotonic clock then (`perf_counter_ns` is CLOCK_MONOTONIC, one clock for the whole
    host on Linux)."""

    def __init__(self):
        self.zero = perf_counter_ns()
        self.utc_epoch_ns = time.time_ns()

    def now(self) -> int:
        return perf_counter_ns() - self.zero


def elapsed_ns(first, later) -> int:
    """ns from CUDA event `first` to `later` (both completed)."""
    return round(first.elapsed_time(later) * NS_PER_MS)
