"""Bad paths and outputs: one `Error: <file>: <problem>; <fix>` line, exit code 1, no
traceback, checked before any analysis. Permission cases run the real CLI in a process
without the right to bypass file permissions (as root: DAC capabilities dropped)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.bad_input import REPORT, assert_one_line_error
from helpers.paths import FIXTURES, ROOT

RUN2 = FIXTURES / "run2"


BATCH = """
import contextlib, io, json, os, sys
from nsyswrap.cli import main
results = {}
for name, (args, env) in json.loads(sys.argv[1]).items():
    os.environ.update(env)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(args)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:  # a bug: keep its traceback for the assertion
            import traceback
            traceback.print_exc(file=err)
            code = 99
    results[name] = [code, out.getvalue(), err.getvalue()]
print(json.dumps(results))
"""


def unprivileged(
    cases: dict[str, tuple[list, dict]], env: dict | None = None
) -> dict[str, tuple[int, str, str]]:
    """`nsyswrap ARGS` for each case (argv, environment variables), in one process that file
    permissions apply to even when run as root (its DAC capabilities dropped)."""
    prefix = []
    if os.geteuid() == 0:
        if not shutil.which("setpriv"):
            pytest.skip("running as root without setpriv: permissions cannot be tested")
        prefix = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--"]
    args = {name: ([str(a) for a in argv], case_env) for name, (argv, case_env) in cases.items()}
    done = subprocess.run(
        [*prefix, sys.executable, "-c", BATCH, json.dumps(args)],
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return {
        name: tuple(result) for name, result in json.loads(done.stdout.splitlines()[-1]).items()
    }


def _permission_cases(base: Path) -> tuple[dict, list[Path]]:
    """Each case: (argv, what its error line says); and the paths to make accessible again."""
    locked: list[Path] = []

    def lock(path: Path, mode: int) -> Path:
        path.chmod(mode)
        locked.append(path)
        return path

    def folder(name: str, report: bool = False) -> Path:
        (base / name).mkdir()
        if report:
            shutil.copy(REPORT, base / name / "rank0.sqlite")
        return base / name

    (folder("out") / "out.csv").write_text("keep")
    (folder("exportrun") / "h.rank0.nsys-rep").write_text("report")
    unreadable = Path(shutil.copy(REPORT, folder("file") / "rank0.sqlite"))
    cases = {
        "unreadable-report-file": (
            ["sql", "SELECT 1", lock(unreadable, 0o000)],
            "rank0.sqlite: cannot be read (Permission denied)",
        ),
        "unreadable-run-directory": (
            ["report", lock(folder("run", report=True), 0o000)],
            "run: cannot be read (Permission denied)",
        ),
        "unsearchable-directory-above": (
            ["query", "kernels.summary", lock(folder("dir", report=True), 0o600) / "rank0.sqlite"],
            "cannot be read",
        ),
        "output-in-read-only-directory": (
            [
                "query",
                "kernels.summary",
                REPORT,
                "-f",
                "csv",
                "-o",
                lock(folder("ro"), 0o555) / "out.csv",
            ],
            "out.csv: cannot be written (Permission denied)",
        ),
        "read-only-output-with-force": (
            [
                "sql",
                "SELECT 1",
                REPORT,
                "-f",
                "csv",
                "-o",
                lock(base / "out" / "out.csv", 0o444),
                "--force",
            ],
            "out.csv: cannot be written (Permission denied)",
        ),
        "export-into-read-only-run": (
            ["export", lock(base / "exportrun", 0o555)],
            "cannot be written",
        ),
        "launch-into-read-only-directory": (
            [
                "launch",
                "--out",
                lock(folder("launch"), 0o555) / "run",
                "--",
                sys.executable,
                "-c",
                "pass",
            ],
            "cannot be written",
        ),
        "read-only-cache": (
            ["sql", "SELECT count(*) AS n FROM kernels", REPORT, "-f", "csv"],
            "cannot be used (Permission denied)",
            {"NSYSWRAP_CACHE_DIR": str(lock(folder("cache"), 0o555))},
        ),
    }
    return cases, locked


@pytest.fixture(scope="module")
def permission_results(tmp_path_factory):
    base = tmp_path_factory.mktemp("permissions")
    nsys = base / "bin" / "nsys"  # a stand-in that records it if anything but --version runs it
    nsys.parent.mkdir()
    nsys.write_text(
        f"#!{sys.executable}\nimport sys\nif sys.argv[1:] == ['--version']:\n"
        "    print('NVIDIA Nsight Systems version 2022.4.2.1')\nelse:\n"
        f"    open({str(base / 'nsys-ran')!r}, 'w').write(' '.join(sys.argv))\n"
    )
    nsys.chmod(0o755)
    cases, locked = _permission_cases(base)
    try:
        results = unprivileged(
            {name: (case[0], case[2] if len(case) > 2 else {}) for name, case in cases.items()},
            env={"PATH": f"{nsys.parent}{os.pathsep}{os.environ['PATH']}"},
        )
    finally:
        for path in locked:
            path.chmod(0o755)
    return {name: (results[name], case[1]) for name, case in cases.items()}, base


@pytest.mark.parametrize(
    "case",
    [
        "unreadable-report-file",
        "unreadable-run-directory",
        "unsearchable-directory-above",
        "output-in-read-only-directory",
        "read-only-output-with-force",
        "export-into-read-only-run",
        "launch-into-read-only-directory",
    ],
)
def test_permissions_are_checked_before_the_work(permission_results, case):
    results, base = permission_results
    result, needle = results[case]
    assert_one_line_error(result, needle)
    assert (base / "out" / "out.csv").read_text() == "keep" and not (base / "nsys-ran").exists()
    assert not (base / "exportrun" / ".export-tmp").exists()


def test_a_read_only_cache_falls_back_to_a_private_directory(permission_results):
    results, base = permission_results
    (code, out, err), needle = results["read-only-cache"]
    assert code == 0 and int(out.split()[1]) > 0 and f"cache {base / 'cache'} {needle}" in err, err
    assert not any((base / "cache").iterdir())


@pytest.mark.parametrize(
    "make, needle",
    [
        (
            lambda d: (os.symlink(d / "b", d / "a"), os.symlink(d / "a", d / "b"), d / "a")[-1],
            "is a symbolic link loop",
        ),
        (
            lambda d: (os.symlink(d / "gone.sqlite", d / "rank0.sqlite"), d / "rank0.sqlite")[-1],
            "is a broken symbolic link",
        ),
        (
            lambda d: (os.mkdir(d / "rank0.sqlite"), d / "*.sqlite")[-1],
            "is a directory inside a run directory",
        ),
        (lambda d: d / "\udcff.sqlite", "does not exist"),
    ],
    ids=["symlink-loop", "broken-symlink", "directory-named-sqlite", "non-utf8-name"],
)
def test_paths_that_lead_nowhere(cli, tmp_path, make, needle):
    assert_one_line_error(cli("sql", "SELECT 1", make(tmp_path)), needle)


@pytest.mark.parametrize(
    "pattern, needle",
    [
        ("rank(", "is not a regular expression"),
        (r"rank\d+", "has no group for the rank number"),
    ],
)
def test_bad_rank_pattern(cli, pattern, needle):
    assert_one_line_error(
        cli("sql", "SELECT 1", REPORT, "--rank-pattern", pattern),
        f"--rank-pattern {pattern}: {needle}",
    )


# --- outputs, checked before the work -------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        ["query", "kernels.summary", REPORT, "-f", "csv", "-o"],
        ["report", REPORT, "-f", "json", "-o"],
        ["report", REPORT, "--html"],
        ["timeline", REPORT, "-o"],
    ],
    ids=["query", "report", "html", "timeline"],
)
def test_output_in_a_missing_directory(cli, tmp_path, command):
    out = tmp_path / "nope" / "out.txt"
    assert_one_line_error(cli(*command, out), "does not exist")
    assert not out.parent.exists()


def test_output_that_is_a_directory(cli, tmp_path):
    assert_one_line_error(
        cli("sql", "SELECT 1", REPORT, "-f", "csv", "-o", tmp_path, "--force"), "is a directory"
    )


# --- parameters -----------------------------------------------------------------------------------


def test_a_reversed_step_window_in_query_is_the_error_of_report_steps(cli):
    assert_one_line_error(cli("report", REPORT, "--steps", "5:2"), "selects no step")
    assert_one_line_error(
        cli("query", "gaps.idle", REPORT, "-p", "step_from=5", "-p", "step_to=2"),
        "-p step_from=5 -p step_to=2: selects no step (step_to must exceed step_from)",
    )


# --- manifests, ranks and rank patterns (round 3) --------------------------------------------


@pytest.fixture
def run_dir(tmp_path) -> Path:
    folder = tmp_path / "run"
    shutil.copytree(RUN2, folder)
    return folder


@pytest.mark.parametrize(
    "ranks, needle",
    [
        (
            [{"sqlite": "rank0.sqlite", "rank": "x"}],
            "gives rank0.sqlite the rank 'x', not a whole number",
        ),
        ([{"sqlite": "rank0.sqlite", "rank": 1.5}], "the rank 1.5, not a whole number"),
        ([{"sqlite": "rank0.sqlite", "rank": True}], "the rank True, not a whole number"),
        ([{"report": "rank0.nsys-rep"}], "gives rank0.sqlite no rank"),
        (
            ["rank0.sqlite", "rank1.sqlite"],
            "entry 0 of its ranks is str 'rank0.sqlite', not an object",
        ),
        ([None], "entry 0 of its ranks is NoneType"),
        (
            [{"sqlite": "rank0.sqlite", "rank": 2**31}, {"sqlite": "rank1.sqlite", "rank": 1}],
            "has rank 2147483648 (from",
        ),
        ([{"sqlite": "rank0.sqlite", "rank": -3}], "has rank -3 (from"),
    ],
    ids=["text", "fraction", "bool", "no-rank", "strings", "null", "above-int32", "negative"],
)
def test_a_bad_manifest_entry_is_one_line(cli, run_dir, ranks, needle):
    (run_dir / "manifest.json").write_text(json.dumps({"ranks": ranks}))
    assert_one_line_error(cli("sql", "SELECT 1", run_dir), needle)


DEEP = "[" * 200_000 + "]" * 200_000  # json.loads: RecursionError, not ValueError


@pytest.mark.parametrize(
    "text",
    ['{"ranks": 7}', "[1, 2]", "not json {", '{"other": []}', DEEP, f'{{"ranks": {DEEP}}}'],
    ids=["ranks-int", "list", "not-json", "other", "nested-deep", "ranks-nested-deep"],
)
def test_a_manifest_json_that_is_no_launch_manifest_is_ignored(cli, run_dir, text):
    (run_dir / "manifest.json").write_text(text)
    code, out, err = cli("sql", "SELECT rank FROM session ORDER BY rank", run_dir, "-f", "csv")
    assert code == 0 and out.split() == ["rank", "0", "1"], err


@pytest.mark.parametrize(
    "name", ["rank2147483648.sqlite", "rank99999999999.sqlite", "rank18446744073709551616.sqlite"]
)
def test_a_rank_above_int32_in_a_file_name_is_one_line(cli, tmp_path, name):
    report = Path(shutil.copy(REPORT, tmp_path / name))
    assert_one_line_error(cli("sql", "SELECT 1", report), "outside 0 to 2,147,483,647")


@pytest.mark.parametrize(
    "pattern, found",
    [
        ("(r)ank", "'r'"),
        ("(ra)nk", "'ra'"),
        (r"(\d*)rank", "''"),
        ("(x)?rank", "None"),
        (r"(\w+)\.sqlite", "'rank0'"),
    ],
)
def test_a_rank_pattern_whose_group_finds_no_number_is_one_line(cli, pattern, found):
    assert_one_line_error(
        cli("sql", "SELECT 1", REPORT, "--rank-pattern", pattern),
        f"--rank-pattern {pattern}: finds {found} in rank0.sqlite, not a rank number",
    )


# --- special files are refused before they are opened ----------------------------------------


def _special(kind: str, path: Path) -> Path:
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "socket":
        import socket

        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(path))
        sock.close()
    else:
        os.symlink("/dev/null", path)  # a character device, by a report's name
    return path


def _no_hang(argv: list, timeout: float = 120) -> tuple[int, str, str]:
    """`nsyswrap ARGV` in a process of its own, so that a regression hangs only it."""
    done = subprocess.run(
        [sys.executable, "-m", "nsyswrap", *map(str, argv)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    return done.returncode, done.stdout, done.stderr


@pytest.mark.parametrize(
    "kind, what",
    [("fifo", "a named pipe (FIFO)"), ("socket", "a socket"), ("device", "a character device")],
)
def test_a_special_file_among_the_reports_is_refused_before_it_is_opened(tmp_path, kind, what):
    run = tmp_path / "run"
    shutil.copytree(RUN2, run)
    special = _special(kind, run / "rank2.sqlite")
    assert_one_line_error(_no_hang(["report", run]), f"rank2.sqlite: is {what}, not a report file")
    assert_one_line_error(_no_hang(["sql", "SELECT 1", special]), f"is {what}")


def test_a_fifo_as_output_or_scheduler_file_is_refused(tmp_path):
    fifo = _special("fifo", tmp_path / "out.csv")
    assert_one_line_error(
        _no_hang(["sql", "SELECT 1", REPORT, "-f", "csv", "-o", fifo, "--force"]),
        "out.csv: is a named pipe (FIFO), not a regular file",
    )
    dask = ["--engine", "dask", "--scheduler-file", fifo]
    assert_one_line_error(
        _no_hang(["sql", "SELECT 1", REPORT, *dask]), "is a named pipe (FIFO), not a scheduler file"
    )
