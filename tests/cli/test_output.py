"""nsyswrap.output: a LIST, STRUCT or MAP value of a result, with NULLs inside it, keeps
them as NULL in every format (DuckDB gives a LIST of numbers as a numpy masked array,
whose NULLs the writers took as 0)."""

from __future__ import annotations

import csv
import json

import duckdb
import pyarrow.parquet as pq
import pytest
from helpers.bad_input import REPORT

from nsyswrap.output import Format, plain_nested, render_text, to_json_records

NESTED = [
    ("[1, NULL, 3] AS v", [1, None, 3]),
    ("[-2.5, NULL]::DOUBLE[] AS v", [-2.5, None]),
    ("[NULL]::BIGINT[] AS v", [None]),
    ("['x', NULL] AS v", ["x", None]),
    ("[[1, NULL], NULL, []] AS v", [[1, None], None, []]),
    ("{'a': [7, NULL], 'b': NULL} AS v", {"a": [7, None], "b": None}),
    ("[{'k': NULL}] AS v", [{"k": None}]),
    ("[true, NULL] AS v", [True, None]),
]
IDS = ["ints", "doubles", "only-null", "strings", "nested", "struct", "list-of-structs", "bools"]


def _frame(select: str):
    return duckdb.sql(f"SELECT 4 AS n, {select}, NULL::INTEGER[] AS none").df()


@pytest.mark.parametrize("select, value", NESTED, ids=IDS)
def test_a_null_inside_a_nested_value_stays_null_in_json_and_csv(select, value):
    df = _frame(select)
    assert to_json_records(df) == [{"n": 4, "v": value, "none": None}]
    assert json.loads(render_text(df, Format.json)) == [{"n": 4, "v": value, "none": None}]
    (row,) = list(csv.DictReader(render_text(df, Format.csv).splitlines()))
    assert json.loads(row["v"]) == value and row["n"] == "4" and row["none"] == ""


@pytest.mark.parametrize("select, value", NESTED, ids=IDS)
def test_a_null_inside_a_nested_value_stays_null_in_parquet(cli, tmp_path, select, value):
    out = tmp_path / "out.parquet"
    sql = f"SELECT rank, {select} FROM kernels GROUP BY rank"
    code, _, err = cli("sql", sql, REPORT, "--format", "parquet", "-o", out)
    assert code == 0, err
    assert pq.read_table(out).to_pylist() == [{"rank": 0, "v": value}]


@pytest.mark.parametrize("fmt", ["json", "csv", "table"])
def test_the_cli_writes_each_null_of_a_list_as_null(cli, tmp_path, fmt):
    out = tmp_path / f"out.{fmt}"
    sql = "SELECT rank, [rank, NULL, rank + 1] AS v FROM kernels GROUP BY rank"
    code, _, err = cli("sql", sql, REPORT, "-f", fmt, "-o", out)
    assert code == 0, err
    text = out.read_text()
    shown = {
        "json": "[\n   0,\n   null,\n   1\n  ]",
        "csv": '"[0, null, 1]"',
        "table": "[0, NULL, 1]",
    }
    assert shown[fmt] in text, text


def test_a_flat_result_is_left_as_it_is():
    df = duckdb.sql("SELECT 1 AS a, 'x' AS b, NULL AS c").df()
    assert plain_nested(df) is df
