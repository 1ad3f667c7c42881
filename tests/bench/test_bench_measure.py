"""The benchmark's measurements follow the whole process tree (nsyswrap's workers are
grandchildren of the task: children of the forkserver)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from bench.measure import KILLED, Tree, _wait, run_task

# A child that starts a grandchild holding 200 MB, and waits for it.
GRANDCHILD = "b = bytearray(200 << 20); import time; time.sleep({sleep})"
CHILD = "import subprocess, sys; subprocess.run([sys.executable, '-c', {grandchild!r}])"


def _start(sleep: float) -> subprocess.Popen:
    child = CHILD.format(grandchild=GRANDCHILD.format(sleep=sleep))
    return subprocess.Popen([sys.executable, "-c", child], process_group=0)


def test_tree_sees_grandchildren():
    proc = _start(sleep=0.5)
    tree = Tree(proc.pid)
    _, _, timed_out = _wait(proc.pid, 30, tree)
    assert not timed_out
    assert len(tree.last) == 2
    grandchild_mb = max(hwm for pid, (hwm, _) in tree.last.items() if pid != proc.pid)
    assert grandchild_mb > 200
    assert tree.peak_rss_mb(main_mb=0) >= grandchild_mb
    assert tree.together > 200


def test_timeout_kills_the_whole_tree():
    proc = _start(sleep=60)
    tree = Tree(proc.pid)
    _, _, timed_out = _wait(proc.pid, 1, tree)
    assert timed_out
    grandchildren = tree.last.keys() - {proc.pid}
    assert grandchildren
    deadline = time.monotonic() + 5
    while any(_alive(pid) for pid in grandchildren) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(pid) for pid in grandchildren)


def _alive(pid: int) -> bool:
    try:
        return "zombie" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


def test_one_process_task():
    m = run_task("startup", ["startup"], timeout_s=60)
    assert m.error is None and m.processes == 1
    assert m.peak_rss_mb == m.peak_rss_main_mb > 10  # nsyswrap.cli imports no pandas or DuckDB
    assert m.cpu_s > 0


def test_task_over_its_limit_is_killed():
    # a limit far below the task's own start (Python and nsyswrap.cli's imports: 35-80 ms);
    # at 50 ms a fast start finished first (CI, 2026-11-28: 59 ms, not killed)
    m = run_task("startup", ["startup"], timeout_s=0.005)
    assert m.timed_out and m.error.startswith(KILLED)
