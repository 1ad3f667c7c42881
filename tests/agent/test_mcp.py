"""`nsyswrap mcp` through the MCP SDK's own client: one server process for the module,
started over stdio as an agent starts it. Every tool is listed and called on the bundled
4-rank run and a real capture, and answers as the command line does in JSON: the
report's own tables, the prebuilt queries, read-only SQL (the sandbox's cases hold
through it) and diff. Errors are one line; a run that is not one is refused."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from helpers.paths import FIXTURES, ROOT
from helpers.sql_cases import READING_SQL, SEVERAL_SQL, WRITING_SQL, case_id

from nsyswrap.agent.tools import MAX_ROWS, Tools
from nsyswrap.cli import main

pytest.importorskip("mcp", reason="nsyswrap mcp needs the mcp extra: pip install -e '.[mcp]'")

RUN4 = str(FIXTURES / "run4_straggler")
REAL = str(FIXTURES / "real" / "h200_fix_slow")
CLEAN = str(FIXTURES / "real" / "h200_fix_clean")
RUNS = [RUN4, REAL]


class Client:
    """The SDK's client session to the server, called from synchronous tests."""

    def __init__(self, portal, session):
        self.portal, self.session = portal, session

    def tools(self) -> list:
        return self.portal.call(self.session.list_tools).tools

    def call(self, tool: str, **arguments):
        """(is_error, the answer: its JSON, or the error's text)."""
        result = self.portal.call(self.session.call_tool, tool, arguments)
        text = result.content[0].text
        return result.is_error, (text if result.is_error else json.loads(text))

    def answer(self, tool: str, **arguments):
        error, answer = self.call(tool, **arguments)
        assert not error, answer
        return answer

    def error(self, tool: str, **arguments) -> str:
        error, text = self.call(tool, **arguments)
        assert error and text.startswith("Error: ") and "\n" not in text and "; " in text, text
        return text


@asynccontextmanager
async def _session(errlog):
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "nsyswrap", "mcp"],
        env={"NSYSWRAP_CACHE_DIR": os.environ["NSYSWRAP_CACHE_DIR"]},
        cwd=ROOT,
    )
    async with stdio_client(server, errlog=errlog) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            yield session


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    import anyio.from_thread

    errors = tmp_path_factory.mktemp("mcp") / "stderr.txt"
    with errors.open("w") as errlog, anyio.from_thread.start_blocking_portal() as portal:
        with portal.wrap_async_context_manager(_session(errlog)) as session:
            yield Client(portal, session)
    assert "Traceback" not in errors.read_text(), errors.read_text()


