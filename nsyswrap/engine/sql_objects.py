"""Every file under `sql/` is a declared SQL object, with one header grammar parsed here.

    -- What one row is (first line), more description.
    -- @scope report                  report: rows of one report alone; run: the whole run.
    -- @include metrics               Macro libraries it calls (`sql/_macros/<name>.sql`).
    -- @reads kernels, device_sweep   Views and objects it reads by name.
    -- @param step_from BIGINT = NULL What the parameter does.
    -- @column dur_ns BIGINT          What the column holds, with its unit (none: as in the
                                      first object it reads that has the column).
    -- @order rank, device, start_ns  Order of its rows (columns, DESC allowed).
    -- @builder nsyswrap.crossrank.solve:build   (objects) built in Python by this function.

Kinds, by folder: `_views` (normalized views, built once per report), `_macros` (libraries
of table macros: they read views only), `_reductions` (per-report objects: computed per
report, take parameters, cached), `_run` (run objects: computed over the whole run from
per-report results) and every other folder (public modules `<area>.<name>`). Nothing is
inferred from the SQL text: what an object needs is what its header says, and a test
checks each header against what the object really reads and returns.

An object built in Python names its builder (`@builder module:function`, see
`nsyswrap.engine.builders`) and has no SQL body: its `@column` types are the single source of its
table's types, and the builder reads only what `@reads` declares.

Values reach the SQL only as bound `$name` parameters; parameters flow by name from an
object to the objects it reads, so every object declares the parameters of what it reads.
Request variables (`sql/_request.sql`: the window, the step pattern) are declared there
once: an object binds one without declaring it, and takes it as a parameter wherever it
or something it reads binds it.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from nsyswrap.storage.cache_keys import code_digest
from nsyswrap.storage.raw_tables import RAW_TABLES
from nsyswrap.storage.sql_files import sql_root

_DIRECTIVE = re.compile(r"^--\s*@(\w+)\s*(.*)$")
_PARAM = re.compile(r"^(\w+)\s+(\w+)(?:\s*=\s*(\S+))?\s*(.*)$")
_COLUMN = re.compile(r"^(\w+)\s+(\w+)\s*(.*)$")
_DOCUMENTED = re.compile(r"^--\s*@(param|var|column)\s")
_MORE = re.compile(r"^--\s{2,}(\S.*)$")
_USE = re.compile(r"(?<![\w$])\$(\w+)")
CONVERT = {
    "BIGINT": int,
    "INTEGER": int,
    "DOUBLE": float,
    "VARCHAR": str,
    "BOOLEAN": lambda v: str(v).lower() in ("1", "true", "yes"),
}
KINDS = {"_views": "view", "_macros": "library", "_reductions": "report", "_run": "run"}
REQUEST = "_request.sql"
"""The request variables' file, at the top of sql/."""


class HeaderError(ValueError):
    """A packaged SQL file's header is wrong: a bug in nsyswrap, not bad input."""


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
class SqlObject:
    """One file of `sql/`. kind: view, library, report (per-report object), run (run
    object) or module (public query; `scope` says whether it runs per report)."""

    name: str
    kind: str
    path: Path
    summary: str
    scope: str
    includes: tuple[str, ...]
    reads: tuple[str, ...]
    params: tuple[Param, ...]
    columns: tuple[Column, ...]
    order: tuple[tuple[str, bool], ...]
    sql: str
    uses: frozenset[str]
    """The parameters its SQL binds (the others pass to what it reads)."""
    builder: str | None = None
    """`module:function` that builds it in Python (see nsyswrap.engine.builders), else None."""

    @property
    def per_report(self) -> bool:
        """Its rows for a report depend on that report only."""
        return self.scope == "report"

    def values(self, given: dict) -> dict:
        """The values of its own parameters out of `given` (defaults for the missing)."""
        return {p.name: given.get(p.name, p.default) for p in self.params}

    def bound(self, given: dict) -> dict:
        """The values its SQL binds, out of `given`."""
        return {k: v for k, v in self.values(given).items() if k in self.uses}


def _literal(text: str | None, type_: str):
    if text is None or text.upper() == "NULL":
        return None
    return CONVERT[type_](text.strip("'"))


def _names(text: str) -> tuple[str, ...]:
    return tuple(n for n in re.split(r"[\s,]+", text.strip()) if n)


