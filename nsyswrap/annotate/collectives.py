"""NVTX ranges around torch.distributed collectives and point-to-point calls.

Each call becomes a push/pop range on the calling thread with the text
`coll:<op> bytes=<n> dtype=<dtype> pg=<group id> size=<group size> seq=<k>`:

* bytes: the message size as nccl-tests counts it, the same on every rank: the tensor for
  all_reduce/broadcast/reduce/send/recv, the whole gathered output for all_gather(_into_tensor)
  and gather, the whole input for reduce_scatter(_tensor), all_to_all(_single) and scatter.
* pg: the process group's `group_name` (same on every rank; the default group is `0`).
  Point-to-point calls use the pair `<group name>:<low rank>-<high rank>` as their group,
  so that they never shift the sequence numbers of the real group's collectives.
* seq: how many calls this rank issued on that group before, from 0.

The range covers issuing the call; with `async_op=True` that is all it covers, and nothing
waits on the returned work. On gloo and MPI (collectives run on the host) an asynchronous
call's completion is an NVTX mark `coll_done:<op> pg=<group id> seq=<k>`, made when its
work completes: the collective's end (NCCL's kernels time its collectives).

DDP's gradient all-reduce runs in C++; a DDP model without its own communication hook
gets torch's Python `allreduce_hook` (the same all-reduce and averaging, issued through
`dist.all_reduce`) at its first forward, so it is annotated too, if that forward comes
before the end of the first optimizer step (then the search stops).
"""

from __future__ import annotations

import atexit
import functools
import inspect
import itertools
import threading
import time
import weakref
from collections import defaultdict
from collections.abc import Callable

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d
from torch.nn.modules.module import register_module_forward_pre_hook
from torch.optim.optimizer import register_optimizer_step_post_hook

from nsyswrap.annotate.handle import Annotation
from nsyswrap.annotate.observers import INSIDE
from nsyswrap.annotate.ranges import nvtx_calls

# op: (parameter whose tensor(s) give bytes and dtype, multiply its bytes by the group size)
PAYLOAD = {
    "all_reduce": ("tensor", False),
    "broadcast": ("tensor", False),
    "reduce": ("tensor", False),
    "all_gather": ("tensor", True),
    "all_gather_into_tensor": ("output_tensor", False),
    "gather": ("tensor", True),
    "reduce_scatter": ("input_list", False),
    "reduce_scatter_tensor": ("input", False),
    "scatter": ("tensor", True),
    "all_to_all": ("input_tensor_list", False),
    "all_to_all_single": ("input", False),
    "send": ("tensor", False),
    "isend": ("tensor", False),
    "recv": ("tensor", False),
    "irecv": ("tensor", False),
    "barrier": (None, False),
}
PEER = {"send": "dst", "isend": "dst", "recv": "src", "irecv": "src"}  # group_dst/group_src too

_active: Annotation | None = None
_issuing = (
    threading.local()
)  # inside a wrapped call: calls it makes itself (recv -> irecv) get no range


def annotate_collectives() -> Annotation:
    """Wrap the torch.distributed calls in PAYLOAD with `coll:` ranges; remove() undoes it.

    Calling it again while active returns a handle that does nothing.
    """
    global _active
    if _active is not None:
        return Annotation([])
    counters: defaultdict[str, itertools.count] = defaultdict(itertools.count)
    undo = []
    for op in PAYLOAD:
        original = getattr(dist, op, None)
        if original is None:
            continue
        wrapped = _wrap(op, original, counters)
        for module in (dist, c10d):
            if getattr(module, op, None) is original:
                setattr(module, op, wrapped)
                undo.append(functools.partial(setattr, module, op, original))
    # DDP models are looked for until the first optimizer step ends: a global module hook
    # takes every module call off PyTorch's fast path (about a microsecond each).
    looking = register_module_forward_pre_hook(_ddp_python_allreduce)
    found = register_optimizer_step_post_hook(lambda *_: (looking.remove(), found.remove()))
    undo += [looking.remove, found.remove]

    def deactivate():
        global _active
        _active = None

    _active = Annotation([deactivate] + undo)
    return _active


