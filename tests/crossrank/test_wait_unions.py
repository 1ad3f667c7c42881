"""Waits counted once: collectives outstanding together (DDP's asynchronous gradient
buckets) overlap in time on a rank, so its time waiting and its time in collectives are
unions of intervals (xr_collective_unions), never sums. Checked on every real capture whose
ranks match collectives, against a union worked out here from crossrank.collectives."""

from __future__ import annotations

import pytest
from helpers.intervals import union_length
from helpers.paths import FIXTURES

from nsyswrap import open_run
from nsyswrap.engine.queries import run_module

REAL = FIXTURES / "real"
# DDP over gloo on the H200 keeps two gradient buckets outstanding at once; the H100 run's
# model has one bucket.
OVERLAPPING = [
    "h200_ddp_gloo_slow",
    "h200_ddp_gloo_slow_zero_code",
    "h200_fix_slow",
    "h200_fix_clean",
]
CAPTURES = ["h100_ddp_gloo", *OVERLAPPING]


@pytest.fixture(scope="module", params=CAPTURES)
def capture(request):
    with open_run([REAL / request.param]) as run:
        yield (
            request.param,
            run_module(run, "crossrank.collectives"),
            run_module(run, "crossrank.comm_split"),
            run_module(run, "steps.ranges"),
            run_module(run, "crossrank.stragglers"),
        )


def test_waits_and_time_in_collectives_are_unions(capture):
    name, coll, split, _, _ = capture
    assert not split.empty
    overlapping = 0
    for (step, rank), mine in coll.groupby(["step", "rank"]):
        row = split[(split["step"] == step) & (split["rank"] == rank)].iloc[0]
        waits = [(s, s + w) for s, w in zip(mine["start_ns"], mine["wait_ns"]) if w > 0]
        assert row["wait_ns"] == union_length(waits)
        assert row["comm_ns"] == union_length(list(zip(mine["start_ns"], mine["end_ns"])))
        assert row["transfer_ns"] == row["comm_ns"] - row["wait_ns"]
        overlapping += row["wait_ns"] < mine["wait_ns"].sum()
    assert bool(overlapping) == (name in OVERLAPPING)


def test_no_step_waits_longer_than_it_lasts(capture):
    _, _, split, steps, _ = capture
    lasts = steps.assign(dur_ns=steps["end_ns"] - steps["start_ns"]).set_index(["rank", "step"])
    per_step = split.dropna(subset=["step"])
    for row in per_step.itertuples(index=False):
        assert row.wait_ns <= row.comm_ns <= lasts.loc[(row.rank, row.step), "dur_ns"]


def test_the_wait_a_straggler_imposed_is_counted_once(capture):
    _, coll, split, _, strag = capture
    run_row = strag[strag["step"].isna()].iloc[0]
    others = split[(split["rank"] != run_row["rank"]) & split["step"].notna()]
    assert run_row["imposed_wait_ns"] <= others["wait_ns"].sum() < coll["wait_ns"].sum()
