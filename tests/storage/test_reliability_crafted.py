"""Crafted and damaged exports: impossible timestamps, text in integer columns, a device
stored as text or missing, repeated string ids, committed rows in a `-wal` file, a missing
or extreme session start, a report holding several ranks, a report that breaks while read.
Values that can be set aside are left out and counted (the data-quality note says what and
why); what cannot is one line naming the file; never a traceback, never a silent answer."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.bad_input import assert_one_line_error
from helpers.bad_input import damaged_copy as crafted
from helpers.paths import FIXTURES, SHARED

import nsyswrap
import nsyswrap.report  # (the package loads its submodules lazily)

REPORT = FIXTURES / "run2" / "rank0.sqlite"
KERNELS = "CUPTI_ACTIVITY_KIND_KERNEL"
INT64_MAX = 2**63 - 1


def untyped(table: str) -> list[str]:
    """Statements that remake `table` without types or NOT NULL (so it can hold text)."""
    return [
        f"CREATE TABLE t_ AS SELECT * FROM {table}",
        f"DROP TABLE {table}",
        f"ALTER TABLE t_ RENAME TO {table}",
    ]


def quality(report: Path) -> dict:
    return nsyswrap.sql("SELECT * FROM data_quality", [report]).iloc[0].to_dict()


def kernels(report: Path) -> int:
    return int(
        nsyswrap.sql(
            "SELECT count(*) AS n FROM kernels WHERE kind <> 'memcpy' AND kind <> 'memset'",
            [report],
        ).n[0]
    )


def section(result: dict, section_id: str) -> dict:
    return next(s for s in result["sections"] if s["id"] == section_id)


@pytest.fixture(scope="module")
def original() -> dict:
    """The untouched report's kernel count, compute time per device, span, and the span of
    its report's ledger (over the report's window: the steps)."""
    ledger = nsyswrap.query("ledger.devices", [REPORT])
    report = json.loads(json.dumps(nsyswrap.report.report([REPORT])))
    (window,) = [t for t in section(report, "single_rank")["tables"] if t["id"] == "ledger"]
    return {
        "kernels": kernels(REPORT),
        "compute": int(ledger.compute_busy_ns.sum()),
        "span": int(ledger.span_ns.max()),
        "report_span": window["rows"][0]["span"]["value"],
    }


# --- events outside the capture: left out and counted ----------------------------------------


@pytest.mark.parametrize(
    "start, end",
    [
        (9_220_000_000_000_000_000, 9_220_000_000_000_000_807),  # 807 ns near the int64 limit
        (86_400_000_000_000, 86_400_000_050_000),  # a day after a 10 ms capture
        (-5_000, 3_000),  # before the session start
        (-(2**63) + 1, INT64_MAX),  # both int64 limits at once
    ],
    ids=["near-int64-max", "a-day-later", "before-start", "int64-limits"],
)
def test_a_kernel_outside_the_capture_is_left_out_and_counted(tmp_path, original, start, end):
    report = crafted(
        tmp_path, f'UPDATE {KERNELS} SET start = {start}, "end" = {end} WHERE rowid = 7'
    )
    q = quality(report)
    assert q["kernels_outside_capture"] + q["kernels_longer_than_capture"] == 1
    assert kernels(report) == original["kernels"] - 1
    assert nsyswrap.query("ledger.devices", [report]).span_ns.max() <= original["span"]


def test_the_report_says_what_was_left_out_and_why(tmp_path, original):
    """Damage of every kind at once: the figures stay those of the sound events, and the
    data-quality section counts each kind (also in its JSON)."""
    report = crafted(
        tmp_path,
        *untyped(KERNELS),
        *untyped("CUPTI_ACTIVITY_KIND_RUNTIME"),
        *untyped("StringIds"),
        f'UPDATE {KERNELS} SET start = 9220000000000000000, "end" = 9220000000000000807 '
        "WHERE rowid = 3",
        f'UPDATE {KERNELS} SET start = -40, "end" = 900 WHERE rowid = 4',
        f"UPDATE {KERNELS} SET start = 'n/a' WHERE rowid IN (5, 6)",
        f"UPDATE {KERNELS} SET deviceId = NULL WHERE rowid = 8",
        f"UPDATE {KERNELS} SET deviceId = 'GPU-1' WHERE rowid = 9",
        "UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET \"end\" = 'x' WHERE rowid < 4",
        "INSERT INTO StringIds SELECT id + 0, value || '!' FROM StringIds WHERE id < 3",
    )
    result = json.loads(json.dumps(nsyswrap.report.report([report])))
    dq = section(result, "data_quality")
    (row,) = dq["tables"][0]["rows"]
    counts = {
        k: row[k]["value"]
        for k in ("outside", "not_integer", "no_device", "other_events", "ids_repeated")
    }
    assert (
        counts
        == {
            "outside": 2,
            "not_integer": 3,
            "no_device": 1,
            "other_events": 3,
            "ids_repeated": counts["ids_repeated"],
        }
        and counts["ids_repeated"] >= 1
    )
    notes = " ".join(dq["notes"])
    assert "6 of 126 kernels left out of every figure" in notes and "3 other events" in notes, notes
    ledger = next(t for t in section(result, "single_rank")["tables"] if t["id"] == "ledger")
    assert ledger["rows"][0]["span"]["value"] <= original["report_span"]  # never 9.2e18 ns


@pytest.mark.parametrize(
    "table, where, start",
    [
        ("CUPTI_ACTIVITY_KIND_MEMCPY", "rowid = 2", INT64_MAX - 10),
        ("CUPTI_ACTIVITY_KIND_RUNTIME", "rowid IN (3, 30, 33)", -(2**40)),
        ("NVTX_EVENTS", "rowid = 5", 2**61),
        ("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "rowid = 1", -1),
    ],
    ids=["copy-late", "api-early", "nvtx-late", "sync-early"],
)
def test_other_events_outside_the_capture_are_left_out_and_counted(tmp_path, table, where, start):
    report = crafted(
        tmp_path, f'UPDATE {table} SET start = {start}, "end" = {start} + 10 WHERE {where}'
    )
    expected = (
        sqlite3.connect(report).execute(f"SELECT count(*) FROM {table} WHERE {where}").fetchone()[0]
    )
    assert quality(report)["events_left_out"] == expected
    assert nsyswrap.query("ledger.devices", [report]).span_ns.max() < 10**9


# --- text in integer columns is never 0 ---------------------------------------------------------


@pytest.mark.parametrize(
    "column, value, every",
    [
        ("start", "'n/a'", 3),
        ("end", "'none'", 2),
        ("start", "2.5", 5),
        ("end", "X'00ff'", 4),
        ("start", "''", 7),
    ],
    ids=["n/a", "none", "fraction", "blob", "empty"],
)
def test_a_time_that_is_not_a_whole_number_is_left_out_and_counted(
    tmp_path, original, column, value, every
):
    report = crafted(
        tmp_path,
        *untyped(KERNELS),
        f'UPDATE {KERNELS} SET "{column}" = {value} WHERE rowid % {every} = 0',
    )
    hit = 126 // every
    assert quality(report)["kernels_not_integer"] == hit
    assert kernels(report) == original["kernels"] - hit
    compute = int(nsyswrap.query("ledger.devices", [report]).compute_busy_ns.sum())
    assert 0 < compute <= original["compute"]  # not 156 s from a start cast to 0


@pytest.mark.parametrize(
    "value, left_out",
    [
        ("'GPU-' || deviceId", 126),
        ("CAST(deviceId AS TEXT)", 0),
        ("deviceId + 0.0", 0),
    ],
    ids=["named", "digits-as-text", "whole-real"],
)
def test_a_device_stored_as_text(tmp_path, original, value, left_out):
    """Text that is a whole number reads as that number; any other text is no device (left
    out and counted), never device 0."""
    report = crafted(tmp_path, *untyped(KERNELS), f"UPDATE {KERNELS} SET deviceId = {value}")
    assert quality(report)["kernels_not_integer"] == left_out
    assert kernels(report) == original["kernels"] - left_out
    devices = nsyswrap.sql(
        "SELECT DISTINCT device FROM kernels WHERE bytes IS NULL", [report]
    ).device.tolist()
    assert devices == ([] if left_out == 126 else [0])


@pytest.mark.parametrize("every", [1, 5])
def test_kernels_without_a_device_are_left_out_and_counted(tmp_path, original, every):
    report = crafted(
        tmp_path,
        *untyped(KERNELS),
        f"UPDATE {KERNELS} SET deviceId = NULL WHERE rowid % {every} = 0",
    )
    assert quality(report)["kernels_no_device"] == 126 // every
    assert kernels(report) == original["kernels"] - 126 // every
    assert nsyswrap.report.report([report])["sections"]  # (every kernel gone: no traceback)


@pytest.mark.parametrize("copies", [3])
def test_repeated_string_ids_never_multiply_rows(tmp_path, original, copies):
    report = crafted(
        tmp_path,
        *untyped("StringIds"),
        *[
            f"INSERT INTO StringIds SELECT id, value || '~{i}' FROM StringIds "
            f"WHERE id % 2 = {i % 2}"
            for i in range(copies)
        ],
    )
    assert kernels(report) == original["kernels"]
    assert (
        nsyswrap.sql("SELECT count(*) AS n FROM api_calls", [report]).n[0]
        == nsyswrap.sql("SELECT count(*) AS n FROM api_calls", [REPORT]).n[0]
    )
    assert quality(report)["string_ids_repeated"] > 0


# --- the session start ------------------------------------------------------------------------


def test_a_report_without_a_session_start_alone_is_read(tmp_path):
    report = crafted(tmp_path, "UPDATE TARGET_INFO_SESSION_START_TIME SET utcEpochNs = NULL")
    result = nsyswrap.report.report([report])
    assert result["sections"]


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE TARGET_INFO_SESSION_START_TIME SET utcEpochNs = NULL",
        "DELETE FROM TARGET_INFO_SESSION_START_TIME",
    ],
    ids=["null", "no-row"],
)
def test_a_report_without_a_session_start_beside_others_is_one_line(cli, tmp_path, statement):
    statements = untyped("TARGET_INFO_SESSION_START_TIME") + [statement]
    crafted(tmp_path / "run", *statements, name="rank0.sqlite")
    shutil.copy(FIXTURES / "run2" / "rank1.sqlite", tmp_path / "run" / "rank1.sqlite")
    assert_one_line_error(
        cli("report", tmp_path / "run"), "rank0.sqlite: records no session start time"
    )


@pytest.mark.parametrize("utc", [INT64_MAX - 1, 0])
def test_a_session_start_near_the_int64_limits(cli, tmp_path, utc):
    crafted(tmp_path / "run", f"UPDATE TARGET_INFO_SESSION_START_TIME SET utcEpochNs = {utc}")
    code, out, err = cli("report", tmp_path / "run", "-f", "json")
    assert code == 0 and "Traceback" not in err, err
    assert json.loads(out)["sections"]


# --- several ranks in one report (one clock) -------------------------------------------------


@pytest.fixture(scope="module")
def one_report_two_ranks(generated_run) -> Path:
    """Two ranks' processes in one report, their NCCL kernels matched: one clock alone."""
    from nsyswrap.synth import preset

    _, out = generated_run(preset("run2").replace(ranks_per_report=2, steps=3))

    (report,) = out.glob("*.sqlite")
    return report


