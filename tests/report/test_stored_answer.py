"""A report asked again is read back from `<cache>/answers/`: the same bytes, without
opening the run or loading pandas or DuckDB; anything the answer depends on (the reports,
their manifest, the options, nsyswrap's code) computes it again."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.paths import FIXTURES, ROOT

from nsyswrap.engine.opener import Opener
from nsyswrap.errors import NsysWrapError


@pytest.fixture
def run(tmp_path) -> Path:
    return Path(shutil.copytree(FIXTURES / "run2", tmp_path / "run2"))


@pytest.fixture
def opens(monkeypatch) -> list:
    """The runs opened (each call of `Opener.open`)."""
    opened, real = [], Opener.open

    def counted(self, inputs):
        opened.append(inputs)
        return real(self, inputs)

    monkeypatch.setattr(Opener, "open", counted)
    return opened


def _report(cli, *args) -> str:
    code, out, err = cli("report", *args)
    assert code == 0 and "Traceback" not in err, err
    return out


HEAVY_PROBE = """import sys
from nsyswrap.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
heavy = ("duckdb", "pandas", "pyarrow", "numpy", "rich")
print(sorted(m for m in heavy if m in sys.modules), file=sys.stderr)
"""


def test_asked_again_the_same_bytes_without_heavy_imports(cli, cache, run):
    first = _report(cli, run, "-f", "json")
    again = subprocess.run(
        [sys.executable, "-c", HEAVY_PROBE, "report", str(run), "-f", "json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "NSYSWRAP_CACHE_DIR": str(cache)},
    )
    assert again.returncode == 0 and again.stderr == "[]\n", again.stderr
    assert again.stdout == first


def test_every_view_of_the_answer_is_drawn_from_it(cli, cache, run, opens, tmp_path):
    views = [(), ("--detail",), ("--section", "steps"), ("-f", "json")]
    computed = {v: _report(cli, run, "--steps", "1:3", *v) for v in views}
    assert len(opens) == 1, "the first call stores the answer, the others read it"
    assert {v: _report(cli, run, "--steps", "1:3", *v) for v in views} == computed
    _report(cli, run, "--steps", "1:3", "-o", tmp_path / "out.json", "-f", "json")
    assert (tmp_path / "out.json").read_text() == computed[("-f", "json")]
    assert len(opens) == 1
    assert len(list((cache / "answers").glob("*/answer.json"))) == 1


def test_the_engine_and_jobs_are_not_in_the_key(cli, cache, run, opens):
    first = _report(cli, run, "-f", "json")
    assert _report(cli, run, "-f", "json", "-j", "1") == first and len(opens) == 1


def _touch(run: Path) -> None:
    report = run / "rank0.sqlite"
    os.utime(report, ns=(0, report.stat().st_mtime_ns + 10**9))


def _rewrite_same_size_and_mtime(run: Path) -> None:
    report = run / "rank1.sqlite"
    stat = report.stat()
    with sqlite3.connect(report) as con:
        con.execute(
            "UPDATE StringIds SET value = value || '' WHERE id = (SELECT min(id) FROM StringIds)"
        )
        con.execute("PRAGMA user_version = 7")  # a write SQLite counts in the header
    con.close()
    os.utime(report, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert report.stat().st_size == stat.st_size


@pytest.mark.parametrize(
    "change, args",
    [
        (_touch, ()),
        (_rewrite_same_size_and_mtime, ()),
        (lambda run: (run / "manifest.json").write_text('{"ranks": []}'), ()),
        (None, ("--steps", "1:3")),
        (None, ("--window-nvtx", "step%")),
        (None, ("--step-pattern", "step%")),
        (None, ("--rank-pattern", r"rank(\d)")),
        (None, ("--allow-unrelated",)),
    ],
    ids=[
        "touched",
        "rewritten",
        "manifest",
        "steps",
        "window-nvtx",
        "step-pattern",
        "rank-pattern",
        "allow-unrelated",
    ],
)
def test_what_the_answer_depends_on_computes_it_again(cli, cache, run, opens, change, args):
    first = _report(cli, run, "-f", "json")
    if change is not None:
        change(run)
    again = _report(cli, run, "-f", "json", *args)
    assert len(opens) == 2
    if change is None and args[0] in ("--rank-pattern", "--allow-unrelated"):
        assert again == first  # the same ranks, a run of related reports: the same answer
    assert _report(cli, run, "-f", "json", *args) == again and len(opens) == 2  # now stored


def test_other_code_computes_it_again(cli, cache, run, opens, monkeypatch):
    import nsyswrap.report.answers

    first = _report(cli, run, "-f", "json")
    monkeypatch.setattr(nsyswrap.report.answers, "code_digest", lambda: "another nsyswrap")
    assert _report(cli, run, "-f", "json") == first and len(opens) == 2


@pytest.mark.parametrize(
    "damage",
    [
        lambda answer: answer.write_bytes(answer.read_bytes()[: answer.stat().st_size // 2]),
        lambda answer: answer.write_bytes(b"\xff\xfe not json"),
        lambda answer: answer.write_text("[1, 2]"),
    ],
    ids=["truncated", "garbage", "not-a-report"],
)
def test_a_damaged_answer_is_computed_again_with_a_note(cli, cache, run, opens, damage):
    first = _report(cli, run, "-f", "json")
    (answer,) = (cache / "answers").glob("*/answer.json")
    damage(answer)
    code, out, err = cli("report", run, "-f", "json")
    assert code == 0 and out == first and len(opens) == 2
    assert (
        err == f"nsyswrap: note: stored answer {answer} was damaged; computing the report again\n"
    )
    assert cli("report", run, "-f", "json") == (0, first, "")  # healed


def test_a_cache_that_cannot_be_written_still_answers(cli, run, tmp_path, monkeypatch):
    monkeypatch.setenv("NSYSWRAP_CACHE_DIR", str(tmp_path / "cache"))
    first = _report(cli, run, "-f", "json")
    (tmp_path / "file").write_text("x")
    monkeypatch.setenv("NSYSWRAP_CACHE_DIR", str(tmp_path / "file" / "cache"))  # under a file
    code, out, err = cli("report", run, "-f", "json")
    assert code == 0 and out == first and "cannot be used" in err and "Traceback" not in err


def test_an_answer_that_cannot_be_stored_is_said_once(cli, cache, run, opens):
    cache.mkdir()
    (cache / "answers").write_text("a file where the folder goes")
    first = _report(cli, run, "-f", "json")
    code, out, err = cli("report", run, "-f", "json")
    assert code == 0 and out == first and len(opens) == 2
    assert err.startswith(f"nsyswrap: note: could not store the answer in {cache / 'answers'}")
    assert err.count("\n") == 1


def test_a_failed_report_is_not_stored(cli, cache, run, monkeypatch):
    import nsyswrap.report.flow

    def fails(run, options, with_plots=False):
        raise NsysWrapError(run.reports[0].path, "is broken", "fix it")

    monkeypatch.setattr(nsyswrap.report.flow, "build", fails)
    for _ in range(2):
        code, out, err = cli("report", run)
        assert (
            code == 1 and err.startswith("Error: ") and err.count("\n") == 1 and "is broken" in err
        )
    assert not list((cache / "answers").glob("*/answer.json"))


def test_html_opens_the_run(cli, cache, run, opens, tmp_path):
    _report(cli, run)
    _report(cli, run, "--html", tmp_path / "page.html")
    assert len(opens) == 2 and (tmp_path / "page.html").exists()


def test_html_asked_again_is_drawn_from_the_stored_answer(cli, cache, run, opens, tmp_path):
    """The page is drawn from the report's answer, its plots stored beside it: asked again,
    the same page, and the run is not opened."""
    first, again = tmp_path / "first.html", tmp_path / "again.html"
    out = _report(cli, run, "-f", "json", "--html", first)
    assert _report(cli, run, "-f", "json", "--html", again) == out
    assert len(opens) == 1 and again.read_text() == first.read_text()
    assert list((cache / "answers").glob("plots-*/plots.json"))


def test_the_library_reads_the_same_answer(cache):
    from nsyswrap.report import report

    run = FIXTURES / "run4_straggler"
    first = report([run])
    assert report([run], opener=Opener(jobs=1)) == first
    (answer,) = (cache / "answers").glob("*/answer.json")
    assert json.loads(answer.read_text()) == first
