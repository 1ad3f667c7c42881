"""The generated runs the benchmark measures, cached under bench/out/runs/.

The main runs are 8 ranks x 1000 steps of ~1000 kernels (~1 M kernels, ~1 M launch calls
and ~100 k NVTX ranges per rank) in three shapes (SHAPES): the generator's `bench` preset,
whose kernels are queued far ahead of the GPU, and two where the host sets the pace, as
in eager training; `steps` shrinks them for a quick try. Runs with fewer ranks are
directories of symbolic links to a run's first reports; runs with fewer kernels per rank
are generated (1 rank, fewer steps). A run is regenerated only when its scenario changes.
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
QUEUED, LAUNCH_BOUND, HOST_PACED = "queued", "launch-bound", "host-paced"
SHAPES = {
    QUEUED: (
        "the `bench` preset: kernels of 10-60 us queued ~15 ms ahead of the GPU by a host "
        "that launches one every 4-11 us, a synchronising call ending each step",
        MAIN_PRESET,
    ),
    LAUNCH_BOUND: (
        "the `bench_launch_bound` preset: every kernel (2-8 us) launched just before it runs "
        "(4-7 us of launch call and a 5-9 us host gap before each: a host gap before every "
        "kernel), no synchronising call",
        "bench_launch_bound",
    ),
    HOST_PACED: (
        "the `bench_host_paced` preset: 2 ms of data loading on the host each step (the GPU "
        "idle), kernels (3-12 us) about as long as their launches (3-8 us call, 2-10 us gap: "
        "some queue, most start at their launch), a synchronising call ending each step",
        "bench_host_paced",
    ),
}
"""Shape name: (what it is, the generator's preset). The paced presets are the `bench`
preset's run with other host and kernel times (its rank-5 forward straggler kept)."""


def _generated(scenario: Scenario, out_dir: Path) -> Path:
    truth = out_dir / "truth.json"
    if truth.is_file() and json.loads(truth.read_text())["scenario"] == json.loads(
        json.dumps(scenario.to_dict())
    ):
        return out_dir
    generate_run(scenario, out_dir, force=True)
    return out_dir


def scenario(shape: str = QUEUED, **size) -> Scenario:
    """The preset of `shape`, resized by `size` (ranks, steps: see `preset`)."""
    return preset(SHAPES[shape][1], **size)


def _name(steps: int, shape: str = QUEUED) -> str:
    name = MAIN_PRESET if shape == QUEUED else f"{MAIN_PRESET}_{shape}"
    return name if steps == FULL_STEPS else f"{name}_{steps}steps"


def main_run(steps: int = FULL_STEPS, shape: str = QUEUED) -> Path:
    """The 8-rank run of `shape`, with `steps` steps."""
    return _generated(scenario(shape, steps=steps), RUNS / _name(steps, shape))


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


SWEEP_RANKS = (8, 32, 64)


def sweep_run(ranks: int, steps: int, shape: str = QUEUED) -> Path:
    """The first `ranks` reports of a 64-rank run of `shape` with `steps` steps per rank
    (~1000 kernels each; generated once, the smaller runs are links to it)."""
    most = max(SWEEP_RANKS)
    name = f"{_name(FULL_STEPS, shape)}_{most}ranks_{steps}steps"
    source = _generated(scenario(shape, ranks=most, steps=steps), RUNS / name)
    return _first(source, ranks, RUNS / f"{name}_first{ranks}")
