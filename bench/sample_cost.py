"""What the always-on sampler costs a training step, measured, on the tiny model of
examples/train_ddp.py.

    python bench/sample_cost.py                # needs torch and nvtx; writes its RESULTS.md section
    python bench/sample_cost.py --device cuda  # the same on a GPU (CUDA events): its own section

TinyNet (2 blocks, width 32, batch 16) under DDP on a one-rank gloo group (so DDP's
gradient all-reduce runs and is timed), fed by a DataLoader, trained with SGD. The set-ups
run the same steps, round after round, interleaved (fair under a changing load): plain;
marked by hand (`nsyswrap.step(i)`, four `nsyswrap.phase`s) without and with the sampler
(no step sampled, every 10th, every step); and zero-code (`--annotate steps`, and
`--annotate sample` at every 10). Each figure is the median over rounds of the CPU time per
step (process time: the machine is shared, and waiting for a core is not a cost of ours);
each cost is the median over rounds of the difference between two set-ups in the same
round. Per-event costs come from timeit loops (best of several repeats, CPU time) on one open step.
With `--device cuda` the model and each batch are on the GPU, so the sampler times with CUDA
events (recorded at every edge, read once `query()` says they completed), and a step's figure
is its wall time up to a synchronize at the end of the round (the GPU machine is not shared).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
import timeit
from importlib.metadata import version
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn

import nsyswrap
from nsyswrap.annotate import phases, steps
from nsyswrap.annotate.auto import install
from nsyswrap.annotate.collectives import annotate_collectives
from nsyswrap.sample import sampler as sampler_module

ROOT = Path(__file__).resolve().parents[1]
RESULTS_MD = ROOT / "bench" / "RESULTS.md"
HEADING = "## Always-on sampler overhead"
GPU_HEADING = HEADING + " on a GPU"
STEPS, ROUNDS, EVERY = 200, 40, 10
PHASES = ("data_loading", "forward", "backward", "optimizer")
GPU_NOTE = (
    "GPU (CUDA events): `python bench/sample_cost.py --device cuda` measures the same rows "
    'with the model on a GPU (section "Always-on sampler overhead on a GPU").'
)


def tiny_net() -> nn.Module:
    sys.path.insert(0, str(ROOT / "examples"))
    from train_ddp import TinyNet

    return TinyNet()


def loop(model, optimizer, loader, first: int, n: int, marked: bool, device=None) -> float:
    """Seconds per step over steps first..first+n-1 (CPU time; on a GPU `device`: wall time
    to a synchronize after the last); `marked`: steps and phases by hand."""
    step = nsyswrap.step if marked else (lambda i: contextlib.nullcontext())
    phase = nsyswrap.phase if marked else (lambda name: contextlib.nullcontext())
    batches = iter(loader)
    clock = time.perf_counter if device else time.process_time
    started = clock()
    for i in range(first, first + n):
        with step(i):
            with phase("data_loading"):
                x, y = next(batches)
                if device:
                    x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            with phase("forward"):
                loss = nn.functional.mse_loss(model(x), y)
            with phase("backward"):
                loss.backward()
            with phase("optimizer"):
                optimizer.step()
                optimizer.zero_grad()
    if device:
        torch.cuda.synchronize(device)
    return (clock() - started) / n


@contextlib.contextmanager
def setup(folder: str, how: dict):
    """The set-up `how` describes: a sampler (every, start), zero-code kinds, marks."""
    handle = None
    if how.get("collectives"):
        handle = annotate_collectives()
    elif how.get("kinds"):
        os.environ[sampler_module.VARIABLE] = json.dumps(
            {"out_dir": folder, "every": how.get("every", EVERY), "start": 0}
        )
        handle = install(how["kinds"])
    elif "every" in how:
        handle = nsyswrap.sampler(folder, every=how["every"], start=how.get("start", 0))
    steps._state.manual = how.get("marked", False)
    try:
        yield
    finally:
        steps.end()
        if handle is not None:
            (handle.remove if hasattr(handle, "remove") else handle.close)()
        steps._state.manual = phases._marked[0] = False  # the next set-up starts afresh


SETUPS = {
    "plain (no nsyswrap)": {},
    "marked by hand: nsyswrap.step + 4 nsyswrap.phase, no sampler": {"marked": True},
    "marked, collectives annotated (annotate_collectives), no sampler": {
        "marked": True,
        "collectives": True,
    },
    "marked, sampler on, no step sampled": {"marked": True, "every": 1, "start": 10**9},
    f"marked, sampler every {EVERY}": {"marked": True, "every": EVERY},
    "marked, sampler every step": {"marked": True, "every": 1},
    "zero-code steps (--annotate steps), no sampler": {"kinds": ("steps",)},
    f"zero-code --sample (every {EVERY})": {"kinds": ("steps", "sample")},
}


def step_costs(folder: str, device=None) -> dict:
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(tiny_net().to(device or "cpu"))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(STEPS * 16, 32)
    data = torch.utils.data.TensorDataset(x, x.sum(1, keepdim=True))
    loader = torch.utils.data.DataLoader(data, batch_size=16, pin_memory=device is not None)
    times: dict[str, list[float]] = {name: [] for name in SETUPS}
    loop(model, optimizer, loader, 0, STEPS, False, device)  # warm-up
    for r in range(ROUNDS):
        for name, how in SETUPS.items():
            with setup(folder, how):
                times[name].append(
                    loop(model, optimizer, loader, r * STEPS, STEPS, how.get("marked"), device)
                )
    return times


def sampler_costs(folder: str) -> dict:
    """CPU ns of the sampler's own work per unsampled and per sampled step: the observer
    calls of one step (its begin and end, four phases, an asynchronous all_reduce whose work
    has completed) made directly, best of several timeit repeats."""
    os.environ["RANK"] = "0"
    out = {}
    for what, every in (("unsampled", 10**9), ("sampled", 1)):
        s = sampler_module.sampler(folder, every=every, start=1 if every > 1 else 0)
        out[what] = best_ns(_steps(s), 2_000)
        s.close()
    return out


def _steps(s):
    """One step's observer calls to sampler `s`, a new step number each call."""
    index = iter(range(1, 10**9))

    def step() -> None:
        s.step_begin(next(index))
        for name in PHASES:
            s.phase_begin(name)
            if name == "backward":
                done = torch.futures.Future()
                done.set_result(None)
                s.collective_end(
                    s.collective_begin("all_reduce", "0", 1, 4096, 0), _Work(done), True
                )
            s.phase_end(name)
        s.step_end()

    return step