def _joined(header: list[str]) -> list[str]:
    """The header's lines, each indented line that goes on with the doc of a @param, @var
    or @column line joined to that line (and left as a bare `--`, so lines keep their
    numbers)."""
    out, last = list(header), None
    for i, line in enumerate(header):
        more = _MORE.match(line)
        if more and last is not None:
            out[last], out[i] = f"{out[last]} {more[1]}", "--"
        else:
            last = i if _DOCUMENTED.match(line) else None
    return out


def parse(path: Path, name: str, kind: str) -> SqlObject:
    """Read one SQL file and check its header against its body."""
    lines = path.read_text().splitlines()
    header = lines[: next((i for i, ln in enumerate(lines) if not ln.startswith("--")), len(lines))]
    header = _joined(header)
    if not header or header[0].startswith("-- @"):
        raise HeaderError(f"{path}: has no summary line; start it with '-- what one row is'")
    params, columns, includes, reads, order, builder = [], [], [], [], [], None
    scope = {"view": "report", "report": "report", "run": "run"}.get(kind, "")
    for lineno, line in enumerate(header, 1):
        m = _DIRECTIVE.match(line)
        if not m:
            continue
        key, rest, where = m[1], m[2], f"{path}:{lineno}"
        if key == "param" or (key == "var" and kind == "request"):
            p = _PARAM.match(rest)
            if not p or p[2] not in CONVERT:
                raise HeaderError(
                    f"{where}: write '-- @param NAME TYPE = DEFAULT doc' with TYPE "
                    f"one of {sorted(CONVERT)}"
                )
            if p[3] is None:
                raise HeaderError(f"{where}: parameter {p[1]} has no default")
            params.append(Param(p[1], p[2], _literal(p[3], p[2]), p[4]))
        elif key == "column":
            c = _COLUMN.match(rest)
            if not c:
                raise HeaderError(f"{where}: write '-- @column NAME TYPE doc'")
            columns.append(Column(c[1], c[2], c[3]))
        elif key == "include":
            includes += _names(rest)
        elif key == "reads":
            reads += _names(rest)
        elif key == "scope":
            if rest.split()[:1] not in (["report"], ["run"]):
                raise HeaderError(f"{where}: scope is report or run")
            scope = rest.split()[0]
        elif key == "order":
            order += [(k.split()[0], k.upper().endswith(" DESC")) for k in rest.split(",")]
        elif key == "builder":
            if kind not in ("report", "run") or not re.fullmatch(r"[\w.]+:\w+", rest.strip()):
                raise HeaderError(
                    f"{where}: write '-- @builder package.module:function' in a "
                    "per-report (_reductions) or run (_run) object"
                )
            builder = rest.strip()
        else:
            raise HeaderError(f"{where}: unknown directive @{key}")
    if kind == "module" and not scope:
        raise HeaderError(f"{path}: a module declares '-- @scope report' or '-- @scope run'")
    body = "\n".join(lines[len(header) :])
    if builder is not None and (body.strip() or not columns):
        raise HeaderError(
            f"{path}: an object built in Python ({builder}) declares its "
            "@column lines and has no SQL body"
        )
    used = set(_USE.findall(re.sub(r"--[^\n]*", "", body)))
    declared = {p.name for p in params} | (set(request_variables()) if kind != "request" else set())
    if kind != "library" and used - declared:
        raise HeaderError(f"{path}: uses undeclared parameters {sorted(used - declared)}")
    intro = [ln.lstrip("- ").strip() for ln in header]
    summary = " ".join(
        intro[: next((i for i, ln in enumerate(intro) if ln.startswith("@")), len(intro))]
    )
    return SqlObject(
        name,
        kind,
        path,
        summary,
        scope,
        tuple(includes),
        tuple(reads),
        tuple(params),
        tuple(columns),
        tuple(order),
        body,
        frozenset(used),
        builder,
    )


@functools.cache
def request_variables() -> dict[str, Param]:
    """The request variables by name (`sql/_request.sql`), in their order."""
    path = sql_root() / REQUEST
    if not path.exists():
        return {}
    return {p.name: p for p in parse(path, "request", "request").params}


