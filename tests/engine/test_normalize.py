"""Normalization (nsyswrap.engine.cache): what writing a report's views holds in memory."""

from __future__ import annotations

import re

import duckdb

from nsyswrap.engine import sql_objects
from nsyswrap.storage.raw_tables import RAW_TABLES
from nsyswrap.storage.sqlite_source import typed_select


def test_writing_the_kernels_view_holds_no_kernel_rows():
    """DuckDB keeps a CTE that several parts of a query read, unless it can inline it: held,
    the kernels view's rows took ~250 MB of a worker on a 1 M-kernel report. Its plan (over
    empty raw tables of the export's types) keeps only the small CTEs."""
    con = duckdb.connect()
    con.execute(sql_objects.get("_macros").sql)
    for key, (names, columns) in RAW_TABLES.items():
        con.execute(f"CREATE TABLE raw_{key} AS {typed_select(names[0], columns, None)}")
    for view in ("memcpy", "memset", "api_calls", "nvtx"):
        con.execute(f"CREATE VIEW {view} AS {sql_objects.get(view).sql}")
    plan = con.execute(f"EXPLAIN {sql_objects.get('kernels').sql}").fetchall()[0][1]
    held = set(re.findall(r"CTE Name: (\w+)", plan))
    assert held <= {"strings", "kernel_names", "capture"}, held
