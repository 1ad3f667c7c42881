"""Bad input: the one-line error it must give, and damaged copies of a bundled report."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

from helpers.paths import FIXTURES

REPORT = FIXTURES / "run2" / "rank0.sqlite"


def assert_one_line_error(result, needle: str) -> str:
    code, out, err = result
    assert "Traceback" not in err and "╭" not in err, err
    lines = [line for line in err.strip().splitlines() if not line.startswith("nsyswrap: note:")]
    assert code == 1 and len(lines) == 1, err
    assert lines[0].startswith("Error: ") and needle in lines[0] and "; " in lines[0], err
    return lines[0]


def damaged_copy(
    folder: Path, *statements: str, source: Path = REPORT, name: str = "rank0.sqlite"
) -> Path:
    """A copy of `source` in `folder` changed by SQL `statements`."""
    folder.mkdir(parents=True, exist_ok=True)
    report = Path(shutil.copy(source, folder / name))
    con = sqlite3.connect(report)
    for statement in statements:
        con.execute(statement)
    con.commit()
    con.close()
    return report