@functools.cache
def objects() -> dict[str, SqlObject]:
    """Every SQL object by name: views, libraries and objects by file stem, public
    modules as `<area>.<name>`."""
    root = sql_root()
    found = {}
    for path in sorted(root.rglob("*.sql")):
        rel = path.relative_to(root)
        if rel == Path(REQUEST):
            continue
        kind = KINDS.get(rel.parts[0], "module")
        if kind == "view" and path.stem == "_macros":
            kind = "library"
        name = path.stem if kind != "module" else ".".join(rel.with_suffix("").parts)
        if name in found:
            raise HeaderError(f"{path}: the name {name} is taken by {found[name].path}")
        found[name] = parse(path, name, kind)
    for obj in found.values():
        for needed in obj.includes + obj.reads:
            if needed not in found and needed.removeprefix("raw_") not in RAW_TABLES:
                raise HeaderError(f"{obj.path}: needs {needed}, which no file of sql/ defines")
            if needed in found and (found[needed].kind == "library") != (needed in obj.includes):
                raise HeaderError(f"{obj.path}: @include names macro libraries, @reads the rest")
    for name in found:
        _in_order(name, found)  # no cycle
    return _with_column_docs(_with_variables(found))


def _with_column_docs(found: dict[str, SqlObject]) -> dict[str, SqlObject]:
    """Each `@column` line without a description takes that of the same column in the
    first object it reads that has one (a column passed on is described where it is made);
    none there is a HeaderError naming the file."""
    out: dict[str, SqlObject] = {}

    def resolved(name: str) -> SqlObject:
        if name not in out:
            obj = found[name]
            columns = []
            for c in obj.columns:
                if not c.doc:
                    docs = [
                        d.doc
                        for r in obj.reads
                        if r in found
                        for d in resolved(r).columns
                        if d.name == c.name and d.doc
                    ]
                    if not docs:
                        raise HeaderError(
                            f"{obj.path}: column {c.name} has no description, "
                            "and no object it reads describes it"
                        )
                    c = dataclasses.replace(c, doc=docs[0])
                columns.append(c)
            out[name] = dataclasses.replace(obj, columns=tuple(columns))
        return out[name]

    for name in found:
        resolved(name)
    return out


def _with_variables(found: dict[str, SqlObject]) -> dict[str, SqlObject]:
    """Each object with, before its own parameters, the request variables that it or
    anything it needs binds (in their declared order)."""
    variables = request_variables()
    out = {}
    for name, obj in found.items():
        bound = {v for n in _in_order(name, found) for v in found[n].uses if v in variables}
        own = {p.name for p in obj.params}
        inherited = tuple(p for v, p in variables.items() if v in bound and v not in own)
        out[name] = dataclasses.replace(obj, params=inherited + obj.params) if inherited else obj
    return out


def check_params(name: str) -> None:
    """Every parameter of `name` is used by its SQL (or builder) or by an object it needs,
    and it declares every parameter of the objects it needs (none is left at its default)."""
    obj = get(name)
    used = obj.uses | ({p.name for p in obj.params} if obj.builder else set())
    below = {p.name for n in needs(name)[:-1] for p in get(n).params}
    declared = {p.name for p in obj.params}
    if declared - used - below:
        raise HeaderError(
            f"{obj.path}: declares unused parameters {sorted(declared - used - below)}"
        )
    if below - declared:
        raise HeaderError(
            f"{obj.path}: reads objects with parameters {sorted(below - declared)}, "
            "which it must declare"
        )


def get(name: str) -> SqlObject:
    return objects()[name]


def of_kind(kind: str) -> list[SqlObject]:
    return [o for o in objects().values() if o.kind == kind]


@functools.cache
def needs(name: str) -> tuple[str, ...]:
    """Every object `name` needs, itself last, each after what it needs (no views)."""
    return _in_order(name, objects())


def _in_order(name: str, found: dict[str, SqlObject]) -> tuple[str, ...]:
    """`needs` over the objects `found`. A cycle of headers (an object that needs itself
    through what it reads or includes) is a HeaderError naming the files of the cycle."""
    out: list[str] = []
    path: list[str] = []

    def visit(n: str) -> None:
        if n in path:
            cycle = path[path.index(n) :] + [n]
            raise HeaderError(
                "a cycle of @reads/@include: "
                + " -> ".join(f"{c} ({found[c].path})" for c in cycle)
            )
        path.append(n)
        for dep in found[n].includes + found[n].reads:
            if dep not in out and dep in found and found[dep].kind != "view":
                visit(dep)
        path.pop()
        if n not in out:
            out.append(n)

    visit(name)
    return tuple(out)


@functools.cache
def digest(name: str) -> str:
    """Changes whenever the SQL of `name` or of anything it needs changes, or nsyswrap's
    Python code where one of them is built in Python."""
    h = hashlib.sha256()
    for n in needs(name):
        h.update(get(n).path.read_bytes())
    if any(get(n).builder for n in needs(name)):
        h.update(code_digest().encode())
    return h.hexdigest()[:16]
