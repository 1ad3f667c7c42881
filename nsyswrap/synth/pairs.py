"""Pairs of runs: (BASE, NEW) for `nsyswrap diff`'s proof, and fault pairs for the replay's.

Each diff pair is two Scenarios that differ in one parameter (and in the seed, so that the
noise of the kernel durations differs too), written with `generate_run` to
`<out>/base` and `<out>/new`. PAIRS names them; `write_pair` writes one and returns the
truth: what changed and by how much.

A fault pair (FAULT_PAIRS, nsyswrap.synth.pair_scenarios) is a job with a fault and the
same job, same seed and random draws, without it, written to `<out>/fault` and
`<out>/fixed` by `write_fault_pair` (`nsyswrap generate --pair NAME OUT`); both truth.json
files hold the pair's truth (`pair_truth`): the fault, both runs' step times and their
difference, and the joins the trace does not record.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from nsyswrap.errors import NsysWrapError
from nsyswrap.synth.pair_scenarios import PAIRS as FAULT_PAIRS
from nsyswrap.synth.pair_truth import fault_identity, hidden_joins
from nsyswrap.synth.presets import preset
from nsyswrap.synth.run import (
    Simulations,
    generate_run,
    outputs_to_replace,
    simulate_with_truth,
    write_run,
)
from nsyswrap.synth.scenario import Scenario, Straggler
from nsyswrap.synth.simulate import Simulation
from nsyswrap.synth.truth import run_step_times

STRAGGLER_RANK = 2
FIXED_NS = 2_000_000  # data loading on the straggler gets this much faster

# Small, so that tests are quick: 4 ranks, 24 steps (>= MIN_STEPS of nsyswrap.comparison), 12
# kernels per step; everything but the planted difference is the same in BASE and NEW.
BASE = Scenario(
    name="pair",
    seed=1,
    ranks=4,
    ranks_per_node=2,
    steps=24,
    kernels_per_step=12,
    modules=4,
    comm_overlap=("hidden",),
    transfer_ns=40_000,
    clock_error_ns=(0, 150_000, -80_000, 40_000),
)


@dataclass(frozen=True)
class Pair:
    about: str
    base: Scenario
    new: Scenario


PAIRS: dict[str, Pair] = {
    "straggler_fixed": Pair(
        f"data_loading on rank {STRAGGLER_RANK} {FIXED_NS / 1e6:g} ms faster per step (the "
        "straggler mostly fixed)",
        BASE.replace(straggler=Straggler(STRAGGLER_RANK, "data_loading", 2_400_000)),
        BASE.replace(
            seed=2, straggler=Straggler(STRAGGLER_RANK, "data_loading", 2_400_000 - FIXED_NS)
        ),
    ),
    "overlap_improved": Pair(
        "gradient all-reduces (80 us each) issued during backward, overlapping the rest of "
        "it, instead of exposed after it",
        BASE.replace(comm_overlap=("exposed",), transfer_ns=80_000),
        BASE.replace(seed=2, comm_overlap=("partial",), transfer_ns=80_000),
    ),
    "kernels_faster": Pair(
        "every compute kernel a quarter shorter (20-60 us -> 15-45 us)",
        BASE.replace(compute_ns=(20_000, 60_000)),
        BASE.replace(seed=2, compute_ns=(15_000, 45_000)),
    ),
    "noise": Pair(
        "nothing changed but the random draws (another seed)", BASE, BASE.replace(seed=2)
    ),
}


def write_pair(name: str, out: str | Path, *, force: bool = False, **changes) -> dict:
    """Write pair `name` to `out/base` and `out/new` (Scenario `changes` applied to both,
    e.g. steps=40); returns {"pair", "about", "base", "new"} (the truth of each run)."""
    if name not in PAIRS:
        raise NsysWrapError(None, f"no pair named {name!r}", f"use one of {', '.join(PAIRS)}")
    pair, out = PAIRS[name], Path(out)
    truths = {
        side: generate_run(getattr(pair, side).replace(**changes), out / side, force=force)
        for side in ("base", "new")
    }
    return {"pair": name, "about": pair.about, **truths}


# -- fault pairs (nsyswrap.synth.pair_scenarios): a fault, and the same job without it --------

HALVES = ("fault", "fixed")
STEP_TIME = (
    "run step time = latest end of the step on any rank - latest end of the previous step "
    "(first step: its latest start); whole run = their sum; difference = fault - fixed, "
    "what a perfect replay of the fault run predicts its fix saves"
)


def pair_scenarios(name: str, **sizes) -> tuple[Scenario, Scenario]:
    """(fault, fixed) of pair ``name``, resized like a preset (ranks, steps, ...)."""
    if name not in FAULT_PAIRS:
        raise NsysWrapError(
            None, f"no fault pair named {name!r}", f"use one of {', '.join(FAULT_PAIRS)}"
        )
    fault = preset(name, **sizes)
    if not fault.has_plant():
        raise NsysWrapError(
            None,
            f"fault pair {name!r} resized to {fault.ranks} ranks and {fault.steps} steps has no "
            "fault left",
            "keep the ranks and steps that hold its fault (see nsyswrap generate --help)",
        )
    return fault, FAULT_PAIRS[name].fixed_of(fault)


def simulate_pair(name: str, **sizes) -> dict:
    """Both halves of pair ``name`` simulated (nothing written): {"fault": (Simulation,
    Truth), "fixed": (...), "pair": pair_truth}; each Truth holds the pair too. The halves
    share their baselines' runs (the fixed half is often the fault's unplanted run)."""
    runs = Simulations()
    fault, fixed = pair_scenarios(name, **sizes)
    halves = {half: simulate_with_truth(sc, runs) for half, sc in zip(HALVES, (fault, fixed))}
    info = pair_truth(name, halves["fault"][0], halves["fixed"][0])
    out = {
        half: (sim, dataclasses.replace(truth, pair={**info, "half": half}))
        for half, (sim, truth) in halves.items()
    }
    return {**out, "pair": info}


def write_fault_pair(name: str, out: str | Path, *, force: bool = False, **sizes) -> dict:
    """Write pair ``name`` to ``out/fault`` and ``out/fixed`` (reports and truth.json each,
    the pair's truth in both); returns the pair's truth (pair_truth)."""
    out = Path(out)
    pair_scenarios(name, **sizes)  # a name that is no pair is refused first
    old = {half: outputs_to_replace(out / half, force) for half in HALVES}
    pair = simulate_pair(name, **sizes)
    for half in HALVES:
        write_run(*pair[half], out / half, old[half])
    return pair["pair"]


def pair_truth(name: str, fault: Simulation, fixed: Simulation) -> dict:
    """What a pair's analysis is checked against: the fault (pair_truth.fault_identity),
    the step times of both runs and their difference, the joins the trace does not record."""
    return {
        "name": name,
        "about": FAULT_PAIRS[name].about,
        "fault": fault_identity(fault.scenario, fixed.scenario),
        "step_times": step_times(fault, fixed),
        "hidden": hidden_joins(fault),
    }


def step_times(fault: Simulation, fixed: Simulation) -> dict:
    """Per step and over the whole run: the fault run's and the fixed run's step times and
    the difference (run_step_times of each)."""
    a, b = run_step_times(fault), run_step_times(fixed)
    steps = [
        {"step": s, "fault_ns": a[s], "fixed_ns": b[s], "difference_ns": a[s] - b[s]}
        for s in sorted(a)
    ]
    total = {k: sum(r[f"{k}_ns"] for r in steps) for k in ("fault", "fixed", "difference")}
    return {
        "definition": STEP_TIME,
        "steps": steps,
        "fault_run_ns": total["fault"],
        "fixed_run_ns": total["fixed"],
        "difference_run_ns": total["difference"],
        "difference_per_step_ns": total["difference"] / len(steps),
    }
