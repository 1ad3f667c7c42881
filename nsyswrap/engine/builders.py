"""Objects built in Python: a header names its builder, the engine calls it.

A per-report (`sql/_reductions`) or run (`sql/_run`) object whose rows Python computes
better than SQL declares them like any object, with no SQL body and one more line:

    -- One row per rank: its clock from the global solve.
    -- @reads xr_rank_keys, xr_members, session
    -- @param step_pattern VARCHAR = step:%  LIKE pattern of the step ranges.
    -- @builder nsyswrap.crossrank.solve:build
    -- @column rank INTEGER   The rank.

The planner computes what it `@reads` first, as for any object, then calls
`function(inputs)` (imported by name only then: the engine imports no domain package).
`inputs` (`Inputs`) gives the builder what its header declares and nothing else: each
view or object of `@reads` as a pandas DataFrame or Arrow table (a name it does not
declare is a bug, refused), its parameter values, and the run's reports. The builder
returns the object's rows (a DataFrame or an Arrow table) with exactly its declared
columns, which the engine casts to the declared `@column` types, the single source of its
table's types; or a mapping `{name: rows}` of several objects that name the same builder
and take the same parameters, which are all made from one call (the cross-rank solve
makes its tables at once). A per-report builder runs in the worker, on the report alone,
and its rows are stored like any per-report object's (`rank` and `report` are added by
the view; over a run of hand-made tables, one table of every rank, it keeps the `rank` it
returns).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any

import duckdb
import pandas as pd
import pyarrow as pa

from nsyswrap.engine import sql_objects

PER_REPORT_KEYS = ("rank", "report")
"""Columns the view of a per-report object adds: a per-report builder does not return them."""


@dataclass(frozen=True)
class Inputs:
    """What a builder reads: the views and objects its header declares (bound on the run's
    connection before it runs), its parameter values and the run's reports."""

    name: str
    """The object asked for (a builder of several objects makes all of them)."""
    params: dict
    """Its parameter values, typed, defaults filled in."""
    reads: frozenset[str]
    """The views and objects it may read (its `@reads`)."""
    _run: Any = field(repr=False)

    @property
    def reports(self) -> list:
        """The run's reports (`nsyswrap.storage.reports.Report`: rank, path, rank_source)."""
        return list(self._run.reports)

    @property
    def cached(self) -> tuple:
        """The run's reports as cached (`nsyswrap.engine.connection.CachedReport`: rank, path,
        views_dir); none for a run of hand-made tables (which may change between calls)."""
        return tuple(self._run.cached)

    @property
    def allow_unrelated(self) -> bool:
        """Whether reports whose captures are far apart are analysed as one run."""
        return bool(self._run.allow_unrelated)

    def arrow(self, name: str, columns: list[str] | None = None) -> pa.Table:
        """View or object `name` (one its header declares), all or some columns."""
        return self._relation(name, columns).to_arrow_table()

    def frame(self, name: str, columns: list[str] | None = None) -> pd.DataFrame:
        """View or object `name` (one its header declares) as a DataFrame."""
        return self._relation(name, columns).df()

    def _relation(self, name: str, columns: list[str] | None) -> duckdb.DuckDBPyRelation:
        if name not in self.reads:
            raise RuntimeError(
                f"the builder of {self.name} reads {name}, which its header "
                f"({sql_objects.get(self.name).path}) does not declare in @reads"
            )
        listed = ", ".join(f'"{c}"' for c in columns) if columns else "*"
        return self._run.connection.sql(f'SELECT {listed} FROM "{name}"')


def function(spec: str):
    """The builder `package.module:function` (its module imported the first time)."""
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


def build(run, obj: sql_objects.SqlObject, params: dict) -> dict[str, pa.Table]:
    """Call `obj`'s builder on `run` (what it reads already bound there): the rows of each
    object it made, as Arrow tables of exactly their declared columns (not yet cast)."""
    made = function(obj.builder)(Inputs(obj.name, obj.values(params), frozenset(obj.reads), run))
    made = made if isinstance(made, dict) else {obj.name: made}
    if obj.name not in made:
        raise RuntimeError(f"{obj.builder} did not return {obj.name}")
    out = {}
    for name, rows in made.items():
        target = sql_objects.objects().get(name)
        if target is None or target.builder != obj.builder or target.params != obj.params:
            raise RuntimeError(
                f"{obj.builder} returned {name}, which is no object built by it "
                "with the same parameters"
            )
        table = (
            rows if isinstance(rows, pa.Table) else pa.Table.from_pandas(rows, preserve_index=False)
        )
        # a per-report object's view adds rank and report over cached reports; over
        # hand-made tables (no store) it is one table of every rank: the rank stays
        kept = ["rank"] if target.kind == "report" and not run.cached else []
        if target.kind == "report":
            table = table.drop_columns(
                [c for c in PER_REPORT_KEYS if c in table.column_names and c not in kept]
            )
        declared = [c.name for c in target.columns]
        if sorted(table.column_names) != sorted(kept + declared):
            raise RuntimeError(
                f"{obj.builder} returned columns {table.column_names} for {name}; "
                f"its header ({target.path}) declares {declared}"
            )
        out[name] = table.select(kept + declared)
    return out


def create_table(con: duckdb.DuckDBPyConnection, table: str, name: str, rows) -> None:
    """Table `table` on `con` holding object `name`'s rows (a DataFrame or Arrow table of
    its declared columns), cast to its declared `@column` types."""
    rows = rows if isinstance(rows, pa.Table) else pa.Table.from_pandas(rows, preserve_index=False)
    typed(con, sql_objects.get(name), rows, f'CREATE OR REPLACE TABLE "{table}" AS FROM {{rows}}')


def typed(
    con: duckdb.DuckDBPyConnection, obj: sql_objects.SqlObject, rows: pa.Table, sql: str
) -> None:
    """Run `sql` with `{rows}` standing for `rows` cast to `obj`'s declared column types."""
    view = f"nsyswrap_built_{obj.name}"
    con.register(view, rows)
    try:
        declared = {c.name for c in obj.columns}
        ranked = (
            ["CAST(rank AS INTEGER) AS rank"]
            if ("rank" in rows.column_names and "rank" not in declared)
            else []
        )
        listed = ", ".join(
            ranked + [f'CAST("{c.name}" AS {c.type}) AS "{c.name}"' for c in obj.columns]
        )
        con.execute(sql.replace("{rows}", f"(SELECT {listed} FROM {view})"))
    finally:
        con.unregister(view)
