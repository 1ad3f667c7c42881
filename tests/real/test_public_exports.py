"""Every real export in shared/nsys-sqlite/public opens and every view answers."""

from __future__ import annotations

import pytest
from helpers.paths import PUBLIC

from nsyswrap import open_run
from nsyswrap.engine.cache import VIEWS

pytestmark = pytest.mark.skipif(
    not PUBLIC, reason="shared/nsys-sqlite/public is not beside the repository"
)


@pytest.mark.parametrize("path", PUBLIC, ids=[p.stem for p in PUBLIC])
def test_every_view_answers(path):
    with open_run([path]) as run:
        for view in VIEWS:
            run.con.execute(f"SELECT count(*) FROM {view}").fetchone()
        session = run.df("SELECT * FROM session")
        assert len(session) == 1 and session.utc_epoch_ns.notna().all()
        assert session.nsys_version[0].startswith("20")
        kernels = run.df("SELECT * FROM kernels")
        assert (kernels.dur_ns >= 0).all()
        launches = run.df(
            "SELECT count(*) AS n, count(DISTINCT (pid, correlation_id)) AS d FROM launches"
        )
        assert launches.n[0] == launches.d[0]  # one launch per GPU activity


def test_known_counts():
    """Spot checks against PROVENANCE.md."""
    by_name = {p.stem: p for p in PUBLIC}
    with open_run([by_name["nsysai__mfu_2gpu_before"]]) as run:
        nccl = run.df("SELECT coll_op, count(*) AS n FROM kernels WHERE kind = 'nccl' GROUP BY ALL")
        assert nccl.to_dict("records") == [{"coll_op": "SendRecv", "n": 66}]
        assert (
            run.df("SELECT count(*) AS n FROM kernels WHERE kind IN ('compute', 'nccl')").n[0]
            == 4010
        )
        assert run.df("SELECT count(*) AS n FROM nvtx").n[0] == 19118
        pids = run.df("SELECT DISTINCT pid FROM kernels ORDER BY pid").pid.tolist()
        assert pids == [144, 145]
        ncl = run.df(
            "SELECT DISTINCT domain FROM nvtx "
            "WHERE text IN ('ncclSend', 'ncclRecv', 'ncclGroupStart')"
        ).domain.tolist()
        assert ncl == ["NCCL"]
    with open_run([by_name["pipit__saxpy-mpi-cuda_nsys_perlmutter0"]]) as run:
        assert run.df(
            "SELECT DISTINCT domain FROM nvtx WHERE domain <> 'default'"
        ).domain.tolist() == ["MPI"]


def test_all_public_reports_as_one_run(cli):
    code, out, err = cli(
        "sql",
        "SELECT rank, count(*) AS n FROM session GROUP BY rank ORDER BY rank",
        *PUBLIC,
        "-f",
        "csv",
    )
    assert code == 0, err
    assert out.count("\n") == len(PUBLIC) + 1
