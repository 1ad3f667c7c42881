"""Pairs of runs (BASE, NEW) with one planted difference, for `nsyswrap diff`'s proof.

Each pair is two Scenarios that differ in one parameter (and in the seed, so that the
noise of the kernel durations differs too), written with `generate_run` to
`<out>/base` and `<out>/new`. PAIRS names them; `write_pair` writes one and returns the
truth: what changed and by how much.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from nsyswrap.errors import NsysWrapError
from nsyswrap.synth.run import generate_run
from nsyswrap.synth.scenario import Scenario, Straggler

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
