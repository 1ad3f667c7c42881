"""The figures read off the stored device timeline (nsyswrap.sweep.device_timeline) equal those
of the windowed SQL sweep they replaced, kept here as the reference
(tests/data/sweep_reference: `device_sweep` and the objects and modules that read it, as
they were): on the fixtures over many kinds of windows, and on random activities with
ties, zero-length and unfinished ones, shared correlation ids, host syncs and step ranges
(with blocks of 3 rows, so that look-ups sweep on from a block's state).
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest
from helpers.metric_helpers import table_run
from helpers.paths import FIXTURES
from helpers.properties import examples
from helpers.windows import WINDOWS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nsyswrap import open_run
from nsyswrap.engine import planner, sql_objects
from nsyswrap.sweep import device_timeline

REFERENCE = {
    p.stem: p.read_text()
    for p in (Path(__file__).parents[1] / "data" / "sweep_reference").glob("*.sql")
}
REPLACED = (
    "device_sweep",
    "window_unions",
    "step_unions",
    "idle_gap_rows",
    "idle_gaps",
    "collective_exposure",
)  # in dependency order
MODULES = (
    "ledger.devices",
    "steps.ledger",
    "gaps.idle",
    "gaps.by_cause",
    "gaps.histogram",
    "collectives.exposure",
    "collectives.exposure_summary",
    "gaps.launch_summary",
)


def _renamed(sql: str) -> str:
    return re.sub(r"\b(%s)\b" % "|".join(REPLACED), r"ref_\1", sql)  # noqa: UP031


def _used(sql: str, params: dict) -> dict:
    return {k: v for k, v in params.items() if re.search(rf"\${k}\b", sql)}


def _sorted(df: pd.DataFrame) -> pd.DataFrame:
    df = df.drop(columns=[c for c in ("report",) if c in df.columns])
    return df.sort_values(list(df.columns), ignore_index=True, na_position="first")


def compare(run, params: dict, what: str) -> None:
    """Every module of MODULES with `params`, against the reference sweep's. (The reference
    counted a kernel in gaps.launch_summary once per launches row of its process,
    correlation id, device, stream and start: twice for each of two kernels of one CUDA
    graph starting in the same ns on one stream. The timeline counts each kernel once.)"""
    con = run.connection
    twice = con.execute(
        "SELECT count(*) FROM kernels GROUP BY rank, pid, correlation_id, device, "
        "stream, start_ns HAVING count(*) > 1"
    ).fetchall()
    values = {}
    for name in MODULES:
        values = {**values, **sql_objects.get(name).values(params)}
        planner.prepare(run, name, values)
    run.load_library("metrics")
    run.load_library("launch_metrics")  # the reference launch summary reads its macro
    for stored in ("device_windows", "device_step_regions", "device_sync_islands"):
        planner.bind(run, stored, values)  # what the reference reads (a plan may skip them)
    for obj in REPLACED:
        sql = _renamed(REFERENCE[obj].split("\n", 1)[1])
        con.execute(f"CREATE OR REPLACE TEMP TABLE ref_{obj} AS {sql}", _used(sql, values))
    for name in MODULES[:-1] if twice else MODULES:
        module = sql_objects.get(name)
        new = con.execute(module.sql, module.bound(values)).df()
        sql = _renamed(REFERENCE.get(name, module.sql))
        old = con.execute(sql, _used(sql, values)).df()
        # columns added after the reference (ledger.devices' busy_before_ns and
        # busy_after_ns: the reference sweep sees only the window) are checked below
        pd.testing.assert_frame_equal(
            _sorted(new[list(old.columns)]),
            _sorted(old),
            check_dtype=False,
            obj=f"{name} {what} {params}",
        )
        if name == "ledger.devices":
            _check_busy_outside(con, new)


def _check_busy_outside(con, ledger: pd.DataFrame) -> None:
    """ledger.devices' busy_before_ns / busy_after_ns: the union of the device's
    activities (kernels with an end at or after their start) clipped to before the
    window's start / after its end, worked out here row by row."""
    rows = con.execute(
        "SELECT rank, device, start_ns, end_ns FROM kernels WHERE end_ns >= start_ns"
    ).fetchall()
    for r in ledger.itertuples(index=False):
        mine = [(s, e) for rank, dev, s, e in rows if (rank, dev) == (r.rank, r.device)]
        before = [(s, min(e, r.window_start_ns)) for s, e in mine]
        after = [(max(s, r.window_end_ns), e) for s, e in mine]
        assert r.busy_before_ns == _union(before), (r.rank, r.device, "before")
        assert r.busy_after_ns == _union(after), (r.rank, r.device, "after")


def _union(intervals: list[tuple[int, int]]) -> int:
    total, reach = 0, None
    for start, end in sorted(i for i in intervals if i[1] > i[0]):
        if reach is None or start > reach:
            total, reach = total + end - start, end
        elif end > reach:
            total, reach = total + end - reach, end
    return total


