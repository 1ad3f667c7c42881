"""NVTX ranges around each module's forward (`fwd:<path>`) and backward (`bwd:<path>`).

Forward ranges are push/pop ranges on the calling thread, closed even when forward raises.
Backward ranges come from hooks on the autograd graph, not on the module: a `bwd:` range
starts when autograd reaches the nodes that made the module's outputs and ends when every
node made inside the module's forward has run. Tensors, parameters and state_dict keys stay
exactly as they were (module backward hooks would wrap tensors and break in-place ops).
"""

from __future__ import annotations

import fnmatch
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator

import torch
from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook

from nsyswrap.annotate.handle import Annotation
from nsyswrap.annotate.ranges import nvtx_calls
from nsyswrap.errors import NsysWrapError

# Every module of a model given to annotate_model; annotate_all leaves these alone.
_explicit: weakref.WeakSet[torch.nn.Module] = weakref.WeakSet()


def annotate_model(
    model: torch.nn.Module,
    *,
    depth: int | None = None,
    include: Iterable[str] = (),
    exclude: Iterable[str] = (),
    leaf_only: bool = False,
) -> Annotation:
    """Add fwd/bwd ranges to the modules of `model`; returns a handle whose remove() undoes it.

    Paths are those of `model.named_modules()`, the root named by its class. `depth` keeps
    paths with at most that many dots plus one (root 0, `layers` 1, `layers.3` 2); `include`
    and `exclude` are globs on the path (`layers.*.attn`); `leaf_only` keeps modules without
    children.
    """
    if not isinstance(model, torch.nn.Module):
        raise NsysWrapError(
            "annotate_model",
            f"expected a torch.nn.Module, got {type(model).__name__}",
            "pass the model (or its DDP/FSDP wrapper) itself",
        )
    names = dict(select_modules(model, depth, tuple(include), tuple(exclude), leaf_only))
    if not names:
        raise NsysWrapError(
            "annotate_model",
            "no module matched the filters",
            "loosen depth/include/exclude (paths look like 'layers.0.attn')",
        )
    if any(module in _explicit for module in model.modules()):
        raise NsysWrapError(
            "annotate_model",
            f"{type(model).__name__} is already annotated",
            "call remove() on the first handle before annotating again",
        )
    ranges = ModuleRanges(lambda module, outermost: names.get(module))
    handles = []
    for module in names:
        handles.append(module.register_forward_pre_hook(ranges.before))
        handles.append(module.register_forward_hook(ranges.after, always_call=True))
    members = list(model.modules())
    _explicit.update(members)
    return Annotation([lambda: _explicit.difference_update(members)] + [h.remove for h in handles])


def annotate_all() -> Annotation:
    """Global hooks: every module of every model, named by its path in the outermost module
    called."""
    names: weakref.WeakKeyDictionary[torch.nn.Module, str] = weakref.WeakKeyDictionary()

    def name_of(module: torch.nn.Module, outermost: bool) -> str | None:
        if module in _explicit:
            return None
        name = names.get(module)
        if name is None:
            if outermost:
                names.update(select_modules(module, None, (), (), False))
            name = names.setdefault(module, type(module).__name__)
        return name

    ranges = ModuleRanges(name_of)
    handles = [
        register_module_forward_pre_hook(ranges.before),
        register_module_forward_hook(ranges.after, always_call=True),
    ]
    return Annotation(h.remove for h in handles)


def select_modules(
    model, depth, include, exclude, leaf_only
) -> Iterator[tuple[torch.nn.Module, str]]:
    """(module, path) pairs of `model` that pass the filters; the root's path is its class name."""
    for path, module in model.named_modules():
        name = path or type(model).__name__
        if depth is not None and (path.count(".") + 1 if path else 0) > depth:
            continue
        if leaf_only and next(module.children(), None) is not None:
            continue
        if include and not any(fnmatch.fnmatchcase(name, p) for p in include):
            continue
        if any(fnmatch.fnmatchcase(name, p) for p in exclude):
            continue
        yield module, name


