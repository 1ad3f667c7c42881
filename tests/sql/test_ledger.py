"""The time ledger and per-collective exposure, exact to the ns on hand-made reports and
against a brute-force reference on random intervals."""

from __future__ import annotations

from collections import Counter

import pytest
from helpers.metric_helpers import (
    AG,
    AR,
    LEDGER_KEYS,
    load_truth,
    set_kernels,
    table_run,
    truth_runs,
    two_device_case,
)
from helpers.paths import FIXTURES
from helpers.properties import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from nsyswrap import metrics, open_run

LEDGER_PARTS = ["compute_only_ns", "comm_only_ns", "both_ns", "copy_only_ns", "idle_ns"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    path = two_device_case(tmp_path_factory.mktemp("case") / "rank0.sqlite")
    with open_run([path]) as run:
        yield run


def rows_by_device(df, columns):
    return {row.device: {c: getattr(row, c) for c in columns} for row in df.itertuples()}


def test_ledger_is_exact_on_nested_back_to_back_and_zero_length_kernels(run):
    ledger = metrics.time_ledger(run)
    columns = [
        "window_start_ns",
        "window_end_ns",
        "span_ns",
        *LEDGER_PARTS,
        "compute_busy_ns",
        "comm_busy_ns",
        "copy_busy_ns",
        "exposed_comm_ns",
        "compute_sum_ns",
        "comm_sum_ns",
        "copy_sum_ns",
        "compute_kernels",
        "comm_kernels",
        "copies",
    ]
    assert rows_by_device(ledger, columns) == {
        0: dict(
            window_start_ns=100,
            window_end_ns=1010,
            span_ns=910,
            compute_only_ns=110,
            comm_only_ns=220,
            both_ns=280,
            copy_only_ns=50,
            idle_ns=250,
            compute_busy_ns=390,
            comm_busy_ns=500,
            copy_busy_ns=50,
            exposed_comm_ns=220,
            compute_sum_ns=490,
            comm_sum_ns=500,
            copy_sum_ns=50,
            compute_kernels=6,
            comm_kernels=3,
            copies=1,
        ),
        1: dict(
            window_start_ns=0,
            window_end_ns=1000,
            span_ns=1000,
            compute_only_ns=900,
            comm_only_ns=0,
            both_ns=100,
            copy_only_ns=0,
            idle_ns=0,
            compute_busy_ns=1000,
            comm_busy_ns=100,
            copy_busy_ns=0,
            exposed_comm_ns=0,
            compute_sum_ns=1000,
            comm_sum_ns=100,
            copy_sum_ns=0,
            compute_kernels=1,
            comm_kernels=2,
            copies=0,
        ),
    }
    ratios = rows_by_device(ledger, ["overlap_ratio", "naive_overlap_ratio"])
    assert ratios[0] == pytest.approx({"overlap_ratio": 0.56, "naive_overlap_ratio": 0.16})
    assert ratios[1] == pytest.approx({"overlap_ratio": 1.0, "naive_overlap_ratio": 1.0})


def test_window_by_steps_and_by_nvtx(run):
    steps = metrics.time_ledger(run, step_from=1, step_to=2)
    assert rows_by_device(steps, ["window_source", "span_ns", *LEDGER_PARTS])[0] == dict(
        window_source="steps",
        span_ns=580,
        compute_only_ns=10,
        comm_only_ns=200,
        both_ns=0,
        copy_only_ns=50,
        idle_ns=320,
    )
    fwd = metrics.time_ledger(run, window_nvtx="fwd:%")
    assert rows_by_device(fwd, ["window_start_ns", "window_end_ns", *LEDGER_PARTS]) == {
        0: dict(
            window_start_ns=150,
            window_end_ns=300,
            compute_only_ns=50,
            comm_only_ns=0,
            both_ns=100,
            copy_only_ns=0,
            idle_ns=0,
        ),
        1: dict(
            window_start_ns=150,
            window_end_ns=300,
            compute_only_ns=100,
            comm_only_ns=0,
            both_ns=50,
            copy_only_ns=0,
            idle_ns=0,
        ),
    }
    assert metrics.time_ledger(run, window_nvtx="no such range%").empty


def test_collective_exposure_and_context(run):
    exposure = metrics.collective_exposure(run)
    got = {
        r.correlation_id: (
            r.overlap_ns,
            r.exposed_ns,
            r.exposure,
            r.step,
            r.context if isinstance(r.context, str) else None,
        )
        for r in exposure.itertuples()
    }
    assert got == {
        3: (280, 20, "partly_hidden", 0, "fwd:model.b"),
        7: (0, 100, "exposed", 1, "coll:all_gather bytes=4096 dtype=float32 pg=0 size=2 seq=0"),
        12: (100, 0, "hidden", 0, None),
        13: (0, 0, "hidden", 0, "fwd:model"),
    }
    assert exposure.name.tolist()[:2] == [AG, AR]  # most exposed first
    summary = metrics.exposure_summary(run)
    assert summary[
        [
            "device",
            "collectives",
            "hidden",
            "partly_hidden",
            "exposed",
            "total_ns",
            "overlap_ns",
            "exposed_ns",
        ]
    ].values.tolist() == [
        [0, 2, 0, 1, 1, 400, 280, 120],
        [1, 2, 2, 0, 0, 100, 100, 0],
    ]


# -- planted truth of generated runs ------------------------------------------------------


@pytest.mark.parametrize("run_dir", truth_runs(FIXTURES), ids=lambda p: p.name)
def test_ledger_and_exposure_match_planted_truth(run_dir):
    truth = load_truth(run_dir)
    with open_run([run_dir]) as run:
        ledger = metrics.time_ledger(run).set_index(["rank", "device"])
        exposure = metrics.collective_exposure(run)
    assert len(ledger) == len(truth["devices"])
    for dev in truth["devices"]:
        row = ledger.loc[(dev["rank"], dev["device"])]
        assert (row.window_start_ns, row.window_end_ns) == (dev["start_ns"], dev["end_ns"])
        assert {k: row[c] for k, c in LEDGER_KEYS.items()} == {k: dev[k] for k in LEDGER_KEYS}
    got = {
        (r["rank"], r.correlation_id): (r.start_ns, r.end_ns, r.overlap_ns)
        for _, r in exposure.iterrows()
    }
    assert got == {
        (k["rank"], k["correlation_id"]): (k["start_ns"], k["end_ns"], k["overlap_ns"])
        for k in truth["nccl_kernels"]
    }


# -- property: the SQL ledger equals a brute-force count of every ns ---------------------

KINDS = {
    "compute": ("compute", False),
    "other": ("other", False),
    "nccl": ("nccl", True),
    "p2p": ("memcpy", True),
    "memcpy": ("memcpy", False),
    "memset": ("memset", False),
}


@st.composite
def activities(draw):
    rows = []
    for _ in range(draw(st.integers(1, 12))):
        kind, is_comm = KINDS[draw(st.sampled_from(sorted(KINDS)))]
        start = draw(st.integers(0, 40))
        rows.append(
            dict(
                device=draw(st.integers(0, 1)),
                stream=draw(st.integers(0, 2)),
                start_ns=start,
                end_ns=start + draw(st.integers(0, 15)),
                kind=kind,
                is_comm=is_comm,
            )
        )
    return rows


def activity_class(row) -> str:
    if row["is_comm"]:
        return "comm"
    return "copy" if row["kind"] in ("memcpy", "memset") else "compute"


def reference(rows):
    """Per device: ledger parts, per-NCCL overlap and idle gaps, counted ns by ns."""
    out = {}
    for device in sorted({r["device"] for r in rows}):
        mine = [r for r in rows if r["device"] == device]
        start, end = min(r["start_ns"] for r in mine), max(r["end_ns"] for r in mine)
        state = {}
        for t in range(start, end):
            state[t] = {activity_class(r) for r in mine if r["start_ns"] <= t < r["end_ns"]}
        parts = Counter()
        for running in state.values():
            compute, comm = "compute" in running, "comm" in running
            key = (
                "both_ns"
                if compute and comm
                else "compute_only_ns"
                if compute
                else "comm_only_ns"
                if comm
                else "copy_only_ns"
                if running
                else "idle_ns"
            )
            parts[key] += 1
        overlaps = sorted(
            (
                r["start_ns"],
                r["end_ns"],
                sum("compute" in state[t] for t in range(r["start_ns"], r["end_ns"])),
            )
            for r in mine
            if r["kind"] == "nccl"
        )
        instants = {r["start_ns"] for r in mine if r["start_ns"] == r["end_ns"]}
        out[device] = (
            {k: parts[k] for k in LEDGER_PARTS},
            end - start,
            overlaps,
            idle_runs(state, instants),
        )
    return out


def idle_runs(state: dict[int, set], instants: set[int]) -> list[tuple[int, int]]:
    """Runs of consecutive idle ns, split where a zero-length activity sits."""
    runs: list[tuple[int, int]] = []
    for t, running in state.items():
        if running:
            continue
        if runs and runs[-1][1] == t and t not in instants:
            runs[-1] = (runs[-1][0], t + 1)
        else:
            runs.append((t, t + 1))
    return runs


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    run = table_run(tmp_path_factory.mktemp("tables"))
    yield run
    run.close()


@settings(max_examples=examples(200), deadline=None)
@given(rows=activities())
def test_ledger_matches_brute_force(tables, rows):
    set_kernels(tables, rows)
    ledger = metrics.time_ledger(tables)
    exposure = metrics.collective_exposure(tables)
    gaps = metrics.idle_gaps(tables)
    for device, (parts, span, overlaps, idle_gaps) in reference(rows).items():
        row = ledger[ledger.device == device].iloc[0]
        assert {k: row[k] for k in LEDGER_PARTS} == parts
        assert row.span_ns == span == sum(parts.values())
        mine = exposure[exposure.device == device]
        got = sorted(zip(mine.start_ns, mine.end_ns, mine.overlap_ns))
        assert got == overlaps
        mine_gaps = gaps[gaps.device == device]
        assert list(zip(mine_gaps.start_ns, mine_gaps.end_ns)) == idle_gaps
