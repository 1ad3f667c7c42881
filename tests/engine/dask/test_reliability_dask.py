"""Dask faults: a malformed address or scheduler file, or an address where nothing listens,
fails in seconds with one line (when the cluster is first needed: a cold cache here); a
cluster that loses its workers while reports wait is an error within WORKERS_TIMEOUT_S (a
lost worker's reports are retried on the others), never an endless wait."""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
import time

import pytest
from helpers.bad_input import assert_one_line_error
from helpers.paths import FIXTURES

distributed = pytest.importorskip("distributed")

RUN = FIXTURES / "run2"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize(
    "address, needle",
    [
        ("not a url", "is not a Dask scheduler address"),
        ("tcp://", "is not a Dask scheduler address"),
        ("tcp://host name:8786", "is not a Dask scheduler address"),
        ("foo://x:1", "is not a Dask scheduler address"),
        ("tcp://127.0.0.1:{free}", "no Dask scheduler listens at"),
        ("127.0.0.1:{free}", "no Dask scheduler listens at"),
        ("tcp://no-such-host.invalid:8786", "no Dask scheduler listens at"),
    ],
    ids=["words", "empty", "space", "protocol", "nothing-listens", "no-protocol", "unknown-host"],
)
def test_a_bad_scheduler_address_fails_in_seconds(cli, cache, address, needle):
    started = time.monotonic()
    result = cli(
        "sql",
        "SELECT 1",
        RUN,
        "--engine",
        "dask",
        "--scheduler-address",
        address.format(free=_free_port()),
    )
    assert_one_line_error(result, needle)
    assert time.monotonic() - started < 20


@pytest.mark.parametrize(
    "text, needle",
    [
        ("garbage{", "is not a scheduler file"),
        ("", "is not a scheduler file"),
        ('{"address": 5}', "holds no scheduler address"),
        ('["tcp://127.0.0.1:8786"]', "holds no scheduler address"),
        ('{"address": "not a url"}', "is not a Dask scheduler address"),
        ('{"address": "tcp://127.0.0.1:{free}"}', "no Dask scheduler listens at"),
        ('{"address": ' + "[" * 200_000 + "]" * 200_000 + "}", "is not a scheduler file"),
    ],
)
def test_a_bad_scheduler_file_fails_in_seconds(cli, cache, tmp_path, text, needle):
    scheduler_file = tmp_path / "scheduler.json"
    scheduler_file.write_text(text.replace("{free}", str(_free_port())))
    started = time.monotonic()
    result = cli("sql", "SELECT 1", RUN, "--engine", "dask", "--scheduler-file", scheduler_file)
    line = assert_one_line_error(result, needle)
    assert str(scheduler_file) in line and time.monotonic() - started < 20


def test_a_lost_worker_is_retried_and_a_cluster_without_workers_is_an_error(monkeypatch):
    """Two workers: one killed mid-task, its task runs again on the other. Then every worker
    gone while tasks wait: an error after WORKERS_TIMEOUT_S, not an endless wait."""
    import nsyswrap.engine.dask_engine as engine_module
    from nsyswrap.errors import NsysWrapError

    monkeypatch.setattr(engine_module, "WORKERS_TIMEOUT_S", 3)
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    )
    client = distributed.Client(cluster, set_as_default=False)
    engine = engine_module.DaskEngine(address=client.scheduler.address)
    try:
        victim, killed = next(iter(cluster.workers.values())), []

        def kill_one():
            time.sleep(1.5)
            killed.append(victim.process.pid)
            os.kill(killed[0], signal.SIGKILL)  # the worker process, as the OOM killer would

        threading.Thread(target=kill_one, daemon=True).start()
        assert engine.map(time.sleep, [3.0, 3.0, 0.5, 0.5]) == [None] * 4 and killed

        def lose_all():
            time.sleep(1.5)
            cluster.scale(0)

        threading.Thread(target=lose_all, daemon=True).start()
        started = time.monotonic()
        with pytest.raises(NsysWrapError, match="all gone for 3 s with 2 of 2 reports left"):
            engine.map(time.sleep, [30.0, 30.0])
        assert time.monotonic() - started < 25
    finally:
        engine_module.close_clients()
        client.close()
        cluster.close()


@pytest.mark.parametrize("command", ["report", "sql", "query", "timeline", "plan"])
@pytest.mark.parametrize(
    "where",
    [["--scheduler-address", "tcp://127.0.0.1:8786"], ["--scheduler-file", "scheduler.json"], []],
    ids=["address", "file", "environment"],
)
def test_engine_dask_without_dask_is_one_line_before_any_work(
    cli, cache, monkeypatch, tmp_path, command, where
):
    """dask (or dask.distributed) not installed: one line saying so and how to install it,
    whatever the command and however the scheduler is named (nothing read, no cache)."""
    for name in ("dask", "dask.utils", "distributed"):
        monkeypatch.setitem(sys.modules, name, None)  # `import` fails as if not installed
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", "tcp://127.0.0.1:8786")
    monkeypatch.chdir(tmp_path)
    args = {
        "report": ["report", RUN],
        "sql": ["sql", "SELECT 1 AS one", RUN],
        "query": ["query", "kernels.summary", RUN],
        "timeline": ["timeline", RUN, "-o", tmp_path / "trace.json"],
        "plan": ["plan", RUN],
    }[command]
    result = cli(*args, "--engine", "dask", *where)
    assert_one_line_error(result, "needs dask.distributed, which is not installed")
    assert not cache.exists()
