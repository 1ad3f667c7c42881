"""Reading tables out of an nsys SQLite export, read-only and offline, into Arrow.

nsyswrap reads with Apache Arrow's ADBC SQLite driver (see README, "How reports
are read"). The driver infers column types from the values it meets, so every
query starts with one typed prototype row (`_proto = 1`) that fixes the Arrow
type of each column before any NULL or mixed value shows up.

SQLite stores whatever bytes a program gave as TEXT; strings that are not valid UTF-8
(a kernel name, an NVTX message) are decoded leniently, with U+FFFD replacement
characters, so one bad name never makes a report unreadable. The `data_quality` view
counts the strings that hold replacement characters.
"""
from __future__ import annotations

import sqlite3
from pathlib import Path

import pyarrow as pa

from nsyswrap.errors import NsysWrapError

BATCH_ROWS = 262_144
_PROTOTYPE = {"INTEGER": "0", "REAL": "0.0", "TEXT": "''", "BLOB": "X''"}


def connect_readonly(path: Path) -> sqlite3.Connection:
    """A stdlib connection that can never write to the report."""
    return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)


def table_columns(con: sqlite3.Connection) -> dict[str, set[str]]:
    """Every table of the report with its column names."""
    tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    return {t: {r[1] for r in con.execute(f'PRAGMA table_info("{t}")')} for t in tables}


def typed_select(table: str, columns: dict[str, str], present: set[str] | None, where: str | None = None) -> str:
    """SQLite text selecting `columns` (name -> INTEGER/REAL/TEXT) with a prototype row first.

    Columns missing from the table (or the whole table, when `present` is None)
    come out as typed NULLs, so callers always see the same schema.
    """
    proto = ", ".join(f'{_PROTOTYPE[t]} AS "{c}"' for c, t in columns.items())
    if present is None:
        return f"SELECT {proto}, 1 AS _proto"
    body = ", ".join(
        f'CAST("{c}" AS {t}) AS "{c}"' if c in present else f'CAST(NULL AS {t}) AS "{c}"'
        for c, t in columns.items()
    )
    filter_ = f" WHERE {where}" if where else ""
    return f'SELECT {proto}, 1 AS _proto UNION ALL SELECT {body}, 0 FROM "{table}"{filter_}'


def read_batches(path: Path, query: str) -> pa.RecordBatchReader:
    """Stream the rows of `query` from the report as Arrow record batches."""
    import adbc_driver_sqlite.dbapi as adbc

    uri = f"{path.resolve().as_uri()}?mode=ro&immutable=1"
    try:
        con = adbc.connect(uri)
        cur = con.cursor()
        cur.adbc_statement.set_options(**{"adbc.sqlite.query.batch_rows": str(BATCH_ROWS)})
        cur.execute(query)
        reader = cur.fetch_record_batch()
    except Exception as exc:  # the driver raises its own error types
        raise NsysWrapError(path, f"cannot be read ({exc})", "check the file is a complete nsys SQLite export") from exc

    def batches():
        try:
            for batch in reader:
                yield valid_utf8(batch)
        finally:
            cur.close()
            con.close()

    return pa.RecordBatchReader.from_batches(reader.schema, batches())


def valid_utf8(batch: pa.RecordBatch) -> pa.RecordBatch:
    """`batch` with every string that is not valid UTF-8 decoded with replacement characters."""
    columns = list(batch.columns)
    for i, column in enumerate(columns):
        if pa.types.is_string(column.type):
            try:
                column.validate(full=True)
            except pa.ArrowInvalid:
                raw = column.view(pa.binary()).to_pylist()
                columns[i] = pa.array([None if b is None else b.decode("utf-8", "replace") for b in raw], pa.string())
    return pa.RecordBatch.from_arrays(columns, schema=batch.schema)
