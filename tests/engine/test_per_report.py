"""Per-report work: worker processes, cached per-report results, per-rank modules."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from helpers.paths import FIXTURES

from nsyswrap import open_run
from nsyswrap.engine import planner
from nsyswrap.engine.pool import map_reports
from nsyswrap.engine.queries import bind, catalog, run_module, run_modules
from nsyswrap.errors import NsysWrapError
from nsyswrap.report import ReportOptions, build_report, report
from nsyswrap.synth import preset

RUN = FIXTURES / "run4_straggler"


def _fail_on_two(item: int) -> int:
    if item == 2:
        raise NsysWrapError(f"report {item}", "is broken", "fix it")
    return item * 10


def test_workers_return_in_order_and_pass_errors_intact():
    assert map_reports(_fail_on_two, [1, 3, 4], jobs=2) == [10, 30, 40]
    with pytest.raises(NsysWrapError) as err:
        map_reports(_fail_on_two, [1, 2, 3], jobs=2)
    assert (err.value.where, err.value.problem, err.value.fix) == (
        "report 2",
        "is broken",
        "fix it",
    )


def test_per_report_results_are_computed_once_per_params(tmp_path, monkeypatch):
    """Several modules at once: computed per report in one pool pass, stored under a key of
    their parameters, read back on the next call; other parameters compute anew."""
    monkeypatch.setenv("NSYSWRAP_CACHE_DIR", str(tmp_path))
    wanted = {
        "a": ("kernels.summary", {}),
        "b": ("ledger.devices", {}),
        "c": ("kernels.summary", {"min_dur_ns": 10**9}),
    }

    def stored() -> set[Path]:
        return set(tmp_path.glob("objects/*"))

    with open_run([RUN], jobs=1) as run:
        first = run_modules(run, wanted)
        after_first = stored()
        again = run_modules(run, wanted)
        assert stored() == after_first  # nothing computed again
        run_modules(run, {"d": ("kernels.summary", {"min_dur_ns": 1})})
        assert len(stored() - after_first) == 4  # one per report
        expected = run.df("SELECT rank, count(*) AS n FROM kernels GROUP BY rank ORDER BY rank")
    for key in wanted:
        pd.testing.assert_frame_equal(first[key], again[key])
    assert first["c"].empty
    assert first["a"].groupby("rank")["count"].sum().tolist() == expected.n.tolist()


@pytest.mark.parametrize("name", [n for n in sorted(catalog()) if catalog()[n].per_report])
def test_per_rank_module_equals_one_query_over_the_run(name):
    """Rows computed per report and merged in the declared @order equal the module run
    once over the views of the whole run."""
    module = catalog()[name]
    with open_run([RUN]) as run:
        merged = run_module(run, name)
        params = bind(module, {})
        planner.prepare(run, name, params)
        whole = run.connection.execute(module.sql, module.bound(params)).df()
    # a column missing everywhere reads as NaN from the stored rows, None from DuckDB
    pd.testing.assert_frame_equal(_nulls_alike(merged), _nulls_alike(whole), check_dtype=False)


def _nulls_alike(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.astype(object).where(frame.notna(), None)


def test_scripts_without_a_main_guard_can_use_workers(tmp_path):
    script = tmp_path / "plain.py"
    script.write_text(
        f"import nsyswrap\nprint(len(nsyswrap.query('ledger.devices', [{str(RUN)!r}])))\n"
    )
    env = {**os.environ, "NSYSWRAP_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120
    )
    assert (done.returncode, done.stdout.strip()) == (0, "4"), done.stderr[-500:]


def test_objects_are_built_when_first_read_and_only_what_is_declared(tmp_path, monkeypatch):
    monkeypatch.setenv("NSYSWRAP_CACHE_DIR", str(tmp_path))

    def built(name: str) -> list[bool]:
        return [any((tmp_path / "objects").glob(f"{name}-*")) for c in run.cached]

    with open_run([RUN]) as run:
        assert not any(built("xr_events") + built("xr_rank_keys"))  # opening builds none
        run.df("SELECT 1 AS x -- xr_events")  # words in SQL text build nothing
        assert not any(built("xr_events"))
        assert run.df("SELECT count(*) AS n FROM step_ranges('step:%')").n[0] > 0  # macros
        run_module(run, "crossrank.clock_offsets")
        assert all(built("xr_rank_keys")) and not any(built("xr_events"))
        assert len(run_module(run, "crossrank.trace_events", max_events=5)) == 5
        assert all(built("xr_events"))


def test_run_objects_are_stored_and_read_back_without_the_solve(tmp_path, monkeypatch):
    """The cross-rank solve's tables and the run objects over them are stored beside the
    first rank's views: a later open of the run reads them (the solve does not run again)
    and gives the same rows."""
    monkeypatch.setenv("NSYSWRAP_CACHE_DIR", str(tmp_path))
    with open_run([RUN], jobs=1) as run:
        first = {
            name: run_module(run, name)
            for name in ("crossrank.stragglers", "crossrank.clock_offsets")
        }
    assert len(list(tmp_path.glob("runs/xr_clock-*/rows.parquet"))) == 1
    from nsyswrap.crossrank import solve

    monkeypatch.setattr(solve, "build", lambda inputs: pytest.fail("the solve ran again"))
    with open_run([RUN], jobs=1) as run:
        for name, rows in first.items():
            pd.testing.assert_frame_equal(run_module(run, name), rows)


def test_unrelated_reports_are_refused_on_every_call(tmp_path, monkeypatch, generated_run):
    """Reports that are not one run are refused on every call: the solve's verdict
    (xr_unrelated) is stored with its other run objects and read back."""
    monkeypatch.setenv("NSYSWRAP_CACHE_DIR", str(tmp_path / "cache"))
    _, a = generated_run("run2")
    _, b = generated_run(preset("run2").replace(name="later", clock_error_ns=(86_400 * 10**9,) * 2))
    for _ in range(2):
        with open_run([a / "rank0.sqlite", b / "rank1.sqlite"], jobs=1) as run:
            with pytest.raises(NsysWrapError, match="not one run"):
                build_report(run, ReportOptions())


def test_window_parameters_reach_every_module_that_reads_a_shared_object():
    """One object per parameter set: a module asked for other window parameters gets its
    own, not the last one computed (run2 rank 0: the whole activity, then step 1)."""
    with open_run([FIXTURES / "run2" / "rank0.sqlite"]) as run:
        whole = run_module(run, "ledger.devices")
        step = run_module(run, "ledger.devices", step_from=1, step_to=2)
        again = run_module(run, "ledger.devices")
    assert whole.span_ns.tolist() == [7_743_832] and step.span_ns.tolist() == [2_256_132]
    pd.testing.assert_frame_equal(whole, again)


def test_paths_with_quotes_work(tmp_path, monkeypatch):
    """Every path reaches SQL bound or quoted: a cache directory and reports named with
    an apostrophe work."""
    here = tmp_path / "it's here"
    monkeypatch.setenv("NSYSWRAP_CACHE_DIR", str(here / "cache"))
    run_dir = shutil.copytree(FIXTURES / "run2", here / "run")
    result = report([run_dir])
    sections = {s["id"]: s for s in result["sections"]}
    assert sections["single_rank"]["tables"] and sections["crossrank"]["tables"]
    assert any((here / "cache").rglob("rows.parquet"))


def test_in_one_process_each_report_is_opened_once_for_every_pass(cache, monkeypatch):
    """jobs=1 over several reports: the per-report work of every pass (here one a module)
    runs on a run of each report kept open until the run closes, not on one opened each
    pass, holding no table between passes (memory bounded by one report), and gives what
    worker processes give."""
    opened, real = [], planner.open_cached
    monkeypatch.setattr(
        planner, "open_cached", lambda cached, **kw: opened.append(cached) or real(cached, **kw)
    )
    names = ("kernels.summary", "gaps.launch_latency", "ledger.devices")
    with open_run([RUN], jobs=1) as run:
        one = [run_module(run, name) for name in names]  # a pass each
        assert len(run.report_runs) == 4
        for kept in run.report_runs.values():  # `launches` was built in memory, then dropped
            assert kept.connection.execute("SELECT * FROM duckdb_tables()").fetchall() == []
    assert sorted(c[0].rank for c in opened) == [0, 1, 2, 3] and run.report_runs == {}
    monkeypatch.setenv("NSYSWRAP_CACHE_DIR", str(cache / "pool"))
    with open_run([RUN], jobs=2) as run:
        for name, rows in zip(names, one, strict=True):
            pd.testing.assert_frame_equal(run_module(run, name), rows)
