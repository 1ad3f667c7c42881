"""Ad-hoc SQL only reads: one read-only statement (DuckDB's parser decides), no extension
is installed or loaded, nothing is written to the reports, the cache or anywhere else."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers.bad_input import REPORT, assert_one_line_error
from helpers.sql_cases import READING_SQL, SEVERAL_SQL, WRITING_SQL, case_id


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A copy of a report, and a cache of its own that holds it (the tests compare every
    file of the cache before and after, not those of the whole session's)."""
    import nsyswrap

    folder = tmp_path_factory.mktemp("sql")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("NSYSWRAP_CACHE_DIR", str(folder / "cache"))
        report = Path(shutil.copy(REPORT, folder / "rank0.sqlite"))
        nsyswrap.sql("SELECT count(*) FROM kernels", [report])  # its cache exists
        yield report


def _cache_files(root: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize("text, kind", WRITING_SQL, ids=case_id)
def test_statements_that_write_or_fetch_are_refused(cli, run, tmp_path, text, kind):
    from nsyswrap.storage.cache_keys import cache_root

    before, cache = run.read_bytes(), _cache_files(cache_root())
    sql = text.format(report=run, cache=cache_root(), tmp=tmp_path)
    assert_one_line_error(cli("sql", sql, run), f"is a {kind} statement, not a read-only query")
    assert run.read_bytes() == before and _cache_files(cache_root()) == cache
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("text", SEVERAL_SQL)
def test_more_than_one_statement_is_refused(cli, run, text):
    assert_one_line_error(cli("sql", text, run), "holds 2 statements, not one")


@pytest.mark.parametrize("text", READING_SQL)
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


@pytest.mark.parametrize(
    "select, shown",
    [
        ("[1, 2, 3] AS l", "[1, 2, 3]"),
        ("list(name ORDER BY name)[1:2] AS l", "["),
        ("[[1], [], NULL] AS l", "[[1], [], NULL]"),
        ("[NULL]::INTEGER[] AS l", "[NULL]"),
        ("{'a': [1.5, 2.5]} AS l", "{a: [1.5, 2.5]}"),
        ("map(['k'], [7]) AS l", "{k: 7}"),
        ("['x', NULL] AS l", "[x, NULL]"),
    ],
    ids=["list", "aggregated", "nested", "null-in-list", "struct", "map", "strings"],
)
def test_a_list_struct_or_map_column_is_drawn_as_a_table(cli, run, select, shown):
    code, out, err = cli("sql", f"SELECT rank, {select} FROM kernels GROUP BY rank", run)
    assert code == 0 and "Traceback" not in err, err
    assert shown in out.splitlines()[2]


def test_a_map_column_that_parquet_cannot_take_is_one_line(cli, run, tmp_path):
    out = tmp_path / "m.parquet"
    result = cli(
        "sql", "SELECT map([1], [2]) AS m FROM kernels LIMIT 1", run, "-f", "parquet", "-o", out
    )
    assert_one_line_error(result, "cannot be written as Parquet")
    code, _, err = cli(
        "sql", "SELECT [1, 2] AS l FROM kernels LIMIT 1", run, "-f", "parquet", "-o", out
    )
    assert code == 0 and out.read_bytes()[:4] == b"PAR1", err
