"""Cross-rank answers on hybrid-parallel generated runs (nsyswrap.synth preset hybrid8:
TP groups of 4 inside each of 2 hosts, DP pairs across them, one clock per host with
node1 3.1 ms off and drifting 40 ppm, backward on an autograd thread, rank 6 slow in
backward in steps 2, 3, 5 and 7), with and without nsyswrap's `coll:` ranges, and the real
MPI run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

# The planted-truth checks of the hybrid run, collected here with this module's `hybrid`
# fixture (with and without `coll:` ranges).
from helpers.hybrid_checks import (  # noqa: F401
    test_every_matched_collective_skew_and_wait_exact,
    test_every_offset_and_drift_exact,
    test_groups_are_found_and_never_merged,
    test_straggler_rank_phase_and_steps,
    test_timeline_places_every_rank_by_its_drifting_clock,
)

from nsyswrap import open_run
from nsyswrap.crossrank import clock_offsets, matched_collectives
from nsyswrap.crossrank.alignment import solve_clocks
from nsyswrap.crossrank.matching import verdicts
from nsyswrap.errors import NsysWrapError
from nsyswrap.report import ReportOptions, build_report
from nsyswrap.synth import preset

VARIANTS = {
    "ranges": {},
    "kernels_only": {"coll_ranges": False, "nccl_nvtx": False},
    "one_capture_per_node": {"ranks_per_report": 4},
}
SHARED = Path(__file__).resolve().parents[2] / ".." / "shared" / "nsys-sqlite"
REAL_MPI = SHARED / "real-mpi"
TWO_GPU = SHARED / "public" / "nsysai__h100_2gpu_1s.sqlite"


@pytest.fixture(scope="module", params=list(VARIANTS))
def hybrid(request, generated_run):
    truth, out = generated_run(preset("hybrid8").replace(**VARIANTS[request.param]))
    with open_run([out]) as run:
        yield truth, run


def test_unrelated_reports_are_refused_in_one_line(generated_run):
    _, a = generated_run("run2")
    later = preset("run2").replace(name="later", clock_error_ns=(86_400 * 10**9, 86_400 * 10**9))
    _, b = generated_run(later)
    with open_run([a / "rank0.sqlite", b / "rank1.sqlite"]) as run:
        with pytest.raises(NsysWrapError, match="not one run"):
            build_report(run, ReportOptions())
    with open_run([a / "rank0.sqlite", b / "rank1.sqlite"]) as run:
        run.allow_unrelated = True
        build_report(run, ReportOptions())


@pytest.mark.skipif(not REAL_MPI.is_dir(), reason="needs ../shared/nsys-sqlite/real-mpi")
def test_real_mpi_run_true_ranks_matched_and_aligned():
    with open_run([REAL_MPI]) as run:
        assert sorted(r.rank for r in run.reports) == [2, 3, 4, 6, 7]
        assert {r.rank_source for r in run.reports} == {"MPI rank (nsys)"}
        offsets = clock_offsets(run)
        coll = matched_collectives(run)
    assert offsets["aligned"].all() and (offsets["source"] == "nvtx").all()
    assert offsets["offset_ns"].abs().max() < 100_000 and offsets["uncertainty_ns"].max() < 5_000
    assert (
        coll.groupby(["pg", "seq"])["rank"].nunique().eq(5).all() and coll["seq"].nunique() > 1_000
    )
    # the five ranks share a node: one clock (its host from the recorded environment), and
    # its 1,002 MPI_Allreduce / MPI_Barrier calls (true barriers) all matched
    assert (offsets["clock"] == "host prm-dgx-05").all() and (offsets["offset_ns"] == 0).all()
    assert len(coll[["pg", "seq"]].drop_duplicates()) == 1_002 and coll["barrier"].all()


@pytest.mark.skipif(not TWO_GPU.is_file(), reason="needs ../shared/nsys-sqlite/public")
def test_one_report_with_two_gpu_processes_is_two_ranks_on_one_clock():
    with open_run([TWO_GPU]) as run:
        offsets = clock_offsets(run)
        section = next(
            s for s in build_report(run, ReportOptions())["sections"] if s["id"] == "crossrank"
        )
    assert offsets[["rank", "pid", "offset_ns", "shift_ns"]].values.tolist() == [
        [0, 111, 0, 0],
        [1, 112, 0, 0],
    ]
    assert offsets["rank_source"].str.startswith("device order").all() and offsets["aligned"].all()
    assert section["verdict"]["label"] is None and "NCCL kernels" in section["verdict"]["reason"]


def _calls(rows):
    return pd.DataFrame(rows, columns=["rank", "pg", "seq", "op", "bytes", "group_size"])


def test_group_size_disagreement_stops_matching():
    calls = _calls(
        [
            (r, "0", s, "all_reduce", 8, 4 if (r, s) != (1, 1) else 2)
            for r in range(2)
            for s in range(3)
        ]
    )
    v = verdicts(calls).set_index(["rank", "seq"])
    assert (
        v.loc[(0, 0), "matches"] and not v.loc[(0, 1), "matches"] and not v.loc[(0, 2), "matches"]
    )
    assert v.loc[(1, 1), "size_differs"]


def test_a_rank_no_collective_connects_is_unaligned_unless_its_host_is():
    ends = pd.DataFrame(
        [(r, "0", s, 1_000 * s + 10 * r, True) for r in (0, 1) for s in range(5)],
        columns=["rank", "pg", "seq", "end_ns", "on_gpu"],
    )
    sessions = pd.DataFrame(
        {"rank": [0, 1, 2, 3], "utc_epoch_ns": [0, 5, 7, 9], "host": ["a", "b", "b", "c"]}
    )
    clock, _ = solve_clocks(ends, sessions)
    clock = clock.set_index("rank")
    assert clock.loc[1, "offset_ns"] == -15 and clock.loc[1, "method"].startswith("robust")
    assert (
        clock.loc[2, "aligned"]
        and clock.loc[2, "offset_ns"] == -15
        and clock.loc[2, "source"] == "host"
    )
    assert not clock.loc[3, "aligned"] and clock.loc[3, "method"].startswith("unaligned")


def _ends(jitter_ns: int = 0, outliers: int = 0) -> tuple[pd.DataFrame, pd.DataFrame, dict, dict]:
    """Ends of 40 collectives of 4 ranks over 0.5 s on clocks of the alignment's model
    (offset + drift per session ns; synth trace.recorded), with jitter and outliers."""
    from nsyswrap.synth.trace import recorded

    rng = np.random.default_rng(3)
    utc, offset, drift = (
        [0, 1_000, 2_000, 3_000],
        [0, 5_000, -7_000, 12_345],
        [0, 0, -40_000, 25_000],
    )
    rows = []
    for seq, true_end in enumerate(np.sort(rng.integers(1_000_000, 500_000_000, 40))):
        for r in range(4):
            x = recorded(int(true_end) - utc[r] - offset[r], -drift[r]) + int(
                rng.integers(0, jitter_ns + 1)
            )
            rows.append((r, "0", seq, x, True))
    ends = pd.DataFrame(rows, columns=["rank", "pg", "seq", "end_ns", "on_gpu"])
    ends.loc[rng.choice(len(ends), outliers, replace=False), "end_ns"] += 50_000
    sessions = pd.DataFrame({"rank": range(4), "utc_epoch_ns": utc, "host": ["a", "b", "c", "d"]})
    return ends, sessions, dict(enumerate(offset)), dict(enumerate(drift))


@pytest.mark.parametrize("outliers", [0, 6])
def test_exact_ends_give_exact_clocks_despite_outliers(outliers):
    ends, sessions, offset, drift = _ends(outliers=outliers)
    clock, resid = solve_clocks(ends, sessions)
    clock = clock.set_index("rank")
    assert clock["offset_ns"].to_dict() == offset and clock["drift_ppb"].to_dict() == drift
    assert (resid.abs() > 1_000).sum() == outliers and (
        resid[resid.abs() < 1_000].round() == 0
    ).all()


def test_jittered_ends_give_clocks_within_a_microsecond():
    ends, sessions, offset, drift = _ends(jitter_ns=200, outliers=6)
    clock = solve_clocks(ends, sessions)[0].set_index("rank")
    for r in offset:  # over the 0.5 s of collectives
        assert (
            abs(clock.loc[r, "offset_ns"] - offset[r])
            + abs(clock.loc[r, "drift_ppb"] - drift[r]) * 0.5
            < 1_000
        )
        assert clock.loc[r, "uncertainty_ns"] < 1_000