def test_one_report_holding_several_ranks_is_analysed(cli, one_report_two_ranks, tmp_path):
    code, out, err = cli("report", one_report_two_ranks, "-f", "json")
    assert code == 0 and "Traceback" not in err, err
    assert len(json.loads(out)["ranks"]) == 2
    code, out, err = cli("query", "crossrank.clock_offsets", one_report_two_ranks, "-f", "csv")
    assert code == 0 and out.count("\n") == 3, err
    code, out, err = cli("timeline", one_report_two_ranks, "-o", tmp_path / "t.json")
    assert code == 0 and "Traceback" not in err, err


@pytest.mark.skipif(
    not (SHARED / "nsys-sqlite" / "public" / "nsysai__h100_2gpu_1s.sqlite").exists(),
    reason="shared/nsys-sqlite/public is missing",
)
def test_a_real_one_node_capture_whose_kernels_match(cli, tmp_path):
    """The layout `nsys profile torchrun ...` writes on one node: its busiest kernel renamed
    to an NCCL collective so that both processes' calls match."""
    real = SHARED / "nsys-sqlite" / "public" / "nsysai__h100_2gpu_1s.sqlite"
    report = crafted(
        tmp_path,
        "UPDATE StringIds SET value = 'ncclDevKernel_AllGather_RING_LL' WHERE id = "
        f"(SELECT shortName FROM {KERNELS} GROUP BY shortName ORDER BY count(*) DESC LIMIT 1)",
        source=real,
    )
    code, out, err = cli("report", report, "-f", "json")
    assert code == 0 and "Traceback" not in err, err
    assert len(json.loads(out)["ranks"]) == 2


