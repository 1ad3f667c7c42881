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
import json
import os
import socket
import stat
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from nsyswrap.errors import NsysWrapError
from nsyswrap.storage.validate import special_file

T = TypeVar("T")
R = TypeVar("R")

ADDRESS_VARIABLE = "DASK_SCHEDULER_ADDRESS"
CONNECT_TIMEOUT_S = 30
PROBE_S = 5  # a scheduler address where nothing answers in this long fails at once
SCHEDULER_FILE_TRIES = 4  # a scheduler file that is not one, read this many times 0.5 s apart
WORKERS_TIMEOUT_S = 60
"""A cluster without workers this long, at the start or while reports wait (a lost worker's
reports are retried on the others, as distributed does, up to 3 times), is an error."""
POLL_S = 1.0
_CLIENTS: dict = {}  # DaskEngine -> its connected distributed.Client
INSTALL = "install it with pip install 'nsyswrap[dask]' (on the client and the workers)"


@dataclass(frozen=True)
class DaskEngine:
    """A Dask scheduler, by the file it wrote (`dask scheduler --scheduler-file F`) or by
    address (`tcp://host:8786`)."""

    scheduler_file: Path | None = None
    address: str | None = None

    @classmethod
    def find(cls, scheduler_file: Path | None = None, address: str | None = None) -> DaskEngine:
        """The scheduler named by the options, else by $DASK_SCHEDULER_ADDRESS; refused
        before any work where dask.distributed is not installed."""
        try:
            import dask.utils  # noqa: F401  (what map and _address import)
            import distributed  # noqa: F401
        except ImportError:
            raise NsysWrapError(
                "--engine dask", "needs dask.distributed, which is not installed", INSTALL
            ) from None
        if scheduler_file and address:
            raise NsysWrapError(
                "--scheduler-file and --scheduler-address",
                "name two schedulers",
                "pass only one of them",
            )
        address = address or (None if scheduler_file else os.environ.get(ADDRESS_VARIABLE))
        if not scheduler_file and not address:
            raise NsysWrapError(
                "--engine dask",
                "needs a scheduler",
                "pass --scheduler-file F or --scheduler-address tcp://HOST:PORT, "
                f"or set {ADDRESS_VARIABLE}",
            )
        if scheduler_file:
            fix = "pass the file `dask scheduler --scheduler-file F` writes, once it has started"
            try:
                mode = os.stat(scheduler_file).st_mode
            except OSError:
                raise NsysWrapError(scheduler_file, "does not exist", fix) from None
            if not stat.S_ISREG(mode):  # (a FIFO would be waited on forever)
                raise NsysWrapError(
                    scheduler_file,
                    f"is {special_file(mode) or 'a directory'}, not a scheduler file",
                    fix,
                )
        return cls(Path(scheduler_file) if scheduler_file else None, address)

    @property
    def name(self) -> str:
        return str(self.scheduler_file or self.address)

    def map(
        self,
        fn: Callable[[T], R],
        items: list[T],
        progress: Callable[[int, int], None] | None = None,
    ) -> list[R]:
        """`[fn(item) for item in items]`, one task per item on the cluster's workers; the
        first task that fails raises its error here (an NsysWrapError stays one line)."""
        from dask.utils import funcname

        client = self._client()
        # tasks named after the work, in the dashboard too
        name = f"{funcname(fn)}-{uuid.uuid4().hex[:12]}"
        futures = client.map(
            functools.partial(_in_directory, os.getcwd(), fn),
            items,
            key=[f"{name}-{i}" for i in range(len(items))],
        )
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
        from distributed import Client

        address = (
            _address(self.address) if self.address else _scheduler_address(self.scheduler_file)
        )
        try:
            client = Client(address, timeout=CONNECT_TIMEOUT_S, set_as_default=False)
        except (OSError, TimeoutError, ValueError) as exc:
            raise NsysWrapError(
                self.name,
                f"no Dask scheduler answers ({exc})",
                "start `dask scheduler` and its workers, or check the address",
            ) from None
        try:
            client.wait_for_workers(1, timeout=WORKERS_TIMEOUT_S)
            _check_code(client, self.name)
        except TimeoutError:
            client.close()
            raise NsysWrapError(
                self.name,
                f"has no workers after {WORKERS_TIMEOUT_S} s",
                "start workers with `dask worker --scheduler-file F` (e.g. under srun)",
            ) from None
        except BaseException:
            client.close()
            raise
        return client


