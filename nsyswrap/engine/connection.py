"""DuckDB sessions: the one set-up every connection of nsyswrap gets (normalization and
analysis alike), and the views over the cached Parquet files of some reports."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import duckdb

from nsyswrap.engine.sql_guard import SAFE_CONFIG
from nsyswrap.errors import shown

VIEWS = (  # in the order they are built: each reads only raw tables and views above it
    "memcpy",
    "memset",
    "api_calls",
    "nvtx",
    "kernels",
    "syncs",
    "launches",
    "collectives",
    "devices",
    "processes",
    "threads",
    "session",
    "data_quality",
    "nvtx_payloads",
    "payload_schemas",
    "osrt_calls",
    "gpu_memory",
)
LAZY_VIEWS = ("launches",)
"""Views a report's normalization does not write: built from its other views where first
needed (nsyswrap.engine.lazy_views)."""


@dataclass(frozen=True)
class CachedReport:
    """A report's rank and path, and where its normalized views are cached."""

    rank: int
    path: Path
    views_dir: Path


def quote(text: str) -> str:
    """`text` as a SQL string literal (for the few places that cannot bind a value)."""
    return "'" + text.replace("'", "''") + "'"


def session(
    *, memory_limit: str, spill_dir: Path, threads: int | None = None
) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection with nsyswrap's settings: a memory cap, a spill directory of its
    own, `threads` threads (default: DuckDB's), no progress bar, no extension loading, no
    Python variables read as tables."""
    con = duckdb.connect(config=SAFE_CONFIG)
    con.execute("SET enable_progress_bar = false")  # workers share the terminal
    # A name SQL reads must be a view or object, never a Python variable of the caller.
    con.execute("SET python_enable_replacements = false")
    con.execute("SET memory_limit = $1", [memory_limit])
    # DuckDB spills to ./.tmp by default and, when done, deletes every spill file there,
    # also other processes' ones: each connection gets a directory of its own.
    con.execute("SET temp_directory = $1", [str(spill_dir)])
    if threads:
        con.execute(f"SET threads = {int(threads)}")
    # ASOF joins must stay sort-merge joins: with the default, DuckDB runs them as nested
    # loops when it guesses the left side is small, which costs left x right rows.
    con.execute("SET asof_loop_join_threshold = 0")
    return con


def create_view(
    con: duckdb.DuckDBPyConnection, name: str, parts: list[tuple[int, Path, Path]]
) -> None:
    """View `name` over Parquet files, one per report: (rank, report path, file), with
    `rank` and `report` first, the files' rows in the order given.

    One `read_parquet` over the list of files, not a UNION ALL of one scan per file: DuckDB
    opens every branch of a UNION ALL when the query starts (one file descriptor per report
    and view read, which hits `ulimit -n` at a few hundred reports), but a list a few files at
    a time. Each row's rank and report are looked up by its file's position (`file_index`)."""
    files = ", ".join(quote(str(file)) for _, _, file in parts)
    ranks = ", ".join(str(int(rank)) for rank, _, _ in parts)
    reports = ", ".join(quote(shown(report)) for _, report, _ in parts)
    con.execute(
        f'CREATE OR REPLACE VIEW "{name}" AS '
        f"SELECT [{ranks}][file_index::BIGINT + 1]::INTEGER AS rank, "
        f"[{reports}][file_index::BIGINT + 1] AS report, * "
        f"FROM read_parquet([{files}], union_by_name = true)"
    )


def connect(
    reports: list[CachedReport], *, memory_limit: str, spill_dir: Path, threads: int | None = None
) -> duckdb.DuckDBPyConnection:
    """A session with one view per normalized view over `reports` (a lazy view only where
    every report has its file: see nsyswrap.engine.lazy_views)."""
    con = session(memory_limit=memory_limit, spill_dir=spill_dir, threads=threads)
    for view in VIEWS:
        files = [(r.rank, r.path, r.views_dir / f"{view}.parquet") for r in reports]
        if view not in LAZY_VIEWS or all(file.exists() for _, _, file in files):
            create_view(con, view, files)
    return con