def _wrap(op: str, original: Callable, counters) -> Callable:
    position = {name: i for i, name in enumerate(inspect.signature(original).parameters)}
    payload_name, scaled = PAYLOAD[op]
    peer_name = PEER.get(op)
    async_op = op in ("isend", "irecv")  # waited on later (the others: with async_op=True)
    calls = nvtx_calls()

    def arg(args, kwargs, name):
        i = position.get(name)
        return args[i] if i is not None and i < len(args) else kwargs.get(name)

    @functools.wraps(original)
    def annotated(*args, **kwargs):
        if getattr(_issuing, "active", False):
            return original(*args, **kwargs)
        pg, size = _group(arg(args, kwargs, "group"))
        nbytes, dtype = _payload(arg(args, kwargs, payload_name) if payload_name else None)
        if scaled:
            nbytes *= size
        if peer_name:
            group = arg(args, kwargs, "group") or c10d._get_default_group()
            pg, size = (
                _pair(
                    group, pg, arg(args, kwargs, peer_name), arg(args, kwargs, "group_" + peer_name)
                ),
                2,
            )
        seq = next(counters[pg])
        calls.push(
            calls.attributes(
                f"coll:{op} bytes={nbytes} dtype={dtype} pg={pg} size={size} seq={seq}"
            )
        )
        tokens = [(o, o.collective_begin(op, pg, size, nbytes, seq)) for o in INSIDE]
        _issuing.active = True
        work = None
        try:
            work = original(*args, **kwargs)
            return work
        finally:
            _issuing.active = False
            waited_later = async_op or bool(arg(args, kwargs, "async_op"))
            if waited_later and work is not None and not _on_gpu(arg(args, kwargs, "group")):
                _mark_done(work, f"coll_done:{op} pg={pg} seq={seq}")
            for observer, token in tokens:
                observer.collective_end(token, work, waited_later)
            calls.pop()

    return annotated


def _on_gpu(group) -> bool:
    """Whether the group's collectives run as NCCL kernels (their kernels time them)."""
    try:
        return "nccl" in str(dist.get_backend(group))
    except (RuntimeError, ValueError):
        return False


_unmarked: set[object] = set()  # completion marks still to be made
_drain_registered = [False]


def _mark_done(work, text: str) -> None:
    """An NVTX mark `text` when the asynchronous `work` completes (gloo and MPI complete
    it on their own thread once every member's data is in): the collective's end."""
    future = getattr(work, "get_future", None)
    if future is None:
        return
    mark, token = nvtx_calls().mark, object()

    def done(_) -> None:
        try:
            mark(text)
        finally:
            _unmarked.discard(token)

    if not _drain_registered[0]:
        atexit.register(_drain)
        _drain_registered[0] = True
    _unmarked.add(token)
    try:
        future().then(done)
    except RuntimeError:  # a backend without futures
        _unmarked.discard(token)


def _drain(timeout_s: float = 1.0) -> None:
    """At exit, wait (a second at most) for the marks still to be made, then a moment for
    the backend's thread to let go of them: a thread that takes the GIL once the
    interpreter is finalizing ends the process (std::terminate)."""
    deadline = time.monotonic() + timeout_s
    while _unmarked and time.monotonic() < deadline:
        time.sleep(0.001)
    time.sleep(0.01)


_groups: dict = {}  # process group -> (group_name, size)


def _group(group) -> tuple[str, int]:
    group = group or c10d._get_default_group()
    known = _groups.get(group)
    if known is None:
        known = _groups[group] = (group.group_name, group.size())
    return known


def _payload(payload) -> tuple[int, str]:
    tensors = [payload] if isinstance(payload, torch.Tensor) else list(payload or ())
    nbytes = sum(t.numel() * t.element_size() for t in tensors)
    dtype = str(tensors[0].dtype).removeprefix("torch.") if tensors else "none"
    return nbytes, dtype


def _pair(group, pg: str, peer, group_peer) -> str:
    if peer is None and group_peer is not None:
        peer = dist.get_global_rank(group, group_peer)
    me = dist.get_rank()
    if peer is None:  # recv from any source
        return f"{pg}:{me}-any"
    low, high = sorted((me, int(peer)))
    return f"{pg}:{low}-{high}"


_ddp_seen: weakref.WeakSet[torch.nn.Module] = weakref.WeakSet()


def _ddp_python_allreduce(module, args) -> None:
    """At a DDP model's first forward, route its gradient all-reduce through dist.all_reduce."""
    if not isinstance(module, torch.nn.parallel.DistributedDataParallel) or module in _ddp_seen:
        return
    _ddp_seen.add(module)
    if getattr(module, "_comm_hooks", None):
        return  # the user's own hook; if it is written in Python it calls dist.* and is annotated
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

    try:
        module.register_comm_hook(None, allreduce_hook)
    except RuntimeError:
        pass  # a built-in C++ hook is already registered
