"""Command-line values turned into Python ones without pydantic, for a quick start.

typer (0.2x) coerces each parameter of the command that runs through a pydantic
TypeAdapter it builds then: importing pydantic and building the adapters of `report`'s
fifteen parameters costs ~0.15-0.25 s, as much as the rest of a warm report. nsyswrap's
parameters are simple (text, whole numbers, paths, a choice, a list of paths): `install`
coerces those as typer's adapters do, with typer's own helpers, and hands anything else to
typer's adapter: a value of another kind, or one that does not convert (so the error is
typer's, word for word). Values and messages stay typer's; valid simple values skip
pydantic. A typer without these internals (another version) is left as it is.
"""
from __future__ import annotations

import dataclasses
import re
from enum import Enum
from pathlib import Path
from typing import Any

_WHOLE = re.compile(r"0|[1-9][0-9]*")  # any other spelling of a number goes to typer


class _Unsure(Exception):
    """This value is typer's to coerce."""


def install() -> None:
    """Coerce simple values of every typer command without pydantic (once)."""
    try:
        from typer import core
        from typer._coercion import RuntimeParam, build_runtime_param
        from typer._param_types import coerce_cli_choice, coerce_cli_path, lenient_issubclass, routes_to_path
    except ImportError:
        return
    parameter = getattr(core, "_TyperParameter", None)
    if parameter is None or getattr(parameter, "_nsyswrap_quick", False):
        return
    if [f.name for f in dataclasses.fields(RuntimeParam)] != ["parameter_info", "annotation"]:
        return

    def leaf(annotation, info, value: Any, param, ctx) -> Any:
        if info.parser is not None:
            raise _Unsure
        if lenient_issubclass(annotation, Enum):
            return coerce_cli_choice(value, choices=list(annotation), case_sensitive=info.case_sensitive,
                                     ctx=ctx)
        if annotation is str and type(value) is str:
            return value
        whole = type(value) is int or (type(value) is str and _WHOLE.fullmatch(value))
        if annotation is int and not info.clamp and whole:
            number = int(value)
            if (info.min is not None and number < info.min) or (info.max is not None and number > info.max):
                raise _Unsure
            return number
        path_text = type(value) is str and value and "\0" not in value
        if annotation is Path and routes_to_path(annotation, info) and path_text:
            return coerce_cli_path(Path(value), info, path_type=Path, param=param, ctx=ctx)
        raise _Unsure

    @dataclasses.dataclass(frozen=True)
    class Quick(RuntimeParam):
        """Simple values here, the rest by typer's adapter (built only then)."""

        descriptor: Any = None
        full: list = dataclasses.field(default_factory=list)

        def _coerce_value(self, value: Any, param, ctx) -> Any:
            try:
                if getattr(self.annotation, "__origin__", None) is list:
                    (item,) = self.annotation.__args__
                    values = value if isinstance(value, (list, tuple)) else [value]
                    return [leaf(item, self.parameter_info, v, param, ctx) for v in values]
                return leaf(self.annotation, self.parameter_info, value, param, ctx)
            except Exception:  # not simple, or not valid: typer's adapter says why
                if not self.full:
                    self.full.append(build_runtime_param(self.descriptor))
                return self.full[0]._coerce_value(value, param=param, ctx=ctx)

    def get_runtime_param(self):
        if self._runtime_param is None:
            d = self.type_descriptor
            self._runtime_param = (
                build_runtime_param(d) if d.file_annotation is not None
                else Quick(parameter_info=d.parameter_info, annotation=d.annotation, descriptor=d))
        return self._runtime_param

    parameter.get_runtime_param = get_runtime_param
    parameter._nsyswrap_quick = True
