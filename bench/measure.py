"""Run one measured thing in its own process: wall time, peak RSS and the task's own timing."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench.tasks import peak_rss_mb

ROOT = Path(__file__).resolve().parents[1]
# The processes' working and temporary directory. DuckDB spills there (`.tmp` or the
# system temp directory) and, when done, deletes every DuckDB spill file it finds in that
# directory, which breaks any other DuckDB process spilling in the same place.
WORKDIR = ROOT / "bench" / "out" / "work"
KILLED = "killed after"


@dataclass(frozen=True)
class Measurement:
    label: str
    wall_s: float      # the whole process, interpreter start and imports included
    work_s: float      # the measured work alone, timed inside the process
    cpu_s: float       # user + system CPU of the process, all threads (robust to other load)
    peak_rss_mb: float  # peak resident set of the process's own program image (VmHWM)
    detail: dict
    error: str | None = None  # why the process produced no result (timeout, crash)

    @property
    def timed_out(self) -> bool:
        return bool(self.error and self.error.startswith(KILLED))


def _wait(pid: int, timeout_s: float):
    """Wait for one child, killing it after timeout_s; (status, rusage, timed_out, last VmHWM in MB)."""
    deadline = time.perf_counter() + timeout_s
    peak = 0.0
    while True:
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            return status, usage, False, peak
        peak = peak_rss_mb(pid) or peak
        if time.perf_counter() > deadline:
            os.kill(pid, signal.SIGKILL)
            _, status, usage = os.wait4(pid, 0)
            return status, usage, True, peak
        time.sleep(0.005)


def run_task(label: str, task: list[str], env: dict[str, str] | None = None, timeout_s: float = 300) -> Measurement:
    """Run `python -m bench.tasks TASK...`: its wall time, its own timing and its peak RSS."""
    argv = [sys.executable, "-m", "bench.tasks", *task]
    WORKDIR.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        started = time.perf_counter()
        path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
        env = {**os.environ, "PYTHONPATH": path, "TMPDIR": str(WORKDIR), **(env or {})}
        proc = subprocess.Popen(argv, cwd=WORKDIR, env=env, stdout=out, stderr=err)
        status, usage, timed_out, polled_mb = _wait(proc.pid, timeout_s)
        wall = time.perf_counter() - started
        cpu = usage.ru_utime + usage.ru_stime
        proc.returncode = code = os.waitstatus_to_exitcode(status)
        out.seek(0), err.seek(0)
        if timed_out or code != 0:
            tail = err.read().strip().splitlines()[-1:] or [""]
            error = f"{KILLED} {timeout_s:.0f} s" if timed_out else f"exit code {code}: {tail[0][:200]}"
            return Measurement(label, wall, wall, cpu, polled_mb, {}, error)
        result = json.loads(out.read().strip().splitlines()[-1])
    work, rss_mb = result.pop("work_s"), result.pop("peak_rss_mb")
    return Measurement(label, wall, work, cpu, rss_mb, result)
