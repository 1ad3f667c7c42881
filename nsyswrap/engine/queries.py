"""Prebuilt SQL modules: `sql/<area>/<name>.sql` is module `<area>.<name>`.

Each file is a declared SQL object (header grammar: `nsyswrap.engine.sql_objects`); the planner
computes what it needs and then it (`nsyswrap.engine.planner`).
"""

from __future__ import annotations

import difflib

import pandas as pd

from nsyswrap.engine import planner, rank_labels, sql_objects
from nsyswrap.engine.run import Run
from nsyswrap.engine.sql_objects import CONVERT, SqlObject
from nsyswrap.errors import NsysWrapError


def catalog() -> dict[str, SqlObject]:
    """Every public module by name."""
    return {o.name: o for o in sql_objects.of_kind("module")}


def get(name: str) -> SqlObject:
    modules = catalog()
    if name not in modules:
        close = difflib.get_close_matches(name, modules, n=3, cutoff=0.5)
        hint = f"did you mean {' or '.join(close)}? " if close else ""
        raise NsysWrapError(
            name, "is not a prebuilt query", f"{hint}see `nsyswrap list` for the names"
        )
    return modules[name]


def bind(module: SqlObject, given: dict[str, object]) -> dict[str, object]:
    """Typed values for every parameter: given ones converted, the rest defaulted."""
    known = {p.name: p for p in module.params}
    unknown = set(given) - set(known)
    if unknown:
        raise NsysWrapError(
            module.name,
            f"has no parameter(s) {sorted(unknown)}",
            f"its parameters are {sorted(known) or 'none'}",
        )
    values = {}
    for p in module.params:
        raw = given.get(p.name, p.default)
        try:
            values[p.name] = (
                raw if raw is None or not isinstance(raw, str) else CONVERT[p.type](raw)
            )
        except ValueError:
            raise NsysWrapError(
                module.name,
                f"parameter {p.name}={raw!r} is not a {p.type}",
                "pass a value of that type",
            ) from None
    low, high = values.get("step_from"), values.get("step_to")
    if low is not None and high is not None and high <= low:  # as `report --steps`
        raise NsysWrapError(
            f"-p step_from={low} -p step_to={high}",
            "selects no step (step_to must exceed step_from)",
            "write e.g. -p step_from=2 -p step_to=5 for steps 2, 3 and 4",
        )
    return values


def run_module(run: Run, name: str, **params) -> pd.DataFrame:
    """Run prebuilt module `name` on an open run."""
    module = get(name)
    return labelled(run, module, planner.result(run, name, bind(module, params)))


def run_modules(run: Run, wanted: dict[str, tuple[str, dict]]) -> dict[str, pd.DataFrame]:
    """Several prebuilt modules on an open run, `key: (name, params)` -> `key: rows`; the
    per-report ones are computed in one pass of the worker pool."""
    rows = planner.results(
        run, {key: (name, bind(get(name), params)) for key, (name, params) in wanted.items()}
    )
    return {key: labelled(run, get(wanted[key][0]), frame) for key, frame in rows.items()}


def object_rows(run: Run, name: str, **params) -> pd.DataFrame:
    """The rows of per-report or run object `name` (`sql/_reductions`, `sql/_run`) for
    `params` (its own, defaults for the rest): how domain code reads a declared object."""
    obj = sql_objects.get(name)
    planner.bind(run, name, obj.values(params))
    return run.connection.execute(f'SELECT * FROM "{name}"').df()


def labelled(run: Run, module: SqlObject, rows: pd.DataFrame) -> pd.DataFrame:
    """A module's rows with the run's rank identity: a per-report module's `rank` is its
    report's (nsyswrap.engine.rank_labels relabels it, then the rows take the module's order
    again); a run module's rows already carry it."""
    if not module.per_report:
        return rows
    out = rank_labels.label(run, rows)
    return out if out is rows else planner.declared_order(out, module, ranks_in_order=False)
