"""The benchmark's pandas baseline computes what nsyswrap computes, to the nanosecond."""

from __future__ import annotations

import pandas as pd
import pytest
from helpers.paths import FIXTURES

import nsyswrap
from bench.baseline import analyse

RUNS = ["run2", "edge_cases", "run4_straggler"]
GAP_COLUMNS = [
    "rank",
    "device",
    "start_ns",
    "end_ns",
    "dur_ns",
    "sync_ns",
    "next_launch_ns",
    "cause",
]
SKEW_COLUMNS = ["pg", "seq", "rank", "start_ns", "end_ns", "wait_ns", "last_rank", "skew_ns"]


def _same(ours: pd.DataFrame, theirs: pd.DataFrame, keys: list[str]) -> None:
    ours = ours.sort_values(keys).reset_index(drop=True)
    theirs = theirs[ours.columns].sort_values(keys).reset_index(drop=True)
    pd.testing.assert_frame_equal(ours, theirs, check_dtype=False)


@pytest.fixture(scope="module", params=RUNS)
def run(request):
    path = FIXTURES / request.param
    return path, analyse([path])


def test_ledger_matches_nsyswrap(run):
    path, (ledger, _, _) = run
    _same(ledger, nsyswrap.query("ledger.devices", [path]), ["rank", "device"])


def test_idle_gaps_match_nsyswrap(run):
    path, (_, gaps, _) = run
    _same(gaps[GAP_COLUMNS], nsyswrap.query("gaps.idle", [path]), ["rank", "device", "start_ns"])


def test_collective_skew_matches_nsyswrap(run):
    """The baseline aligns clocks pairwise to the lowest rank (median of end differences);
    nsyswrap solves all offsets at once (robust least squares): times agree within the
    end jitter, durations exactly."""
    path, (_, _, skew) = run
    ours = nsyswrap.query("crossrank.collectives", [path]).sort_values(["pg", "seq", "rank"])
    theirs = skew[SKEW_COLUMNS].sort_values(["pg", "seq", "rank"])
    assert (
        ours[["pg", "seq", "rank"]].values.tolist() == theirs[["pg", "seq", "rank"]].values.tolist()
    )
    for column in ("start_ns", "end_ns", "wait_ns", "skew_ns"):
        assert (abs(ours[column].to_numpy() - theirs[column].to_numpy()) <= 200).all(), column
    assert (
        (ours["end_ns"] - ours["start_ns"]).to_numpy()
        == (theirs["end_ns"] - theirs["start_ns"]).to_numpy()
    ).all()
