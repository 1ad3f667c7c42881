"""Writing a result for people (a table) or machines (csv, json, parquet)."""

from __future__ import annotations

import codecs
import io
import json
import sys
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING

from nsyswrap.errors import NsysWrapError
from nsyswrap.storage.safe_output import check_writable, save, writing

if TYPE_CHECKING:
    import pandas as pd

TABLE_ROWS = 50


class Format(str, Enum):
    table = "table"
    csv = "csv"
    json = "json"
    parquet = "parquet"


class ReportFormat(str, Enum):
    """The formats of `nsyswrap report`."""

    table = "table"
    json = "json"


# What a terminal that cannot encode a character is shown instead (else `\\uXXXX`).
ASCII_FALLBACK = {
    "─": "-",
    "…": "...",
    "–": "-",
    "—": "-",
    "−": "-",
    "±": "+/-",
    "×": "x",
    "µ": "u",
    "≥": ">=",
    "≤": "<=",
    "·": ".",
    "§": "S",
}


def _fallback(error: UnicodeEncodeError) -> tuple[str, int]:
    text = error.object[error.start : error.end]
    return "".join(
        ASCII_FALLBACK.get(c, c.encode("ascii", "backslashreplace").decode()) for c in text
    ), error.end


def fall_back_where_unencodable() -> None:
    """Make stdout and stderr write what their encoding cannot (PYTHONIOENCODING=ascii, a
    Latin-1 terminal) as ASCII_FALLBACK says, else escaped, instead of failing."""
    codecs.register_error("nsyswrap", _fallback)
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure") and stream.errors == "strict":
            stream.reconfigure(errors="nsyswrap")


def to_json_records(df: pd.DataFrame) -> list[dict]:
    """Rows as plain JSON values: NaN/NA become null, numpy scalars become numbers, a
    LIST, STRUCT or MAP value a JSON array or object (a NULL inside it null)."""
    return json.loads(plain_nested(df).to_json(orient="records", double_precision=15))


def plain_nested(df: pd.DataFrame) -> pd.DataFrame:
    """`df` with its LIST, STRUCT and MAP values as Python lists and dicts, a NULL inside
    them None. DuckDB gives a LIST of numbers as a numpy masked array, whose NULLs every
    writer took as 0 (`[1, NULL]` written `[1, 0]` in JSON and Parquet)."""
    nested = _nested_columns(df)
    if not nested:
        return df
    df = df.copy()
    for i in nested:
        df.isetitem(i, df.iloc[:, i].map(_plain))
    return df


def _nested_columns(df: pd.DataFrame) -> list[int]:
    """The positions of the columns that hold a LIST, STRUCT or MAP value."""
    objects = [i for i, dtype in enumerate(df.dtypes) if dtype.kind == "O"]
    return [i for i in objects if df.iloc[:, i].map(_nested).any()]


def render_text(df: pd.DataFrame, fmt: Format) -> str:
    """csv or json text of a result (in csv, a LIST, STRUCT or MAP value is its JSON)."""
    if fmt is Format.csv:
        df = plain_nested(df)
        for i in _nested_columns(df):
            df.isetitem(i, df.iloc[:, i].map(_json_if_nested))
        buf = io.StringIO()
        df.to_csv(buf, index=False)
        return buf.getvalue()
    return json.dumps(to_json_records(df), indent=1) + "\n"


def write(df: pd.DataFrame, fmt: Format, output: Path | None, force: bool, console) -> None:
    """Show or save one result in the chosen format (a table fits the terminal's width)."""
    check_writable(output, force)
    df = plain_nested(df)
    if fmt is Format.parquet:
        if output is None:
            raise NsysWrapError("--format parquet", "needs a file", "add --output FILE.parquet")
        import pyarrow as pa

        try:
            table = pa.Table.from_pandas(df, preserve_index=False)
        except pa.ArrowException as exc:  # e.g. a MAP column (Python dicts of int keys)
            raise NsysWrapError(
                output,
                f"cannot be written as Parquet ({exc})",
                "cast that column in the SQL, e.g. col::VARCHAR, or use --format json",
            ) from None
        import pyarrow.parquet as pq

        # through a file of ours: given a path, a failed write_table removes it (as root,
        # a device such as /dev/full)
        with writing(output), open(output, "wb") as fh:
            pq.write_table(table, fh)
    elif fmt is Format.table:
        lines = table_lines(df, console.width if output is None else None)
        text = "\n".join(lines) + "\n"
        if output is None:
            console.file.write(text)
        else:
            save(output, text)
    elif output is None:
        console.file.write(render_text(df, fmt))
    else:
        save(output, render_text(df, fmt))


def table_lines(df: pd.DataFrame, width: int | None) -> list[str]:
    """A result as text lines no wider than `width` (None: every column): the first
    TABLE_ROWS rows; columns that do not fit are named below the table."""
    import pandas as pd

    from nsyswrap.text_table import fit, wrap

    if df.empty:
        return [f"(no rows; columns: {', '.join(map(str, df.columns))})"]
    right = [
        pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c])
        for c in df.columns
    ]
    cells = [
        ["" if _isna(v) else _fmt(v) for v in row]
        for row in df.head(TABLE_ROWS).itertuples(index=False)
    ]
    keys = sum(1 for c in df.columns[:2] if c in ("rank", "report")) or 1
    # numbers go from the right before names are cut below 24 characters
    droppable = tuple(i for i in reversed(range(keys, len(df.columns))) if right[i])
    lines, dropped = fit(
        [str(c) for c in df.columns], cells, right, width or 10**6, keys, droppable=droppable
    )
    notes = []
    if len(df) > TABLE_ROWS:
        notes.append(f"first {TABLE_ROWS} of {len(df):,} rows")
    if dropped:
        notes.append(f"not shown at this width: {', '.join(dropped)}")
    if notes:
        lines += wrap(
            "; ".join(notes) + "; --format csv or json gives every row and column.", width or 100
        )
    return lines


def _isna(value) -> bool:
    import pandas as pd

    if _nested(value):
        return False
    if type(value).__name__ == "MaskedConstant":  # a NULL inside a LIST (numpy's masked)
        return True
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


def _nested(value) -> bool:
    """A LIST, STRUCT or MAP value (a list, a dict, an array)."""
    return isinstance(value, (list, tuple, dict)) or getattr(value, "ndim", 0) > 0


def _plain(value):
    """A value, nested ones as Python lists and dicts with None for NULL."""
    if type(value).__name__ == "MaskedConstant":
        return None
    if isinstance(value, dict):
        return {_plain(k): _plain(v) for k, v in value.items()}
    if _nested(value):  # a list, a numpy array (masked: .tolist() gives None for NULL)
        items = value.tolist() if hasattr(value, "mask") else value
        return [_plain(v) for v in items]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        return value.item()
    return value


def _json_if_nested(value):
    return json.dumps(value, ensure_ascii=False, default=str) if _nested(value) else value


def _fmt(value) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 1e6 else f"{value:,.0f}"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_fmt(k)}: {_item(v)}" for k, v in value.items()) + "}"
    if _nested(value):
        return "[" + ", ".join(_item(v) for v in value) + "]"
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        return _fmt(value.item())
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _item(value) -> str:
    """A value inside a LIST, STRUCT or MAP."""
    return "NULL" if _isna(value) else _fmt(value)
