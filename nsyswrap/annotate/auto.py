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

`sample` (`nsyswrap launch --sample`) starts the sampler `$NSYSWRAP_SAMPLE` describes and
marks the automatic steps' phases (AutomaticPhases): `before_forward` (from the step's
start to its first forward, when the step starts earlier), `forward` (the step's first
outermost forward), `backward` (from there to the optimizer's step: the loss, backward
and the gradient all-reduce) and `optimizer`.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.util
import os
import sys
import threading
import weakref
from collections.abc import Callable

from nsyswrap.annotate import phases
from nsyswrap.annotate.handle import Annotation
from nsyswrap.annotate.observers import Observer, observe
from nsyswrap.errors import NsysWrapError

VARIABLE = "NSYSWRAP_ANNOTATE"
KINDS = ("modules", "collectives", "steps", "sample")
ALL = ("modules", "collectives", "steps")  # what `all` means: every kind of NVTX range


def parse_kinds(text: str, where: str = "--annotate") -> tuple[str, ...]:
    """'modules,steps' -> ('modules', 'steps'); 'all' -> every kind of range; '' -> ();
    'sample' brings 'steps' (the sampler's phases are the automatic steps')."""
    kinds = tuple(k.strip() for k in text.split(",") if k.strip())
    if kinds == ("all",):
        return ALL
    if "sample" in kinds:
        kinds += ("steps",)
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise NsysWrapError(
            where, f"unknown kind {unknown[0]!r}", f"choose from {', '.join(KINDS)} or all"
        )
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
    phases = AutomaticPhases() if "sample" in kinds else None
    if phases is not None:  # its forward pre-hook runs before the one that opens the step
        handles.append(phases.before())
    if "steps" in kinds:  # first: the step range must open before the outermost module's range
        handles.append(automatic_steps())
    if "modules" in kinds:
        from nsyswrap.annotate.modules import annotate_all

        handles.append(annotate_all())
    if phases is not None:  # its forward hook runs after the module ranges have closed
        handles.append(phases.after())
    if "collectives" in kinds and torch.distributed.is_available():
        from nsyswrap.annotate.collectives import annotate_collectives

        handles.append(annotate_collectives())
    if "sample" in kinds:
        from nsyswrap.sample.sampler import from_environment

        started = from_environment()
        if started is not None:
            handles.append(Annotation([started.close]))
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
    handles = [
        register_module_forward_pre_hook(open_step),
        register_optimizer_step_post_hook(close_step),
    ]
    restore = functools.partial(setattr, DataLoader, "__iter__", iterate)
    return Annotation([*(h.remove for h in handles), restore, _end_unconfirmed])


def _end_unconfirmed() -> None:
    """Taking the annotation off closes a step opened ahead of work that never came."""
    from nsyswrap.annotate import steps

    if steps.is_open() and not steps.is_confirmed() and not steps.is_manual():
        steps.end()


class AutomaticPhases(Observer):
    """The phases of the automatic steps (see the module doc), as `nsyswrap.phase` ranges:
    an observer of the steps (it closes the open phase before the step's range closes)
    and hooks on every module's forward and every optimizer's step (on the thread that
    installed them: the training loop's)."""

    def __init__(self):
        self.stage: str | None = None  # the open phase
        self.depth = 0  # module forwards running on the loop's thread
        self.entering = False  # an outermost forward is starting (the step may open in it)
        self.thread = threading.get_ident()

    def _to(self, stage: str | None) -> None:
        if self.stage is not None:
            phases.end(self.stage)
        self.stage = None if phases.is_manual() else stage  # the program's own phases win
        if self.stage is not None:
            phases.begin(stage)

    def step_begin(self, i: int) -> None:
        from nsyswrap.annotate import steps

        if not steps.is_manual():
            self._to("forward" if self.entering else "before_forward")

    def step_end(self) -> None:
        self._to(None)

    def before(self) -> Annotation:
        """The forward pre-hook (install it before the steps' hooks) and the observer."""
        import torch
        from torch.nn.modules.module import register_module_forward_pre_hook

        def pre(module, args) -> None:
            if threading.get_ident() != self.thread:
                return
            self.depth += 1
            if self.depth == 1 and torch.is_grad_enabled():
                self.entering = True
                if self.stage == "before_forward":
                    self._to("forward")

        return Annotation([register_module_forward_pre_hook(pre).remove, observe(self)])

    def after(self) -> Annotation:
        """The forward hook and the optimizer hooks (install them after the module ranges)."""
        from torch.nn.modules.module import register_module_forward_hook
        from torch.optim.optimizer import register_optimizer_step_pre_hook

        def post(module, args, result) -> None:
            if threading.get_ident() != self.thread or not self.depth:
                return
            self.depth -= 1
            if self.depth == 0 and self.entering:
                self.entering = False
                if self.stage == "forward":
                    self._to("backward")

        def optimizer_starts(optimizer, args, kwargs) -> None:
            if self.stage in ("before_forward", "forward", "backward"):
                self._to("optimizer")

        handles = [
            register_module_forward_hook(post, always_call=True),
            register_optimizer_step_pre_hook(optimizer_starts),
        ]
        return Annotation(h.remove for h in handles)


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
