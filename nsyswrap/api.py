"""One-call Python entry points: each opens the reports, runs, and returns a DataFrame."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from nsyswrap.engine import sql_objects
from nsyswrap.engine.connection import VIEWS
from nsyswrap.engine.opener import DEFAULT_OPENER, Opener
from nsyswrap.engine.queries import catalog, run_module
from nsyswrap.engine.sql_guard import check_read_only, lock
from nsyswrap.errors import NsysWrapError

if TYPE_CHECKING:
    import duckdb

    from nsyswrap.engine.run import Run
    from nsyswrap.report.options import ReportOptions


def query(
    name: str, reports: list[str | Path], *, opener: Opener = DEFAULT_OPENER, **params
) -> pd.DataFrame:
    """Run prebuilt module `name` (e.g. "kernels.summary") over the reports."""
    with opener.open(reports) as run:
        return run_module(run, name, **params)


def query_to_file(
    name: str,
    reports: list[str | Path],
    output: Path,
    fmt: str,
    *,
    opener: Opener = DEFAULT_OPENER,
    **params,
) -> int:
    """Write prebuilt module `name`'s rows to `output` as csv or parquet, per-rank modules
    streamed from the per-report results (memory does not grow with the rows); the rows."""
    from nsyswrap.engine.stream import write_module

    with opener.open(reports) as run:
        return write_module(run, name, Path(output), fmt, **params)


def sql(
    text: str, reports: list[str | Path], *, opener: Opener = DEFAULT_OPENER, **params
) -> pd.DataFrame:
    """Run ad-hoc SQL over the views of the reports; `$name` values come from params.
    Only one read-only statement is run (see `sql_guard`)."""
    with _read_only(text, reports, opener) as run:
        return run.df(text, params)


def sql_page(
    text: str,
    reports: list[str | Path],
    offset: int,
    limit: int,
    *,
    opener: Opener = DEFAULT_OPENER,
    **params,
) -> tuple[int, pd.DataFrame]:
    """(rows in all, at most `limit` of them from `offset`) of ad-hoc SQL as `sql` runs
    it, read in chunks: memory holds the page, not every row."""
    with _read_only(text, reports, opener) as run:
        cursor = run.execute(text, params)
        total, kept = 0, []
        while not (chunk := cursor.fetch_df_chunk()).empty:
            start, end = max(offset - total, 0), max(offset + limit - total, 0)
            kept.append(chunk.iloc[start:end])
            total += len(chunk)
        page = pd.concat(kept, ignore_index=True) if kept else cursor.df()
        return total, page


@contextmanager
def _read_only(text: str, reports: list[str | Path], opener: Opener):
    """The run of `reports`, its settings locked, once `text` is found to be one
    read-only statement (see `sql_guard`)."""
    check_read_only(text)
    with opener.open(reports) as run:
        run.ready_for(text)  # lazy views are built before the settings are locked
        lock(run.connection)
        yield run


def report_tables(
    inputs: list[str | Path],
    options: ReportOptions | None = None,
    *,
    opener: Opener = DEFAULT_OPENER,
) -> dict[str, pd.DataFrame]:
    """The tables of what `nsyswrap report` answers for `inputs` (exports, sample files
    or both; the stored answer when asked before), as DataFrames by table id: figures as
    their values, units in `frame.attrs["units"]` (see nsyswrap.report.frames)."""
    from nsyswrap.report import report_of
    from nsyswrap.report.frames import table_frames

    return table_frames(report_of(inputs, options, opener=opener))


def relation(run: Run, text: str, **params) -> duckdb.DuckDBPyRelation:
    """A DuckDB relation over an open run (`nsyswrap.open_run`), valid while the run is
    open: `text` is a view (`kernels`, see `nsyswrap views`), a prebuilt query (its
    rows, computed now with `params`) or one read-only SQL statement over the views
    (`$name` values from `params`)."""
    import duckdb

    from nsyswrap.engine.queries import catalog

    if text in VIEWS:
        return run.con.table(text)
    if text in catalog():
        return run.con.from_df(run_module(run, text, **params))
    check_read_only(text)
    try:
        return run.con.sql(text, params=params or None)
    except duckdb.Error as exc:
        raise NsysWrapError(
            "query",
            str(exc).splitlines()[0],
            "check the SQL against the views listed by `nsyswrap views`",
        ) from exc


def catalog_table() -> pd.DataFrame:
    """The prebuilt queries: name, what a row is, and their parameters."""
    rows = [
        {
            "name": m.name,
            "row": m.summary,
            "params": ", ".join(f"{p.name}={p.default}" for p in m.params),
        }
        for m in catalog().values()
    ]
    return pd.DataFrame(rows, columns=["name", "row", "params"])


def rules_table() -> pd.DataFrame:
    """The diagnosis' rules (nsyswrap.report.diagnosis.rules): a row per rule (what it
    decides, its thresholds written as their defaults; threshold null), then one per
    threshold: its name, default, unit and doc."""
    from nsyswrap.report.diagnosis.rules import RULES

    rows = []
    for r in RULES:
        rows.append(
            {
                "rule": r.id,
                "kind": r.kind,
                "threshold": None,
                "default": None,
                "unit": None,
                "doc": " ".join(r.prose().split()),
            }
        )
        rows += [
            {
                "rule": r.id,
                "kind": r.kind,
                "threshold": t.name,
                "default": t.default,
                "unit": t.unit,
                "doc": t.doc,
            }
            for t in r.thresholds
        ]
    return pd.DataFrame(rows, columns=["rule", "kind", "threshold", "default", "unit", "doc"])


def views_table() -> pd.DataFrame:
    """The normalized views with their documented columns."""
    rows = [
        {"view": "*", "column": "rank", "type": "INTEGER", "doc": "Rank of the report."},
        {"view": "*", "column": "report", "type": "VARCHAR", "doc": "Path of the report."},
    ]
    for view in VIEWS:
        module = sql_objects.get(view)
        rows += [
            {"view": view, "column": c.name, "type": c.type, "doc": c.doc} for c in module.columns
        ]
    return pd.DataFrame(rows)
