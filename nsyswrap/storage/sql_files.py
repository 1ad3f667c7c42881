"""The packaged `sql/` folder: found in an installed wheel and in a source checkout."""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parents[1]  # nsyswrap/


def sql_root() -> Path:
    """`nsyswrap/sql` inside a wheel, else the repository's top-level `sql/`."""
    for candidate in (_PACKAGE / "sql", _PACKAGE.parent / "sql"):
        if candidate.is_dir():
            return candidate
    raise RuntimeError("nsyswrap's sql/ folder is missing from this installation")
