"""`nsyswrap query NAME RUN -f csv|parquet -o FILE` streams a per-rank module's rows from
the per-report results to the file: the same rows, in the same order, as the DataFrame."""

from __future__ import annotations

import pandas as pd
import pytest
from helpers.paths import FIXTURES

from nsyswrap import api
from nsyswrap.engine.queries import catalog

RUN = FIXTURES / "run4_straggler"
MODULES = ["gaps.idle", "gaps.launch_latency", "kernels.summary", "crossrank.collectives"]


@pytest.mark.parametrize("name", MODULES)
@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_streamed_file_has_the_dataframe_rows(cli, tmp_path, name, fmt):
    out = tmp_path / f"rows.{fmt}"
    code, _, err = cli("query", name, RUN, "-f", fmt, "-o", out)
    assert code == 0, err
    streamed = pd.read_csv(out) if fmt == "csv" else pd.read_parquet(out)
    expected = api.query(name, [RUN])
    if fmt == "csv":  # both through the same CSV reader
        expected.to_csv(tmp_path / "expected.csv", index=False)
        expected = pd.read_csv(tmp_path / "expected.csv")
    assert len(streamed) > 0
    pd.testing.assert_frame_equal(streamed, expected, check_dtype=fmt == "csv")


def test_one_report_and_the_row_count(tmp_path):
    report = FIXTURES / "run2" / "rank1.sqlite"
    out = tmp_path / "idle.csv"
    rows = api.query_to_file("gaps.idle", [report], out, "csv")
    assert rows == len(api.query("gaps.idle", [report])) == len(pd.read_csv(out)) > 0


def test_streamed_modules_are_per_rank():
    assert (
        all(catalog()[name].per_report for name in MODULES[:3])
        and not catalog()[MODULES[3]].per_report
    )


def test_existing_file_is_kept(cli, tmp_path):
    out = tmp_path / "rows.csv"
    out.write_text("mine\n")
    code, _, err = cli("query", "gaps.idle", RUN, "-f", "csv", "-o", out)
    assert code == 1 and "--force" in err and out.read_text() == "mine\n"
