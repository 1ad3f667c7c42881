"""Every bad input gives one `Error: <file>: <problem>; <fix>` line and exit code 1."""

from __future__ import annotations

import shutil
import sqlite3

import pytest
from helpers.report_builder import make_report


def _assert_one_line_error(result, needle: str):
    code, out, err = result
    assert code == 1
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("Error: ") and needle in lines[0] and "; " in lines[0]
    assert "Traceback" not in err


@pytest.fixture
def good(tmp_path):
    return make_report(tmp_path / "rank0.sqlite", kernels=[(0, 10, 0, 7, "k")])


def test_missing_path(cli, tmp_path):
    _assert_one_line_error(cli("sql", "SELECT 1", tmp_path / "nope.sqlite"), "does not exist")


def test_directory_without_reports(cli, tmp_path):
    _assert_one_line_error(cli("query", "kernels.summary", tmp_path), "holds no .sqlite reports")


def test_directory_with_unexported_reports(cli, tmp_path):
    (tmp_path / "rank0.nsys-rep").write_bytes(b"x")
    _assert_one_line_error(cli("query", "kernels.summary", tmp_path), "nsyswrap export")


def test_not_sqlite(cli, tmp_path):
    bad = tmp_path / "rank0.sqlite"
    bad.write_text("hello, not a database\n" * 10)
    _assert_one_line_error(cli("sql", "SELECT 1", bad), "is not an SQLite database")


def test_empty_file(cli, tmp_path):
    bad = tmp_path / "rank0.sqlite"
    bad.write_bytes(b"")
    _assert_one_line_error(cli("sql", "SELECT 1", bad), "is an empty file")


def test_truncated(cli, good, tmp_path):
    cut = tmp_path / "cut" / "rank0.sqlite"
    cut.parent.mkdir()
    data = good.read_bytes()
    cut.write_bytes(data[: len(data) // 2 + 100])
    _assert_one_line_error(cli("sql", "SELECT 1", cut), "truncated")


def test_sqlite_but_not_nsys(cli, tmp_path):
    other = tmp_path / "rank0.sqlite"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE t (x INTEGER)")
    con.commit()
    con.close()
    _assert_one_line_error(cli("sql", "SELECT 1", other), "not an Nsight Systems export")


def test_empty_report(cli, tmp_path):
    empty = make_report(tmp_path / "rank0.sqlite")
    _assert_one_line_error(cli("sql", "SELECT 1", empty), "holds no events")


def test_duplicate_ranks(cli, good, tmp_path):
    other = tmp_path / "b"
    other.mkdir()
    shutil.copy(good, other / "rank0.sqlite")
    _assert_one_line_error(cli("sql", "SELECT 1", good, other / "rank0.sqlite"), "has rank 0")


def test_same_report_twice(cli, good):
    _assert_one_line_error(cli("sql", "SELECT 1", good, good), "is given twice")


def test_mixed_named_and_unnamed(cli, good, tmp_path):
    unnamed = shutil.copy(good, tmp_path / "other.sqlite")
    _assert_one_line_error(cli("sql", "SELECT 1", good, unnamed), "has no rank")


def test_unknown_query(cli, good):
    _assert_one_line_error(cli("query", "no.such", good), "is not a prebuilt query")


def test_bad_parameter(cli, good):
    _assert_one_line_error(
        cli("query", "kernels.summary", good, "-p", "nope=1"), "has no parameter"
    )
    _assert_one_line_error(
        cli("query", "kernels.summary", good, "-p", "min_dur_ns=abc"), "is not a BIGINT"
    )


def test_bad_sql(cli, good):
    _assert_one_line_error(cli("sql", "SELECT nope FROM kernels", good), "query")


def test_output_not_overwritten(cli, good, tmp_path):
    out = tmp_path / "out.csv"
    out.write_text("keep me")
    _assert_one_line_error(
        cli("query", "kernels.summary", good, "-f", "csv", "-o", out), "already exists"
    )
    assert out.read_text() == "keep me"
    assert cli("query", "kernels.summary", good, "-f", "csv", "-o", out, "--force")[0] == 0
    assert out.read_text().startswith("rank,pid,kind,name")


def test_report_is_opened_read_only(cli, good):
    before = good.read_bytes()
    good.chmod(0o444)
    assert cli("query", "kernels.summary", good)[0] == 0
    assert good.read_bytes() == before
