"""Start-up annotation for `nsyswrap launch --annotate`, without touching the user's code.

The launcher puts `startup/` (a sitecustomize.py) on PYTHONPATH and sets
NSYSWRAP_ANNOTATE=modules,collectives,steps; as soon as the program imports torch, the chosen
helpers are installed. Automatic steps cover whole iterations: step 0 opens at the first
data fetch (a `DataLoader` iterated) or the first forward with autograd on, whichever comes
first; step i closes when the first optimizer that ever stepped finishes its step, and step
i+1 opens right then, so it holds the data loading before its forward. A step that sees no
forward with autograd on before it closes (what runs after the last optimizer step, up to
the program's exit) is marked unfinished and is no step (nsyswrap.annotate.steps). A
program that calls `nsyswrap.step` itself keeps its own steps.
"""
from __future__ import annotations

import functools
import importlib.abc
import importlib.util
import os
import sys
import weakref
from typing import Callable

from nsyswrap.annotate.handle import Annotation
from nsyswrap.errors import NsysWrapError

VARIABLE = "NSYSWRAP_ANNOTATE"
KINDS = ("modules", "collectives", "steps")


def parse_kinds(text: str, where: str = "--annotate") -> tuple[str, ...]:
    """'modules,steps' -> ('modules', 'steps'); 'all' -> every kind; '' -> ()."""
    kinds = tuple(k.strip() for k in text.split(",") if k.strip())
    if kinds == ("all",):
        return KINDS
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise NsysWrapError(where, f"unknown kind {unknown[0]!r}", f"choose from {', '.join(KINDS)} or all")
    return tuple(k for k in KINDS if k in kinds)


def install_from_env() -> None:
    """Annotate this program as NSYSWRAP_ANNOTATE says, once torch is imported; never raises."""
    try:
        kinds = parse_kinds(os.environ.get(VARIABLE, ""), VARIABLE)
    except NsysWrapError as exc:
        _warn(exc)
        return
    if not kinds:
        return
    if "torch" in sys.modules:
        _install_quietly(kinds)
    else:
        sys.meta_path.insert(0, _AfterImport("torch", lambda: _install_quietly(kinds)))


def install(kinds: tuple[str, ...]) -> Annotation:
    """Install the helpers for `kinds` now (torch must be importable)."""
    import torch

    from nsyswrap.annotate.ranges import nvtx_calls

    nvtx_calls()  # fail early and clearly when the nvtx package is missing
    handles = []
    if "steps" in kinds:  # first: the step range must open before the outermost module's range
        handles.append(automatic_steps())
    if "modules" in kinds:
        from nsyswrap.annotate.modules import annotate_all

        handles.append(annotate_all())
    if "collectives" in kinds and torch.distributed.is_available():
        from nsyswrap.annotate.collectives import annotate_collectives

        handles.append(annotate_collectives())
    return Annotation(h.remove for h in handles)


def automatic_steps() -> Annotation:
    """Step ranges from the training loop's own rhythm, each a whole iteration: from the end
    of the previous optimizer step (the first: the first data fetch or forward) to the end
    of its own (module doc)."""
    import torch
    from torch.nn.modules.module import register_module_forward_pre_hook
    from torch.optim.optimizer import register_optimizer_step_post_hook
    from torch.utils.data import DataLoader

    from nsyswrap.annotate import steps

    state = {"next": 0, "clock": None}

    def open_step(module, args) -> None:
        if steps.is_manual() or not torch.is_grad_enabled():
            return
        if steps.is_open():
            steps.confirm()
        else:
            steps.begin(state["next"])

    def close_step(optimizer, args, kwargs) -> None:
        if steps.is_manual():
            return
        if state["clock"] is None:
            state["clock"] = weakref.ref(optimizer)
        if state["clock"]() is optimizer and steps.is_open():
            steps.end()
            state["next"] += 1
            steps.begin(state["next"], confirmed=False)

    iterate = DataLoader.__iter__

    @functools.wraps(iterate)
    def first_fetch(loader):
        if not steps.is_manual() and not steps.is_open():
            steps.begin(state["next"], confirmed=False)
        return iterate(loader)

    DataLoader.__iter__ = first_fetch
    handles = [register_module_forward_pre_hook(open_step), register_optimizer_step_post_hook(close_step)]
    restore = functools.partial(setattr, DataLoader, "__iter__", iterate)
    return Annotation([*(h.remove for h in handles), restore, _end_unconfirmed])


def _end_unconfirmed() -> None:
    """Taking the annotation off closes a step opened ahead of work that never came."""
    from nsyswrap.annotate import steps

    if steps.is_open() and not steps.is_confirmed() and not steps.is_manual():
        steps.end()


def _install_quietly(kinds: tuple[str, ...]) -> None:
    try:
        install(kinds)
    except Exception as exc:  # a training run must never die because annotation failed
        _warn(exc)


def _warn(exc: Exception) -> None:
    print(f"nsyswrap: automatic annotation is off: {exc}", file=sys.stderr)


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs `callback` right after module `name` has been imported for the first time."""

    def __init__(self, name: str, callback: Callable[[], None]):
        self.name, self.callback = name, callback

    def find_spec(self, fullname, path, target=None):
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_then_callback(module) -> None:
            exec_module(module)
            self.callback()

        spec.loader.exec_module = exec_then_callback
        return spec
