"""Copy the schema of a real nsys 2026.2 export into ``schema_2026_2.sql``.

Run once (or when a newer real export should become the model):
``python -m nsyswrap.synth.extract_schema REAL.sqlite [OUT.sql]``.
The output is an SQL script that rebuilds a *template database*: the DDL of every
table (verbatim from ``sqlite_master``), all ``ENUM_*`` rows, and the generic rows of
``META_DATA_EXPORT``, ``META_DATA_CAPTURE`` and ``TARGET_INFO_SYSTEM_ENV`` that the
generator patches per rank. Rows that describe the original capture's environment
(environment variables, slicing keys added by nsys-ai) are left out.
"""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

DEFAULT_OUT = Path(__file__).with_name("schema_2026_2.sql")

# Rows kept from the real file, per table: a WHERE clause selecting them.
TEMPLATE_ROWS = {
    "META_DATA_EXPORT": "name NOT LIKE 'DERIVED_%'",
    "META_DATA_CAPTURE": "name NOT IN ('PROCESS_0:ENVIRONMENT_VARIABLE')"
    " AND name NOT LIKE 'PROCESS_0:ARGUMENT_%'",
    "TARGET_INFO_SYSTEM_ENV": "name NOT IN ('DeviceEnvironment')",
}


def _literal(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, (int, float)):
        return repr(value)
    return "'" + str(value).replace("'", "''") + "'"


def extract(real: Path) -> str:
    """Return the template SQL script for the export at ``real``."""
    con = sqlite3.connect(f"file:{real}?mode=ro", uri=True)
    meta = dict(con.execute("SELECT name, value FROM META_DATA_EXPORT"))
    lines = [
        f"-- nsys {meta['EXPORT_PRODUCT_VERSION']} SQLite export schema"
        f" {meta['EXPORT_SCHEMA_VERSION']}, copied from a real export.",
        f"-- Source: {real.name} (see shared/nsys-sqlite/PROVENANCE.md).",
        "-- Regenerate: python -m nsyswrap.synth.extract_schema REAL.sqlite",
        "",
    ]
    tables = con.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'table' ORDER BY rowid"
    ).fetchall()
    for name, ddl in tables:
        lines.append(ddl + ";")
        if name.startswith("ENUM_") or name in TEMPLATE_ROWS:
            where = TEMPLATE_ROWS.get(name, "1")
            for row in con.execute(f'SELECT * FROM "{name}" WHERE {where} ORDER BY rowid'):
                values = ", ".join(_literal(v) for v in row)
                lines.append(f"INSERT INTO {name} VALUES ({values});")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    real = Path(argv[0])
    out = Path(argv[1]) if len(argv) > 1 else DEFAULT_OUT
    out.write_text(extract(real), encoding="utf-8")
    print(f"wrote {out}")


if __name__ == "__main__":
    main(sys.argv[1:])
