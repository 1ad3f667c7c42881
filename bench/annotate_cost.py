"""What one annotation range costs with no profiler attached, next to a bare Python call.

    python bench/annotate_cost.py            # needs torch and nvtx

Each row is the best of several timed repeats, in ns per range. Module and collective rows
are differences: the same work annotated minus it plain, divided by the ranges it adds.
"""

from __future__ import annotations

import os
import tempfile
import timeit
from importlib.metadata import version

import torch
import torch.distributed as dist
from torch import nn

import nsyswrap
from nsyswrap.annotate.collectives import annotate_collectives
from nsyswrap.annotate.modules import annotate_model
from nsyswrap.annotate.ranges import nvtx_calls

MODULES = 200


def best_ns(fn, number: int, repeat: int = 7) -> float:
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e9


def noop() -> None:
    pass


def push_pop():
    calls = nvtx_calls()
    attributes = calls.attributes(
        "fwd:layers.3.attn"
    )  # built once per module path, as annotate_model does

    def range_() -> None:
        calls.push(attributes)
        calls.pop()

    return range_


def step_counter():
    i = 0

    def mark() -> None:
        nonlocal i
        nsyswrap.step(i)
        i += 1

    return mark


def plain_and_annotated(run, annotate, number: int, rounds: int = 7) -> tuple[float, float]:
    """Best ns per call of run() plain and annotated, measured in alternating rounds (fair
    under load)."""
    plain, annotated = [], []
    for _ in range(rounds):
        plain.append(best_ns(run, number, repeat=1))
        with annotate():
            annotated.append(best_ns(run, number, repeat=1))
    return min(plain), min(annotated)


def per_module(train: bool) -> float:
    """Extra ns per module call (forward only, or forward + backward with autograd)."""
    model = nn.Sequential(*(nn.Linear(4, 4) for _ in range(MODULES)))
    x = torch.randn(2, 4, requires_grad=train)

    def run() -> None:
        if train:
            model(x).sum().backward()
        else:
            with torch.no_grad():
                model(x)

    plain, annotated = plain_and_annotated(run, lambda: annotate_model(model, leaf_only=True), 10)
    return (annotated - plain) / MODULES


def per_collective() -> float:
    """Extra ns per all_reduce on a one-rank gloo group."""
    folder = tempfile.mkdtemp()
    dist.init_process_group("gloo", init_method=f"file://{folder}/store", rank=0, world_size=1)
    t = torch.ones(16)
    plain, annotated = plain_and_annotated(lambda: dist.all_reduce(t), annotate_collectives, 1000)
    dist.destroy_process_group()
    return annotated - plain


def main() -> None:
    torch.set_num_threads(1)
    rows = [
        ("bare Python function call", best_ns(noop, 200_000)),
        ("NVTX push + pop (one range, cached text)", best_ns(push_pop(), 200_000)),
        (
            "nsyswrap.step(i) (call form, closes the previous step)",
            best_ns(step_counter(), 200_000),
        ),
        ("annotate_model: per module, forward only (no_grad)", per_module(train=False)),
        ("annotate_model: per module, forward + backward", per_module(train=True)),
        ("annotate_collectives: per all_reduce", per_collective()),
    ]
    nsyswrap.annotate.steps.end()
    print(
        f"torch {torch.__version__}, nvtx {version('nvtx')}, {os.cpu_count()} cores, "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    width = max(len(name) for name, _ in rows)
    print(f"{'what':<{width}}  ns per range")
    for name, ns in rows:
        print(f"{name:<{width}}  {ns:>10.0f}")


if __name__ == "__main__":
    main()
