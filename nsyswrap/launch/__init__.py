"""Run every selected rank of a training job under `nsys profile` and export the reports.

`launch(LaunchConfig.build(command, out=...))` runs a launch, `export_run(run_dir)` exports one;
names load on first use, so the per-rank wrapper starts fast.
"""

from __future__ import annotations

import importlib

_LAZY = {
    "LaunchConfig": "nsyswrap.launch.config",
    "launch": "nsyswrap.launch.run",
    "export_run": "nsyswrap.launch.export",
    "nsys_argv": "nsyswrap.launch.nsys",
}

__all__ = list(_LAZY)


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'nsyswrap.launch' has no attribute {name!r}")
    return getattr(importlib.import_module(_LAZY[name]), name)
