"""Exported rows may come in any order (Nsight Systems 2025.6 says so): the report of a
copy of a fixture whose every table lists its rows shuffled is byte-identical."""

from __future__ import annotations

import json
import random
import shutil
import sqlite3
from pathlib import Path

import pytest
from conftest import FIXTURES

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


def _json(run_dir: Path, options: ReportOptions) -> str:
    text = json.dumps(report([run_dir], options), indent=1, sort_keys=True)
    return text.replace(str(run_dir), "RUN")


@pytest.mark.parametrize("fixture", ["run2", "edge_cases"])
@pytest.mark.parametrize("options", [ReportOptions(), ReportOptions.parse("1:3")])
def test_report_is_identical_on_shuffled_rows(tmp_path, fixture, options):
    original = shutil.copytree(FIXTURES / fixture, tmp_path / "original" / "run")
    shuffled = shuffled_copy(FIXTURES / fixture, tmp_path / "shuffled" / "run")
    assert _json(original, options) == _json(shuffled, options)
