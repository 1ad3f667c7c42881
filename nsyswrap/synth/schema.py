"""The real 2026.2 export schema, loaded from ``schema_2026_2.sql``."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

SCHEMA_FILE = Path(__file__).with_name("schema_2026_2.sql")


@dataclass(frozen=True)
class Template:
    """DDL of every real table (in the real file's order) and the rows copied with it."""

    ddl: dict[str, str]
    rows: dict[str, list[tuple]]

    def columns(self, table: str) -> list[str]:
        """Column names of ``table``, in DDL order."""
        con = sqlite3.connect(":memory:")
        con.execute(self.ddl[table])
        return [r[1] for r in con.execute(f'PRAGMA table_info("{table}")')]

    @property
    def enum_tables(self) -> list[str]:
        return [name for name in self.ddl if name.startswith("ENUM_")]


@lru_cache(maxsize=1)
def template() -> Template:
    """Load the template database from the packaged SQL script."""
    con = sqlite3.connect(":memory:")
    con.executescript(SCHEMA_FILE.read_text(encoding="utf-8"))
    ddl = dict(
        con.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table' ORDER BY rowid")
    )
    rows = {name: con.execute(f'SELECT * FROM "{name}" ORDER BY rowid').fetchall() for name in ddl}
    return Template(ddl=ddl, rows={k: v for k, v in rows.items() if v})
