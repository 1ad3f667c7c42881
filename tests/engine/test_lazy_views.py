"""Lazy views (nsyswrap.engine.lazy_views): `launches` is not written when a report is
normalized, and is built, with the very rows normalization wrote, where first needed."""

from __future__ import annotations

import json

import duckdb
import pandas as pd
from helpers.paths import FIXTURES

from nsyswrap import open_run
from nsyswrap.engine import sql_objects
from nsyswrap.engine.connection import LAZY_VIEWS, VIEWS, quote
from nsyswrap.engine.queries import run_module
from nsyswrap.report import ReportOptions, report

RUN = FIXTURES / "run4_straggler"
ORDER = "pid, correlation_id, device, stream, kernel_start_ns, kernel_end_ns, start_ns, api, tid"


def _eager(views_dir) -> pd.DataFrame:
    """`launches` of one report as normalization used to write it: its SQL over the stored
    views, on one thread."""
    con = duckdb.connect()
    con.execute("SET threads = 1")
    for view in sql_objects.get("launches").reads:
        file = quote(str(views_dir / f"{view}.parquet"))
        con.execute(f"CREATE VIEW {view} AS SELECT * FROM read_parquet({file})")
    return con.execute(f"{sql_objects.get('launches').sql} ORDER BY {ORDER}").df()


def test_lazy_views_read_only_other_views():
    for name in LAZY_VIEWS:
        assert name in VIEWS
        assert all(r in VIEWS for r in sql_objects.get(name).reads), name


def test_a_cold_report_writes_no_launches_and_a_query_builds_them(cache, cli):
    report([RUN], ReportOptions())
    entries = sorted((cache / "views").iterdir())
    assert len(entries) == 4
    assert not any((e / "launches.parquet").exists() for e in entries)
    sizes = [json.loads((e / "entry.json").read_text())["bytes"] for e in entries]
    code, out, _ = cli("sql", "SELECT rank, count(*) AS n FROM launches GROUP BY rank", RUN)
    assert code == 0 and len(out.splitlines()) == 6  # header, rule, 4 ranks
    for entry, before in zip(entries, sizes):
        file = entry / "launches.parquet"
        assert file.exists()
        index = json.loads((entry / "entry.json").read_text())
        assert index["bytes"] == before + file.stat().st_size  # counted in the store
        ordered = f"SELECT * FROM read_parquet({quote(str(file))}) ORDER BY {ORDER}"
        pd.testing.assert_frame_equal(duckdb.sql(ordered).df(), _eager(entry))


def test_over_one_report_it_is_built_in_memory(cache):
    one = RUN / "rank2.sqlite"
    with open_run([one]) as run:
        rows = run.df(f"SELECT * EXCLUDE (rank, report) FROM launches ORDER BY {ORDER}")
        (cached,) = run.cached
        assert run.lazy == {"launches": "table"}
    assert not (cached.views_dir / "launches.parquet").exists()
    pd.testing.assert_frame_equal(rows, _eager(cached.views_dir))


def test_what_reads_it_through_a_macro_builds_it(cache):
    """A module or ad-hoc SQL reading `launches` only through launch_metrics' macros."""
    with open_run([RUN]) as run:
        module = run_module(run, "gaps.launch_latency")  # per report, in the workers
        assert len(module) > 0 and module["launch_ns"].notna().all()
        assert "launches" not in run.lazy
        rows = run.df("SELECT count(*) AS n FROM window_launch_latency(NULL, 'step:%', 0, NULL)")
        assert rows["n"].iloc[0] == len(module)
        assert run.lazy == {"launches": "files"}