def _scheduler_address(scheduler_file: Path) -> str:
    """The address in the file `dask scheduler --scheduler-file F` writes (read here, so that
    a file that is not one fails at once instead of being waited on)."""
    fix = "pass the file `dask scheduler --scheduler-file F` writes, once it has started"
    for _ in range(SCHEDULER_FILE_TRIES):  # (the scheduler may be writing it)
        try:
            info = json.loads(Path(scheduler_file).read_text())
            if isinstance(info, dict) and isinstance(info.get("address"), str):
                return _address(info["address"], scheduler_file)
            problem = 'holds no scheduler address (a JSON object with "address")'
        except (ValueError, RecursionError) as exc:  # (RecursionError: nested too deep)
            problem = f"is not a scheduler file ({exc})"
        except OSError as exc:
            raise NsysWrapError(scheduler_file, f"cannot be read ({exc.strerror})", fix) from None
        time.sleep(0.5)
    raise NsysWrapError(scheduler_file, problem, fix)


def _address(address: str, where: str | Path | None = None) -> str:
    """`address` (`tcp://HOST:PORT`, or `HOST:PORT`) checked: a malformed one, or one where
    nothing listens, fails at once (in at most PROBE_S), not after the client's timeout."""
    from distributed.comm import parse_address
    from distributed.comm.addressing import parse_host_port
    from distributed.comm.registry import backends

    full = address if "://" in address else f"tcp://{address}"
    fix = "write e.g. tcp://node001:8786, the address `dask scheduler` prints"
    try:
        protocol, location = parse_address(full, strict=True)
        if protocol not in backends:
            known = ", ".join(sorted(backends))
            raise ValueError(f"unknown protocol {protocol!r}, not one of {known}")
        host, port = None, None
        if protocol in ("tcp", "tls"):
            host, port = parse_host_port(location, default_port=8786)
        if host is not None and (not host or any(c.isspace() for c in host)):
            raise ValueError(f"bad host {host!r}")
    except ValueError as exc:
        raise NsysWrapError(
            where or address, f"is not a Dask scheduler address ({exc})", fix
        ) from None
    if host is not None:
        try:
            socket.create_connection((host, port), timeout=PROBE_S).close()
        except OSError as exc:
            raise NsysWrapError(
                where or address,
                f"no Dask scheduler listens at {full} ({exc.strerror or exc})",
                "start `dask scheduler` and its workers, or check the address",
            ) from None
    return full


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
    from nsyswrap.storage.cache_keys import code_digest

    mine = code_digest()
    other = sorted(w for w, digest in client.run(code_digest).items() if digest != mine)
    if other:
        raise NsysWrapError(
            other[0],
            f"(a worker of {name}) runs another nsyswrap version than this client",
            "install the same nsyswrap on the client and every worker",
        )


def _gather(client, futures, progress: Callable[[int, int], None] | None) -> list:
    """The futures' results, raising the first task's error; never an unbounded wait: a
    cluster left without workers for WORKERS_TIMEOUT_S while tasks wait (distributed would
    wait for new ones forever), or a scheduler that stops answering, is an error."""
    from distributed import as_completed
    from distributed.client import FutureCancelledError
    from distributed.scheduler import KilledWorker

    finished = as_completed(futures, loop=client.loop)
    done_count, checked, alone_since = 0, time.monotonic(), None
    try:
        while done_count < len(futures):
            batch = finished.next_batch(block=False)
            for future in batch:
                if future.status == "error":
                    future.result()  # raises the task's own error
                done_count += 1
                if progress:
                    progress(done_count, len(futures))
            if batch or time.monotonic() - checked < POLL_S:
                time.sleep(0 if batch else 0.05)
                continue
            checked = time.monotonic()
            if _workers(client):
                alone_since = None
                continue
            alone_since = alone_since or checked
            if checked - alone_since >= WORKERS_TIMEOUT_S:
                raise NsysWrapError(
                    "Dask workers",
                    f"all gone for {WORKERS_TIMEOUT_S} s with "
                    f"{len(futures) - done_count} of {len(futures)} reports left",
                    "check the workers' memory and logs, start workers again, "
                    "or use --engine local",
                )
        return [f.result() for f in futures]
    except (KilledWorker, FutureCancelledError) as exc:
        raise NsysWrapError(
            "Dask workers",
            f"stopped while working on a report ({type(exc).__name__}: {exc})",
            "check the workers' memory and logs, or use --engine local",
        ) from None


def _workers(client) -> int:
    """How many workers the scheduler has now (a scheduler that does not answer is an error)."""
    try:
        return len(client.nthreads())
    except (OSError, TimeoutError) as exc:
        raise NsysWrapError(
            client.scheduler.address,
            f"the Dask scheduler stopped answering ({exc})",
            "check the scheduler, or use --engine local",
        ) from None
