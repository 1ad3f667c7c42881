"""`nsyswrap check-claims`: is each claim a text states held by the report's tables?
(nsyswrap.agent.mentions reads the claims; docs/mcp.md says for users what is verified
and what is not.)

The report's numbers are facts (`Fact`): every figure (and plain number) of every table,
of the diagnosis, the window and any other part of the report's JSON, each in the
context of its row and the rows it is inside (their ranks, steps and phases) and with
its basis where the report says it (per step or in total); the number of rows of each
list; the numbers with units in the tables' titles and short text cells.

A number is held by a fact in its unit that rounds to it at the digits printed and whose
row agrees with the claim (`_agreement`); of those, the one that agrees most, then
shares most words with the claim's sentence, then comes first (tables before the
diagnosis) is named. A rank is held when the run has it, a step when the window or a
table has it, a name in backticks when a table's row holds it.
"""

from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from nsyswrap.agent.mentions import (
    NUMBER,
    Context,
    Mention,
    number,
    read,
    singular,
    words_of,
)
from nsyswrap.errors import NsysWrapError
from nsyswrap.report.figures import is_figure
from nsyswrap.storage.validate import check_readable

ROWS = "rows"  # the column of a fact that counts the rows of a list (a table, `ranks`)
LABEL = 4  # the values of a row that `held_by` names
IDS = {"rank", "step", "device", "pid", "report_rank", "stage", "tid", "seq"}
"""Plain numbers that are ids, not counts."""


@dataclass
class Fact:
    """One number of the report and the row it stands in."""

    where: str  # "section/table", "diagnosis.findings", ...
    row: int | None
    label: dict
    column: str
    value: float
    unit: str
    context: Context = field(default_factory=Context)
    basis: str | None = None


def check(report: dict, text: str) -> dict:
    """Each claim of `text` (nsyswrap.agent.mentions) checked against `report`: held or
    not, and by which table, row and column; with how many of each."""
    facts = _facts(report)
    phases = {p for f in facts for p in f.context.phases}
    _with_phases(facts, phases)
    names = _names(report)
    claims = [_checked(m, facts, report, names) for m in read(text, phases)]
    held = sum(c["held"] for c in claims)
    return {"claims": claims, "held": held, "not_held": len(claims) - held}


def claims_table(found: dict):
    """The claims of `check` as a DataFrame, one row each (csv, parquet)."""
    import pandas as pd

    columns = ["line", "claim", "kind", "held", "held_by", "why"]
    rows = [{**c, "held_by": c.get("held_by") or c.get("table")} for c in found["claims"]]
    return pd.DataFrame([{k: r.get(k) for k in columns} for r in rows], columns=columns)


def text_of(source: str) -> str:
    """The text to check: the file `source`, or stdin for `-`."""
    if source == "-":
        return sys.stdin.read()
    path = Path(source)
    check_readable(path)
    if path.is_dir():
        raise NsysWrapError(path, "is a directory", "give the file holding the text, or -")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise NsysWrapError(path, "is not UTF-8 text", "give a text file, or - for stdin") from None


def _checked(m: Mention, facts: list[Fact], report: dict, names: dict) -> dict:
    out = {"line": m.line + 1, "claim": m.text, "kind": m.kind}
    if m.kind == "number":
        found = _holding(m, facts)
        out |= {"value": m.value, "unit": m.written, "basis": m.basis}
        out["context"] = {k: sorted(getattr(m.context, k)) for k in ("ranks", "steps", "phases")}
        if found is None:
            return {**out, "held": False, "why": _why_not(m)}
        return {**out, "held": True, **_source(found)}
    if m.kind in ("rank", "step"):
        have = _ids(report, m.kind, names)
        missing = [i for i in m.value if i not in have]
        if missing:
            said = f"{m.kind}s {_span(sorted(have))}" if have else f"no {m.kind}s"
            why = f"no table has {m.kind} {', '.join(map(str, missing))} (the report has {said})"
            return {**out, "held": False, "why": why}
        return {**out, "held": True, "table": have[m.value[0]]}
    where = names.get(m.value)
    if where is None:
        return {**out, "held": False, "why": f"no table names {m.text}"}
    return {**out, "held": True, "table": where}


def _holding(m: Mention, facts: list[Fact]) -> Fact | None:
    """The fact that holds number `m` and agrees most with its context, then with its
    words (the first of those, tables before the diagnosis); None when none does. N of
    M is held by a count N in a row that counts M too (`last` 19 of `collectives` 19)."""
    best, score = None, -1
    for f in facts:
        agreed = _agreement(m, f)
        if agreed < 0 or not _equal(m, f):
            continue
        if m.of is not None and not any(
            g.where == f.where and g.row == f.row and g.unit in ("count", "") and g.value == m.of
            for g in facts
        ):
            continue
        s = 100 * agreed + _shared(m.words, f)
        if s > score:
            best, score = f, s
    return best


def _shared(words: set[str], f: Fact) -> int:
    """How many words of the claim's sentence name the fact's column or row (one a prefix
    of the other: `comp` and `compute`)."""
    named = words_of(f.column.replace("_", " ") + " " + " ".join(map(str, f.label.values())))
    return sum(any(a.startswith(b) or b.startswith(a) for b in named) for a in words)


