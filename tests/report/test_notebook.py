"""The notebook path (#38 item 10): the report's tables as DataFrames
(nsyswrap.report_tables) and a DuckDB relation over a run (nsyswrap.relation), as
docs/notebook.md and the README show them."""

from __future__ import annotations

import re

import duckdb
import pandas as pd
import pytest
from helpers.paths import FIXTURES, ROOT

import nsyswrap
from nsyswrap.errors import NsysWrapError
from nsyswrap.report import report_of
from nsyswrap.report.figures import is_figure

RUN = [FIXTURES / "run4_straggler"]


def test_every_table_of_the_report_is_a_dataframe_of_its_values():
    tables = nsyswrap.report_tables(RUN)
    answer = report_of(RUN)
    specs = [t for s in answer["sections"] for t in s["tables"]]
    assert list(tables) == [t["id"] for t in specs]
    for spec in specs:
        frame = tables[spec["id"]]
        assert frame.attrs["title"] == spec["title"]
        assert len(frame) == len(spec["rows"])
        for i, row in enumerate(spec["rows"]):
            for column, cell in row.items():
                got = frame.iloc[i][column]
                if is_figure(cell):
                    assert frame.attrs["units"][column] == cell["unit"]
                    cell = cell["value"]
                assert (cell is None and pd.isna(got)) or got == cell, (spec["id"], i, column)


def test_the_straggler_in_three_lines():
    stragglers = nsyswrap.report_tables(RUN)["stragglers"]
    overall = stragglers[stragglers["step"] == "all"]
    assert overall["rank"].tolist() == [2]
    assert stragglers.attrs["units"]["lag"] == "ns"


def test_a_sampled_run_gives_its_tables_too():
    tables = nsyswrap.report_tables([FIXTURES / "real" / "h200_sampled"])
    assert {"step_times", "stragglers"} <= set(tables)


def test_a_relation_over_a_view_a_query_and_sql():
    with nsyswrap.open_run(RUN) as run:
        kernels = nsyswrap.relation(run, "kernels")
        assert isinstance(kernels, duckdb.DuckDBPyRelation)
        per_rank = kernels.aggregate("rank, count(*) AS n").order("rank").df()
        direct = nsyswrap.sql("SELECT rank, count(*) AS n FROM kernels GROUP BY rank", RUN)
        assert per_rank["n"].tolist() == direct.sort_values("rank")["n"].tolist()
        ledger = nsyswrap.relation(run, "ledger.devices").df()
        assert ledger.equals(nsyswrap.query("ledger.devices", RUN))
        long = nsyswrap.relation(run, "SELECT count(*) FROM kernels WHERE dur_ns > $d", d=100_000)
        assert long.fetchall() == kernels.filter("dur_ns > 100000").count("*").fetchall()


@pytest.mark.parametrize(
    "text, problem",
    [
        ("DELETE FROM kernels", "not a read-only query"),
        ("SELECT nothing FROM kernels", "nothing"),
        ("SELECT 1; SELECT 2", "2 statements"),
    ],
)
def test_a_relation_refuses_what_sql_refuses(text, problem):
    with nsyswrap.open_run(RUN) as run, pytest.raises(NsysWrapError, match=problem):
        nsyswrap.relation(run, text)


def test_the_docs_examples_run(monkeypatch):
    """Every Python block of docs/notebook.md runs as written, in order in one namespace
    (as a notebook's cells), from the repository root."""
    monkeypatch.chdir(ROOT)
    text = (ROOT / "docs" / "notebook.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) == 2
    namespace = {}
    for block in blocks:
        exec(compile(block, "docs/notebook.md", "exec"), namespace)


def test_the_readme_example_runs(monkeypatch, capsys):
    """The README's Python block runs as written from the repository root: the straggler
    row names rank 2, the relation prints a row per rank, and it never reaches run.con."""
    monkeypatch.chdir(ROOT)
    text = (ROOT / "README.md").read_text()
    (block,) = re.findall(r"```python\n(.*?)```", text, re.S)
    assert ".con" not in block
    namespace = {}
    exec(compile(block, "README.md", "exec"), namespace)
    straggler = namespace["tables"]["stragglers"].query("step == 'all'")
    assert straggler["rank"].tolist() == [2]
    assert len(capsys.readouterr().out.splitlines()) == 1 + 4  # header and 4 ranks