class ModuleRanges:
    """Forward hooks for the modules that `name_of(module, outermost)` names (None: skip it)."""

    def __init__(self, name_of: Callable[[torch.nn.Module, bool], str | None]):
        self.name_of = name_of
        self.calls = nvtx_calls()
        self._attributes: dict[str, tuple] = {}  # path -> (fwd, bwd) event attributes
        self._local = threading.local()

    def _stack(self) -> list:
        stack = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        return stack

    def before(self, module, args) -> None:
        stack = self._stack()
        name = self.name_of(module, not stack)
        if name is None:
            return
        attributes = self._attributes.get(name)
        if attributes is None:
            attributes = self._attributes[name] = (
                self.calls.attributes("fwd:" + name),
                self.calls.attributes("bwd:" + name),
            )
        self.calls.push(attributes[0])
        first_node = torch.autograd._get_sequence_nr() if torch.is_grad_enabled() else None
        stack.append((module, attributes[1], first_node))

    def after(self, module, args, result) -> None:
        stack = self._stack()
        if not stack or stack[-1][0] is not module:
            return  # our before() did not run for this call (an earlier pre-hook raised)
        _, backward_attributes, first_node = stack.pop()
        try:
            if first_node is not None and result is not None:
                watch_backward(backward_attributes, result, first_node)
        finally:
            self.calls.pop()


def watch_backward(backward_attributes, result, first_node: int) -> None:
    """Hook the graph nodes that the module's forward made (sequence numbers from first_node on)."""
    end_node = torch.autograd._get_sequence_nr()

    def inside(node) -> bool:
        return first_node <= node._sequence_nr() < end_node

    outputs = {t.grad_fn for t in _tensors(result, 3) if t.grad_fn is not None}
    outputs = [node for node in outputs if inside(node)]
    if not outputs:
        return
    exits = _exit_nodes(outputs, inside)
    backward = _BackwardRange(backward_attributes, len(exits))
    for node in outputs:
        node.register_prehook(backward.reached)
    for node in exits:
        node.register_hook(backward.left)


def _exit_nodes(outputs: list, inside: Callable) -> list:
    """Nodes inside the module with no successor inside it: when all have run, the module is
    done."""
    seen, todo, exits = set(outputs), list(outputs), []
    while todo:
        node = todo.pop()
        inner = [n for n, _ in node.next_functions if n is not None and inside(n)]
        if not inner:
            exits.append(node)
        for n in inner:
            if n not in seen:
                seen.add(n)
                todo.append(n)
    return exits


class _BackwardRange:
    """One module call's backward: opened by the first output node, closed by the last exit node."""

    __slots__ = ("attributes", "exits", "remaining", "range_id")

    def __init__(self, attributes, exits: int):
        self.attributes, self.exits, self.remaining, self.range_id = attributes, exits, exits, None

    def reached(self, grad_outputs) -> None:
        if self.range_id is None:
            self.range_id = nvtx_calls().start(self.attributes)
            self.remaining = self.exits
            # An exit node that autograd never runs must not leave the range open.
            torch.autograd.Variable._execution_engine.queue_callback(self.close)

    def left(self, grad_inputs, grad_outputs) -> None:
        if self.range_id is not None:
            self.remaining -= 1
            if self.remaining <= 0:
                self.close()

    def close(self) -> None:
        if self.range_id is not None:
            nvtx_calls().end(self.range_id)
            self.range_id = None


def _tensors(obj, depth: int) -> Iterator[torch.Tensor]:
    """Tensors in obj, looking into tuples, lists and dict values up to `depth` levels."""
    if isinstance(obj, torch.Tensor):
        yield obj
    elif depth and isinstance(obj, (tuple, list)):
        for item in obj:
            yield from _tensors(item, depth - 1)
    elif depth and isinstance(obj, dict):
        for item in obj.values():
            yield from _tensors(item, depth - 1)
