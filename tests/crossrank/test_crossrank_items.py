"""The smaller items of cross-rank work (#23), on generated runs with planted truth: a stream
wait is no host sync, per-step figures divide by the steps they sum, `diff` without phase
data and its exit codes, duplicate reports refused, waits of seconds, frames typed BIGINT, an
unaligned rank's clock null in the JSON."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3

import duckdb
import pandas as pd
import pytest

from nsyswrap import open_run
from nsyswrap.comparison.gate import REGRESSION
from nsyswrap.crossrank.solve import ALIGNED_COLUMNS
from nsyswrap.engine.builders import create_table
from nsyswrap.engine.queries import run_module
from nsyswrap.report import ReportOptions, build_report
from nsyswrap.report.flow import section_of
from nsyswrap.synth import preset


@pytest.fixture(scope="module")
def lag(generated_run):
    """dp6_lag (rank 2 3.00 ms late every step) and the same run without its plant."""
    _, none = generated_run(preset("dp6_lag").replace(straggler=None))
    _, late = generated_run("dp6_lag")
    return none, late


def test_per_step_figures_divide_by_the_steps_they_sum(lag):
    with open_run([lag[1]]) as run:
        report = build_report(run, ReportOptions())
    finding = report["diagnosis"]["findings"][0]
    evidence = finding["evidence"]
    assert (evidence["rank"], evidence["phase"]) == (2, "data_loading")
    # the lag and the others' wait sum steps 1-5 (step 0 holds only the first all-reduce, the
    # start-up skew), the phase excess steps 0-5: each divided by its own count
    assert evidence["steps"]["value"] == 5 and evidence["phase_steps"]["value"] == 6
    for key in ("lag_per_step", "wait_per_step", "phase_excess_per_step"):
        assert evidence[key]["value"] == pytest.approx(3_000_000, abs=1)
    assert (
        "3.00 ms per step after the median rank (over 5 steps: each group's first collective"
        in finding["text"]
    )
    assert (
        "(+3.00 ms per step)" in finding["text"]
        and "wait 3.00 ms per step each for it" in finding["text"]
    )
    assert 0 < evidence["share_of_nccl_time"]["value"] <= 1


def test_diff_without_phase_data_and_its_exit_codes(lag, cli, tmp_path):
    """The run without the plant has no straggler phase (every phase alike): diff works
    with --step-pattern; the gate exits 3 on a regression, 0 without, 1 on a bad input."""
    none, late = lag
    code, out, err = cli(
        "diff", none, late, "--step-pattern", "step_%", "--fail-on-regression", "5"
    )
    assert code == REGRESSION == 3 and err.strip().splitlines()[-1].startswith("FAIL: step_time +")
    assert "data_loading on rank 2 +3.000 ms per step" in out
    code, _, err = cli("diff", late, none, "--step-pattern", "step_%", "--fail-on-regression", "5")
    assert code == 0 and err.strip().splitlines()[-1].startswith("PASS: step_time")
    code, out, err = cli("diff", late, tmp_path / "missing", "--fail-on-regression", "5")
    assert (
        code == 1 and not out and len(err.strip().splitlines()) == 1 and err.startswith("Error: ")
    )


def test_two_copies_of_one_report_are_refused(cli, tmp_path):
    for rank in (0, 1):
        shutil.copy("fixtures/run2/rank0.sqlite", tmp_path / f"rank{rank}.sqlite")
    code, out, err = cli("report", tmp_path)
    assert code == 1 and not out and len(err.strip().splitlines()) == 1
    assert "rank1.sqlite: is the same capture as" in err and "give each capture once" in err


def test_a_stream_wait_is_no_host_sync(generated_run):
    """The gap behind a cudaStreamWaitEvent the driver holds is host-bound, as planted."""
    truth, out = generated_run("stream_wait")
    with open_run([out]) as run:
        gaps = run_module(run, "gaps.idle")
    for planted in (g for g in truth.idle_gaps if g["planted"]):
        found = gaps[(gaps["rank"] == planted["rank"]) & (gaps["start_ns"] == planted["start_ns"])]
        assert found[["end_ns", "cause", "sync_ns"]].values.tolist() == [
            [planted["end_ns"], "host_bound", 0]
        ]


def test_waits_of_seconds_are_reported(generated_run):
    truth, out = generated_run("long_wait")
    with open_run([out]) as run:
        coll = run_module(run, "crossrank.collectives")
        section = section_of(run, "crossrank", ReportOptions())  # its section alone: the quick way
    longest = max(p["wait_ns"] for c in truth.collectives for p in c["per_rank"])
    assert longest > 3 * 10**9 and abs(coll["wait_ns"].max() - longest) < 1_000
    assert section["verdict"]["label"] == "straggler: rank 3"


def test_frames_are_handed_to_duckdb_typed():
    """ns past 2^31 after thousands of small ones: the solve's frames are cast to the
    declared column types (nsyswrap.engine.builders), no type is guessed from the first rows."""
    n = 5_000
    frame = pd.DataFrame({c: [None] * n for c in ALIGNED_COLUMNS}).assign(
        pg="0",
        seq=range(n),
        rank=0,
        wait_ns=[1] * (n - 1) + [3_200_000_000],
        significant=[True] * (n - 1) + [None],
        barrier=True,
    )
    con = duckdb.connect()
    create_table(con, "xr_test", "xr_aligned", frame)
    types = dict(
        con.execute(
            "SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = 'xr_test'"
        ).fetchall()
    )
    assert (types["wait_ns"], types["rank"], types["barrier"]) == ("BIGINT", "INTEGER", "BOOLEAN")
    assert con.execute("SELECT max(wait_ns), count(significant) FROM xr_test").fetchone() == (
        3_200_000_000,
        n - 1,
    )


def _strict(text: str):
    """JSON as a strict parser reads it: NaN or Infinity is an error."""

    def refuse(constant):
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize("host", ["nodeX", None])
def test_an_unaligned_rank_has_no_clock_and_the_json_stays_json(cli, tmp_path, host):
    """A rank that no collective joins to the reference (another host, no NCCL kernel, no
    coll: range) is unaligned: its clock is null in the JSON (never NaN) and blank in the
    table (never 'nan'), also when its report records no host."""
    run = tmp_path / "run"
    shutil.copytree("fixtures/run2", run)
    con = sqlite3.connect(run / "rank1.sqlite")
    con.execute(
        "UPDATE TARGET_INFO_SYSTEM_ENV SET value = ? WHERE name = 'Hostname'", (host or "",)
    )
    if host is None:
        con.execute("DELETE FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'Hostname'")
    con.execute("UPDATE StringIds SET value = 'plain_' || id WHERE value LIKE 'ncclDevKernel%'")
    con.execute("DELETE FROM NVTX_EVENTS WHERE text LIKE 'coll:%'")
    con.commit()
    con.close()
    code, out, err = cli("report", run, "-f", "json")
    assert code == 0, err
    crossrank = next(s for s in _strict(out)["sections"] if s["id"] == "crossrank")
    rows = {r["rank"]: r for r in crossrank["tables"][0]["rows"]}
    assert (rows[1]["aligned"], rows[1]["clock"]) == (False, None)
    assert rows[0]["clock"] == "host node0"
    code, out, err = cli("report", run, "--section", "crossrank")
    assert code == 0 and not re.search(r"\bnan\b", out, re.IGNORECASE), out
