"""Tests of the synthetic report generator (nsyswrap.synth) and its planted ground truth."""

from __future__ import annotations

import json
import shutil
import sqlite3
import tempfile
from pathlib import Path

import pytest
from helpers.properties import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nsyswrap.errors import NsysWrapError
from nsyswrap.synth import (
    FIXTURES,
    ExtraCollective,
    PlantedGap,
    Scenario,
    Straggler,
    Truth,
    generate_run,
    ids,
    preset,
    write_fixtures,
)
from nsyswrap.synth.intervals import Measure, gaps, intersect, union

ROOT = Path(__file__).parents[2]
FIXTURE_DIR = ROOT / "fixtures"
REAL = (
    Path(__file__).parents[2].parent
    / "shared"
    / "nsys-sqlite"
    / "public"
    / "nsysai__mfu_2gpu_before.sqlite"
)
MASK = 0xFFFFFF


def connect(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


def reports(name: str) -> list[Path]:
    return sorted((FIXTURE_DIR / name).glob("rank*.sqlite"))


def all_reports() -> list[Path]:
    return [p for name in FIXTURES for p in reports(name)]


def truth_of(name: str) -> Truth:
    return Truth.load(FIXTURE_DIR / name / "truth.json")


def tables(con: sqlite3.Connection) -> list[str]:
    return [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]


@pytest.fixture(scope="module")
def small_run(generated_run) -> tuple[Path, Truth]:
    truth, out = generated_run("mismatch")
    return out, truth


# -- schema fidelity ------------------------------------------------------------------


@pytest.mark.skipif(not REAL.exists(), reason="real 2026.2.1 export not available")
@pytest.mark.parametrize("path", all_reports(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_tables_have_the_real_columns_and_ddl(path):
    real, ours = connect(REAL), connect(path)
    real_tables = set(tables(real))
    for table in tables(ours):
        assert table in real_tables
        info = f'PRAGMA table_info("{table}")'
        assert ours.execute(info).fetchall() == real.execute(info).fetchall(), table
        ddl = "SELECT sql FROM sqlite_master WHERE name = ?"
        assert ours.execute(ddl, (table,)).fetchone() == real.execute(ddl, (table,)).fetchone(), (
            table
        )


@pytest.mark.parametrize("path", all_reports(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_lazy_export_has_only_filled_tables(path):
    con = connect(path)
    for table in tables(con):
        count = con.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]
        assert count > 0 or table.startswith("ENUM_"), table
    for table in (
        "CUPTI_ACTIVITY_KIND_KERNEL",
        "CUPTI_ACTIVITY_KIND_RUNTIME",
        "NVTX_EVENTS",
        "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
        "ENUM_NSYS_EVENT_TYPE",
        "ENUM_CUDA_MEMCPY_OPER",
        "ENUM_CUPTI_SYNC_TYPE",
        "TARGET_INFO_CUDA_STREAM",
        "ThreadNames",
    ):
        assert table in tables(con)


@pytest.mark.skipif(not REAL.exists(), reason="real 2026.2.1 export not available")
def test_metadata_matches_real_keys_and_names_the_rank():
    real_keys = [
        k
        for (k,) in connect(REAL).execute("SELECT name FROM META_DATA_EXPORT")
        if not k.startswith("DERIVED_")
    ]
    for name in FIXTURES:
        truth = truth_of(name)
        for rank, path in enumerate(reports(name)):
            con = connect(path)
            meta = con.execute("SELECT name, value FROM META_DATA_EXPORT").fetchall()
            assert [k for k, _ in meta] == real_keys + ["NSYSWRAP_SYNTHETIC"]
            meta = dict(meta)
            assert meta["EXPORT_PRODUCT_VERSION"] == "2026.2.1.210"
            assert meta["EXPORT_SCHEMA_VERSION"] == "3.25.0"
            assert meta["NSYSWRAP_SYNTHETIC"] == name
            env = {
                v
                for (v,) in con.execute(
                    "SELECT value FROM META_DATA_CAPTURE "
                    "WHERE name = 'PROCESS_0:ENVIRONMENT_VARIABLE'"
                )
            }
            info = truth.ranks[rank]
            assert {
                f'RANK="{rank}"',
                f'LOCAL_RANK="{info["local_rank"]}"',
                f'WORLD_SIZE="{len(truth.ranks)}"',
            } <= env
            ((utc, utc_time, local_time, clock),) = con.execute(
                "SELECT * FROM TARGET_INFO_SESSION_START_TIME"
            )
            assert utc == info["utc_epoch_ns"] and utc_time.startswith("2026-") and clock > 0
            host = con.execute(
                "SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'Hostname'"
            ).fetchone()
            assert host == (info["hostname"],)


# -- identifiers and joins ---------------------------------------------------------------


@given(st.integers(0, MASK), st.integers(0, MASK))
def test_global_ids_round_trip(pid, tid):
    g = ids.global_tid(pid, tid)
    assert ids.decode(g) == (pid, tid)
    assert (g >> 24) & MASK == pid and g & MASK == tid
    assert g >> 48 == 1
    assert ids.global_pid(pid) == g & ~MASK


def test_global_ids_match_real_example():
    assert ids.global_pid(144) == 281477392629760  # mfu_before kernels, PID 144
    assert ids.global_tid(144, 144) == 281477392629904


@pytest.mark.parametrize("path", all_reports(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_global_ids_decode_to_the_rank_process(path):
    con = connect(path)
    ((pid,),) = con.execute("SELECT pid FROM PROCESSES WHERE name = 'python3'")
    for table, column in (
        ("CUPTI_ACTIVITY_KIND_KERNEL", "globalPid"),
        ("CUPTI_ACTIVITY_KIND_RUNTIME", "globalTid"),
        ("NVTX_EVENTS", "globalTid"),
        ("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "globalPid"),
    ):
        decoded = set(
            con.execute(f"SELECT DISTINCT ({column} >> 24) & {MASK}, {column} >> 48 FROM {table}")
        )
        assert decoded == {(pid, 1)}, table
    tids = set(con.execute(f"SELECT DISTINCT globalTid & {MASK} FROM CUPTI_ACTIVITY_KIND_RUNTIME"))
    assert tids == {(pid,)}


LAUNCH_APIS = {
    "CUPTI_ACTIVITY_KIND_KERNEL": {"cudaLaunchKernel_v7000", "cuLaunchKernelEx"},
    "CUPTI_ACTIVITY_KIND_MEMCPY": {"cudaMemcpyAsync_v3020"},
    "CUPTI_ACTIVITY_KIND_MEMSET": {"cudaMemsetAsync_v3020"},
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": {
        "cudaStreamSynchronize_v3020",
        "cudaStreamWaitEvent_v3020",
    },
}


@pytest.mark.parametrize("path", all_reports(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_activity_has_its_launch_call(path):
    con = connect(path)
    for table, apis in LAUNCH_APIS.items():
        rows = con.execute(f"""
            SELECT a.start, r.start, r."end", s.value, count(r.start) OVER (PARTITION BY a.rowid)
            FROM {table} AS a
            LEFT JOIN CUPTI_ACTIVITY_KIND_RUNTIME AS r
              ON r.correlationId = a.correlationId AND (r.globalTid & ~{MASK}) = a.globalPid
            LEFT JOIN StringIds AS s ON s.id = r.nameId""").fetchall()
        assert rows, table
        for start, call_start, call_end, api, matches in rows:
            assert matches == 1 and api in apis, (table, api)
            assert call_start < start and call_end > call_start, table
    # stream syncs: syncType 3 on a cudaStreamSynchronize call
    bad = con.execute("""SELECT count(*) FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION AS y
        JOIN CUPTI_ACTIVITY_KIND_RUNTIME AS r ON r.correlationId = y.correlationId
        JOIN StringIds AS s ON s.id = r.nameId
        WHERE (y.syncType = 3) != (s.value = 'cudaStreamSynchronize_v3020')
           OR y.start < r.start OR y."end" > r."end" """).fetchone()[0]
    assert bad == 0


@pytest.mark.parametrize("path", all_reports(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_kernel_names_resolve_through_stringids(path):
    con = connect(path)
    names = con.execute("""SELECT s.value, d.value, m.value FROM CUPTI_ACTIVITY_KIND_KERNEL AS k
        JOIN StringIds AS s ON s.id = k.shortName JOIN StringIds AS d ON d.id = k.demangledName
        JOIN StringIds AS m ON m.id = k.mangledName""").fetchall()
    assert (
        len(names) == con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    )
    assert any(short.startswith("ncclDevKernel_AllReduce") for short, _, _ in names)
    assert all(short in demangled for short, demangled, _ in names)


# -- NVTX ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", FIXTURES)
def test_nvtx_ranges_follow_the_contract(name):
    truth = truth_of(name)
    steps = truth.scenario["steps"]
    for path in reports(name):
        con = connect(path)
        assert {r[0] for r in con.execute("SELECT DISTINCT eventType FROM NVTX_EVENTS")} == {59, 75}
        domains = dict(con.execute("SELECT text, domainId FROM NVTX_EVENTS WHERE eventType = 75"))
        assert domains["nsyswrap"] == 1 and domains["NCCL"] == 2
        texts = [
            t
            for (t,) in con.execute(
                "SELECT text FROM NVTX_EVENTS WHERE domainId = 1 AND eventType = 59"
            )
        ]
        assert sorted(t for t in texts if t.startswith("step:")) == sorted(
            f"step:{i}" for i in range(steps)
        )
        for phase in ("data_loading", "forward", "backward", "optimizer"):
            assert texts.count(phase) == steps
        assert any(t.startswith("fwd:layers.") for t in texts) and any(
            t.startswith("bwd:") for t in texts
        )
        # each coll: range contains the launch call of exactly one NCCL kernel (one device per rank)
        rows = con.execute("""
            SELECT n.text, count(k.start) FROM NVTX_EVENTS AS n
            LEFT JOIN CUPTI_ACTIVITY_KIND_RUNTIME AS r ON r.start >= n.start AND r."end" <= n."end"
            LEFT JOIN CUPTI_ACTIVITY_KIND_KERNEL AS k ON k.correlationId = r.correlationId
                 AND k.shortName IN (SELECT id FROM StringIds WHERE value LIKE 'ncclDevKernel%')
            WHERE n.text LIKE 'coll:%' GROUP BY n.rowid""").fetchall()
        assert rows and all(count == 1 for _, count in rows)
        world = len(truth.ranks)
        assert all(f"pg=0 size={world} seq=" in text and " dtype=" in text for text, _ in rows)


# -- ground truth ---------------------------------------------------------------------------

LEDGER = ("compute_only_ns", "comm_only_ns", "both_ns", "other_only_ns", "idle_ns")


def check_ledger(entry: dict) -> None:
    assert sum(entry[k] for k in LEDGER) == entry["span_ns"]
    assert all(entry[k] >= 0 for k in LEDGER)
    assert entry["compute_busy_ns"] == entry["compute_only_ns"] + entry["both_ns"]
    assert entry["comm_busy_ns"] == entry["comm_only_ns"] + entry["both_ns"]


@pytest.mark.parametrize("name", FIXTURES)
def test_truth_ledgers_add_up(name):
    truth = truth_of(name)
    assert {(d["rank"], d["device"]) for d in truth.devices} == {
        (r["rank"], dev) for r in truth.ranks for dev in r["devices"]
    }
    for device in truth.devices:
        check_ledger(device)
        assert device["span_ns"] == device["end_ns"] - device["start_ns"]
        assert len(device["steps"]) == truth.scenario["steps"]
        for step in device["steps"]:
            check_ledger(step)
        gaps_ns = sum(
            g["dur_ns"]
            for g in truth.idle_gaps
            if (g["rank"], g["device"]) == (device["rank"], device["device"])
        )
        assert gaps_ns <= device["idle_ns"]


def sweep_ledger(intervals: list[tuple[int, int, str]], lo: int, hi: int) -> dict[str, int]:
    """Independent check: a sweep line over activity boundaries read back from SQLite."""
    events = sorted({lo, hi, *(t for s, e, _ in intervals for t in (s, e) if lo <= t <= hi)})
    out = dict.fromkeys(LEDGER, 0)
    for a, b in zip(events, events[1:]):
        active = {c for s, e, c in intervals if s <= a and e >= b and e > s}
        key = (
            "both_ns"
            if {"compute", "comm"} <= active
            else "compute_only_ns"
            if "compute" in active
            else "comm_only_ns"
            if "comm" in active
            else "other_only_ns"
            if active
            else "idle_ns"
        )
        out[key] += b - a
    return out


def activities_from_sqlite(path: Path, device: int) -> list[tuple[int, int, str]]:
    con = connect(path)
    rows = con.execute(
        """SELECT k.start, k."end", CASE WHEN s.value LIKE 'nccl%' THEN 'comm' ELSE 'compute' END
        FROM CUPTI_ACTIVITY_KIND_KERNEL AS k JOIN StringIds AS s ON s.id = k.shortName WHERE k.deviceId = ?
        UNION ALL SELECT start, "end", CASE WHEN copyKind = 10 THEN 'comm' ELSE 'other' END
        FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE deviceId = ?
        UNION ALL SELECT start, "end", 'other' FROM CUPTI_ACTIVITY_KIND_MEMSET WHERE deviceId = ?""",  # noqa: E501
        (device, device, device),
    ).fetchall()
    return rows


@pytest.mark.parametrize("name", ["run2", "edge_cases"])
def test_truth_ledgers_match_an_independent_sweep_of_the_files(name):
    truth = truth_of(name)
    for device in truth.devices:
        acts = activities_from_sqlite(reports(name)[device["rank"]], device["device"])
        assert sweep_ledger(acts, device["start_ns"], device["end_ns"]) == {
            k: device[k] for k in LEDGER
        }
        step = device["steps"][1]
        assert sweep_ledger(acts, step["start_ns"], step["end_ns"]) == {k: step[k] for k in LEDGER}


@pytest.mark.parametrize("name", FIXTURES)
def test_nccl_kernels_in_truth_match_the_files(name):
    truth = truth_of(name)
    for path, info in zip(reports(name), truth.ranks):
        con = connect(path)
        rows = con.execute(
            """SELECT k.correlationId, k.start, k."end" FROM CUPTI_ACTIVITY_KIND_KERNEL AS k
            JOIN StringIds AS s ON s.id = k.shortName WHERE s.value LIKE 'nccl%' ORDER BY k.start"""
        ).fetchall()
        ours = [
            (n["correlation_id"], n["start_ns"], n["end_ns"])
            for n in truth.nccl_kernels
            if n["rank"] == info["rank"]
        ]
        assert sorted(ours, key=lambda r: r[1]) == rows
        for n in truth.nccl_kernels:
            assert 0 <= n["overlap_ns"] <= n["end_ns"] - n["start_ns"]


def test_planted_gaps_come_out_with_their_cause():
    truth = truth_of("run2")
    planted = [(g["rank"], g["cause"]) for g in truth.idle_gaps if g["planted"]]
    expected = [(g["rank"], g["cause"]) for g in truth.scenario["gaps"]]
    assert sorted(planted) == sorted(expected)
    assert {c for _, c in planted} == {"host_bound", "sync", "other"}
    for g in truth.idle_gaps:
        assert g["dur_ns"] == g["end_ns"] - g["start_ns"] > 0


def test_sync_gap_is_covered_by_a_stream_sync_call():
    truth = truth_of("run2")
    gap = next(g for g in truth.idle_gaps if g["cause"] == "sync")
    con = connect(reports("run2")[gap["rank"]])
    covered = con.execute(
        """SELECT sum(min(r."end", ?) - max(r.start, ?)) FROM CUPTI_ACTIVITY_KIND_RUNTIME AS r
        JOIN StringIds AS s ON s.id = r.nameId
        WHERE s.value = 'cudaStreamSynchronize_v3020' AND r.start < ? AND r."end" > ?""",
        (gap["end_ns"], gap["start_ns"], gap["end_ns"], gap["start_ns"]),
    ).fetchone()[0]
    assert 2 * covered >= gap["dur_ns"]


def aligned(path: Path, offset: int, t: int) -> int:
    ((utc,),) = connect(path).execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME")
    return utc + t + offset


@pytest.mark.parametrize("name", ["run2", "run4_straggler"])
def test_collectives_end_together_in_aligned_time(name):
    truth = truth_of(name)
    assert truth.offset_ns[0] == 0
    by_key = {(n["rank"], n["pg"], n["seq"]): n for n in truth.nccl_kernels}
    for c in truth.collectives:
        ends, starts = [], {}
        for r in c["per_rank"]:
            n = by_key[(r["rank"], c["pg"], c["seq"])]
            path = reports(name)[r["rank"]]
            assert aligned(path, truth.offset_ns[r["rank"]], n["start_ns"]) == r["start_aligned_ns"]
            ends.append(aligned(path, truth.offset_ns[r["rank"]], n["end_ns"]))
            starts[r["rank"]] = r["start_aligned_ns"]
        assert max(ends) - min(ends) < 200
        last = max(starts.values())
        assert starts[c["last_rank"]] == last
        assert all(r["wait_ns"] == last - starts[r["rank"]] for r in c["per_rank"])
        lr = next(r for r in c["per_rank"] if r["rank"] == c["last_rank"])
        assert c["transfer_ns"] == lr["end_aligned_ns"] - lr["start_aligned_ns"]


def test_clock_offsets_undo_the_planted_clock_errors():
    truth = truth_of("run4_straggler")
    errors = truth.scenario["clock_error_ns"]
    assert truth.offset_ns == [errors[0] - e for e in errors]
    assert max(map(abs, truth.offset_ns)) > 1_000_000  # a few ms: UTC alone can't align the ranks


def test_straggler_is_the_last_to_arrive():
    truth = truth_of("run4_straggler")
    assert truth.straggler == {"rank": 2, "phase": "data_loading", "extra_ns": 400_000}
    later = [c for c in truth.collectives if c["seq"] >= 2]  # step 0 is skewed by process start
    assert sum(c["last_rank"] == 2 for c in later) == len(later)
    rows = [r for c in later for r in c["per_rank"] if r["rank"] != 2]
    assert min(r["wait_ns"] for r in rows) > 100_000


def test_edge_cases_cover_the_edge_cases():
    truth = truth_of("edge_cases")
    con = connect(reports("edge_cases")[0])
    kernels = con.execute(
        """SELECT k.start, k."end", k.streamId, s.value FROM CUPTI_ACTIVITY_KIND_KERNEL AS k
        JOIN StringIds AS s ON s.id = k.shortName ORDER BY k.streamId, k.start"""
    ).fetchall()
    assert any(s == e for s, e, _, _ in kernels)  # zero-length
    assert any(
        a[2] == b[2] and a[1] == b[0] and a[1] > a[0]  # back-to-back
        for a, b in zip(kernels, kernels[1:])
    )
    assert len({stream for _, _, stream, _ in kernels}) >= 4  # compute, 2 side, nccl
    compute = [k for k in kernels if k[2] == 7]
    side = [k for k in kernels if k[2] not in (7,) and not k[3].startswith("nccl")]
    assert any(c[0] <= s[0] and s[1] <= c[1] for s in side for c in compute)  # nested
    assert any(
        stream == 7 and name.startswith("nccl") for _, _, stream, name in kernels
    )  # NCCL on compute
    nccl = truth.nccl_kernels
    assert any(n["overlap_ns"] == n["end_ns"] - n["start_ns"] > 0 for n in nccl)  # fully hidden
    assert any(n["overlap_ns"] == 0 for n in nccl)  # fully exposed


scenarios = st.builds(
    Scenario,
    seed=st.integers(0, 10**6),
    ranks=st.integers(1, 3),
    ranks_per_node=st.integers(1, 2),
    devices_per_rank=st.integers(1, 2),
    steps=st.integers(1, 3),
    kernels_per_step=st.integers(3, 30),
    modules=st.integers(1, 5),
    side_streams=st.integers(0, 2),
    zero_length_every=st.integers(0, 4),
    back_to_back_every=st.integers(0, 3),
    collectives_per_step=st.integers(0, 3),
    p2p_per_step=st.integers(0, 1),
    comm_overlap=st.lists(
        st.sampled_from(["hidden", "partial", "exposed", "same_stream"]), min_size=1, max_size=3
    ).map(tuple),
    step_sync=st.booleans(),
    clock_skew_ns=st.integers(0, 5_000_000),
)


@settings(max_examples=examples(12), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios)
def test_random_scenarios_keep_the_invariants(sc):
    with tempfile.TemporaryDirectory() as tmp:
        truth = generate_run(sc, tmp)
        for device in truth.devices:
            check_ledger(device)
            acts = activities_from_sqlite(
                Path(tmp) / f"rank{device['rank']}.sqlite", device["device"]
            )
            assert sweep_ledger(acts, device["start_ns"], device["end_ns"]) == {
                k: device[k] for k in LEDGER
            }
        for c in truth.collectives:
            ends = [r["end_aligned_ns"] for r in c["per_rank"]]
            assert max(ends) - min(ends) < 200 and min(r["wait_ns"] for r in c["per_rank"]) == 0
        for path in Path(tmp).glob("rank*.sqlite"):
            missing = (
                connect(path)
                .execute(f"""SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL AS k
                LEFT JOIN CUPTI_ACTIVITY_KIND_RUNTIME AS r ON r.correlationId = k.correlationId
                 AND (r.globalTid & ~{MASK}) = k.globalPid AND r.start < k.start
                WHERE r.start IS NULL""")
                .fetchone()[0]
            )
            assert missing == 0


def test_mismatch_is_planted_and_visible(small_run):
    out, truth = small_run
    assert truth.mismatches == [
        {"rank": 1, "step": 1, "pg": 0, "seq": 4, "op": "all_reduce", "bytes": 8}
    ]
    assert truth.unmatched_collectives == [{"pg": 0, "seq": 8, "ranks": [1]}]
    assert any(not c["same_content"] for c in truth.collectives)
    counts = [len([n for n in truth.nccl_kernels if n["rank"] == r]) for r in (0, 1)]
    assert counts == [8, 9]
    texts = (
        connect(out / "rank1.sqlite")
        .execute("SELECT text FROM NVTX_EVENTS WHERE text LIKE 'coll:% seq=4'")
        .fetchall()
    )
    assert texts == [("coll:all_reduce bytes=8 dtype=float32 pg=0 size=2 seq=4",)]


def test_truth_json_holds_only_plain_values():
    def walk(v):
        if isinstance(v, dict):
            assert all(isinstance(k, str) for k in v)
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)
        else:
            assert v is None or isinstance(v, (int, str, bool)), v

    for name in FIXTURES:
        walk(json.loads((FIXTURE_DIR / name / "truth.json").read_text()))


# -- determinism, fixtures, errors, CLI ------------------------------------------------------------


def test_same_seed_same_truth_other_seed_differs(tmp_path):
    sc = preset("run2", steps=2)
    a = generate_run(sc, tmp_path / "a")
    b = generate_run(sc, tmp_path / "b")
    c = generate_run(sc.replace(seed=99), tmp_path / "c")
    assert a == b and a.to_json() == b.to_json()
    assert (tmp_path / "a" / "rank1.sqlite").read_bytes() == (
        tmp_path / "b" / "rank1.sqlite"
    ).read_bytes()
    assert c.devices != a.devices


def table_contents(path: Path) -> dict[str, list[tuple]]:
    con = connect(path)
    return {t: con.execute(f'SELECT * FROM "{t}" ORDER BY rowid').fetchall() for t in tables(con)}


def test_fixtures_regenerate_identically(tmp_path):
    write_fixtures(tmp_path)
    for name in FIXTURES:
        committed = sorted(p.name for p in (FIXTURE_DIR / name).iterdir())
        assert sorted(p.name for p in (tmp_path / name).iterdir()) == committed
        assert (tmp_path / name / "truth.json").read_text() == (
            FIXTURE_DIR / name / "truth.json"
        ).read_text()
        for path in reports(name):
            assert table_contents(tmp_path / name / path.name) == table_contents(path)
            assert path.stat().st_size < 1_000_000
        assert "python -m nsyswrap.synth fixtures" in (FIXTURE_DIR / name / "README.md").read_text()


def test_the_fixture_script_refuses_other_arguments(tmp_path):
    """`python -m nsyswrap.synth` rewrites fixtures/ only: any other arguments get one line
    pointing to `nsyswrap generate` and exit 1, with nothing written."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "nsyswrap.synth", "generate", "run2", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1 and not (tmp_path / "out").exists()
    assert done.stderr.count("\n") == 1 and "nsyswrap generate --help" in done.stderr


def test_refuses_to_overwrite_without_force(tmp_path):
    sc = preset("run2", steps=1)
    generate_run(sc, tmp_path)
    with pytest.raises(NsysWrapError) as err:
        generate_run(sc, tmp_path)
    assert str(err.value) == (
        f"{tmp_path / 'rank0.sqlite'}: already exists (generated output); "
        "pass force=True (CLI: --force) to overwrite, or pick another directory"
    )
    (tmp_path / "notes.txt").write_text("keep")
    generate_run(sc.replace(ranks=1), tmp_path, force=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt", "rank0.sqlite", "truth.json"]


def test_scenario_round_trips_through_json():
    for name in ("run2", "run4_straggler", "edge_cases", "mismatch", "bench"):
        sc = preset(name)
        assert Scenario.from_dict(json.loads(json.dumps(sc.to_dict()))) == sc
    assert Scenario.from_dict(truth_of("run2").scenario) == preset("run2")


@pytest.mark.parametrize(
    "bad",
    [
        dict(ranks=0),
        dict(comm_overlap=("sideways",)),
        dict(straggler=Straggler(5, "forward", 1)),
        dict(gaps=(PlantedGap(0, 0, "host_bound", dur_ns=100),)),
        dict(extra_collectives=(ExtraCollective(0, 99),)),
        dict(clock_error_ns=(1, 2, 3)),
    ],
)
def test_inconsistent_scenarios_are_refused(bad, tmp_path):
    with pytest.raises(NsysWrapError, match="^scenario 'custom': "):
        generate_run(Scenario(**bad), tmp_path)
    assert not list(tmp_path.iterdir())


def test_preset_resizing_drops_what_no_longer_fits():
    sc = preset("run4_straggler", ranks=2, steps=3, kernels_per_step=12)
    assert (sc.ranks, sc.steps, sc.kernels_per_step) == (2, 3, 12)
    assert sc.straggler is None and sc.clock_error_ns is None and sc.clock_skew_ns == 3_100_000
    with pytest.raises(NsysWrapError, match="no scenario named"):
        preset("nope")


def test_cli_generate_and_errors(tmp_path, cli):
    code, out, _ = cli("generate", "--help")
    assert code == 0 and "run4_straggler" in out
    assert cli("generate", "run2", tmp_path, "--steps", "1", "--kernels-per-step", "9")[0] == 0
    truth = Truth.load(tmp_path / "truth.json")
    assert truth.scenario["kernels_per_step"] == 9 and len(truth.ranks) == 2
    code, _, err = cli("generate", "run2", tmp_path, "--steps", "1")
    assert code == 1 and err.startswith("Error: ")
    # the truth file as the scenario of the same directory is an input: never replaced
    code, _, err = cli("generate", tmp_path / "truth.json", tmp_path, "--force")
    assert code == 1 and "is one of the inputs" in err
    scenario = shutil.copy(tmp_path / "truth.json", tmp_path / "scenario.json")
    assert cli("generate", scenario, tmp_path, "--force")[0] == 0


DEEP = "[" * 200_000 + "]" * 200_000  # json.loads: RecursionError, not ValueError


@pytest.mark.parametrize(
    "text, said",
    [
        ("not json {", "is not JSON"),
        (DEEP, "is not JSON"),
        ('{"scenario": ' + DEEP + "}", "is not JSON"),
        ("[1, 2]", "is not a scenario"),
        ('{"scenario": 7}', "is not a scenario"),
        ("null", "is not a scenario"),
    ],
    ids=["not-json", "nested-deep", "scenario-nested-deep", "list", "scenario-int", "null"],
)
def test_a_scenario_file_that_is_none_is_one_line(tmp_path, cli, text, said):
    scenario = tmp_path / "scenario.json"
    scenario.write_text(text)
    code, out, err = cli("generate", scenario, tmp_path / "out")
    assert code == 1 and "Traceback" not in err and err.count("\n") == 1, err[-2000:]
    assert err.startswith(f"Error: {scenario}: {said}"), err[-2000:]
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("ranks", [2**31 + 1, 2**63, 2**64])
def test_more_ranks_than_32_bits_hold_is_one_line_before_any_work(tmp_path, cli, ranks):
    """generate --ranks 2**64 ran on, drawing a clock error per rank: a rank is 32-bit."""
    code, _, err = cli("generate", "run2", tmp_path / "out", "--ranks", ranks)
    assert code == 1 and err.startswith("Error: scenario 'run2': ranks must be at most"), err
    assert not (tmp_path / "out").exists()


def test_generate_force_over_a_truth_file_nested_too_deep_is_one_line(tmp_path, cli):
    """A truth.json in OUT that cannot be read lists nothing generate wrote: --force
    replaces only the truth file itself and refuses the reports beside it, in one line."""
    assert cli("generate", "run2", tmp_path, "--steps", "1")[0] == 0
    (tmp_path / "truth.json").write_text('{"ranks": ' + DEEP + "}")
    code, _, err = cli("generate", "run2", tmp_path, "--steps", "1", "--force")
    assert code == 1 and "Traceback" not in err and "generate did not write it" in err, err


# -- interval helpers (truth arithmetic) -----------------------------------------------------------

intervals = st.lists(
    st.tuples(st.integers(0, 60), st.integers(0, 15)).map(lambda p: (p[0], p[0] + p[1])), max_size=8
)


def points(ivs, lo=-(10**9), hi=10**9) -> set[int]:
    return {t for s, e in ivs for t in range(max(s, lo), min(e, hi))}


@given(intervals, intervals, st.integers(-5, 80), st.integers(-5, 80))
def test_interval_arithmetic_matches_point_sets(a, b, lo, hi):
    ua, ub = union(a), union(b)
    assert points(ua) == points(a)
    assert all(s < e for s, e in ua) and all(x[1] < y[0] for x, y in zip(ua, ua[1:]))
    assert points(intersect(ua, ub)) == points(a) & points(b)
    assert Measure(ua)(lo, hi) == len(points(a, lo, hi))
    if lo < hi:
        idle = points(gaps(a, lo, hi))
        assert idle == set(range(lo, hi)) - points(a)
