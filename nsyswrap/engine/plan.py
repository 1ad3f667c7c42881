"""The compiled plan of a request: the whole graph, checked, before anything runs.

A request asks for results `{key: (module or object, parameters)}`. `compile` walks the
headers' declarations from each (`nsyswrap.engine.sql_objects`: `@include`, `@reads`; the
graph is checked when the headers load: a cycle or a missing object names its files)
and gives one `Step` per object and parameter values it needs, in dependency order:

* `library`: a macro library, run on the connection once;
* `report`: a per-report object, or a per-report module of a run of several reports:
  computed on each report alone in the worker pool (or on Dask), stored per report;
* `run`: a run object, computed over the whole run from the per-report results, stored;
* `module`: a public module run on the run's connection.

Each step knows where it is stored (its store entries, `nsyswrap.storage.store`) and whether it
is: what is stored needs nothing under it, so the plan leaves out what only a stored
step reads (a warm run reads its stored clock solve and computes none of its inputs).
`nsyswrap.engine.planner` executes a plan in order; `nsyswrap plan` prints it (`rows`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from nsyswrap.engine import sql_objects
from nsyswrap.engine.connection import CachedReport
from nsyswrap.storage import store
from nsyswrap.storage.cache_keys import code_digest, nsyswrap_version


@dataclass(frozen=True)
class Scope:
    """What a plan is compiled for: the run's reports (cached; none for a run of hand-made
    tables), their ranks and rank sources, whether unrelated reports are allowed, and
    whether per-report modules are stored per report even for one report."""

    cached: tuple[CachedReport, ...]
    reports: tuple = ()
    allow_unrelated: bool = False
    store_per_report: bool = False

    @property
    def ranked(self) -> list[CachedReport]:
        return sorted(self.cached, key=lambda c: c.rank)

    @property
    def several(self) -> bool:
        """Per-report modules are stored per report and concatenated."""
        return len(self.cached) > 1 or (bool(self.cached) and self.store_per_report)


@dataclass
class Step:
    """One object (or module) with one set of parameter values."""

    name: str
    kind: str  # library, report, run or module
    params: dict  # the parameters it is asked with (its own are `values`)
    entries: tuple[Path, ...] = ()  # its store entries: per report, or the run's one
    readers: list[str] = field(default_factory=list)  # the steps that read it
    asked: bool = False  # a result asked for

    @property
    def values(self) -> dict:
        return sql_objects.get(self.name).values(self.params)

    @property
    def id(self) -> tuple:
        return step_id(self.name, self.params)

    @property
    def stored(self) -> int:
        """How many of its entries are stored."""
        return sum(e.exists() for e in self.entries)


def step_id(name: str, params: dict) -> tuple:
    return name, tuple(sorted(sql_objects.get(name).values(params).items()))


@dataclass
class Plan:
    scope: Scope
    steps: list[Step]
    """In dependency order: each after every step it needs."""

    def step(self, name: str, params: dict) -> Step | None:
        wanted = step_id(name, params)
        return next((s for s in self.steps if s.id == wanted), None)

    def per_report_work(
        self, but: tuple | None = None
    ) -> list[tuple[CachedReport, list[tuple[str, dict, Path]]]]:
        """Per report, its per-report steps not stored yet, in order: (name, params, entry);
        without step `but` (a step id)."""
        out = []
        for i, cached in enumerate(self.scope.ranked):
            todo = [
                (s.name, s.params, s.entries[i])
                for s in self.steps
                if s.kind == "report" and s.entries and not s.entries[i].exists() and s.id != but
            ]
            if todo:
                out.append((cached, todo))
        return out


def compile(scope: Scope, wanted: list[tuple[str, dict]], inputs: bool = False) -> Plan:
    """The plan of `wanted` (module or object, parameters): every step they need, in
    dependency order, without what only a stored step needs (with `inputs`, what the
    steps asked for need is in the plan even where they are stored)."""
    steps: dict[tuple, Step] = {}

    def visit(name: str, params: dict, reader: str | None) -> None:
        obj = sql_objects.get(name)
        key = step_id(name, params)
        step = steps.get(key)
        if step is None:
            kind = _kind(scope, obj, asked=reader is None)
            step = Step(name, kind, params, _entries(scope, obj, kind, params))
            stored = step.entries and step.stored == len(step.entries)
            if (inputs and reader is None) or not stored:
                for needed in obj.includes + obj.reads:
                    if needed in sql_objects.objects() and sql_objects.get(needed).kind != "view":
                        visit(needed, params, name)
            steps[key] = step
        if reader is None:
            step.asked = True
        elif reader not in step.readers:
            step.readers.append(reader)

    for name, params in wanted:
        visit(name, params, None)
    return Plan(scope, list(steps.values()))


def _kind(scope: Scope, obj: sql_objects.SqlObject, asked: bool) -> str:
    if obj.kind == "library":
        return "library"
    if obj.kind == "report" and scope.cached:
        return "report"
    if obj.kind == "module" and asked and obj.per_report and scope.several:
        return "report"
    return "run" if obj.kind in ("report", "run") else "module"


def _entries(scope: Scope, obj: sql_objects.SqlObject, kind: str, params: dict) -> tuple[Path, ...]:
    if kind == "report":
        return tuple(object_entry(c, obj.name, params) for c in scope.ranked)
    if kind == "run" and scope.cached:
        return (run_entry(scope, obj.name, params),)
    return ()


def object_entry(cached: CachedReport, name: str, params: dict) -> Path:
    """The store entry of per-report object or module `name` with `params` of one report:
    keyed to the report's views entry and rank, the SQL of the object and of everything it
    needs, its parameter values and nsyswrap's version."""
    values = sorted(sql_objects.get(name).values(params).items())
    return store.entry(
        "objects",
        name,
        cached.views_dir.name,
        cached.rank,
        sql_objects.digest(name),
        values,
        nsyswrap_version(),
    )


def run_entry(scope: Scope, name: str, params: dict) -> Path:
    """The store entry of run object `name` with `params`: keyed to every report's views
    entry, path as given, rank and rank source, whether unrelated reports are allowed,
    nsyswrap's code, the object's SQL and its parameter values."""
    sources = sorted((r.rank, str(r.path), r.rank_source) for r in scope.reports)
    views = sorted((c.rank, c.views_dir.name) for c in scope.cached)
    values = sorted(sql_objects.get(name).values(params).items())
    return store.entry(
        "runs",
        name,
        sources,
        views,
        scope.allow_unrelated,
        code_digest(),
        sql_objects.digest(name),
        values,
    )


STAGES = {"library": "connection", "report": "per report", "run": "run", "module": "run"}


def rows(plan: Plan) -> list[dict]:
    """The plan as rows for people and machines: step, stage, what, parameters that differ
    from their defaults, stored (entries stored of those it has), to compute, and why."""
    out = []
    for i, s in enumerate(plan.steps, 1):
        obj = sql_objects.get(s.name)
        defaults = {p.name: p.default for p in obj.params}
        given = {k: v for k, v in s.values.items() if v != defaults[k]}
        n = len(s.entries)
        todo = (n - s.stored) if n else (1 if s.kind != "library" else 0)
        out.append(
            {
                "step": i,
                "stage": STAGES[s.kind],
                "name": s.name,
                "params": ", ".join(f"{k}={v}" for k, v in given.items()),
                "stored": f"{s.stored}/{n}" if n else "-",
                "compute": todo if s.kind == "report" else ("yes" if todo else "no"),
                "why": "; ".join(
                    ["asked for"] * s.asked + ["read by " + ", ".join(s.readers)] * bool(s.readers)
                ),
            }
        )
    return out