# --- committed rows in a -wal file ----------------------------------------------------------


@pytest.fixture
def wal_report(tmp_path) -> Path:
    """A report in WAL mode whose committed changes are still only in its -wal file: a
    third of its kernels deleted, and the directory then made read-only."""
    folder = tmp_path / "wal"
    report = crafted(folder)
    code = (
        f"import sqlite3, os\ncon = sqlite3.connect({str(report)!r})\n"
        "con.execute('PRAGMA journal_mode=WAL'); con.execute('PRAGMA wal_autocheckpoint=0')\n"
        f"con.execute('DELETE FROM {KERNELS} WHERE rowid % 3 = 0'); con.commit()\n"
        "os._exit(0)\n"
    )  # ends without a checkpoint: the rows stay in the -wal file
    subprocess.run([sys.executable, "-c", code], check=True)
    assert (folder / "rank0.sqlite-wal").stat().st_size > 32
    yield report
    folder.chmod(0o755)


def test_committed_rows_in_a_wal_file_are_read(wal_report, original):
    folder = wal_report.parent
    before = {p.name: (p.stat().st_mtime_ns, p.stat().st_size) for p in folder.iterdir()}
    folder.chmod(0o555)
    assert kernels(wal_report) == original["kernels"] - 126 // 3
    assert {p.name: (p.stat().st_mtime_ns, p.stat().st_size) for p in folder.iterdir()} == before


