"""One DuckDB connection over the cached Parquet files of some reports: the normalized
views and the per-report reductions, each with `rank` and `report` columns, and the
table macros of `sql/_macros`."""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

import duckdb

from nsyswrap.sql_files import sql_root
from nsyswrap.sql_guard import SAFE_CONFIG

VIEWS = (
    "memcpy", "memset", "kernels", "syncs", "api_calls", "launches",
    "nvtx", "collectives", "devices", "processes", "session", "data_quality",
)


@dataclass(frozen=True)
class CachedReport:
    """A report's rank and path, and where its views and reductions are cached."""

    rank: int
    path: Path
    views_dir: Path
    reductions_dir: Path | None  # None while the reductions themselves are built


def reduction_names() -> list[str]:
    """The per-report reductions: `sql/_reductions/<name>.sql`."""
    return sorted(p.stem for p in (sql_root() / "_reductions").glob("*.sql"))


def reduction_columns(name: str) -> list[tuple[str, str]]:
    """(name, type) of each column a reduction's header declares (`-- @column`)."""
    text = (sql_root() / "_reductions" / f"{name}.sql").read_text()
    return re.findall(r"^--\s*@column\s+(\w+)\s+(\w+)", text, re.M)


def _unbuilt_reduction(name: str) -> str:
    """A view of a reduction's declared columns that fails when read: until a reduction
    is built, the macros that read it can still be created (DuckDB binds a table macro
    when it is created), but no reduction can read another."""
    columns = ", ".join(f'CAST(NULL AS {type_}) AS "{column}"'
                        for column, type_ in [("rank", "INTEGER"), ("report", "VARCHAR"),
                                              *reduction_columns(name)])
    return (f"CREATE VIEW {name} AS SELECT {columns} FROM range(1) "
            f"WHERE error({quote(f'reduction {name} is read while the reductions are built')})")


def quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def macro_files() -> list[Path]:
    return sorted((sql_root() / "_macros").glob("*.sql"))


@functools.cache
def macro_names(path: Path) -> set[str]:
    """The table macros a file of `sql/_macros` creates."""
    return set(re.findall(r"^CREATE OR REPLACE MACRO (\w+)", path.read_text(), re.M))


def create_view(con: duckdb.DuckDBPyConnection, name: str, reports: list[CachedReport],
                where: str) -> None:
    """View `name` over `<name>.parquet` in each report's `where` directory, with `rank`
    and `report` first (replacing a stand-in of an unbuilt reduction)."""
    parts = [
        f"SELECT {r.rank}::INTEGER AS rank, {quote(str(r.path))} AS report, * "
        f"FROM read_parquet({quote(str(getattr(r, where) / f'{name}.parquet'))})"
        for r in reports
    ]
    con.execute(f"CREATE OR REPLACE VIEW {name} AS " + "\nUNION ALL\n".join(parts))


def connect(reports: list[CachedReport], *, memory_limit: str, spill_dir: Path,
            threads: int | None = None, macros: bool = True) -> duckdb.DuckDBPyConnection:
    """A connection with one view per normalized view and per reduction over `reports`
    (a stand-in that fails when read while a report lacks the reduction), and
    (`macros`) every file of `sql/_macros`."""
    con = duckdb.connect(config=SAFE_CONFIG)
    con.execute("SET enable_progress_bar = false")  # workers share the terminal
    con.execute(f"SET memory_limit = {quote(memory_limit)}")
    # DuckDB spills to ./.tmp by default and, when done, deletes every spill file there,
    # also other processes' ones: each connection gets a directory of its own.
    con.execute(f"SET temp_directory = {quote(str(spill_dir))}")
    if threads:
        con.execute(f"SET threads = {int(threads)}")
    # ASOF joins must stay sort-merge joins (see sql/_macros/metrics.sql), also in SQL
    # that runs before any macro file is loaded.
    con.execute("SET asof_loop_join_threshold = 0")
    for view in VIEWS:
        create_view(con, view, reports, "views_dir")
    for name in reduction_names():
        if all(r.reductions_dir and (r.reductions_dir / f"{name}.parquet").exists()
               for r in reports):
            create_view(con, name, reports, "reductions_dir")
        else:
            con.execute(_unbuilt_reduction(name))
    for path in macro_files() if macros else []:
        con.execute(path.read_text())
    return con