def _agreement(m: Mention, f: Fact) -> int:
    """How many of rank, step, phase and basis the claim and the fact both name alike;
    -1 when the fact cannot hold the claim: it names another; it is a row (not the run as
    a whole) that does not name each rank and phase the claim's sentence names (a row
    whose phase column is empty, a figure of no one phase, may hold a phase's claim); it
    is a row of one step the claim does not name; its basis is not the claim's; it counts
    the rows of a list (`rows`) and the claim counts something else."""
    score = 0
    for kind in ("ranks", "steps", "phases"):
        said, has = getattr(m.context, kind), getattr(f.context, kind)
        if said and has and not said & has:
            return -1
        if kind != "steps" and getattr(m.named, kind) and not has and f.row is not None:
            if kind == "ranks" or "phase" not in f.label:
                return -1
        score += bool(said and has)
    if f.context.steps and not m.context.steps:
        return -1
    step_row = bool(f.context.steps)
    if m.basis == "per step" and f.basis != "per step" and not step_row:
        return -1
    if m.basis == "total" and f.basis == "per step":
        return -1
    if m.noun and m.noun not in ("time", "count") and not _counts(m.noun, f):
        return -1
    if f.column == ROWS and not m.noun:
        return -1
    return score + (m.basis is not None and m.basis == f.basis)


def _counts(noun: str, f: Fact) -> bool:
    """The fact counts `noun` (a step, a collective, a GPU ...): its column names it, or
    it counts the rows of a list that does."""
    noun = "device" if noun == "gpu" else noun
    name = f.where.replace("/", ".").split(".")[-1] if f.column == ROWS else f.column
    named = words_of(name.replace("_", " "))
    return any(singular(w).startswith(noun) or noun.startswith(singular(w)) for w in named)


def _equal(m: Mention, f: Fact) -> bool:
    """The fact rounds to the claim at the digits printed, in the claim's unit."""
    if m.unit == "count":
        if f.unit not in ("count", "") or not float(f.value).is_integer():
            return False
    elif m.unit == "x" and f.unit == "":  # a ratio may be a plain number (`times_median`)
        pass
    elif m.unit == "%":
        if f.unit not in ("fraction", "%"):
            return False
    elif f.unit.lower() != m.unit.lower():
        return False
    value = f.value * 100 if f.unit == "fraction" else f.value
    value = value if m.signed else abs(value)
    half = 0.5 * 10**-m.digits
    return any(
        abs(value / scale - m.value) <= half * (1 + 1e-9) + 1e-12 * abs(m.value)
        for scale in m.scale
    )


def _why_not(m: Mention) -> str:
    half = 0.5 * 10**-m.digits
    said = [f"{k[:-1]} {', '.join(map(str, sorted(v)))}" for k, v in vars(m.context).items() if v]
    among = f" in a row of {', '.join(said)} (or of the whole run)" if said else ""
    basis = f" {m.basis}" if m.basis else ""
    if m.of is not None:
        return f"no row counts {m.value:g} of {m.of:g}{among}"
    if m.unit == "count":
        return f"no table counts {m.value:g} {m.noun}s{basis}{among}"
    return f"no figure within ±{half:g} {m.written} of {m.text}{basis}{among}"


def _source(f: Fact) -> dict:
    value = f.value
    shown = (
        f"{value:,.1f}" if isinstance(value, float) and not value.is_integer() else f"{value:,.0f}"
    )
    row = "" if f.row is None else f" row {f.row}"
    named = {k: v for k, v in f.label.items() if v is not None}
    label = ", ".join(f"{k}={v}" for k, v in list(named.items())[:LABEL])
    return {
        "table": f.where,
        "row": f.row,
        "row_label": named,
        "column": f.column,
        "figure": {"value": f.value, "unit": f.unit},
        "held_by": f"{f.where}{row}"
        + (f" ({label})" if label else "")
        + f": {f.column} = {shown} {f.unit}".rstrip(),
    }


def _span(ids: list[int]) -> str:
    return (
        f"{ids[0]}-{ids[-1]}"
        if ids == list(range(ids[0], ids[-1] + 1))
        else ", ".join(map(str, ids))
    )


# --- the report's numbers -----------------------------------------------------------------------


def _facts(report: dict) -> list[Fact]:
    """Every number of the report (see the module doc), the sections' tables first."""
    facts = []
    for sec in report["sections"]:
        for t in sec.get("tables", []):
            where = f"{sec['id']}/{t['id']}"
            facts += _in_text(t.get("title", ""), where, None, {}, "title")
            facts += _walk(t["rows"], where, None, Context())
    for key, value in report.items():
        if key not in ("sections", "reports", "ranks", "tool", "version", "options"):
            facts += _walk(value, key, None, Context())
    for key in ("ranks", "reports"):
        facts.append(Fact(key, None, {}, ROWS, len(report.get(key, [])), "count"))
    steps = (report.get("window") or {}).get("steps") or []
    facts.append(Fact("window", None, {}, "steps", len(steps), "count"))
    return facts


