"""Ad-hoc SQL only reads: one read-only statement (DuckDB's parser decides), no extension
is installed or loaded, nothing is written to the reports, the cache or anywhere else."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers.bad_input import REPORT, assert_one_line_error


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    import nsyswrap

    report = Path(shutil.copy(REPORT, tmp_path_factory.mktemp("sql") / "rank0.sqlite"))
    nsyswrap.sql("SELECT count(*) FROM kernels", [report])  # its cache exists
    return report


def _cache_files(root: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize(
    "text, kind",
    [
        ("COPY (SELECT 'gone' AS x) TO '{report}' (FORMAT csv)", "COPY"),
        ("COPY (SELECT 1 AS x) TO '{cache}/poison.parquet' (FORMAT parquet)", "COPY"),
        ("COPY kernels FROM '{tmp}/k.csv'", "COPY"),
        ("EXPLAIN ANALYZE COPY (SELECT 1) TO '{tmp}/x.csv'", "COPY"),
        ("ATTACH '{tmp}/new.db' AS x", "ATTACH"),
        ("INSTALL sqlite", "LOAD"),
        ("LOAD sqlite", "LOAD"),
        ("CREATE TABLE t AS SELECT 1", "CREATE"),
        ("CREATE OR REPLACE VIEW kernels AS SELECT 1", "CREATE"),
        ("SET temp_directory = '{tmp}'", "SET"),
        ("PRAGMA enable_profiling", "PRAGMA"),
        ("CALL pragma_version()", "CALL"),
        ("EXPORT DATABASE '{tmp}/db'", "EXPORT"),
        ("DROP VIEW kernels", "DROP"),
    ],
    ids=lambda v: v.split()[0] if " " in v else v,
)
def test_statements_that_write_or_fetch_are_refused(cli, run, tmp_path, text, kind):
    from nsyswrap.storage.cache_keys import cache_root

    before, cache = run.read_bytes(), _cache_files(cache_root())
    sql = text.format(report=run, cache=cache_root(), tmp=tmp_path)
    assert_one_line_error(cli("sql", sql, run), f"is a {kind} statement, not a read-only query")
    assert run.read_bytes() == before and _cache_files(cache_root()) == cache
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("text", ["SELECT 1; SELECT 2", "SELECT 1; COPY (SELECT 1) TO 'x.csv'"])
def test_more_than_one_statement_is_refused(cli, run, text):
    assert_one_line_error(cli("sql", text, run), "holds 2 statements, not one")


@pytest.mark.parametrize(
    "text",
    [
        "SELECT count(*) AS n FROM kernels",
        "WITH k AS (SELECT * FROM kernels) SELECT count(*) AS n FROM k",
        "FROM kernels SELECT count(*) AS n",
        "EXPLAIN SELECT count(*) FROM kernels",
        "DESCRIBE kernels",
        "SUMMARIZE kernels",
    ],
)
def test_read_only_statements_run(cli, run, text):
    code, out, err = cli("sql", text, run, "-f", "csv")
    assert code == 0 and out.strip() and "Error" not in err


def test_extensions_are_never_autoloaded(run):
    import nsyswrap

    with nsyswrap.open_run([run]) as opened:
        settings = dict(
            opened.connection.execute(
                "SELECT name, value FROM duckdb_settings() WHERE name LIKE 'auto%_known_extensions'"
            ).fetchall()
        )
    assert settings == {
        "autoinstall_known_extensions": "false",
        "autoload_known_extensions": "false",
    }
