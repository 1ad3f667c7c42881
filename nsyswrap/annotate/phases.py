"""Phases of a training step: `with nsyswrap.phase("data_loading"): ...`.

A phase is a push/pop NVTX range in the `nsyswrap` domain (as a hand-made marker inside a
`step:<i>` range: the report's phases are the ranges nested in a step), and the observers
(the always-on sampler) are told when it opens and closes. Mark phases on the thread that
runs the training loop, inside a step.
"""

from __future__ import annotations

from nsyswrap.annotate.observers import INSIDE
from nsyswrap.annotate.ranges import nvtx_calls

_attributes: dict[str, object] = {}  # phase name -> NVTX event attributes (names repeat every step)
_marked = [False]  # the program marks phases itself: the automatic phases stand aside


class phase:
    """`with nsyswrap.phase(name):` marks one phase of the current step."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = str(name)
        _marked[0] = True

    def __enter__(self) -> phase:
        begin(self.name)
        return self

    def __exit__(self, *exc) -> None:
        end(self.name)


def begin(name: str) -> None:
    """Open phase `name` (a range pushed on this thread)."""
    calls = nvtx_calls()
    attributes = _attributes.get(name)
    if attributes is None:
        attributes = _attributes[name] = calls.attributes(name)
    calls.push(attributes)
    for observer in INSIDE:
        observer.phase_begin(name)


def is_manual() -> bool:
    """Whether the program marks phases itself (with `phase`)."""
    return _marked[0]


def end(name: str) -> None:
    """Close phase `name`, the innermost range open on this thread."""
    for observer in INSIDE:
        observer.phase_end(name)
    nvtx_calls().pop()
