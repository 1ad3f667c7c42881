"""Whether a process is alive, and worker processes that live only as long as the
process that started them.

Each worker of `pool.map_reports` ignores SIGINT (an interrupt is the parent's to handle:
it stops the workers itself) and runs a watchdog thread that ends the worker when its
parent dies, even by `kill -9`, so no orphan keeps running.
"""

from __future__ import annotations

import os
import signal
import threading
import time

POLL_S = 0.5


def start_worker(parent_pid: int) -> None:
    """The pool's initializer, run in each worker process."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    first_ppid = os.getppid()  # the forkserver, which itself ends when the parent does
    threading.Thread(
        target=_watch, args=(parent_pid, first_ppid), daemon=True, name="nsyswrap-lifeline"
    ).start()


def _watch(parent_pid: int, first_ppid: int) -> None:
    while True:
        time.sleep(POLL_S)
        if os.getppid() != first_ppid or not alive(parent_pid):
            os._exit(1)


def alive(pid: int | None) -> bool:
    """True while `pid` runs (a process that ended but is not yet reaped counts as dead)."""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a killed parent not yet reaped by its own parent is a zombie: dead
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[-1].split()[0] != b"Z"
    except OSError:
        return True
