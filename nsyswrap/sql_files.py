"""The packaged `sql/` folder: found in an installed wheel and in a source checkout."""
from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).resolve().parent


def sql_root() -> Path:
    """`nsyswrap/sql` inside a wheel, else the repository's top-level `sql/`."""
    for candidate in (_HERE / "sql", _HERE.parent / "sql"):
        if candidate.is_dir():
            return candidate
    raise RuntimeError("nsyswrap's sql/ folder is missing from this installation")