def _walk(obj, where: str, row: int | None, above: Context) -> list[Fact]:
    """The numbers of a row (a dict) and of the dicts inside it, each in the context of
    its row and of the rows it is inside."""
    if isinstance(obj, list):
        rows = [
            f
            for i, item in enumerate(obj)
            for f in _walk(item, where, i if row is None else row, above)
        ]
        listed = obj and all(isinstance(item, dict) for item in obj)
        return rows + ([Fact(where, None, {}, ROWS, len(obj), "count", above)] if listed else [])
    if not isinstance(obj, dict):
        return []
    context = _row_context(obj, above)
    label = {
        k: v
        for k, v in obj.items()
        if v is None
        or (isinstance(v, (str, int)) and not isinstance(v, bool) and len(str(v)) <= 40)
    }
    facts = []
    for key, cell in obj.items():
        if is_figure(cell) and isinstance(cell["value"], (int, float)):
            if not isinstance(cell["value"], bool) and math.isfinite(cell["value"]):
                basis = _basis(obj, key)
                facts.append(
                    Fact(where, row, label, key, cell["value"], cell["unit"], context, basis)
                )
        elif isinstance(cell, (int, float)) and not isinstance(cell, bool) and key not in IDS:
            facts.append(Fact(where, row, label, key, cell, "", context))
        elif isinstance(cell, str) and len(cell) <= 40:
            facts += _in_text(cell, where, row, label, key, context)
        elif isinstance(cell, (dict, list)):
            facts += _walk(cell, f"{where}.{key}", row, context)
    return facts


def _in_text(text: str, where, row, label, column, context=None) -> list[Fact]:
    """The numbers with units in a table's title or a short text cell (`100 us - 1 ms`)."""
    facts = []
    for m in re.finditer(NUMBER, text):
        n = number(m, 0, text[m.end() :])
        if n is not None and n.unit != "count":
            for scale in n.scale[:1]:
                value = n.value * scale
                facts.append(Fact(where, row, label, column, value, n.unit, context or Context()))
    return facts


def _row_context(row: dict, above: Context) -> Context:
    """The ranks, steps and phases a row names (`rank`, `*_rank`, `ranks`, `*_ranks`,
    the ranks of `devices` pairs; `step`; `phase`), with those of the rows above it."""
    c = Context(set(above.ranks), set(above.steps), set(above.phases))
    for key, cell in row.items():
        value = cell["value"] if is_figure(cell) else cell
        if key == "rank" or key.endswith("_rank"):
            c.ranks |= {value} if isinstance(value, int) else set()
        elif (key == "ranks" or key.endswith("_ranks")) and isinstance(value, list):
            c.ranks |= {v for v in value if isinstance(v, int)}
        elif key == "devices" and isinstance(value, list):
            c.ranks |= {d[0] for d in value if isinstance(d, list) and d}
        elif key == "step" and isinstance(value, int):
            c.steps.add(value)
        elif key == "phase" and isinstance(value, str):
            c.phases.add(value)
    return c


def _with_phases(facts: list[Fact], phases: set[str]) -> None:
    """A row that names a phase in another column (`host_work: data_loading`) names it."""
    for f in facts:
        named = {v for k, v in f.label.items() if "phase" not in k and v in phases}
        f.context.phases |= named


def _basis(row: dict, column: str) -> str | None:
    """Whether a figure is per step or in total, where the report says so: its name
    (`*_per_step`), its own `<column>_basis` or its row's `cost_basis`."""
    if "per_step" in column or "per_affected_step" in column:
        return "per step"
    said = row.get(f"{column}_basis") or row.get("cost_basis")
    if said == "per step":
        return "per step"
    return "total" if said in ("over the run", "over the span") else None


def _ids(report: dict, kind: str, names: dict) -> dict:
    """{rank or step: where the report has it}."""
    if kind == "rank":
        return {r["rank"]: f"ranks row {i}" for i, r in enumerate(report.get("ranks", []))}
    found = {s: "window.steps" for s in (report.get("window") or {}).get("steps") or []}
    for sec in report["sections"]:
        for t in sec.get("tables", []):
            for i, row in enumerate(t["rows"]):
                step = row.get("step")
                step = step["value"] if is_figure(step) else step
                if isinstance(step, int) and step not in found:
                    found[step] = f"{sec['id']}/{t['id']} row {i}"
    return found


def _names(report: dict) -> dict[str, str]:
    """{name: where}: every short text of the tables' rows (phases first, then ranges,
    kernels, ops and the rest), and the tables' ids (a text may name a table)."""
    found: dict[str, str] = {
        t["id"]: f"{sec['id']}/{t['id']} (table)"
        for sec in report["sections"]
        for t in sec.get("tables", [])
    }
    for phases in (True, False):
        for sec in report["sections"]:
            for t in sec.get("tables", []):
                for i, row in enumerate(t["rows"]):
                    for key, cell in row.items():
                        if (
                            isinstance(cell, str)
                            and cell not in found
                            and (key == "phase") == phases
                        ):
                            found[cell] = f"{sec['id']}/{t['id']} row {i} ({key})"
    return found
