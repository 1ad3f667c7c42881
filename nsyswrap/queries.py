"""Prebuilt SQL modules: `sql/<area>/<name>.sql` is module `<area>.<name>`.

Each file is one SELECT over the views, with a header::

    -- What one row is (first line), more description.
    -- @param min_dur_ns BIGINT = 0   What the parameter does.
    -- @column dur_ns BIGINT          What the column holds, with its unit.
    -- @scope rank                    (optional) Each rank's rows depend on its report only.

Values reach the SQL only as bound `$name` parameters. The loader rejects undeclared or
unused parameters; a test checks every column is documented. A module of scope rank
runs on each report alone, `jobs` at a time, with results cached per report
(`Run.per_report`); its rows are then put in the order of its final ORDER BY.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from nsyswrap.errors import NsysWrapError
from nsyswrap.run import Run
from nsyswrap.sql_files import sql_root

_PARAM = re.compile(r"^--\s*@param\s+(\w+)\s+(\w+)(?:\s*=\s*(\S+))?\s*(.*)$")
_COLUMN = re.compile(r"^--\s*@column\s+(\w+)\s+(\w+)\s*(.*)$")
_SCOPE = re.compile(r"^--\s*@scope\s+(rank|run)\b")
_ORDER = re.compile(r"^ORDER BY (.+?)(?:^LIMIT\b.*)?\Z", re.M | re.S)
_USE = re.compile(r"(?<![\w$])\$(\w+)")
_CONVERT = {
    "BIGINT": int, "INTEGER": int, "DOUBLE": float, "VARCHAR": str,
    "BOOLEAN": lambda v: str(v).lower() in ("1", "true", "yes"),
}


@dataclass(frozen=True)
class Param:
    name: str
    type: str
    default: object
    doc: str


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    doc: str


@dataclass(frozen=True)
class SqlModule:
    name: str
    path: Path
    summary: str
    params: tuple[Param, ...]
    columns: tuple[Column, ...]
    sql: str
    per_rank: bool = False

    def order(self) -> list[tuple[str, bool]]:
        """(column, descending) of the final ORDER BY, table aliases dropped."""
        m = _ORDER.search(self.sql)
        keys = [k.strip() for k in m[1].split(",")] if m else []
        return [(re.sub(r"^\w+\.", "", k.split()[0]), k.upper().endswith(" DESC")) for k in keys]


def _literal(text: str | None, type_: str):
    if text is None or text.upper() == "NULL":
        return None
    return _CONVERT[type_](text.strip("'"))


def parse(path: Path, name: str) -> SqlModule:
    """Read one SQL file and check its header against its body."""
    lines = path.read_text().splitlines()
    header = lines[: next((i for i, ln in enumerate(lines) if not ln.startswith("--")), len(lines))]
    if not header:
        raise NsysWrapError(path, "has no header comment", "start it with '-- what one row is'")
    params, columns, per_rank = [], [], False
    for lineno, line in enumerate(header, 1):
        if m := _PARAM.match(line):
            if m[2] not in _CONVERT:
                raise NsysWrapError(f"{path}:{lineno}", f"parameter type {m[2]} is not one of {sorted(_CONVERT)}", "fix the header")
            if m[3] is None:
                raise NsysWrapError(f"{path}:{lineno}", f"parameter {m[1]} has no default", "write '= VALUE' or '= NULL'")
            params.append(Param(m[1], m[2], _literal(m[3], m[2]), m[4]))
        elif m := _COLUMN.match(line):
            columns.append(Column(m[1], m[2], m[3]))
        elif m := _SCOPE.match(line):
            per_rank = m[1] == "rank"
    body = "\n".join(lines[len(header):])
    used = set(_USE.findall(re.sub(r"--[^\n]*", "", body)))
    declared = {p.name for p in params}
    if used - declared:
        raise NsysWrapError(path, f"uses undeclared parameter(s) {sorted(used - declared)}", "add '-- @param NAME TYPE doc' lines")
    if declared - used:
        raise NsysWrapError(path, f"declares unused parameter(s) {sorted(declared - used)}", "remove them from the header")
    intro = [ln.lstrip("- ").strip() for ln in header]
    summary = " ".join(intro[: next((i for i, ln in enumerate(intro) if ln.startswith("@")), len(intro))])
    return SqlModule(name, path, summary, tuple(params), tuple(columns), body, per_rank)


def catalog() -> dict[str, SqlModule]:
    """Every public module by name (files and folders starting with `_` are helpers)."""
    root = sql_root()
    modules = {}
    for path in sorted(root.rglob("*.sql")):
        rel = path.relative_to(root)
        if any(part.startswith("_") for part in rel.parts):
            continue
        name = ".".join(rel.with_suffix("").parts)
        modules[name] = parse(path, name)
    return modules


def get(name: str) -> SqlModule:
    modules = catalog()
    if name not in modules:
        close = difflib.get_close_matches(name, modules, n=3, cutoff=0.5)
        hint = f"did you mean {' or '.join(close)}? " if close else ""
        raise NsysWrapError(name, "is not a prebuilt query", f"{hint}see `nsyswrap list` for the names")
    return modules[name]


def bind(module: SqlModule, given: dict[str, object]) -> dict[str, object]:
    """Typed values for every parameter: given ones converted, the rest defaulted."""
    known = {p.name: p for p in module.params}
    unknown = set(given) - set(known)
    if unknown:
        raise NsysWrapError(module.name, f"has no parameter(s) {sorted(unknown)}", f"its parameters are {sorted(known) or 'none'}")
    values = {}
    for p in module.params:
        raw = given.get(p.name, p.default)
        try:
            values[p.name] = raw if raw is None or not isinstance(raw, str) else _CONVERT[p.type](raw)
        except ValueError:
            raise NsysWrapError(module.name, f"parameter {p.name}={raw!r} is not a {p.type}", "pass a value of that type") from None
    low, high = values.get("step_from"), values.get("step_to")
    if low is not None and high is not None and high <= low:  # as `report --steps`
        raise NsysWrapError(f"-p step_from={low} -p step_to={high}", "selects no step (step_to must exceed step_from)",
                            "write e.g. -p step_from=2 -p step_to=5 for steps 2, 3 and 4")
    return values


def run_module(run: Run, name: str, **params) -> pd.DataFrame:
    """Run prebuilt module `name` on an open run."""
    module = get(name)
    values = bind(module, params)
    if not module.per_rank or len(run.cached) < 2:
        return run.df(module.sql, values)
    frame = run.per_report(_module_on_report, {"module": name, **values})["rows"]
    keys = module.order()
    if keys and keys[0] == ("rank", False):
        return frame  # per_report puts the ranks in order, each report's rows are in order
    return frame.sort_values([k for k, _ in keys], ascending=[not d for _, d in keys],
                             kind="stable", ignore_index=True)


def _module_on_report(run: Run, params: dict) -> dict[str, pd.DataFrame]:
    """Run.per_report work: one module on one report."""
    values = dict(params)
    return {"rows": run_module(run, values.pop("module"), **values)}
