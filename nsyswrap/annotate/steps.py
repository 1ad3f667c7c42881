"""Training steps as `step:<i>` ranges, and the capture window that starts and stops nsys.

`step(i)` opens step i and closes the step before it, so it works as a call at the top of
each step or as `with nsyswrap.step(i): ...`. Steps are start/end ranges (not push/pop:
closing one never closes a range the program opened inside it, e.g. an `optimizer` range
around the optimizer step that ends an automatic step); mark them on the thread that runs
the training loop.

A step opened ahead of its work (`begin(i, confirmed=False)`: automatic steps open the next
step as the previous one ends) that is closed before any work confirmed it leaves the mark
`step:<i> unfinished` (UNFINISHED) just inside its end: it held no iteration (what ran after
the training loop), and the step definition (`step_ranges` in sql/_macros/metrics.sql)
leaves such a range out.

While a step inside the capture window is open, a `capture` range (domain `nsyswrap`) is
open around the steps and, when CUDA is in use, cudaProfilerStart/Stop bracket it: nsys
started with `--capture-range=nvtx --nvtx-capture=capture@nsyswrap` (what `nsyswrap launch
--steps` passes) or `--capture-range=cudaProfilerApi` records just those steps.
"""

from __future__ import annotations

import atexit
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass, replace

from nsyswrap.annotate.observers import STEPS
from nsyswrap.annotate.ranges import nvtx_calls
from nsyswrap.annotate.ranks import env_rank, parse_ranks
from nsyswrap.errors import NsysWrapError

CAPTURE_RANGE = "capture"
UNFINISHED = "step:{} unfinished"
STEPS_VARIABLE, EVERY_VARIABLE = "NSYSWRAP_CAPTURE_STEPS", "NSYSWRAP_CAPTURE_EVERY"


@dataclass(frozen=True)
class CaptureWindow:
    """Steps start..stop-1, again every `every` steps if set, on `ranks` (None: every rank)."""

    start: int
    stop: int
    every: int | None = None
    ranks: frozenset[int] | None = None

    def __contains__(self, i: int) -> bool:
        if self.ranks is not None and env_rank() not in self.ranks:
            return False
        if i < self.start:
            return False
        offset = i - self.start
        return (offset % self.every if self.every else offset) < self.stop - self.start


def parse_window(
    steps: str, every: int | str | None = None, where: str = "--steps"
) -> CaptureWindow:
    """'100:110' (and every=1000) -> CaptureWindow(100, 110, 1000)."""
    start, colon, stop = steps.partition(":")
    if not (colon and start.strip().isdigit() and stop.strip().isdigit()) or int(stop) <= int(
        start
    ):
        raise NsysWrapError(
            where,
            f"{steps!r} is not a step window",
            "write START:STOP with START < STOP, e.g. 100:110",
        )
    if every is not None and (not str(every).isdigit() or int(every) < int(stop) - int(start)):
        raise NsysWrapError(
            where,
            f"every={every!r} is not a whole number of steps at least as long as the window",
            f"use a value >= {int(stop) - int(start)} or leave it out",
        )
    return CaptureWindow(int(start), int(stop), int(every) if every is not None else None)


@dataclass
class _State:
    open_step: int | None = None  # the step whose range is open
    range_id: object = None  # its NVTX range id
    confirmed: bool = True  # work of the open step was seen (see the module doc)
    manual: bool = False  # the program calls step() itself: automatic steps stand aside
    capturing: bool = False
    window: CaptureWindow | None = None
    window_read: bool = False  # the environment is read once, unless capture_window() came first
    exit_hook: bool = False


_state = _State()


def capture_window(
    steps: str | None, every: int | None = None, ranks: Iterable[int] | str | None = None
) -> CaptureWindow | None:
    """Capture only steps START:STOP ('100:110'), again every N steps, on these ranks ('0,1' or
    a set); steps=None captures everything. Overrides what `nsyswrap launch --steps` set."""
    window = parse_window(steps, every, "capture_window") if steps is not None else None
    if window is not None and ranks is not None:
        chosen = (
            parse_ranks(ranks, "capture_window(ranks=...)")
            if isinstance(ranks, str)
            else frozenset(ranks)
        )
        window = replace(window, ranks=chosen)
    _state.window, _state.window_read = window, True
    return window


class step:
    """Mark training step i: call `nsyswrap.step(i)` at the top of a step, or
    `with nsyswrap.step(i):`."""

    def __init__(self, i: int):
        self.index = int(i)
        _state.manual = True
        begin(self.index)

    def __enter__(self) -> step:
        return self

    def __exit__(self, *exc) -> None:
        if _state.open_step == self.index:
            end()


def begin(i: int, confirmed: bool = True) -> None:
    """Close the open step, start or stop capture for step i, and open step i (ahead of
    its work when not `confirmed`: see the module doc)."""
    end()
    _follow_window(i)
    calls = nvtx_calls()
    _state.range_id = calls.start(calls.attributes(f"step:{i}"))
    _state.open_step, _state.confirmed = i, confirmed
    for observer in STEPS:
        observer.step_begin(i)
    if not _state.exit_hook:
        atexit.register(_close_all)
        _state.exit_hook = True


def confirm() -> None:
    """The open step's work has begun: it is a step of its own."""
    _state.confirmed = True


def end() -> None:
    """Close the open step, if any (marked unfinished when no work confirmed it)."""
    if _state.open_step is not None:
        for observer in STEPS:
            observer.step_end()
        calls = nvtx_calls()
        if not _state.confirmed:
            calls.mark(UNFINISHED.format(_state.open_step))
        calls.end(_state.range_id)
        _state.open_step, _state.range_id, _state.confirmed = None, None, True


def is_confirmed() -> bool:
    return _state.confirmed


def is_open() -> bool:
    return _state.open_step is not None


def is_manual() -> bool:
    return _state.manual


def _window() -> CaptureWindow | None:
    if not _state.window_read:
        _state.window_read = True
        steps = os.environ.get(STEPS_VARIABLE)
        if steps:
            _state.window = parse_window(
                steps, os.environ.get(EVERY_VARIABLE) or None, STEPS_VARIABLE
            )
    return _state.window


def _follow_window(i: int) -> None:
    window = _window()
    inside = window is not None and i in window
    if inside and not _state.capturing:
        calls = nvtx_calls()
        calls.push(calls.attributes(CAPTURE_RANGE))
        _cuda_profiler("start")
        _state.capturing = True
    elif not inside and _state.capturing:
        _cuda_profiler("stop")
        nvtx_calls().pop()
        _state.capturing = False


def _cuda_profiler(action: str) -> None:
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        getattr(torch.cuda.profiler, action)()


def _close_all() -> None:
    end()
    if _state.capturing:
        _cuda_profiler("stop")
        nvtx_calls().pop()
        _state.capturing = False
