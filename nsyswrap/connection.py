"""One DuckDB connection over the cached Parquet files of some reports: the normalized
views and the per-report reductions, each with `rank` and `report` columns, and the
table macros of `sql/_macros`."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import duckdb

from nsyswrap.sql_files import sql_root

VIEWS = (
    "memcpy", "memset", "kernels", "syncs", "api_calls", "launches",
    "nvtx", "collectives", "devices", "processes", "session",
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


def quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def connect(reports: list[CachedReport], *, memory_limit: str, spill_dir: Path,
            threads: int | None = None) -> duckdb.DuckDBPyConnection:
    """A connection with one view per normalized view and per reduction over `reports`."""
    con = duckdb.connect()
    con.execute(f"SET memory_limit = {quote(memory_limit)}")
    # DuckDB spills to ./.tmp by default and, when done, deletes every spill file there,
    # also other processes' ones: each connection gets a directory of its own.
    con.execute(f"SET temp_directory = {quote(str(spill_dir))}")
    if threads:
        con.execute(f"SET threads = {int(threads)}")
    tables = [(view, "views_dir") for view in VIEWS]
    if all(r.reductions_dir for r in reports):
        tables += [(name, "reductions_dir") for name in reduction_names()]
    for name, where in tables:
        parts = [
            f"SELECT {r.rank}::INTEGER AS rank, {quote(str(r.path))} AS report, * "
            f"FROM read_parquet({quote(str(getattr(r, where) / f'{name}.parquet'))})"
            for r in reports
        ]
        con.execute(f"CREATE VIEW {name} AS " + "\nUNION ALL\n".join(parts))
    for macros in sorted((sql_root() / "_macros").glob("*.sql")):
        con.execute(macros.read_text())
    return con
