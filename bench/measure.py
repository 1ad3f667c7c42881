"""Run one measured thing in its own process: wall time, CPU and peak RSS of its whole
process tree (the task, the forkserver nsyswrap's pool starts, the workers) and the
task's own timing."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench.tasks import memory_mb

ROOT = Path(__file__).resolve().parents[1]
# The processes' working and temporary directory. DuckDB spills there (`.tmp` or the
# system temp directory) and, when done, deletes every DuckDB spill file it finds in that
# directory, which breaks any other DuckDB process spilling in the same place.
WORKDIR = ROOT / "bench" / "out" / "work"
KILLED = "killed after"
POLL_S = 0.01  # how often the process tree is sampled
TICK_S = 1 / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Measurement:
    label: str
    wall_s: float  # the whole process, interpreter start and imports included
    work_s: float  # the measured work alone, timed inside the process
    cpu_s: float  # user + system CPU of every process of the tree, all threads
    peak_rss_mb: (
        float  # sum over the tree's processes of each one's peak RSS (VmHWM): an upper bound
    )
    peak_rss_main_mb: float  # the task process's own VmHWM
    processes: int  # processes seen in the tree (the task included)
    rss_together_mb: (
        float  # the largest sum of the live processes' RSS at one sample: the peak, from below
    )
    detail: dict
    error: str | None = None  # why the process produced no result (timeout, crash)

    @property
    def timed_out(self) -> bool:
        return bool(self.error and self.error.startswith(KILLED))


class Tree:
    """Every process seen under `root` (found by parent pid: this kernel has no
    /proc/PID/task/TID/children) with its latest VmHWM and CPU time. Workers are children
    of the forkserver, not of the task, so the whole tree is followed. A process that
    lives less than `POLL_S` may be missed, and each one's last POLL_S of growth is."""

    def __init__(self, root: int):
        self.root = root
        self.last: dict[int, tuple[float, float]] = {
            root: (0.0, 0.0)
        }  # pid -> (VmHWM MB, user + system s)
        self.others: set[int] = set()  # pids known not to be in the tree
        self.gone: set[int] = set()  # processes of the tree that ended (their pid may be reused)
        self.together = 0.0  # the largest sum of current RSS over one sample

    def sample(self) -> None:
        pids = {int(p) for p in os.listdir("/proc") if p.isdigit()}
        self.others &= pids  # a pid that went away may come back as someone else
        parents = {pid: _stat(pid)[0] for pid in pids - self.others - self.last.keys()}
        found = True
        while found:  # a parent and its child may both be new
            found = False
            for pid, ppid in list(parents.items()):
                if ppid in self.last:
                    self.last[pid] = (0.0, 0.0)
                    del parents[pid]
                    found = True
        self.others |= parents.keys()
        together = 0.0
        for pid in self.last.keys() - self.gone:
            memory, (_, cpu) = memory_mb(pid), _stat(pid)
            if "VmHWM" not in memory:  # ended (a zombie has no memory left to report)
                self.gone.add(pid)
                continue
            self.last[pid] = (memory["VmHWM"], cpu)
            together += memory["VmRSS"]
        self.together = max(self.together, together)

    def descendants_cpu_s(self) -> float:
        return sum(cpu for pid, (_, cpu) in self.last.items() if pid != self.root)

    def peak_rss_mb(self, main_mb: float) -> float:
        """The sum of every process's peak (not simultaneous, shared pages counted in each)."""
        return main_mb + sum(hwm for pid, (hwm, _) in self.last.items() if pid != self.root)


def _stat(pid: int) -> tuple[int | None, float]:
    """(parent pid, own user + system CPU seconds) from /proc/PID/stat; (None, 0) if gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None, 0.0
    return int(fields[1]), (int(fields[11]) + int(fields[12])) * TICK_S


def _wait(pid: int, timeout_s: float, tree: Tree):
    """Wait for the task, sampling its tree, killing its process group after timeout_s.

    Returns (status, rusage, timed_out). The rusage is the task's own plus that of the
    children it waited for, which the forkserver is not."""
    deadline = time.perf_counter() + timeout_s
    fd = os.pidfd_open(pid)
    try:
        while not select.select([fd], [], [], POLL_S)[0]:
            tree.sample()
            if time.perf_counter() > deadline:
                os.killpg(
                    pid, signal.SIGKILL
                )  # the task runs in its own group with its descendants
                return *os.wait4(pid, 0)[1:], True
        return *os.wait4(pid, 0)[1:], False
    finally:
        os.close(fd)


def run_task(
    label: str, task: list[str], env: dict[str, str] | None = None, timeout_s: float = 300
) -> Measurement:
    """Run `python -m bench.tasks TASK...`: its wall time, its own timing, its tree's CPU and
    peak RSS."""
    argv = [sys.executable, "-m", "bench.tasks", *task]
    WORKDIR.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        started = time.perf_counter()
        path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
        env = {**os.environ, "PYTHONPATH": path, "TMPDIR": str(WORKDIR), **(env or {})}
        proc = subprocess.Popen(argv, cwd=WORKDIR, env=env, stdout=out, stderr=err, process_group=0)
        tree = Tree(proc.pid)
        status, usage, timed_out = _wait(proc.pid, timeout_s, tree)
        wall = time.perf_counter() - started
        cpu = usage.ru_utime + usage.ru_stime + tree.descendants_cpu_s()
        proc.returncode = code = os.waitstatus_to_exitcode(status)
        polled_main = tree.last[proc.pid][0]
        out.seek(0), err.seek(0)
        if timed_out or code != 0:
            tail = err.read().strip().splitlines()[-1:] or [""]
            error = (
                f"{KILLED} {timeout_s:.0f} s" if timed_out else f"exit code {code}: {tail[0][:200]}"
            )
            return Measurement(
                label,
                wall,
                wall,
                cpu,
                tree.peak_rss_mb(polled_main),
                polled_main,
                len(tree.last),
                tree.together,
                {},
                error,
            )
        result = json.loads(out.read().strip().splitlines()[-1])
    work, main_mb = result.pop("work_s"), max(result.pop("peak_rss_mb"), polled_main)
    return Measurement(
        label,
        wall,
        work,
        cpu,
        tree.peak_rss_mb(main_mb),
        main_mb,
        len(tree.last),
        tree.together,
        result,
    )
