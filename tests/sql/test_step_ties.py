"""Step ranges that start together: every lookup of an instant's step is settled by one
rule (step_regions: the step whose region holds it; of steps starting together the lowest
number holds the time), the same on every run and with any number of threads.

On fixtures/run2 with `--step-pattern 'bwd:%'`, `bwd:head` (step 0: no number, first by
start order) and `bwd:ToyTransformer` (step 1) start together at 1,343,585 ns on rank 0;
so do steps 5 and 6, and 10 and 11, in the later iterations. (`bwd:layers.0.mlp` and
`bwd:layers.0.attn` are numbered 0 by their text in every iteration: each later use of
the number is a step of its own, numbered on after the highest, 15 to 20; they were
merged into step 0 before, one step from the first iteration to the last.)"""

from __future__ import annotations

import pandas as pd
import pytest
from helpers.paths import FIXTURES

from nsyswrap import open_run
from nsyswrap.engine import planner, sql_objects

TIED = {"step_pattern": "bwd:%"}
RANK0 = FIXTURES / "run2" / "rank0.sqlite"


def _rows(report, name: str, params: dict, cache, monkeypatch) -> pd.DataFrame:
    """Object `name` over one report, computed afresh (a new cache) with 4 threads."""
    monkeypatch.setenv("NSYSWRAP_CACHE_DIR", str(cache))
    with open_run([report], jobs=1) as run:
        run.connection.execute("SET threads = 4")
        planner.bind(run, name, sql_objects.get(name).values(params))
        rows = run.connection.execute(f'SELECT * EXCLUDE (report) FROM "{name}"').df()
    return rows.sort_values(list(rows.columns), ignore_index=True, na_position="first")


def test_tied_starts_give_the_time_to_the_lowest_step(tmp_path, monkeypatch):
    regions = _rows(RANK0, "device_step_regions", TIED, tmp_path, monkeypatch)
    holding = regions[regions["region_end_ns"] > regions["start_ns"]]
    assert holding["start_ns"].is_unique
    tied = regions[regions["start_ns"] == 1_343_585].set_index("step")
    assert list(tied.index) == [0, 1]
    assert tied.loc[0, "region_end_ns"] == 1_387_737  # to its end, before the next start
    assert tied.loc[1, "region_end_ns"] == 1_343_585  # holds no time


def test_launch_step_is_the_region_holding_the_launch_call(tmp_path, monkeypatch):
    rows = _rows(RANK0, "nccl_context", TIED, tmp_path, monkeypatch)
    step = dict(zip(rows["launch_ns"], rows["step"].astype("Int64")))
    # inside bwd:ToyTransformer (steps 1, 6, 11) after bwd:head (0, 5, 10) ended, between
    # the layers' steps: the region of the tied pair ended with step 0 / 5 / 10, as
    # steps.ledger counts that time in no step (each launch is between two steps)
    for launch_ns in (1_403_269, 1_480_310, 4_547_710, 4_629_965, 6_363_128, 6_425_608):
        assert step[launch_ns] is pd.NA


def test_phase_step_is_the_step_around_it(tmp_path, monkeypatch):
    rows = _rows(RANK0, "xr_phases", TIED, tmp_path, monkeypatch)
    # the ranges directly inside bwd:ToyTransformer (steps 1, 6, 11); bwd:head (0, 5, 10)
    # starts with it but is one level deeper
    by_phase = rows.groupby("phase")["step"].apply(sorted).to_dict()
    assert by_phase == {
        p: [1, 6, 11] for p in ("bwd:embed", "bwd:head", "bwd:layers.0.attn", "bwd:layers.0.mlp")
    }


@pytest.mark.parametrize(
    "name", ["device_step_regions", "nccl_context", "xr_phases", "idle_gap_rows"]
)
def test_tied_lookups_repeat_exactly(name, tmp_path, monkeypatch):
    for report in sorted((FIXTURES / "run2").glob("*.sqlite")):
        runs = [
            _rows(report, name, TIED, tmp_path / f"{report.stem}-{i}", monkeypatch)
            for i in range(5)
        ]
        for again in runs[1:]:
            pd.testing.assert_frame_equal(again, runs[0], obj=f"{name} {report.name}")


def test_collective_step_of_tied_ranges_is_the_lowest_step(tmp_path, monkeypatch):
    """The cross-rank solve places a call by step_lookup (the one rule: of steps starting
    together the lowest, if it still holds the instant); step_at only finds the region
    holding it, whatever the order of the rows."""
    from nsyswrap.crossrank.solve import step_at

    lookup = _rows(RANK0, "step_lookup", TIED, tmp_path, monkeypatch)
    tied = lookup[lookup["start_ns"] == 1_343_585].set_index("step")
    assert list(tied.index) == [0, 1] and tied.loc[1, "region_end_ns"] == 1_343_585
    # inside both tied ranges (step 0 holds them); inside step 6 after the tied step 5 ended
    calls = pd.DataFrame({"rank": 0, "cpu_start_ns": [1_360_000, 1_387_000, 4_547_710]})
    for order in ([*range(len(lookup))], [*range(len(lookup))][::-1]):
        got = step_at(calls, "cpu_start_ns", lookup.iloc[order])
        assert got.tolist()[:2] == [0, 0] and pd.isna(got.iloc[2])
