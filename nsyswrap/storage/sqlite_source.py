"""Reading tables out of an nsys SQLite export, read-only and offline, into Arrow.

nsyswrap reads with Apache Arrow's ADBC SQLite driver (see README, "How reports
are read"). The driver infers column types from the values it meets, so every
query starts with one typed prototype row (`_proto = 1`) that fixes the Arrow
type of each column before any NULL or mixed value shows up.

SQLite stores whatever bytes a program gave as TEXT; strings that are not valid UTF-8
(a kernel name, an NVTX message) are decoded leniently, with U+FFFD replacement
characters, so one bad name never makes a report unreadable. A value that is not a whole
number in an INTEGER column (text, a fraction) reads as NULL, never as 0. The
`data_quality` view counts both, and the events they leave out.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from nsyswrap.errors import NsysWrapError, limit_error
from nsyswrap.storage.leftovers import temp_dir
from nsyswrap.storage.raw_tables import TIME_AND_PLACE

BATCH_ROWS = 262_144
NOT_INTEGER = -(1 << 63)
"""What an INTEGER column reads as, out of SQLite, when it holds no whole number; NULL once
read (the int64 minimum: no time, id or size nsys writes)."""
_PROTOTYPE = {"INTEGER": "0", "REAL": "0.0", "TEXT": "''", "BLOB": "X''"}


def connect_readonly(path: Path) -> sqlite3.Connection:
    """A stdlib connection that can never write to the report."""
    return sqlite3.connect(_uri(path), uri=True)


def _uri(path: Path) -> str:
    """How the report is opened: read-only and immutable (SQLite then never looks beside
    it, nor writes a lock or `-shm` file there), or, while `wal_applied` holds it, its
    private snapshot with its `-wal` file, read-only."""
    snapshot = _SNAPSHOTS.get(path.resolve())
    if snapshot is not None:
        return f"{snapshot.as_uri()}?mode=ro"
    return f"{path.resolve().as_uri()}?mode=ro&immutable=1"


def wal_file(path: Path) -> Path | None:
    """The report's `-wal` file when it holds committed rows SQLite has not yet copied into
    the report (a database in WAL mode, header bytes 18-19 = 2, and a `-wal` longer than its
    32-byte header); None otherwise."""
    wal = path.with_name(path.name + "-wal")
    try:
        with path.open("rb") as fh:
            head = fh.read(20)
        return wal if head[18:20] == b"\x02\x02" and wal.stat().st_size > 32 else None
    except OSError:
        return None


@contextmanager
def wal_applied(path: Path):
    """While it holds, reads of `path` see the rows committed in its `-wal` file too: the
    report (hard-linked, else copied) and its `-wal` (copied) go into a private temporary
    directory (`nsyswrap-wal-<host>-<pid>-*`), where SQLite may keep its `-shm` index; nothing is
    written beside the report, which may be read-only. Removed afterwards."""
    wal = wal_file(path)
    key = path.resolve()
    if wal is None or key in _SNAPSHOTS:
        yield
        return
    folder = temp_dir("wal")
    try:
        snapshot = folder / path.name
        try:
            os.link(path, snapshot)
        except OSError:  # another file system, or not allowed
            shutil.copyfile(path, snapshot)
        shutil.copyfile(wal, folder / wal.name)
        _SNAPSHOTS[key] = snapshot
        yield
    finally:
        _SNAPSHOTS.pop(key, None)
        shutil.rmtree(folder, ignore_errors=True)


_SNAPSHOTS: dict[Path, Path] = {}  # report -> its snapshot with its -wal (see wal_applied)


def table_columns(con: sqlite3.Connection) -> dict[str, set[str]]:
    """Every table of the report with its column names."""
    tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    return {t: {r[1] for r in con.execute(f'PRAGMA table_info("{t}")')} for t in tables}


def typed_select(
    table: str, columns: dict[str, str], present: set[str] | None, where: str | None = None
) -> str:
    """SQLite text selecting `columns` (name -> INTEGER/REAL/TEXT) with a prototype row first,
    and `_not_integer` (filled in by `read_batches`).

    An INTEGER column reads a whole number as itself (also one stored as text or REAL: '7',
    7.0) and any other value (text such as 'n/a', a fraction, a number beyond int64) as
    NOT_INTEGER, never as the 0 that SQLite's CAST makes of it; `read_batches` turns those into
    NULL and counts them. Columns missing from the table (or the whole table, when `present`
    is None) come out as typed NULLs, so callers always see the same schema.
    """
    proto = ", ".join(f'{_PROTOTYPE[t]} AS "{c}"' for c, t in columns.items())
    if present is None:
        return f"SELECT {proto}, 0 AS _not_integer, 1 AS _proto"
    body = ", ".join(
        (_integer(c) if t == "INTEGER" else f'CAST("{c}" AS {t})') + f' AS "{c}"'
        if c in present
        else f'CAST(NULL AS {t}) AS "{c}"'
        for c, t in columns.items()
    )
    filter_ = f" WHERE {where}" if where else ""
    return (
        f"SELECT {proto}, 0 AS _not_integer, 1 AS _proto UNION ALL "
        f'SELECT {body}, 0, 0 FROM "{table}"{filter_}'
    )


def _integer(column: str) -> str:
    """`column` when it holds a whole number, else NOT_INTEGER (NULL stays NULL). Comparing
    the value with its CAST compares numbers (text that reads as one is converted), so 'n/a'
    (CAST: 0), 2.5 (CAST: 2) and 9.3e18 (CAST: the int64 limit) all differ from theirs."""
    c = f'"{column}"'
    return (
        f"CASE WHEN CAST({c} AS INTEGER) = {c} THEN CAST({c} AS INTEGER) "
        f"WHEN {c} IS NOT NULL THEN {NOT_INTEGER} END"
    )


def read_batches(path: Path, query: str) -> pa.RecordBatchReader:
    """Stream the rows of `query` from the report as Arrow record batches."""
    import adbc_driver_sqlite.dbapi as adbc

    try:
        con = adbc.connect(_uri(path))
        cur = con.cursor()
        cur.adbc_statement.set_options(**{"adbc.sqlite.query.batch_rows": str(BATCH_ROWS)})
        cur.execute(query)
        reader = cur.fetch_record_batch()
    except Exception as exc:  # the driver raises its own error types (its first line: no SQL)
        raise limit_error(exc) or NsysWrapError(
            path,
            f"cannot be read ({str(exc).splitlines()[0]})",
            "check the file is a complete nsys SQLite export",
        ) from exc

    def batches():
        try:
            for batch in reader:
                yield _cleaned(batch)
        except Exception as exc:  # DuckDB, which reads the batches, says only its own words
            READ_FAILURES[path] = NsysWrapError(
                path,
                f"cannot be read to the end ({str(exc).splitlines()[0]}): it changed or was "
                "cut short while being read, or is damaged",
                "re-export or copy the report again",
            )
            raise
        finally:
            cur.close()
            con.close()

    return pa.RecordBatchReader.from_batches(reader.schema, batches())


READ_FAILURES: dict[Path, NsysWrapError] = {}
"""Report -> why reading it stopped part way (DuckDB, which consumes the batches, raises an
error of its own; the caller raises this one instead)."""


def _cleaned(batch: pa.RecordBatch) -> pa.RecordBatch:
    """`batch` with every string that is not valid UTF-8 decoded with replacement characters,
    every NOT_INTEGER read as NULL, and `_not_integer` counting, per row, the TIME_AND_PLACE
    columns that held one."""
    columns = list(batch.columns)
    bad = None
    for i, (name, column) in enumerate(zip(batch.schema.names, columns)):
        if pa.types.is_string(column.type):
            try:
                column.validate(full=True)
            except pa.ArrowInvalid:
                raw = column.view(pa.binary()).to_pylist()
                columns[i] = pa.array(
                    [None if b is None else b.decode("utf-8", "replace") for b in raw], pa.string()
                )
        elif pa.types.is_int64(column.type) and pc.min(column).as_py() == NOT_INTEGER:
            hit = pc.fill_null(pc.equal(column, NOT_INTEGER), False)
            columns[i] = pc.if_else(hit, pa.scalar(None, pa.int64()), column)
            if name in TIME_AND_PLACE:
                bad = hit.cast(pa.int64()) if bad is None else pc.add(bad, hit.cast(pa.int64()))
    if bad is not None and "_not_integer" in batch.schema.names:
        columns[batch.schema.get_field_index("_not_integer")] = bad
    return pa.RecordBatch.from_arrays(columns, schema=batch.schema)
