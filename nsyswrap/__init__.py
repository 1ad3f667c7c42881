"""nsyswrap: where does the step time of multi-GPU training go?

Names load on first use: the annotation helpers run inside every training process, so
`import nsyswrap` must stay light (no pandas, duckdb, torch or nvtx until asked for).
"""

from __future__ import annotations

import importlib

from nsyswrap.errors import NsysWrapError

_LAZY = {
    "query": "nsyswrap.api",
    "query_to_file": "nsyswrap.api",
    "sql": "nsyswrap.api",
    "report_tables": "nsyswrap.api",
    "relation": "nsyswrap.api",
    "Opener": "nsyswrap.engine.opener",
    "Run": "nsyswrap.engine.run",
    "open_run": "nsyswrap.engine.opening",
    "DaskEngine": "nsyswrap.engine.dask_engine",
    "annotate_model": "nsyswrap.annotate.modules",
    "annotate_collectives": "nsyswrap.annotate.collectives",
    "step": "nsyswrap.annotate.steps",
    "capture_window": "nsyswrap.annotate.steps",
    "phase": "nsyswrap.annotate.phases",
    "sampler": "nsyswrap.sample.sampler",
    "export_run": "nsyswrap.launch.export",
    "diff": "nsyswrap.comparison",
}

__all__ = ["NsysWrapError", "__version__", *_LAZY]


def __getattr__(name: str):
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("nsyswrap")
        except PackageNotFoundError:  # a source tree that was never installed
            return "0+unknown"
    if name not in _LAZY:
        raise AttributeError(f"module 'nsyswrap' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