class _Work:
    def __init__(self, future):
        self.future = future

    def get_future(self):
        return self.future


def event_costs(folder: str) -> dict:
    """ns per phase (begin + end) and per collective (begin + end) on a sampled and on an
    unsampled step, and per host timer read."""
    os.environ["RANK"] = "0"
    s = sampler_module.sampler(folder, every=2, flush_every=10**9)
    out = {}
    for sampled, i in ((True, 0), (False, 1)):
        steps.begin(i)

        def phase() -> None:
            phases.begin("p")
            phases.end("p")

        def collective() -> None:
            s.collective_end(s.collective_begin("all_reduce", "0", 2, 64, 0), None, False)

        what = "sampled" if sampled else "unsampled"
        out[f"phase (begin + end, NVTX range included), {what} step"] = best_ns(phase, 20_000)
        out[f"collective (begin + end, the sampler's part), {what} step"] = best_ns(
            collective, 20_000
        )
        if s.step is not None:
            s.step.phases.clear()
            s.step.calls.clear()
    out["host timer read (one edge)"] = best_ns(sampler_module.perf_counter_ns, 200_000)
    s.step = None
    steps.end()
    s.close()
    return out


def best_ns(fn, number: int, repeat: int = 7) -> float:
    """CPU ns per call of fn, best of `repeat` timings of `number` calls (CPU time: on a
    shared machine the wall clock also counts the time others held the core)."""
    best = min(timeit.repeat(fn, number=number, repeat=repeat, timer=time.process_time))
    return best / number * 1e9


