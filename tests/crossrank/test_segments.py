"""The replay's per-report inputs (nsyswrap.crossrank.segments: xr_segments, xr_nccl_calls):
compact, one row per (process, step, phase range or collective segment), and what each
segment's lane rests on."""

from __future__ import annotations

import pytest

from nsyswrap import open_run
from nsyswrap.engine import planner
from nsyswrap.synth import preset


def _counts(folder) -> dict[str, int]:
    """Rows of the replay's inputs and what they summarise, over every report of a run."""
    with open_run([folder]) as run:
        for name in ("xr_segments", "xr_nccl_calls", "xr_phases"):
            planner.bind(run, name, {})
        return {
            name: int(run.df(f"SELECT count(*) FROM {name}").iloc[0, 0])
            for name in ("xr_segments", "xr_nccl_calls", "xr_phases", "kernels")
        }


@pytest.fixture(scope="module")
def launch_bound(generated_run) -> dict[int, dict[str, int]]:
    """The bench's launch-bound shape (every kernel launched just before it runs, no
    synchronising call), 2 ranks x 3 steps, with 100 and 400 kernels a step."""
    out = {}
    for kernels in (100, 400):
        _, folder = generated_run(
            preset("bench_launch_bound", ranks=2, steps=3, kernels_per_step=kernels)
        )
        out[kernels] = _counts(folder)
    return out


def test_the_replays_inputs_scale_with_phase_ranges_and_collectives_not_kernels(launch_bound):
    """Four times the kernels (and launch gaps), the same phase ranges and collectives: as
    many rows of the replay's inputs, within the few the hosts' waits add, and a handful per
    phase range and collective, never one per kernel (#37)."""
    few, many = launch_bound[100], launch_bound[400]
    assert many["kernels"] >= 3.5 * few["kernels"]
    assert many["xr_phases"] == few["xr_phases"]
    assert many["xr_nccl_calls"] == few["xr_nccl_calls"]
    assert abs(many["xr_segments"] - few["xr_segments"]) <= 0.1 * few["xr_segments"]
    per = many["xr_segments"] / (many["xr_phases"] + many["xr_nccl_calls"])
    assert per < 3 and many["xr_segments"] < many["kernels"] / 20
