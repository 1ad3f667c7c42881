"""Per-report work: worker processes, cached per-report results, per-rank modules."""
from __future__ import annotations

import os
import subprocess
import sys

import pandas as pd
import pytest

from nsyswrap import open_run
from nsyswrap.errors import NsysWrapError
from nsyswrap.pool import map_reports
from nsyswrap.queries import bind, catalog, run_module

from conftest import FIXTURES

RUN = FIXTURES / "run4_straggler"
CALLS: list[int] = []


def _fail_on_two(item: int) -> int:
    if item == 2:
        raise NsysWrapError(f"report {item}", "is broken", "fix it")
    return item * 10


def _count_kernels(run, params):
    CALLS.append(len(run.reports))
    return {"kernels": run.df("SELECT rank, count(*) AS n FROM kernels WHERE dur_ns >= $min "
                              "GROUP BY rank", params)}


def test_workers_return_in_order_and_pass_errors_intact():
    assert map_reports(_fail_on_two, [1, 3, 4], jobs=2) == [10, 30, 40]
    with pytest.raises(NsysWrapError) as err:
        map_reports(_fail_on_two, [1, 2, 3], jobs=2)
    assert (err.value.where, err.value.problem, err.value.fix) == ("report 2", "is broken", "fix it")


def test_per_report_results_are_cached_per_params():
    CALLS.clear()
    with open_run([RUN], jobs=1) as run:
        first = run.per_report(_count_kernels, {"min": 0})["kernels"]
        again = run.per_report(_count_kernels, {"min": 0})["kernels"]
        assert CALLS == [1, 1, 1, 1]  # once per report, then from the cache
        run.per_report(_count_kernels, {"min": 10**9})
        assert CALLS == [1] * 8
    pd.testing.assert_frame_equal(first, again)
    assert first["rank"].tolist() == [0, 1, 2, 3]
    with open_run([RUN]) as run:
        expected = run.df("SELECT rank, count(*) AS n FROM kernels GROUP BY rank ORDER BY rank")
    pd.testing.assert_frame_equal(first, expected, check_dtype=False)


@pytest.mark.parametrize("name", [n for n in sorted(catalog()) if catalog()[n].per_rank])
def test_per_rank_module_equals_one_query_over_the_run(name):
    module = catalog()[name]
    with open_run([RUN]) as run:
        merged = run_module(run, name)
        whole = run.df(module.sql, bind(module, {}))
    pd.testing.assert_frame_equal(merged, whole, check_dtype=False)


def test_scripts_without_a_main_guard_can_use_workers(tmp_path):
    script = tmp_path / "plain.py"
    script.write_text("import nsyswrap\n"
                      f"print(len(nsyswrap.query('ledger.devices', [{str(RUN)!r}])))\n")
    env = {**os.environ, "NSYSWRAP_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                          timeout=120)
    assert (done.returncode, done.stdout.strip()) == (0, "4"), done.stderr[-500:]


def test_reductions_are_built_when_first_read(tmp_path, monkeypatch):
    monkeypatch.setenv("NSYSWRAP_CACHE_DIR", str(tmp_path))
    with open_run([RUN]) as run:
        events = [c.reductions_dir / "xr_events.parquet" for c in run.cached]
        keys = [c.reductions_dir / "xr_rank_keys.parquet" for c in run.cached]
        assert not any(p.exists() for p in events + keys)  # opening builds none
        run_module(run, "crossrank.clock_offsets")
        assert all(p.exists() for p in keys) and not any(p.exists() for p in events)
        assert len(run_module(run, "crossrank.trace_events", max_events=5)) == 5
        assert all(p.exists() for p in events)
