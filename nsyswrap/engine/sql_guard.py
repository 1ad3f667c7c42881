"""What DuckDB may do for nsyswrap: never fetch extensions, and run ad-hoc SQL
(`nsyswrap sql`, `nsyswrap.sql`) only as one read-only statement.

The check uses DuckDB's own parser (statement types), not pattern matching; after it the
connection's configuration is locked, so the statement cannot change settings either.
"""

from __future__ import annotations

import duckdb

from nsyswrap.errors import NsysWrapError

SAFE_CONFIG = {"autoinstall_known_extensions": False, "autoload_known_extensions": False}
"""Every connection nsyswrap opens: no extension is downloaded or loaded behind the user's back."""

READ_ONLY_STATEMENTS = "SELECT (or WITH, FROM, DESCRIBE, SUMMARIZE, EXPLAIN)"
"""The statements ad-hoc SQL may be, in words."""

READ_ONLY_FIX = (
    f"ask with one {READ_ONLY_STATEMENTS} over the views; "
    "nsyswrap sql never writes, attaches, installs or loads"
)


def check_read_only(text: str) -> None:
    """Raise NsysWrapError unless `text` is exactly one statement that only reads."""
    try:
        statements = duckdb.extract_statements(text)
    except duckdb.Error as exc:
        raise NsysWrapError(
            "query",
            str(exc).splitlines()[0],
            "check the SQL against the views listed by `nsyswrap views`",
        ) from None
    if len(statements) != 1:
        raise NsysWrapError("query", f"holds {len(statements)} statements, not one", READ_ONLY_FIX)
    statement = statements[0]
    if statement.type == duckdb.StatementType.EXPLAIN:
        check_read_only(_explained(statement.query))  # EXPLAIN ANALYZE runs what it explains
    elif statement.type != duckdb.StatementType.SELECT:
        raise NsysWrapError(
            "query", f"is a {statement.type.name} statement, not a read-only query", READ_ONLY_FIX
        )


def _explained(text: str) -> str:
    """The statement after `EXPLAIN [ANALYZE]`, found with DuckDB's tokenizer."""
    tokens = [
        (offset, kind)
        for offset, kind in duckdb.tokenize(text)
        if kind != duckdb.token_type.comment
    ]
    ends = [offset for offset, _ in tokens[1:]] + [len(text)]
    words = [text[offset:end].strip().upper() for (offset, _), end in zip(tokens, ends)]
    skip = 2 if words[1:2] == ["ANALYZE"] else 1
    return text[tokens[skip][0] :] if len(tokens) > skip else ""


def lock(con: duckdb.DuckDBPyConnection) -> None:
    """No later statement on `con` may change a setting (spill directory, memory, access)."""
    con.execute("SET lock_configuration = true")
