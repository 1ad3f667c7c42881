"""A run: several per-rank reports behind one DuckDB connection with the normalized views."""
from __future__ import annotations

import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import duckdb
import pandas as pd

from nsyswrap.cache import VIEWS, normalized
from nsyswrap.errors import NsysWrapError
from nsyswrap.reports import DEFAULT_RANK_PATTERN, Report, assign_ranks, expand
from nsyswrap.sql_files import sql_root
from nsyswrap.validate import inspect_tables

MEMORY_LIMIT = "2GB"


@dataclass
class Run:
    con: duckdb.DuckDBPyConnection
    reports: list[Report]
    spill_dir: Path

    def df(self, sql: str, params: dict | None = None) -> pd.DataFrame:
        """Run SQL over the views with bound parameters and return a DataFrame."""
        try:
            return self.con.execute(sql, params or {}).df()
        except duckdb.Error as exc:
            raise NsysWrapError("query", str(exc).splitlines()[0], "check the SQL against the views listed by `nsyswrap views`") from exc

    def close(self) -> None:
        self.con.close()
        shutil.rmtree(self.spill_dir, ignore_errors=True)

    def __enter__(self) -> "Run":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def open_run(
    inputs: list[str | Path],
    *,
    rank_pattern: str = DEFAULT_RANK_PATTERN,
    jobs: int = 2,
    progress: Callable[[int, int], None] | None = None,
) -> Run:
    """Validate the reports, normalize each (cached) and open the views over all of them.

    `jobs` reports are normalized at a time (memory stays bounded by that, not by
    the number of ranks); `progress(done, total)` is called after each report.
    """
    paths = expand(inputs)
    tables = {p: inspect_tables(p) for p in paths}
    reports = assign_ranks(paths, rank_pattern)

    done = iter(range(1, len(reports) + 1))

    def prepare(report: Report) -> Path:
        out = normalized(report.path, tables[report.path])
        if progress:
            progress(next(done), len(reports))
        return out

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        dirs = list(pool.map(prepare, reports))
    con = duckdb.connect()
    con.execute(f"SET memory_limit = '{MEMORY_LIMIT}'")
    # DuckDB spills to ./.tmp by default and, when done, deletes every spill file there,
    # also other processes' ones: give each run a directory of its own.
    spill = Path(tempfile.mkdtemp(prefix="nsyswrap-spill-"))
    con.execute(f"SET temp_directory = {_quote(str(spill))}")
    for view in VIEWS:
        parts = [
            f"SELECT {r.rank}::INTEGER AS rank, {_quote(str(r.path))} AS report, * "
            f"FROM read_parquet({_quote(str(d / f'{view}.parquet'))})"
            for r, d in zip(reports, dirs)
        ]
        con.execute(f"CREATE VIEW {view} AS " + "\nUNION ALL\n".join(parts))
    for macros in sorted((sql_root() / "_macros").glob("*.sql")):
        con.execute(macros.read_text())
    return Run(con, reports, spill)


@dataclass(frozen=True)
class Opener:
    """How to open reports: the options every command that reads a run shares."""

    rank_pattern: str = DEFAULT_RANK_PATTERN
    jobs: int = 2
    progress: Callable[[int, int], None] | None = None

    def open(self, inputs: list[str | Path]) -> Run:
        return open_run(inputs, rank_pattern=self.rank_pattern, jobs=self.jobs, progress=self.progress)


DEFAULT_OPENER = Opener()
