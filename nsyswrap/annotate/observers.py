"""Who else is told when a step, a phase or a collective starts and ends: the always-on
sampler (`nsyswrap.sample`) and the zero-code phases. The annotation helpers call the
observers after opening and before closing their NVTX range: those in `STEPS` of every
step, those in `INSIDE` of every phase and collective. With none there, that costs one test
of an empty list; an observer that needs the inside of some steps only (the sampler, of
its sampled steps) joins `INSIDE` for those steps alone.

An observer is an `Observer`: it overrides the calls it wants to hear.
"""

from __future__ import annotations

from collections.abc import Callable

STEPS: list[Observer] = []
INSIDE: list[Observer] = []


class Observer:
    """Told of steps (and, while in INSIDE, of phases and collectives); each call does
    nothing unless overridden."""

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
    """Tell `observer` of every step from now on (before the others when `first`: a step is
    then open for it before another observer opens a phase in it); returns the call that
    stops it (of INSIDE too)."""
    STEPS.insert(0 if first else len(STEPS), observer)

    def stop() -> None:
        for observers in (STEPS, INSIDE):
            if observer in observers:
                observers.remove(observer)

    return stop
