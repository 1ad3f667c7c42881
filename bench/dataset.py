"""The generated runs the benchmark measures, cached under bench/out/runs/.

The main run is the generator's `bench` preset (8 ranks x 1000 steps of ~1000 kernels:
~1 M kernels, ~1 M launch calls and ~100 k NVTX ranges per rank); `steps` shrinks it
for a quick try. Runs with fewer ranks are directories of symbolic links to its first
reports; runs with fewer kernels per rank are generated (1 rank, fewer steps). A run is
regenerated only when its scenario changes.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from nsyswrap.synth import Scenario, generate_run, preset

OUT = Path(__file__).resolve().parent / "out"
RUNS = OUT / "runs"
MAIN_PRESET = "bench"
FULL_STEPS = 1000  # the preset's steps: ~1 M kernels per rank


def _generated(scenario: Scenario, out_dir: Path) -> Path:
    truth = out_dir / "truth.json"
    if truth.is_file() and json.loads(truth.read_text())["scenario"] == json.loads(
        json.dumps(scenario.to_dict())
    ):
        return out_dir
    generate_run(scenario, out_dir, force=True)
    return out_dir


def _name(steps: int) -> str:
    return MAIN_PRESET if steps == FULL_STEPS else f"{MAIN_PRESET}_{steps}steps"


def main_run(steps: int = FULL_STEPS) -> Path:
    """The 8-rank run: the `bench` preset, with `steps` steps."""
    return _generated(preset(MAIN_PRESET, steps=steps), RUNS / _name(steps))


def first_ranks(ranks: int, steps: int = FULL_STEPS) -> Path:
    """A run of the main run's first `ranks` reports (symbolic links, nothing copied)."""
    return _first(main_run(steps), ranks, RUNS / f"{_name(steps)}_first{ranks}")


def _first(source: Path, ranks: int, out: Path) -> Path:
    """`source` itself, or `out` with symbolic links to its first `ranks` reports."""
    reports = sorted(source.glob("rank*.sqlite"), key=lambda p: int(p.stem[4:]))
    if ranks >= len(reports):
        return source
    out.mkdir(parents=True, exist_ok=True)
    for report in reports[:ranks]:
        link = out / report.name
        if not link.is_symlink():
            link.symlink_to(report)
    return out


def one_rank(fraction: float, steps: int = FULL_STEPS) -> Path:
    """One rank with `fraction` of the main run's kernels per rank."""
    if fraction >= 1:
        return first_ranks(1, steps)
    fewer = max(1, round(steps * fraction))
    return _generated(
        preset(MAIN_PRESET, ranks=1, steps=fewer), RUNS / f"{_name(steps)}_1rank_{fewer}steps"
    )


def size_of(run: Path) -> dict[str, int]:
    """Reports, bytes and rows of the tables the benchmark is about."""
    reports = sorted(run.glob("*.sqlite"))
    totals = {"reports": len(reports), "bytes": sum(p.stat().st_size for p in reports)}
    for key, table in (
        ("kernels", "CUPTI_ACTIVITY_KIND_KERNEL"),
        ("launch_calls", "CUPTI_ACTIVITY_KIND_RUNTIME"),
        ("nvtx", "NVTX_EVENTS"),
    ):
        totals[key] = 0
        for path in reports:
            con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
            totals[key] += con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            con.close()
    return totals


SWEEP_RANKS = (8, 16, 32, 64)


def sweep_run(ranks: int, steps: int) -> Path:
    """The first `ranks` reports of a 64-rank run of the `bench` preset with `steps` steps
    per rank (~1000 kernels each; generated once, the smaller runs are links to it)."""
    most = max(SWEEP_RANKS)
    name = f"{MAIN_PRESET}_{most}ranks_{steps}steps"
    source = _generated(preset(MAIN_PRESET, ranks=most, steps=steps), RUNS / name)
    return _first(source, ranks, RUNS / f"{name}_first{ranks}")
