"""Writing a result for people (a table) or machines (csv, json, parquet)."""
from __future__ import annotations

import io
import json
import tempfile
from enum import Enum
from pathlib import Path

import pandas as pd

from nsyswrap.errors import NsysWrapError

TABLE_ROWS = 50


class Format(str, Enum):
    table = "table"
    csv = "csv"
    json = "json"
    parquet = "parquet"


def check_writable(output: Path | None, force: bool) -> None:
    """Before any work: refuse an output that exists (unless forced), is a directory, or
    cannot be written (missing or read-only directory, read-only file)."""
    if output is None:
        return
    output = Path(output)
    if output.is_dir():
        raise NsysWrapError(output, "is a directory", "give a file name, e.g. --output DIR/result.csv")
    if output.exists() and not force:
        raise NsysWrapError(output, "already exists", "pass --force to overwrite it or choose another --output")
    folder = output.absolute().parent
    if not folder.is_dir():
        raise NsysWrapError(output, f"cannot be written: directory {folder} does not exist",
                            "create it first or choose another --output")
    try:
        tempfile.TemporaryFile(dir=folder).close()
        if output.exists():
            open(output, "ab").close()  # opening to append changes nothing
    except OSError as exc:
        raise NsysWrapError(output, f"cannot be written ({exc.strerror})",
                            "choose an --output in a directory you can write to") from None


def to_json_records(df: pd.DataFrame) -> list[dict]:
    """Rows as plain JSON values: NaN/NA become null, numpy scalars become numbers."""
    return json.loads(df.to_json(orient="records", double_precision=15))


def render_text(df: pd.DataFrame, fmt: Format) -> str:
    """csv or json text of a result."""
    if fmt is Format.csv:
        buf = io.StringIO()
        df.to_csv(buf, index=False)
        return buf.getvalue()
    return json.dumps(to_json_records(df), indent=1) + "\n"


def write(df: pd.DataFrame, fmt: Format, output: Path | None, force: bool, console) -> None:
    """Show or save one result in the chosen format."""
    check_writable(output, force)
    if fmt is Format.parquet:
        if output is None:
            raise NsysWrapError("--format parquet", "needs a file", "add --output FILE.parquet")
        df.to_parquet(output, index=False)
    elif fmt is Format.table:
        if output is None:
            console.print(_table(df))
        else:
            from rich.console import Console

            buf = io.StringIO()
            Console(file=buf, width=200).print(_table(df))
            output.write_text(buf.getvalue())
    elif output is None:
        console.file.write(render_text(df, fmt))
    else:
        output.write_text(render_text(df, fmt))


def _table(df: pd.DataFrame):
    from rich.table import Table

    if df.empty:
        return f"(no rows; columns: {', '.join(df.columns)})"
    table = Table(show_lines=False, header_style="bold")
    for col in df.columns:
        numeric = pd.api.types.is_numeric_dtype(df[col])
        table.add_column(str(col), justify="right" if numeric else "left", no_wrap=numeric, overflow="fold")
    for row in df.head(TABLE_ROWS).itertuples(index=False):
        table.add_row(*("" if pd.isna(v) else _fmt(v) for v in row))
    if len(df) > TABLE_ROWS:
        table.caption = f"{len(df) - TABLE_ROWS} more rows; use --format csv or json for all"
    return table


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 1e6 else f"{value:,.0f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)
