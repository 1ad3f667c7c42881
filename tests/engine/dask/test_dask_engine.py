"""`--engine dask`: the per-report work on a real dask.distributed LocalCluster (two worker
processes), with the same answers as the local pool and the same one-line errors."""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections import Counter

import pytest
from helpers.paths import FIXTURES

from nsyswrap.engine.dask_engine import close_clients

distributed = pytest.importorskip("distributed")

RUNS = [FIXTURES / "run2", FIXTURES / "run4_straggler"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A LocalCluster of 2 worker processes and the scheduler file it is known by."""
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    )
    client = distributed.Client(cluster, set_as_default=False)
    scheduler_file = tmp_path_factory.mktemp("dask") / "scheduler.json"
    client.write_scheduler_file(str(scheduler_file))
    yield client, scheduler_file
    close_clients()  # nsyswrap's own, kept between runs
    client.close()
    cluster.close()


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """Point the cache at a fresh directory named `name` (cold)."""

    def use(name: str):
        monkeypatch.setenv("NSYSWRAP_CACHE_DIR", str(tmp_path / name))
        return tmp_path / name

    return use


@pytest.mark.parametrize("run", RUNS, ids=lambda p: p.name)
def test_report_json_is_the_local_one(cli, cluster, cache, run):
    client, scheduler_file = cluster
    cache("local")
    code, local, err = cli("report", run, "-f", "json")
    assert code == 0, err
    cache("dask")
    with distributed.get_task_stream(client=client) as stream:
        code, remote, err = cli(
            "report", run, "-f", "json", "--engine", "dask", "--scheduler-file", scheduler_file
        )
    assert code == 0, err
    assert json.loads(remote) == json.loads(local)
    workers = {task["worker"] for task in stream.data}
    names = Counter(task["key"].split("-")[0] for task in stream.data)
    assert len(workers) == 2, "both worker processes took reports"
    # two tasks per report: its normalization with the per-report objects that take no
    # window (nsyswrap.engine.opening.open_run's plan), then, the window chosen, the
    # per-report modules of that window in one more pass (nsyswrap.engine.planner.fill)
    reports = len(list(run.glob("*.sqlite")))
    assert names == {"_normalize": reports, "compute": reports}, names


def test_per_rank_query_by_address_from_the_environment(cli, cluster, cache, monkeypatch):
    client, _ = cluster
    run = FIXTURES / "run4_straggler"
    cache("local")
    code, local, err = cli("query", "gaps.idle", run, "-f", "csv")
    assert code == 0, err
    cache("dask")
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", client.scheduler.address)
    with distributed.get_task_stream(client=client) as stream:
        code, remote, err = cli("query", "gaps.idle", run, "-f", "csv", "--engine", "dask")
    assert code == 0, err
    assert remote == local and local.count("\n") > 10
    names = {task["key"].split("-")[0] for task in stream.data}
    assert names == {"_normalize", "compute"}, names  # compute: the planner's per-report steps


def test_bad_report_on_a_worker_is_one_line(cli, cluster, cache, tmp_path):
    """A report that passes the client's checks but is damaged further in fails in
    the worker that reads it: the error comes back as one line, no traceback."""
    _, scheduler_file = cluster
    cache("bad")
    run = tmp_path / "run"
    shutil.copytree(FIXTURES / "run2", run)
    report = run / "rank1.sqlite"
    with sqlite3.connect(report) as con:
        try:
            pages = con.execute(
                "SELECT pageno FROM dbstat WHERE name = 'CUPTI_ACTIVITY_KIND_KERNEL' "
                "AND pagetype = 'leaf' ORDER BY pageno"
            ).fetchall()
            page_size = con.execute("PRAGMA page_size").fetchone()[0]
        except sqlite3.OperationalError:
            pytest.skip("this SQLite has no dbstat table")
    data = bytearray(report.read_bytes())
    last = pages[-1][0]  # the first leaf stays readable: the client's checks pass
    data[(last - 1) * page_size : last * page_size] = b"\xff" * page_size
    report.write_bytes(data)
    code, _, err = cli("report", run, "--engine", "dask", "--scheduler-file", scheduler_file)
    assert code == 1
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert str(report) in err and "cannot be read" in err


@pytest.mark.parametrize(
    "args, says",
    [
        (["--engine", "dask"], "needs a scheduler"),
        (["--scheduler-file", "x.json"], "only apply to --engine dask"),
        (["--engine", "dask", "--scheduler-file", "missing.json"], "does not exist"),
    ],
)
def test_engine_options_misused(cli, monkeypatch, args, says):
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    code, _, err = cli("report", FIXTURES / "run2", *args)
    assert code == 1 and says in err and err.count("\n") == 1, err
