"""The CLI: help everywhere, machine formats, and the manual documents every command."""

from __future__ import annotations

import json

import pytest
import typer.main
from helpers.paths import FIXTURES, ROOT

from nsyswrap.cli import app

COMMANDS = sorted(typer.main.get_command(app).commands)


@pytest.mark.parametrize("command", COMMANDS)
def test_help(cli, command):
    code, out, _ = cli(command, "--help")
    assert code == 0 and "Usage" in out
    assert cli(command, "-h")[0] == 0


@pytest.mark.parametrize("command", COMMANDS)
def test_manual_mentions_command(command):
    assert f"nsyswrap {command}" in (ROOT / "docs" / "command-line.md").read_text()


def test_list(cli):
    code, out, _ = cli("list", "-f", "csv")
    assert code == 0 and "kernels.summary" in out


def test_query_formats(cli, tmp_path):
    report = FIXTURES / "run2"
    code, out, _ = cli("query", "kernels.summary", report, "-f", "json")
    rows = json.loads(out)
    assert code == 0 and rows and {"rank", "name", "total_ns"} <= set(rows[0])
    code, out, _ = cli(
        "query", "kernels.summary", report, "-f", "csv", "-p", "min_dur_ns=1000000000000"
    )
    assert code == 0 and out.strip() == "rank,pid,kind,name,count,total_ns,avg_ns,min_ns,max_ns"
    target = tmp_path / "k.parquet"
    assert cli("query", "kernels.summary", report, "-f", "parquet", "-o", target)[0] == 0
    assert target.stat().st_size > 0


def test_sql_with_bound_parameter(cli):
    code, out, _ = cli(
        "sql",
        "SELECT count(*) AS n FROM kernels WHERE dur_ns > $d",
        FIXTURES / "run2",
        "-p",
        "d=0",
        "-f",
        "csv",
    )
    assert code == 0 and out.startswith("n\n")


def test_views(cli):
    code, out, _ = cli("views", "-f", "csv")
    assert code == 0 and "kernels,kind," in out