@pytest.mark.parametrize(
    "fixture", ["run2", "run4_straggler", "edge_cases", "real/h100_cuda_graphs"]
)
def test_fixtures_over_windows(fixture):
    for report in sorted((FIXTURES / fixture).glob("*.sqlite"))[:2]:
        with open_run([report], jobs=1) as run:
            for window in WINDOWS:
                compare(run, window, report.name)


# -- random activities -----------------------------------------------------------------

NAMES = ("gemm", "relu", "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "memcpy HtoD", None)
KINDS = {
    "compute": ("compute", False),
    "nccl": ("nccl", True),
    "p2p": ("memcpy", True),
    "memcpy": ("memcpy", False),
    "memset": ("memset", False),
    "other": ("other", False),
}


@st.composite
def activities(draw):
    kernels, launches = [], []
    for _ in range(draw(st.integers(1, 14))):
        kind, is_comm = KINDS[draw(st.sampled_from(sorted(KINDS)))]
        start = draw(st.integers(0, 60))
        end = draw(
            st.one_of(
                st.integers(start, start + 15),
                st.just(start),
                st.just(None),
                st.integers(start - 5, start - 1),
            )
        )
        kernels.append(
            dict(
                device=draw(st.integers(0, 1)),
                stream=draw(st.integers(0, 2)),
                start_ns=start,
                end_ns=end,
                kind=kind,
                is_comm=is_comm,
                name=draw(st.sampled_from(NAMES)) if kind != "nccl" else NAMES[2],
                correlation_id=draw(st.integers(0, 6)),
            )
        )
    calls = {
        c: draw(st.integers(-5, 60))
        for c in sorted({k["correlation_id"] for k in kernels})
        if draw(st.booleans())
    }
    for k in kernels:
        if k["correlation_id"] in calls:
            launches.append(
                dict(
                    start_ns=calls[k["correlation_id"]],
                    correlation_id=k["correlation_id"],
                    device=k["device"],
                    stream=k["stream"],
                    kernel_start_ns=k["start_ns"],
                    kernel_end_ns=k["end_ns"],
                    kind=k["kind"],
                )
            )
    syncs = [
        (s, s + draw(st.integers(1, 12))) for s in draw(st.lists(st.integers(0, 60), max_size=3))
    ]
    steps = [
        (i, s, s + draw(st.integers(0, 20)) if draw(st.booleans()) else None)
        for i, s in enumerate(draw(st.lists(st.integers(-5, 60), max_size=4)))
    ]
    return kernels, launches, syncs, steps


def fill(run, kernels, launches, syncs, steps) -> None:
    """The views of a run of hand-made tables: these kernels, launch calls, host syncs and
    step ranges (and one range fwd:x from 10 to 40)."""
    con = run.connection
    for table in ("kernels", "launches", "api_calls", "nvtx"):
        con.execute(f"DELETE FROM {table}")
    con.register("k", pd.DataFrame(kernels))
    con.execute(
        "INSERT INTO kernels BY NAME SELECT 0 AS rank, 'r' AS report, 1 AS pid, "
        "1 AS context, device, stream, start_ns, end_ns::BIGINT AS end_ns, "
        "(end_ns - start_ns)::BIGINT AS dur_ns, correlation_id, name, kind, is_comm FROM k"
    )
    if launches:
        con.register("l", pd.DataFrame(launches))
        con.execute(
            "INSERT INTO launches BY NAME SELECT 0 AS rank, 'r' AS report, 1 AS pid, "
            "1 AS tid, 'cudaLaunchKernel' AS api, start_ns, start_ns + 1 AS end_ns, "
            "1 AS dur_ns, correlation_id, device, stream, kernel_start_ns, "
            "kernel_end_ns::BIGINT AS kernel_end_ns, kind, "
            "kernel_start_ns - start_ns AS latency_ns FROM l"
        )
    for start, end in syncs:
        con.execute(
            "INSERT INTO api_calls BY NAME SELECT 0 AS rank, 'r' AS report, 1 AS pid, "
            "1 AS tid, 'cudaStreamSynchronize' AS api, $s AS start_ns, $e AS end_ns",
            {"s": start, "e": end},
        )
    for step, start, end in [*steps, (None, 10, 40)]:
        con.execute(
            "INSERT INTO nvtx BY NAME SELECT 0 AS rank, 'r' AS report, 1 AS pid, "
            "1 AS tid, $s AS start_ns, $e AS end_ns, 'push_pop' AS event_type, $t AS text",
            {"s": start, "e": end, "t": "fwd:x" if step is None else f"step:{step}"},
        )


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    run = table_run(tmp_path_factory.mktemp("tables"))
    yield run
    run.close()


@settings(
    max_examples=examples(40),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    case=activities(),
    window=st.sampled_from(
        [
            {},
            {"step_from": 1},
            {"step_to": 2},
            {"step_from": 1, "step_to": 3},
            {"window_nvtx": "fwd:%"},
            {"window_nvtx": "fwd:%", "step_from": 0, "step_to": 2},
        ]
    ),
)
def test_random_activities(tables, monkeypatch, case, window):
    monkeypatch.setattr(device_timeline, "BLOCK", 3)
    fill(tables, *case)
    compare(tables, window, "random")
