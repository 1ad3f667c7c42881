"""Ad-hoc SQL that writes or fetches, refused as `is a <kind> statement` ({report}, {cache}
and {tmp}: the report, the cache and a scratch directory); several statements, refused as
`holds 2 statements`; and SQL that only reads. `nsyswrap sql`
(tests/engine/test_reliability_sql.py) and the MCP server's run_sql
(tests/agent/test_mcp.py) are held to each."""

from __future__ import annotations

WRITING_SQL = [
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
]
SEVERAL_SQL = ["SELECT 1; SELECT 2", "SELECT 1; COPY (SELECT 1) TO 'x.csv'"]
READING_SQL = [
    "SELECT count(*) AS n FROM kernels",
    "WITH k AS (SELECT * FROM kernels) SELECT count(*) AS n FROM k",
    "FROM kernels SELECT count(*) AS n",
    "EXPLAIN SELECT count(*) FROM kernels",
    "DESCRIBE kernels",
    "SUMMARIZE kernels",
]


def case_id(value) -> str:
    """A case's test id: the first word of its statement (`COPY`), or its kind."""
    return value.split()[0] if " " in value else value
