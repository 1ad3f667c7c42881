"""Where a command's CPU goes, step by step: with `$NSYSWRAP_STAGE_LOG` naming a file,
every process of the command (its own and its workers) appends one JSON line per step it
runs, for the bench's per-stage rows (bench/README.md):

    {"pid": 812, "kind": "object", "name": "device_timeline", "report": "/r/rank0.sqlite",
     "cpu_s": 0.41, "wall_s": 0.43, "hwm_mb": 612}

kind: `views` (a report's normalization: its read out of SQLite and its views written),
`object` (a per-report object or module computed and stored, in the worker), `run` (a run
object computed on the run's connection). `cpu_s` is the process's CPU (user + system,
every thread) spent in the step itself, net of the steps it ran inside it; `hwm_mb` the
process's peak resident set so far (VmHWM). Without the variable nothing is timed.
"""

from __future__ import annotations

import json
import os
import time
from contextlib import contextmanager
from pathlib import Path

VARIABLE = "NSYSWRAP_STAGE_LOG"
_open: list[float] = []  # CPU of the steps run inside each step in progress


@contextmanager
def step(kind: str, name: str, report: str = ""):
    """Time the step `kind` `name` (of `report`) when `$NSYSWRAP_STAGE_LOG` is set."""
    target = os.environ.get(VARIABLE)
    if not target:
        yield
        return
    cpu, wall = time.process_time(), time.perf_counter()
    _open.append(0.0)
    try:
        yield
    finally:
        inner = _open.pop()
        spent = time.process_time() - cpu
        if _open:
            _open[-1] += spent
        line = {
            "pid": os.getpid(),
            "kind": kind,
            "name": name,
            "report": report,
            "cpu_s": round(spent - inner, 4),
            "wall_s": round(time.perf_counter() - wall, 4),
            "hwm_mb": _peak_mb(),
        }
        with Path(target).open("a") as fh:  # one short line: appended whole
            fh.write(json.dumps(line) + "\n")


def _peak_mb() -> float | None:
    """This process's VmHWM in MB (None where /proc is not there)."""
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return None
    return next(
        (int(ln.split()[1]) / 1024 for ln in status.splitlines() if ln.startswith("VmHWM:")), None
    )
