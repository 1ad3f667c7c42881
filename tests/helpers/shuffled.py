"""Copies of a run whose every table lists its rows shuffled, and the report to compare."""

from __future__ import annotations

import json
import random
import shutil
import sqlite3
from pathlib import Path

from nsyswrap.report import ReportOptions, report


def shuffled_copy(src: Path, dst: Path, seed: int = 1) -> Path:
    """Copy the run directory `src` to `dst`, every table of every report rewritten with
    its rows in a seeded random order (same schema, same rows)."""
    shutil.copytree(src, dst)
    rng = random.Random(seed)
    for path in sorted(dst.glob("*.sqlite")):
        con = sqlite3.connect(path)
        tables = [
            name
            for (name,) in con.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            )
        ]
        for table in tables:
            rows = con.execute(f'SELECT * FROM "{table}"').fetchall()
            rng.shuffle(rows)
            con.execute(f'DELETE FROM "{table}"')
            if rows:
                marks = ", ".join("?" * len(rows[0]))
                con.executemany(f'INSERT INTO "{table}" VALUES ({marks})', rows)
        con.commit()
        con.execute("VACUUM")  # rows are stored in their new order
        con.close()
    return dst


def report_json(run_dir: Path, options: ReportOptions) -> str:
    """The report's JSON of `run_dir`, its path written RUN (so copies compare equal)."""
    text = json.dumps(report([run_dir], options), indent=1, sort_keys=True)
    return text.replace(str(run_dir), "RUN")
