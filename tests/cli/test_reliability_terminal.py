"""Terminal output is safe: control characters in kernel names, NVTX texts, column names and
file names (a crafted trace) are shown escaped in tables, the report's text and error
lines; a newline never splits the one-line error. JSON stays exact (and escaped by JSON)."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from helpers.bad_input import assert_one_line_error
from helpers.paths import FIXTURES

from nsyswrap.errors import printable

REPORT = FIXTURES / "run2" / "rank0.sqlite"
CONTROL = [chr(c) for c in [*range(0x20), 0x7F, *range(0x80, 0xA0)]]

NAMES = {
    "osc-title-clear": "evil\x1b]0;pwned\x07\x1b[2Jkernel",
    "newline-and-tab": "line one\nline two\tend\r",
    "c1-csi": "k\x9b2J\x9d0;t\x9c\x85next",
    "nul-and-del": "a\x00b\x7fc",
}


def raw_control(text: str) -> list[str]:
    """The control characters in `text`, other than the newlines between lines."""
    return [c for c in text if c in CONTROL and c != "\n"]


@pytest.fixture(scope="module", params=list(NAMES), ids=list(NAMES))
def crafted(request, tmp_path_factory) -> tuple[Path, str]:
    """A report whose busiest kernel and first `fwd` NVTX range are named `name`."""
    name = NAMES[request.param]
    report = Path(shutil.copy(REPORT, tmp_path_factory.mktemp("crafted") / "rank0.sqlite"))
    con = sqlite3.connect(report)
    con.execute(
        "UPDATE StringIds SET value = ? WHERE id = (SELECT shortName "
        "FROM CUPTI_ACTIVITY_KIND_KERNEL "
        "GROUP BY shortName ORDER BY count(*) DESC LIMIT 1)",
        (name,),
    )
    con.execute(
        "UPDATE NVTX_EVENTS SET text = ? WHERE rowid = (SELECT min(rowid) FROM NVTX_EVENTS "
        "WHERE text LIKE 'fwd%')",
        (name,),
    )
    con.commit()
    con.close()
    return report, name


@pytest.mark.parametrize(
    "args",
    [
        ["report", "{r}", "--detail"],
        ["report", "{r}", "--section", "single_rank"],
        ["query", "kernels.summary", "{r}"],
        ["query", "nvtx.gpu_time_by_text", "{r}"],
        ["sql", "SELECT name, name AS other FROM kernels ORDER BY name", "{r}"],
    ],
    ids=["report-detail", "report-section", "query-kernels", "query-nvtx", "sql"],
)
def test_names_reach_the_terminal_escaped(cli, crafted, monkeypatch, args):
    monkeypatch.setenv("COLUMNS", "250")  # (wide: names are shown whole)
    report, name = crafted
    code, out, err = cli(*[str(report) if a == "{r}" else a for a in args])
    assert code == 0, err
    assert raw_control(out) == [] and raw_control(err) == []
    if args[0] != "report":  # (the report shows the NVTX text)
        assert printable(name) in out


def test_json_keeps_the_name_exactly(cli, crafted):
    report, name = crafted
    code, out, _ = cli("query", "kernels.summary", report, "-f", "json")
    assert code == 0 and name in {row["name"] for row in json.loads(out)}


@pytest.mark.parametrize("header", ["h\x1b[2J", "x\ny", "\x07bell"])
def test_column_names_are_escaped(cli, header):
    code, out, _ = cli("sql", f'SELECT 1 AS "{header}"', REPORT)
    assert code == 0 and raw_control(out) == [] and printable(header) in out


@pytest.mark.parametrize(
    "name", ["r\x1b]0;t\x07ank0.sqlite", "rank0\n.sqlite", "rank\x1b[2J0\r.sqlite"]
)
def test_file_names_are_escaped_in_the_error_line(cli, tmp_path, name):
    bad = tmp_path / name
    bad.write_bytes(b"not a database" * 20)
    line = assert_one_line_error(cli("sql", "SELECT 1", bad), "is not an SQLite database")
    assert raw_control(line) == [] and printable(str(bad)) in line


def test_file_names_are_escaped_in_the_report(cli, tmp_path):
    report = Path(shutil.copy(REPORT, tmp_path / "rank0\x1b]0;t\x07.sqlite"))
    code, out, err = cli("report", report)
    assert code == 0 and raw_control(out) == [] and "rank0\\x1b]0;t\\x07.sqlite" in out, err


# --- a terminal that cannot encode a character; file names that are not UTF-8 --------------


@pytest.mark.parametrize(
    "encoding, args",
    [
        ("ascii", ["report", FIXTURES / "run2"]),
        ("latin-1", ["report", FIXTURES / "run4_straggler", "--detail"]),
        ("ascii:strict", ["diff", FIXTURES / "run2", FIXTURES / "run2"]),
        ("ascii", ["query", "kernels.summary", FIXTURES / "run2"]),
        ("ascii", ["sql", "SELECT '× µs — ±' AS said, '漢字' AS other", REPORT]),
        ("latin-1", ["sql", "SELECT '× µs — ±' AS said, '漢字' AS other", REPORT]),
    ],
    ids=["report", "detail", "diff", "query", "sql-ascii", "sql-latin-1"],
)
def test_a_terminal_that_cannot_encode_a_character_gets_a_fallback(tmp_path, encoding, args):
    """PYTHONIOENCODING=ascii (or Latin-1): the text is written, what the encoding cannot
    hold shown in ASCII (`-`, `...`, `x`, `u`, `+/-`) or escaped; no traceback."""
    import os
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "nsyswrap", *map(str, args)],
        env={**os.environ, "PYTHONIOENCODING": encoding, "NSYSWRAP_CACHE_DIR": str(tmp_path)},
        capture_output=True,
        timeout=600,
    )
    assert done.returncode == 0 and b"Traceback" not in done.stderr, done.stderr[-3000:]
    text = done.stdout.decode(encoding.partition(":")[0])
    assert text.strip() and "\\u2026" not in text and "\\u2500" not in text
    if args[0] == "sql":
        assert "x us - +/-" in text or "× µs - ±" in text
        assert "\\u6f22\\u5b57" in text


NOT_UTF8 = [b"rank0\xff.sqlite", b"\xe9t\xe9/rank0.sqlite", b"rank0-\xc3(.sqlite"]


@pytest.mark.parametrize("name", NOT_UTF8, ids=["byte", "directory", "bad-sequence"])
@pytest.mark.parametrize("command", ["report", "report-json", "sql", "timeline", "html"])
def test_a_report_name_that_is_not_utf8(cli, cache, tmp_path, name, command):
    """A report (or its directory) named by bytes that are not UTF-8 is read; its name is
    shown with those bytes escaped (`\\xff`) in tables, JSON and messages."""
    import os

    path = os.path.join(os.fsencode(tmp_path), name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    shutil.copy(REPORT, path)
    report = os.fsdecode(path)
    args = {
        "report": ["report", report],
        "report-json": ["report", report, "-f", "json"],
        "sql": ["sql", "SELECT report, count(*) AS n FROM kernels GROUP BY 1", report, "-f", "csv"],
        "timeline": ["timeline", report, "-o", tmp_path / "trace.json"],
        "html": ["report", report, "--html", tmp_path / "page.html"],
    }[command]
    code, out, err = cli(*args)
    assert code == 0 and "Traceback" not in err, err
    escaped = os.fsencode(report).decode("utf-8", "backslashreplace")
    if command == "sql":
        assert escaped in out
    if command == "report-json":
        assert json.loads(out)["reports"][0]["path"] == escaped
