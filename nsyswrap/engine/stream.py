"""Results too large to hold, written straight to a file: a per-rank module's rows are
computed per report (each report's rows stored as Parquet by the planner) and DuckDB
copies them to the output in the module's order, so the main process never holds them
(`gaps.launch_latency` is 8 M rows on 8 ranks of 1 M kernels)."""

from __future__ import annotations

from pathlib import Path

import duckdb

from nsyswrap.engine import planner
from nsyswrap.engine.connection import quote
from nsyswrap.engine.queries import bind, get, run_module
from nsyswrap.engine.rank_labels import label_sql
from nsyswrap.engine.run import Run
from nsyswrap.errors import NsysWrapError, limit_error

FORMATS = {"csv": "FORMAT csv, HEADER", "parquet": "FORMAT parquet"}


def write_module(run: Run, name: str, output: Path, fmt: str, **params) -> int:
    """Write prebuilt module `name`'s rows to `output` (`fmt` csv or parquet); returns
    the number of rows. A module of scope run (small: cross-rank) goes through a DataFrame."""
    module = get(name)
    values = bind(module, params)
    labels: dict = {}
    if module.per_report and run.cached:
        (files,) = planner.stored_rows(run, [(name, values)])
        keys = list(module.order)
        rank, labels = label_sql(run, [c.name for c in module.columns])  # the run's rank identity
        if not labels and (not keys or keys[0] == ("rank", False)):
            # Reports in rank order, each one's rows in order: DuckDB keeps the order of the
            # files and of their rows (preserve_insertion_order), nothing to sort or hold.
            listed = ", ".join(quote(str(f)) for f in files)
            sql = f"SELECT * FROM read_parquet([{listed}], union_by_name = true)"
        else:  # sorted as run_module does (stable: ties keep rank, then row order)
            # one scan over the list (a few files open at a time, see connection.create_view)
            listed = ", ".join(quote(str(f)) for f in files)
            parts = (
                f"SELECT * REPLACE ({rank} AS rank), file_index AS _part FROM "
                f"read_parquet([{listed}], union_by_name = true, file_row_number = true)"
            )
            order = "".join(f'"{k}"{" DESC" if d else ""}, ' for k, d in keys)
            sql = (
                f"SELECT * EXCLUDE (_part, file_row_number) FROM ({parts}) "
                f"ORDER BY {order}_part, file_row_number"
            )
    else:
        run.connection.register("_module_rows", run_module(run, name, **values))
        sql = "SELECT * FROM _module_rows"
    con = run.connection
    threads = con.execute("SELECT current_setting('threads')").fetchone()[0]
    con.execute(
        "SET threads = 1"
    )  # in order, one batch at a time: nothing buffered waiting for its turn
    try:  # written in place (USE_TMP_FILE false): DuckDB's own way, a temporary file
        # renamed over the output, would replace a symbolic link or a device (/dev/null) by
        # a regular file
        return con.execute(
            f"COPY ({sql}) TO {quote(str(output))} ({FORMATS[fmt]}, USE_TMP_FILE false)", labels
        ).fetchone()[0]
    except duckdb.IOException as exc:
        if str(output) not in str(exc):
            raise
        raise limit_error(exc, output, output=True) or NsysWrapError(
            output, f"cannot be written ({str(exc).splitlines()[0]})", "choose another output file"
        ) from None
    finally:
        con.execute(f"SET threads = {int(threads)}")
