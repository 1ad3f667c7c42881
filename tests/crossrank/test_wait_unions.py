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


def test_the_stragglers_lag_and_gap_are_counted_once(capture):
    """Its lag (from the median arrival) and its gap (from the first) at the collectives it
    arrived last at are unions per step: DDP's two buckets, outstanding together, summed
    said 13.01 ms per step after rank 0 on h200_fix_slow, where rank 0 waited 9.36."""
    name, coll, _, steps, strag = capture
    lasts = steps.assign(dur_ns=steps["end_ns"] - steps["start_ns"]).set_index(["rank", "step"])
    firsts = coll.groupby("pg")["seq"].transform("min") == coll["seq"]  # start-up skew
    arrivals = coll[~firsts].assign(
        first_ns=lambda c: c.groupby(["pg", "seq"])["start_ns"].transform("min")
    )
    late = arrivals[arrivals["rank"] == arrivals["last_rank"]]

    def unions(rank, step) -> tuple[int, int]:
        in_step = late["step"].isna() if step is None else late["step"] == step
        mine = late[(late["rank"] == rank) & in_step]
        lag = [(s - lag, s) for s, lag in zip(mine["start_ns"], mine["lag_ns"]) if lag > 0]
        gap = [(f, s) for f, s in zip(mine["first_ns"], mine["start_ns"]) if s > f]
        overlapping.append(union_length(gap) < sum(e - s for s, e in gap))
        return union_length(lag), union_length(gap)

    overlapping = []
    for row in strag.dropna(subset=["step"]).itertuples(index=False):
        assert (row.lag_ns, row.gap_ns) == unions(row.rank, row.step)
        assert row.gap_ns <= lasts.loc[(row.rank, row.step), "dur_ns"]
    assert any(overlapping) == (name in OVERLAPPING)
    run_row = strag[strag["step"].isna()].iloc[0]
    outside = [None] if late["step"].isna().any() else []  # collectives outside the steps
    steps_of = [*sorted(late["step"].dropna().unique()), *outside]
    summed = [unions(run_row["rank"], step) for step in steps_of]
    assert (run_row["lag_ns"], run_row["gap_ns"]) == tuple(map(sum, zip(*summed)))