def test_a_new_commit_in_the_wal_file_is_read_again(wal_report, original):
    assert kernels(wal_report) == original["kernels"] - 126 // 3
    con = sqlite3.connect(wal_report)
    con.execute("PRAGMA wal_autocheckpoint=0")
    con.execute(f"DELETE FROM {KERNELS} WHERE rowid % 3 = 1")
    con.commit()
    assert kernels(wal_report) == original["kernels"] - 2 * (126 // 3)
    con.close()


# --- a report that breaks while it is read --------------------------------------------------


@pytest.mark.parametrize("table", [KERNELS, "CUPTI_ACTIVITY_KIND_RUNTIME"])
def test_a_report_damaged_part_way_is_one_line_without_the_sql(cli, tmp_path, monkeypatch, table):
    """The header and the first rows read; a page further on does not (as when the file is
    cut short or rewritten while read): small batches, so the damage is met mid-stream."""
    import nsyswrap.storage.sqlite_source
    from nsyswrap.synth import generate_run, preset

    monkeypatch.setattr(nsyswrap.storage.sqlite_source, "BATCH_ROWS", 300)

    generate_run(preset("run2").replace(steps=20), tmp_path / "run")
    report = tmp_path / "run" / "rank0.sqlite"
    with sqlite3.connect(report) as con:
        try:
            pages = [
                p
                for (p,) in con.execute(
                    f"SELECT pageno FROM dbstat WHERE name = '{table}' "
                    "AND pagetype = 'leaf' ORDER BY pageno"
                )
            ]
        except sqlite3.OperationalError:
            pytest.skip("this SQLite has no dbstat table")
        size = con.execute("PRAGMA page_size").fetchone()[0]
    data = bytearray(report.read_bytes())
    data[(pages[-1] - 1) * size : pages[-1] * size] = b"\xff" * size
    report.write_bytes(data)
    line = assert_one_line_error(cli("report", report), "rank0.sqlite: cannot be read to the end")
    assert "SELECT" not in line


# --- kernels without a name string: classified by what else identifies them, or left out ---

RUN4 = FIXTURES / "run4_straggler"
NAME_IDS = f"(SELECT shortName FROM {KERNELS} UNION SELECT demangledName FROM {KERNELS})"
NCCL_RANGES = "UPDATE NVTX_EVENTS SET text = 'x' || text WHERE lower(text) LIKE 'nccl%'"
LOST = {  # what loses its name: the StringIds rows deleted (and other damage), per case
    "nccl-names": [f"DELETE FROM StringIds WHERE value LIKE 'nccl%' AND id IN {NAME_IDS}"],
    "half-nccl-names": [  # every other NCCL kernel points at ids StringIds lacks
        f"UPDATE {KERNELS} SET shortName = 1000000 + rowid, demangledName = 2000000 + rowid "
        f"WHERE rowid IN (SELECT rowid FROM {KERNELS} WHERE shortName IN "
        "(SELECT id FROM StringIds WHERE value LIKE 'nccl%') ORDER BY start LIMIT 10)"
    ],
    "nccl-names-and-ranges": [
        f"DELETE FROM StringIds WHERE value LIKE 'nccl%' AND id IN {NAME_IDS}",
        NCCL_RANGES,
    ],
    "a-page-of-ids": [  # six ids in a row, as an overwritten page of StringIds loses them
        f"DELETE FROM StringIds WHERE id IN (SELECT id FROM (SELECT shortName AS id FROM "
        f"{KERNELS} UNION SELECT demangledName FROM {KERNELS}) ORDER BY id LIMIT 6 OFFSET 2)"
    ],
    "every-name": [f"DELETE FROM StringIds WHERE id IN {NAME_IDS}"],
}


def _run_losing(tmp_path: Path, case: str, ranks=range(4)) -> Path:
    for rank in range(4):
        statements = LOST[case] if rank in ranks else []
        crafted(
            tmp_path / case,
            *statements,
            source=RUN4 / f"rank{rank}.sqlite",
            name=f"rank{rank}.sqlite",
        )
    return tmp_path / case


@pytest.fixture(scope="module")
def run4_report() -> dict:
    return json.loads(json.dumps(nsyswrap.report.report([RUN4])))


def _figures(built: dict) -> dict:
    """Every table but the data quality's, kernel names left out (they are what was lost)."""
    return {
        (s["id"], t["id"]): [{k: v for k, v in row.items() if k != "kernel"} for row in t["rows"]]
        for s in built["sections"]
        if s["id"] != "data_quality"
        for t in s["tables"]
        if t["id"] not in ("top_kernels", "tensor_cores", "frameworks")  # (read from names)
    }


@pytest.mark.parametrize(
    "case, ranks",
    [
        ("nccl-names", range(4)),
        ("nccl-names", [2]),
        ("half-nccl-names", range(4)),
        ("nccl-names-and-ranges", range(4)),
        ("a-page-of-ids", [0, 3]),
    ],
    ids=["nccl-names", "nccl-names-rank-2", "half", "no-nccl-ranges", "page-ranks-0-3"],
)
def test_kernels_without_a_name_are_classified_and_counted(tmp_path, run4_report, case, ranks):
    """NCCL kernels that lost their names stay NCCL (by the NCCL range around their
    launch, else their stream or shape), compute kernels compute: every figure is the
    untouched run's, and the data-quality note counts them per rank."""
    run = _run_losing(tmp_path, case, ranks)
    built = json.loads(json.dumps(nsyswrap.report.report([run])))
    assert built["diagnosis"]["headline"] == run4_report["diagnosis"]["headline"]
    assert _figures(built) == _figures(run4_report)
    left_out = nsyswrap.query("trace.left_out", [run]).set_index("rank")
    for rank in range(4):
        row = left_out.loc[rank]
        assert bool(row.kernels_unnamed > 0) == (rank in ranks)
        assert row.kernels_unnamed == row.kernels_unnamed_nccl + row.kernels_unnamed_compute
    (dq,) = [s for s in built["sections"] if s["id"] == "data_quality"]
    said = [n for n in dq["notes"] if "kernels have no name" in n]
    assert len(said) == len(list(ranks)) and all("0 left out of every figure" in n for n in said)


def test_kernels_nothing_identifies_are_left_out_and_counted(tmp_path):
    """Every name lost: the NCCL kernels are still found by the NCCL ranges around their
    launch; the compute kernels, whose streams and shapes no named kernel shares, are left
    out of every figure and counted, never taken as compute (or NCCL) silently."""
    run = _run_losing(tmp_path, "every-name")
    kernels = nsyswrap.sql(
        "SELECT rank, kind, count(*) AS n FROM kernels WHERE name IS NULL GROUP BY ALL", [run]
    )
    assert set(kernels.kind) == {"nccl"}
    left_out = nsyswrap.query("trace.left_out", [run])
    quality = nsyswrap.query("trace.data_quality", [run])
    assert (left_out.kernels_unnamed == quality.kernels_captured).all()
    assert (left_out.kernels_unnamed_compute == 0).all()
    built = json.loads(json.dumps(nsyswrap.report.report([run])))
    (dq,) = [s for s in built["sections"] if s["id"] == "data_quality"]
    nccl = int(left_out.kernels_unnamed_nccl.iloc[0])
    assert any(f"{320 - nccl} left out of every figure" in n for n in dq["notes"])
    assert "NaN" not in json.dumps(built)
