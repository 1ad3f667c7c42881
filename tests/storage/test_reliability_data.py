"""Damaged data is never silently dropped or absurd: kernels whose times cannot be right
are left out and counted per rank, names that are not UTF-8 are repaired and counted,
reports without NVTX text or without kernels say so. Damaged files are made from the
bundled fixtures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.bad_input import REPORT, damaged_copy

import nsyswrap
import nsyswrap.report  # (the package loads its submodules lazily)

KERNELS = "CUPTI_ACTIVITY_KIND_KERNEL"


@pytest.fixture(scope="module")
def damaged(tmp_path_factory) -> Path:
    """Two kernels ending before they start, one with a flipped bit in its end (1.6 days),
    one without an end, one kernel name and one NVTX text that are not UTF-8."""
    return damaged_copy(
        tmp_path_factory.mktemp("damaged"),
        f"CREATE TABLE k AS SELECT * FROM {KERNELS}",  # the copy has no NOT NULL constraints
        f"DROP TABLE {KERNELS}",
        f"ALTER TABLE k RENAME TO {KERNELS}",
        f'UPDATE {KERNELS} SET "end" = start - 5 WHERE rowid IN (1, 2)',
        f'UPDATE {KERNELS} SET "end" = "end" + (1 << 47) WHERE rowid = 3',
        f'UPDATE {KERNELS} SET "end" = NULL WHERE rowid = 4',
        "UPDATE StringIds SET value = CAST(X'6B65726E656CFF' AS TEXT) "
        f"WHERE id = (SELECT shortName FROM {KERNELS} WHERE rowid = 10)",
        "UPDATE NVTX_EVENTS SET text = CAST(X'6677643AFE' AS TEXT) "
        "WHERE rowid = (SELECT min(rowid) FROM NVTX_EVENTS WHERE text LIKE 'fwd%')",
    )


@pytest.fixture(scope="module")
def damaged_report(damaged) -> dict:
    return nsyswrap.report.report([damaged])


def _section(report: dict, section_id: str) -> dict:
    return next(s for s in report["sections"] if s["id"] == section_id)


def test_kernels_whose_times_cannot_be_right_are_counted_per_rank(damaged):
    quality = nsyswrap.sql("SELECT * FROM data_quality", [damaged]).iloc[0]
    assert (
        quality.kernels_end_before_start,
        quality.kernels_longer_than_capture,
        quality.kernels_null_time,
    ) == (2, 1, 1)
    original = nsyswrap.sql("SELECT count(*) AS n FROM kernels", [REPORT]).n[0]
    assert nsyswrap.sql("SELECT count(*) AS n FROM kernels", [damaged]).n[0] == original - 4


def test_the_left_out_kernels_are_said_in_the_report_and_its_json(damaged_report):
    section = _section(json.loads(json.dumps(damaged_report)), "data_quality")
    (row,) = section["tables"][0]["rows"]
    assert (
        row["end_lt_start"]["value"] == 2
        and row["too_long"]["value"] == 1
        and row["no_time"]["value"] == 1
    )
    assert any("4 of 126 kernels left out of every figure" in note for note in section["notes"])
    assert "4 of 126 kernels left out" in section["tables"][0]["title"]


def test_a_flipped_bit_does_not_make_the_verdict_absurd(damaged_report):
    ledger = next(
        t for t in _section(damaged_report, "single_rank")["tables"] if t["id"] == "ledger"
    )
    (device,) = ledger["rows"]
    assert device["span"]["value"] < 20_000_000  # the capture lasts 10 ms, not 1.6 days


@pytest.mark.parametrize(
    "view, column, expected",
    [
        ("kernels", "name", "kernel\ufffd"),
        ("nvtx", "text", "fwd:\ufffd"),
    ],
    ids=["kernel-name", "nvtx-text"],
)
def test_names_that_are_not_utf8_are_read_with_replacement_characters(
    damaged, view, column, expected
):
    found = nsyswrap.sql(
        f"SELECT DISTINCT {column} AS v FROM {view} WHERE contains({column}, chr(65533))", [damaged]
    )
    assert found.v.tolist() == [expected]


def test_the_repaired_strings_are_counted(damaged, damaged_report):
    assert (
        nsyswrap.sql("SELECT strings_repaired FROM data_quality", [damaged]).strings_repaired[0]
        == 2
    )
    assert any(
        "2 names or NVTX texts were not valid UTF-8" in n
        for n in _section(damaged_report, "data_quality")["notes"]
    )


def test_a_report_with_repaired_names_prints_as_json(cli, damaged):
    code, out, err = cli("query", "kernels.summary", damaged, "-f", "json")
    assert code == 0 and "kernel\\ufffd" in out, err


def test_nvtx_ranges_without_text_are_not_no_nvtx_ranges(tmp_path):
    report = damaged_copy(tmp_path, "UPDATE NVTX_EVENTS SET text = NULL, textId = NULL")
    result = nsyswrap.report.report([report])
    reasons = [c["reason"] for c in _section(result, "single_rank")["cannot_answer"]]
    assert any("NVTX ranges all have no text" in r for r in reasons)
    assert not any("have no NVTX ranges" in r for r in reasons)
    assert any("have no text" in n for n in _section(result, "data_quality")["notes"])


def test_a_capture_without_a_kernel_table_says_no_cuda_kernels_captured(tmp_path):
    report = damaged_copy(tmp_path, f"DROP TABLE {KERNELS}")
    result = nsyswrap.report.report([report])
    reasons = [c["reason"] for c in _section(result, "data_quality")["cannot_answer"]]
    assert any(r.startswith("no CUDA kernels captured") for r in reasons)
    verdict = _section(result, "single_rank")["verdict"]
    assert verdict["label"] != "balanced" or "no CUDA kernels" in verdict["reason"]
