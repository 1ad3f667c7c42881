"""Synthetic Nsight Systems SQLite exports (nsys 2026.2.1, schema 3.25.0) with planted truth.

``generate_run(scenario, out_dir)`` writes ``rank{N}.sqlite`` per rank plus ``truth.json``;
``python -m nsyswrap.synth --help`` is the command-line entry point.
"""

from nsyswrap.synth.fixtures import FIXTURES, write_fixtures
from nsyswrap.synth.presets import PRESETS, load_scenario, preset
from nsyswrap.synth.run import generate_run
from nsyswrap.synth.scenario import ExtraCollective, PlantedGap, Scenario, Straggler
from nsyswrap.synth.truth import Truth

__all__ = [
    "FIXTURES",
    "PRESETS",
    "ExtraCollective",
    "PlantedGap",
    "Scenario",
    "Straggler",
    "Truth",
    "generate_run",
    "load_scenario",
    "preset",
    "write_fixtures",
]