def _cli_json(*args: str):
    """What `nsyswrap ARGS --format json` prints, parsed."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            main([*args, "--format", "json"])
        except SystemExit as exc:
            assert not exc.code, exc
    return json.loads(out.getvalue())


@pytest.fixture(scope="module")
def reports():
    """`nsyswrap report RUN --format json` of each run (which stores its answer)."""
    return {run: _cli_json("report", run) for run in RUNS}


def test_every_tool_is_listed_read_only_with_its_arguments(server):
    tools = {t.name: t for t in server.tools()}
    assert list(tools) == list(Tools.NAMES)
    for tool in tools.values():
        assert tool.annotations.read_only_hint and not tool.annotations.open_world_hint
        properties = tool.input_schema["properties"]
        assert all(f"{name}:" in tool.description for name in properties), tool.name
    # what the rows mean, from the header of the SQL module behind them
    assert "gain_ns_per_step (DOUBLE): Step time saved" in tools["whatif"].description
    assert "Columns:" in tools["critical_path"].description


@pytest.mark.parametrize("run", RUNS)
def test_the_diagnosis_and_window_are_the_json_report(server, reports, run):
    report, answer = reports[run], server.answer("report_diagnosis", run=run)
    contents = answer.pop("contents")
    assert answer == {k: v for k, v in report.items() if k != "sections"}
    assert [s["id"] for s in contents] == [s["id"] for s in report["sections"]]
    assert [[t["rows"] for t in s["tables"]] for s in contents] == [
        [len(t["rows"]) for t in s["tables"]] for s in report["sections"]
    ]


@pytest.mark.parametrize("run", RUNS)
def test_every_section_and_table_is_the_json_reports(server, reports, run):
    for section in reports[run]["sections"]:
        answer = server.answer("report_section", run=run, name=section["id"], limit=MAX_ROWS)
        assert [{**t, "rows": t["rows"]} for t in section["tables"]] == [
            {k: v for k, v in t.items() if k not in ("columns", "offset", "rows_total")}
            for t in answer.pop("tables")
        ]
        assert answer == {k: v for k, v in section.items() if k != "tables"}
        for table in section["tables"]:
            name = f"{section['id']}/{table['id']}"
            answer = server.answer("report_section", run=run, name=name, limit=MAX_ROWS)
            assert answer["section"] == section["id"] and answer["title"] == table["title"]
            assert answer["rows"] == table["rows"][:MAX_ROWS]
            assert answer["rows_total"] == len(table["rows"])
            units = {c["name"]: c["unit"] or "" for c in answer["columns"]}
            for row in table["rows"]:
                for name, cell in row.items():
                    assert not isinstance(cell, dict) or cell["unit"] in units[name].split(", ")


def test_a_long_table_comes_in_pages_that_say_how_many_rows(server, reports):
    rows = next(t for s in reports[RUN4]["sections"] for t in s["tables"] if t["id"] == "steps")
    rows = rows["rows"]
    pages, offset = [], 0
    while offset < len(rows):
        page = server.answer("report_section", run=RUN4, name="steps", limit=7, offset=offset)
        assert page["rows_total"] == len(rows) and len(page["rows"]) <= 7
        assert ("more" in page) == (offset + 7 < len(rows))
        pages += page["rows"]
        offset += 7
    assert pages == rows


@pytest.mark.parametrize("run", RUNS)
def test_whatif_and_critical_path_are_the_reports_rows(server, reports, run):
    def table(name):
        return next(t for s in reports[run]["sections"] for t in s["tables"] if t["id"] == name)

    whatif = table("whatif")["rows"]
    assert server.answer("whatif", run=run, limit=MAX_ROWS)["rows"] == whatif
    for row in whatif:
        given = {k: row[k] for k in ("kind", "rank", "phase", "op") if row.get(k) is not None}
        answer = server.answer("whatif", run=run, limit=MAX_ROWS, **given)
        assert row in answer["rows"]
        assert answer["rows"] == [r for r in whatif if all(r[k] == v for k, v in given.items())]
    path = table("critical_path")["rows"]
    for step in sorted({r["step"] for r in path if r["step"] is not None}, key=str):
        answer = server.answer("critical_path", run=run, step=step, limit=MAX_ROWS)
        assert answer["rows"] == [r for r in path if r["step"] == step]
    assert "no row of whatif has rank=99" in server.answer("whatif", run=run, rank=99)["note"]
    missing = server.error("whatif", run=run, link="0-1") if "link" not in whatif[0] else ""
    assert not missing or "has no column link" in missing


@pytest.mark.parametrize("run", RUNS)
def test_prebuilt_queries_answer_as_nsyswrap_query(server, run):
    catalog = server.answer("list_queries")["queries"]
    assert [q["name"] for q in catalog] == [r["name"] for r in _cli_json("list")]
    header = server.answer("describe_query", name="kernels.summary")
    assert "min_dur_ns" in [p["name"] for p in header["params"]]
    assert all(c["doc"] for c in header["columns"])
    for name, params in [("kernels.summary", {"min_dur_ns": "1000"}), ("crossrank.stragglers", {})]:
        answer = server.answer("run_query", run=run, name=name, params=params, limit=MAX_ROWS)
        flags = [a for k, v in params.items() for a in ("-p", f"{k}={v}")]
        expected = _cli_json("query", name, run, *flags)
        assert answer["rows"] == expected[:MAX_ROWS] and answer["rows_total"] == len(expected)
        assert [c["name"] for c in answer["columns"]] == list(expected[0])


@pytest.mark.parametrize("run", RUNS)
def test_sql_answers_as_nsyswrap_sql_in_pages(server, run):
    assert server.answer("list_views")["columns"] == _cli_json("views")
    text = "SELECT rank, name, dur_ns FROM kernels WHERE dur_ns > $least ORDER BY rank, start_ns"
    expected = _cli_json("sql", text, run, "-p", "least=1000")
    answer = server.answer(
        "run_sql", run=run, sql=text, params={"least": "1000"}, limit=5, offset=3
    )
    assert answer["rows"] == expected[3:8] and answer["rows_total"] == len(expected)
    assert answer["more"].endswith("offset=8 for the next")


def test_diff_answers_as_nsyswrap_diff(server):
    expected = _cli_json("diff", CLEAN, REAL)
    answer = server.answer("diff", base=CLEAN, new=REAL, limit=MAX_ROWS)
    totals = answer.pop("rows_total")
    assert answer.pop("offset") == 0
    assert answer == {k: v[:MAX_ROWS] if isinstance(v, list) else v for k, v in expected.items()}
    assert totals["figures"] == len(expected["figures"])
    again = server.answer("diff", base=CLEAN, new=REAL, limit=2, offset=1)
    assert again["figures"] == expected["figures"][1:3]


def test_check_claims_answers_as_the_command(server, tmp_path):
    text = tmp_path / "answer.txt"
    text.write_text("Rank 2 is the straggler: fixing it saves 0.37 ms per step; rank 9 waits.")
    answer = server.answer("check_claims", run=RUN4, text=text.read_text())
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exit_code:
        main(["check-claims", RUN4, str(text), "--format", "json"])
    assert exit_code.value.code == 3 and answer == json.loads(out.getvalue())
    assert [c["held"] for c in answer["claims"]] == [True, True, False]


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """A copy of a report, its views in the cache."""
    report = tmp_path_factory.mktemp("sandbox") / "rank0.sqlite"
    shutil.copy(FIXTURES / "run2" / "rank0.sqlite", report)
    _cli_json("sql", "SELECT count(*) AS n FROM kernels", str(report))
    return report


@pytest.mark.parametrize("text, kind", WRITING_SQL, ids=case_id)
def test_sql_that_writes_or_fetches_is_refused(server, report, tmp_path, text, kind):
    from nsyswrap.storage.cache_keys import cache_root

    def files(root: Path) -> dict:
        return {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}

    before, cache = report.read_bytes(), files(cache_root())
    sql = text.format(report=report, cache=cache_root(), tmp=tmp_path)
    error = server.error("run_sql", run=str(report), sql=sql)
    assert f"is a {kind} statement, not a read-only query" in error
    assert report.read_bytes() == before and files(cache_root()) == cache
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("text", SEVERAL_SQL)
def test_more_than_one_statement_is_refused(server, report, text):
    assert "holds 2 statements, not one" in server.error("run_sql", run=str(report), sql=text)


@pytest.mark.parametrize("text", READING_SQL)
def test_read_only_statements_run(server, report, text):
    assert server.answer("run_sql", run=str(report), sql=text)["rows"]


def test_nothing_is_fetched(server, report):
    error = server.error("run_sql", run=str(report), sql="FROM read_csv('https://x.invalid/a')")
    assert error.startswith("Error: query: ")


def test_bad_input_is_one_line_and_a_run_that_is_none_is_refused(server, tmp_path):
    not_a_report = tmp_path / "rank0.sqlite"
    not_a_report.write_text("no SQLite here\n")
    assert "does not exist" in server.error("report_diagnosis", run=str(tmp_path / "none"))
    assert str(not_a_report) in server.error("report_diagnosis", run=str(not_a_report))
    assert str(not_a_report) in server.error("run_sql", run=str(not_a_report), sql="SELECT 1")
    docs = str(ROOT / "docs")
    assert "holds no .sqlite reports" in server.error("run_query", run=docs, name="kernels.summary")
    assert "is not a prebuilt query" in server.error("describe_query", name="kernels.nope")
    assert "is no section or table" in server.error("report_section", run=RUN4, name="nope")
    assert "is not FROM:TO" in server.error("report_diagnosis", run=RUN4, steps="x")
    assert "is no page of rows" in server.error("run_sql", run=RUN4, sql="SELECT 1", limit=10**6)
    assert "arguments do not fit" in server.error("report_diagnosis", run=3)
    assert "has no parameter" in server.error(
        "run_query", run=RUN4, name="kernels.summary", params={"nope": 1}
    )


def test_without_the_extra_mcp_says_how_to_install_it():
    probe = "import sys; sys.modules['mcp'] = None; from nsyswrap.cli import main; main(['mcp'])"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 1 and not done.stdout and done.stderr.count("\n") == 1
    assert done.stderr.startswith("Error: ") and "pip install 'nsyswrap[mcp]'" in done.stderr
