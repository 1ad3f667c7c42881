"""generate_run: scenario -> ``rank{N}.sqlite`` reports + ``truth.json`` in a directory."""

from __future__ import annotations

import json
from pathlib import Path

from nsyswrap.errors import NsysWrapError
from nsyswrap.synth.presets import load_scenario
from nsyswrap.synth.scenario import Scenario
from nsyswrap.synth.simulate import Simulation, simulate
from nsyswrap.synth.truth import Truth, compute_truth
from nsyswrap.synth.writer import write_report

TRUTH_FILE = "truth.json"


def report_name(rank: int, ranks_per_report: int = 1) -> str:
    """rank<N>.sqlite; a capture of several ranks: capture<K>.sqlite (the K-th capture)."""
    return (
        f"rank{rank}.sqlite"
        if ranks_per_report == 1
        else f"capture{rank // ranks_per_report}.sqlite"
    )


def _existing_outputs(out_dir: Path) -> list[Path]:
    return sorted(
        [*out_dir.glob("rank*.sqlite"), *out_dir.glob("capture*.sqlite"), *out_dir.glob(TRUTH_FILE)]
    )


def outputs_to_replace(out_dir: str | Path, force: bool) -> list[Path]:
    """The generated files already in ``out_dir`` (to be replaced: only with ``force``, and
    only what generate wrote before, the truth file and the reports it lists)."""
    out = Path(out_dir)
    old = _existing_outputs(out) if out.is_dir() else []
    if old and not force:
        raise NsysWrapError(
            out / old[0].name,
            "already exists (generated output)",
            "pass force=True (CLI: --force) to overwrite, or pick another directory",
        )
    if out.exists() and not out.is_dir():
        raise NsysWrapError(out, "is not a directory", "give a directory for the generated reports")
    ours = _written_before(out)
    strangers = [p for p in old if p not in ours and p.name != TRUTH_FILE]
    if strangers:
        raise NsysWrapError(
            strangers[0],
            f"is not listed by {out / TRUTH_FILE}, so generate did not write it; --force "
            "replaces only what generate wrote",
            "move it away, or pick another directory",
        )
    return old


def _written_before(out: Path) -> set[Path]:
    """The files a generate into `out` wrote, by its truth file: itself and its reports."""
    try:
        truth = json.loads((out / TRUTH_FILE).read_text(encoding="utf-8"))
        names = {Path(str(r["report"])).name for r in truth["ranks"]}
    except (OSError, ValueError, RecursionError, TypeError, KeyError):
        return set()
    return {out / TRUTH_FILE, *(out / n for n in names if n not in ("", ".", ".."))}


class Simulations:
    """Each scenario simulated once (a pair's halves and their baselines share runs)."""

    def __init__(self) -> None:
        self._runs: dict[Scenario, Simulation] = {}

    def __call__(self, scenario: Scenario) -> Simulation:
        if scenario not in self._runs:
            self._runs[scenario] = simulate(scenario)
        return self._runs[scenario]


def simulate_with_truth(
    scenario: Scenario, runs: Simulations | None = None
) -> tuple[Simulation, Truth]:
    """The scenario's simulation and its truth: the planted gain against the same scenario
    simulated again without its plant (and for a hot expert, again with balanced routing)."""
    runs = runs or Simulations()
    sim = runs(scenario)
    names = [report_name(tr.rank, scenario.ranks_per_report) for tr in sim.traces]
    plant = scenario.has_plant()
    unplanted = runs(scenario.unplanted()) if plant else None
    balanced = runs(scenario.replace(hot_expert=None)) if plant and scenario.hot_expert else None
    return sim, compute_truth(sim, names, unplanted, balanced)


def write_run(sim: Simulation, truth: Truth, out_dir: str | Path, old: list[Path]) -> None:
    """Write the reports of ``sim`` and ``truth.json`` to ``out_dir``, replacing ``old``."""
    out, scenario = Path(out_dir), sim.scenario
    names = [report_name(tr.rank, scenario.ranks_per_report) for tr in sim.traces]
    out.mkdir(parents=True, exist_ok=True)
    for path in old:
        path.unlink()
    for name in dict.fromkeys(names):
        write_report([tr for tr, n in zip(sim.traces, names) if n == name], scenario, out / name)
    (out / TRUTH_FILE).write_text(truth.to_json(), encoding="utf-8")


def generate_run(scenario: Scenario, out_dir: str | Path, force: bool = False) -> Truth:
    """Write one report per rank and ``truth.json`` to ``out_dir``; return the truth.

    Refuses to touch a directory that already holds reports or a truth file unless
    ``force`` (see `outputs_to_replace`: what is replaced).
    """
    old = outputs_to_replace(out_dir, force)
    sim, truth = simulate_with_truth(scenario)
    write_run(sim, truth, out_dir, old)
    return truth


def generate_named(
    name_or_file: str, out_dir: str | Path, *, force: bool = False, **sizes
) -> Truth:
    """`generate_run` of a preset or scenario file, resized by ranks/steps/kernels_per_step/seed."""
    return generate_run(load_scenario(name_or_file, **sizes), out_dir, force=force)
