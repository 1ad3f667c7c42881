"""Per-report work on the workers of a running `dask.distributed` cluster (`--engine dask`).

The same functions the local pool runs (normalize a report, build its reductions,
compute its per-rank results) run on the cluster's workers, one task per report.
Workers read the reports and write the cache entries at the paths the client passes
them, so reports and cache must be on a file system every node sees at the same path;
the cross-rank stage then runs on the client over the per-report results.
Needs the optional extra: `pip install 'nsyswrap[dask]'`.
"""
from __future__ import annotations

import atexit
import functools
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, TypeVar

from nsyswrap.errors import NsysWrapError

T = TypeVar("T")
R = TypeVar("R")

ADDRESS_VARIABLE = "DASK_SCHEDULER_ADDRESS"
CONNECT_TIMEOUT_S = 30
WORKERS_TIMEOUT_S = 60
_CLIENTS: dict = {}  # DaskEngine -> its connected distributed.Client
INSTALL = "install it with pip install 'nsyswrap[dask]' (on the client and the workers)"


@dataclass(frozen=True)
class DaskEngine:
    """A Dask scheduler, by the file it wrote (`dask scheduler --scheduler-file F`) or by
    address (`tcp://host:8786`)."""

    scheduler_file: Path | None = None
    address: str | None = None

    @classmethod
    def find(cls, scheduler_file: Path | None = None, address: str | None = None) -> "DaskEngine":
        """The scheduler named by the options, else by $DASK_SCHEDULER_ADDRESS."""
        if scheduler_file and address:
            raise NsysWrapError("--scheduler-file and --scheduler-address", "name two schedulers",
                                "pass only one of them")
        address = address or (None if scheduler_file else os.environ.get(ADDRESS_VARIABLE))
        if not scheduler_file and not address:
            raise NsysWrapError("--engine dask", "needs a scheduler",
                                f"pass --scheduler-file F or --scheduler-address tcp://HOST:PORT, or set {ADDRESS_VARIABLE}")
        if scheduler_file and not Path(scheduler_file).is_file():
            raise NsysWrapError(scheduler_file, "does not exist",
                                "pass the file `dask scheduler --scheduler-file F` writes, once it has started")
        return cls(Path(scheduler_file) if scheduler_file else None, address)

    @property
    def name(self) -> str:
        return str(self.scheduler_file or self.address)

    def map(self, fn: Callable[[T], R], items: list[T],
            progress: Callable[[int, int], None] | None = None) -> list[R]:
        """`[fn(item) for item in items]`, one task per item on the cluster's workers; the
        first task that fails raises its error here (an NsysWrapError stays one line)."""
        from dask.utils import funcname

        client = self._client()
        name = f"{funcname(fn)}-{uuid.uuid4().hex[:12]}"  # tasks named after the work, in the dashboard too
        futures = client.map(functools.partial(_in_directory, os.getcwd(), fn), items,
                             key=[f"{name}-{i}" for i in range(len(items))])
        try:
            return _gather(client, futures, progress)
        finally:
            client.cancel(futures)

    def _client(self):
        """A client of this scheduler, kept for the process's later calls (a run makes
        several: normalize, reductions, per-rank results) while it stays connected."""
        client = _CLIENTS.get(self)
        if client is None or client.status != "running":
            if not _CLIENTS:
                atexit.register(close_clients)
            _CLIENTS[self] = client = self._connect()
        return client

    def _connect(self):
        try:
            from distributed import Client
        except ImportError:
            raise NsysWrapError("--engine dask", "needs dask.distributed, which is not installed", INSTALL) from None
        try:
            if self.scheduler_file:
                client = Client(scheduler_file=str(self.scheduler_file), timeout=CONNECT_TIMEOUT_S,
                                set_as_default=False)
            else:
                client = Client(self.address, timeout=CONNECT_TIMEOUT_S, set_as_default=False)
        except (OSError, TimeoutError) as exc:
            raise NsysWrapError(self.name, f"no Dask scheduler answers ({exc})",
                                "start `dask scheduler` and its workers, or check the address") from None
        try:
            client.wait_for_workers(1, timeout=WORKERS_TIMEOUT_S)
            _check_code(client, self.name)
        except TimeoutError:
            client.close()
            raise NsysWrapError(self.name, f"has no workers after {WORKERS_TIMEOUT_S} s",
                                "start workers with `dask worker --scheduler-file F` (e.g. under srun)") from None
        except BaseException:
            client.close()
            raise
        return client


def _in_directory(cwd: str, fn: Callable[[T], R], item: T) -> R:
    """On a worker: `fn(item)` in the client's working directory where the worker sees it,
    so that relative report and cache paths mean the same as on the client."""
    if os.getcwd() != cwd and os.path.isdir(cwd):
        os.chdir(cwd)
    return fn(item)


def close_clients() -> None:
    """Disconnect from every scheduler (at exit, or before its cluster stops)."""
    while _CLIENTS:
        _CLIENTS.popitem()[1].close()


def _check_code(client, name: str) -> None:
    """Every worker must run this nsyswrap: cache entries are keyed to its code."""
    from nsyswrap.cache_keys import code_digest

    mine = code_digest()
    other = sorted(w for w, digest in client.run(code_digest).items() if digest != mine)
    if other:
        raise NsysWrapError(other[0], f"(a worker of {name}) runs another nsyswrap version than this client",
                            "install the same nsyswrap on the client and every worker")


def _gather(client, futures, progress: Callable[[int, int], None] | None) -> list:
    from distributed import as_completed
    from distributed.client import FutureCancelledError
    from distributed.scheduler import KilledWorker

    try:
        for done, future in enumerate(as_completed(futures, loop=client.loop), 1):
            if future.status == "error":
                future.result()  # raises the task's own error
            if progress:
                progress(done, len(futures))
        return [f.result() for f in futures]
    except (KilledWorker, FutureCancelledError) as exc:
        raise NsysWrapError("Dask workers", f"stopped while working on a report ({type(exc).__name__}: {exc})",
                            "check the workers' memory and logs, or use --engine local") from None
