"""Who else is told when a step, a phase or a collective starts and ends: the always-on
sampler (`nsyswrap.sample`). The annotation helpers call every observer in `OBSERVERS`
after opening and before closing their NVTX range; with none installed that costs one
test of an empty list.

An observer is an `Observer`: it overrides the calls it wants to hear.
"""
from __future__ import annotations

from collections.abc import Callable

OBSERVERS: list[Observer] = []


class Observer:
    """Told of every step, phase and collective; each call does nothing unless overridden."""

    def step_begin(self, i: int) -> None:
        """Step i has opened."""

    def step_end(self) -> None:
        """The open step is closing."""

    def phase_begin(self, name: str) -> None:
        """Phase `name` has opened."""

    def phase_end(self, name: str) -> None:
        """Phase `name` is closing."""

    def collective_begin(self, op: str, pg: str, size: int, nbytes: int, seq: int):
        """A collective call starts (as its `coll:` range says); returns a token or None."""
        return None

    def collective_end(self, token, work, async_op: bool) -> None:
        """The call returned `work`; with `async_op` the work completes later."""


def observe(observer: Observer, first: bool = False) -> Callable[[], None]:
    """Tell `observer` from now on (before the others when `first`: a step is then open
    for it before another observer opens a phase in it); returns the call that stops it."""
    OBSERVERS.insert(0 if first else len(OBSERVERS), observer)

    def stop() -> None:
        if observer in OBSERVERS:
            OBSERVERS.remove(observer)

    return stop
