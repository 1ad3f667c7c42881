"""Per-report work in a bounded pool of processes: `jobs` reports at a time, so memory
grows with `jobs`, not with the number of ranks, and every core is used; or, with an
engine (`nsyswrap.engine.dask_engine.DaskEngine`), on the workers of a Dask cluster."""

from __future__ import annotations

import functools
import multiprocessing
import os
import sys
import tempfile
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from typing import TypeVar

from nsyswrap.engine.dask_engine import DaskEngine
from nsyswrap.errors import NsysWrapError, note, open_files_error
from nsyswrap.storage.processes import start_worker

POOL_FILES = 24  # file descriptors a pool needs free: its workers' pipes, and some to spare
SOCKET_PATH = 107  # the longest AF_UNIX socket path on Linux, in bytes (sun_path, NUL-ended)
SOCKET_NAME = len("/pymp-XXXXXXXX/listener-XXXXXXXX")  # the forkserver's, under the temp folder
T = TypeVar("T")
R = TypeVar("R")


def map_reports(
    fn: Callable[[T], R],
    items: Iterable[T],
    jobs: int,
    progress: Callable[[int, int], None] | None = None,
    engine: DaskEngine | None = None,
) -> list[R]:
    """`[fn(item) for item in items]`, `jobs` at a time in worker processes (in this
    process when there is one item or one job), or one task per item on `engine`'s
    workers; `progress(done, total)` after each."""
    items = list(items)
    if engine is not None and items:
        return engine.map(fn, items, progress)
    if jobs > 1 and len(items) > 1 and not _socket_fits():
        _say_one_process()
        jobs = 1
    if jobs <= 1 or len(items) <= 1:
        out = []
        for done, item in enumerate(items, 1):
            out.append(fn(item))
            if progress:
                progress(done, len(items))
        return out
    _check_open_files()
    # forkserver: workers fork from a clean server process, never from this one, which
    # may hold DuckDB threads; the server imports nsyswrap once for all workers.
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["nsyswrap.engine.opening"])
    pool = ProcessPoolExecutor(
        max_workers=min(jobs, len(items)),
        mp_context=context,
        initializer=start_worker,
        initargs=(os.getpid(),),
    )
    try:
        with _main_hidden():  # the workers start here
            futures = [pool.submit(fn, item) for item in items]
        for done, _ in enumerate(as_completed(futures), 1):
            if progress:
                progress(done, len(items))
        return [f.result() for f in futures]
    except KeyboardInterrupt:  # the workers ignore SIGINT: stop them here
        for worker in multiprocessing.active_children():
            worker.terminate()
        raise
    except BrokenProcessPool as exc:
        raise NsysWrapError(
            "worker processes",
            f"stopped unexpectedly ({exc})",
            "check free memory, or pass jobs=1 (-j 1) to work in one process",
        ) from None
    finally:
        pool.shutdown(cancel_futures=True)


def _socket_fits() -> bool:
    """Whether the forkserver's socket, `<temporary folder>/pymp-XXXXXXXX/listener-XXXXXXXX`
    (multiprocessing's names), fits in an AF_UNIX address."""
    return len(os.fsencode(tempfile.gettempdir())) + SOCKET_NAME <= SOCKET_PATH


@functools.cache
def _say_one_process() -> None:
    """Said once, however many pools the command would start."""
    note(
        f"the temporary folder {tempfile.gettempdir()} is too long a path for the "
        f"worker processes' socket (at most {SOCKET_PATH - SOCKET_NAME} characters): "
        "working in one process; set TMPDIR to a shorter folder to use -j"
    )


def _check_open_files() -> None:
    """Refuse to start workers that could not be started: each takes a few file descriptors
    here (pipes) while the run holds its own (a bounded number, see README), and a pool
    that runs out of them part way leaves its server process complaining."""
    import resource

    try:
        held = len(os.listdir("/proc/self/fd"))
    except OSError:  # not Linux: nothing to check
        return
    if resource.getrlimit(resource.RLIMIT_NOFILE)[0] < held + POOL_FILES:
        raise open_files_error()


@contextmanager
def _main_hidden():
    """Workers would run the caller's main script again to find its functions (ours live in
    modules), which breaks scripts without an `if __name__ == '__main__':` guard."""
    main = sys.modules["__main__"]
    saved = {k: getattr(main, k) for k in ("__spec__", "__file__") if hasattr(main, k)}
    main.__spec__ = None
    if "__file__" in saved:
        del main.__file__
    try:
        yield
    finally:
        for key, value in saved.items():
            setattr(main, key, value)


def find_engine(
    name: str, scheduler_file=None, scheduler_address: str | None = None
) -> DaskEngine | None:
    """The engine of `--engine NAME`: None for local processes, else the Dask scheduler."""
    if name == "local":
        if scheduler_file or scheduler_address:
            raise NsysWrapError(
                "--scheduler-file/--scheduler-address",
                "only apply to --engine dask",
                "add --engine dask, or leave them out",
            )
        return None
    return DaskEngine.find(scheduler_file, scheduler_address)