def section(times: dict, own: dict, events: dict, gpu: str | None = None) -> str:
    """The RESULTS.md section of these measurements (`gpu`: the GPU's name, when the model
    ran on it)."""
    names = list(SETUPS)
    plain, marked, coll, none, every, sampled, zero_steps, zero_sample = names
    step_ms = {n: statistics.median(t) * 1e3 for n, t in times.items()}

    def cost_us(name: str, base: str) -> list[float]:
        """Quartiles over rounds of `name`'s cost over `base` (µs per step)."""
        return statistics.quantiles([(a - b) * 1e6 for a, b in zip(times[name], times[base])], n=4)

    def plus(name: str, base: str) -> str:
        low, cost, high = cost_us(name, base)
        share = 100 * cost / (step_ms[plain] * 1e3)
        return f"{cost:+,.1f} µs ({share:+.2f} %; rounds' IQR {low:+,.1f} to {high:+,.1f})"

    extras = [
        "",
        f"{plus(marked, plain)} over plain",
        f"{plus(coll, marked)} over marked",
        f"{plus(none, coll)} over collectives annotated: an unsampled step",
        f"{plus(every, coll)} over collectives annotated: **the sampler at every {EVERY}**",
        f"{plus(sampled, coll)} over collectives annotated: a sampled step",
        f"{plus(zero_steps, plain)} over plain",
        f"{plus(zero_sample, plain)} over plain, "
        f"{plus(zero_sample, zero_steps)} over zero-code steps",
    ]
    machine = (
        f"torch {torch.__version__}, nvtx {version('nvtx')}, {os.cpu_count()} cores, load "
        f"average {os.getloadavg()[0]:.1f}, Python {sys.version.split()[0]}"
    )
    where, clock = (
        (f"{gpu}, CUDA-event timers", "wall time") if gpu else ("CPU, host timers", "CPU time")
    )
    lines = [
        GPU_HEADING if gpu else HEADING,
        "",
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by "
        f"`python bench/sample_cost.py{' --device cuda' if gpu else ''}` ({machine}). "
        f"{where}: examples/train_ddp.py's TinyNet under DDP (one-rank gloo group), {STEPS} "
        f"steps a round, {ROUNDS} rounds, set-ups interleaved; median of the rounds' {clock} "
        "per step; a cost is the median over rounds of the difference to the set-up it is "
        "measured against in the same round (% of a plain step), with the rounds' "
        "interquartile range. Target: the sampler at every 10 costs at most 1 % of the "
        "step.",
        "",
        f"| set-up | {'wall' if gpu else 'CPU'} ms per step | cost |",
        "|---|--:|---|",
    ]
    lines += [f"| {name} | {step_ms[name]:.3f} | {extra} |" for name, extra in zip(names, extras)]
    at_every = ((EVERY - 1) * own["unsampled"] + own["sampled"]) / EVERY
    share = at_every / 1e9 / statistics.median(times[plain])
    lines += [
        "",
        "The sampler's own work (its observer calls for one step: begin, end, four "
        "phases, an asynchronous all_reduce, made directly; CPU time, best of timeit "
        "repeats: what it costs with its code and data in the caches), against the plain "
        "step above:",
        "",
        "| the sampler's own work | µs per step | of a plain step |",
        "|---|--:|--:|",
        f"| unsampled step | {own['unsampled'] / 1e3:.2f} | "
        f"{100 * own['unsampled'] / 1e9 / statistics.median(times[plain]):.2f} % |",
        f"| sampled step ({'CUDA events recorded and read' if gpu else 'host timers'}, record "
        "formatted and written) | "
        f"{own['sampled'] / 1e3:.2f} | "
        f"{100 * own['sampled'] / 1e9 / statistics.median(times[plain]):.2f} % |",
        f"| **every {EVERY}th step sampled (mean)** | {at_every / 1e3:.2f} | "
        f"**{100 * share:.2f} %** |",
    ]
    in_loop = 100 * cost_us(every, coll)[1] / (step_ms[plain] * 1e3)
    sampled_in_loop = cost_us(sampled, coll)[1]
    lines += [
        "",
        f"**Target (≤ 1 % of the step at every {EVERY})**: measured in the loop "
        f"{in_loop:+.2f} %: {verdict(in_loop)}; the sampler's own work {100 * share:.2f} %: "
        f"{verdict(100 * share)}. In the loop a sampled step costs {sampled_in_loop:,.1f} µs, "
        f"{sampled_in_loop / (own['sampled'] / 1e3):.1f}× its own work alone "
        f"({own['sampled'] / 1e3:.2f} µs): the difference is the loop's (colder caches, the "
        "garbage collections its objects bring forward, the completion callback's hand-over "
        "of the GIL), not measured apart.",
    ]
    lines += ["", "| event | µs |", "|---|--:|"]
    lines += [f"| {name} | {ns / 1e3:.2f} |" for name, ns in events.items()]
    lines += [""] if gpu else ["", GPU_NOTE, ""]
    return "\n".join(lines)


def verdict(percent: float) -> str:
    """The 1 % target's verdict for a cost of `percent` % of the step."""
    return "met" if percent <= 1 else f"**missed by {percent:.1f}×**"


def write(text: str) -> None:
    """Replace this section of RESULTS.md (the one its first line names; the others stay as
    they are)."""
    old = RESULTS_MD.read_text() if RESULTS_MD.is_file() else ""
    parts = ("\n" + old).split("\n## ")
    heading = text.split("\n", 1)[0]
    kept = [p for p in parts[1:] if ("## " + p).split("\n", 1)[0] != heading]
    RESULTS_MD.write_text(
        parts[0].lstrip("\n") + "".join("\n## " + p for p in kept).rstrip("\n") + "\n\n" + text
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    cuda = parser.parse_args().device == "cuda"
    torch.set_num_threads(1)
    device = torch.device("cuda", 0) if cuda else None
    if device:
        torch.cuda.init()  # the sampler times with CUDA events once CUDA is in use
    with tempfile.TemporaryDirectory() as folder:
        dist.init_process_group("gloo", init_method=f"file://{folder}/store", rank=0, world_size=1)
        times = step_costs(folder, device)
        own = sampler_costs(folder)
        events = event_costs(folder)
        dist.destroy_process_group()
    text = section(times, own, events, torch.cuda.get_device_name(device) if device else None)
    print(text)
    write(text)
    print(f"wrote its section of {RESULTS_MD}", file=sys.stderr)


if __name__ == "__main__":
    main()
