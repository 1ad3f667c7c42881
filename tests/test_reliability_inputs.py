"""Bad paths and outputs: one `Error: <file>: <problem>; <fix>` line, exit code 1, no
traceback, checked before any analysis. Permission cases run the real CLI in a process
without the right to bypass file permissions (as root: DAC capabilities dropped)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RUN2 = ROOT / "fixtures" / "run2"
REPORT = RUN2 / "rank0.sqlite"


def assert_one_line_error(result, needle: str) -> str:
    code, out, err = result
    assert "Traceback" not in err and "╭" not in err, err
    lines = [line for line in err.strip().splitlines() if not line.startswith("nsyswrap: note:")]
    assert code == 1 and len(lines) == 1, err
    assert lines[0].startswith("Error: ") and needle in lines[0] and "; " in lines[0], err
    return lines[0]


def unprivileged(*args) -> tuple[int, str, str]:
    """`nsyswrap ARGS` in a process that file permissions apply to, even when run as root."""
    prefix = []
    if os.geteuid() == 0:
        if not shutil.which("setpriv"):
            pytest.skip("running as root without setpriv: permissions cannot be tested")
        prefix = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([*prefix, sys.executable, "-m", "nsyswrap", *map(str, args)], env=env,
                          capture_output=True, text=True, timeout=120)
    return done.returncode, done.stdout, done.stderr


@pytest.fixture
def locked(tmp_path):
    """make(path, mode): chmod that is undone after the test (so tmp_path can be removed)."""
    changed = []

    def make(path: Path, mode: int) -> Path:
        path.chmod(mode)
        changed.append(path)
        return path

    yield make
    for path in changed:
        path.chmod(0o755)


# --- reports that cannot be reached or read ------------------------------------------------------

def test_unreadable_report_file(tmp_path, locked):
    report = locked(Path(shutil.copy(REPORT, tmp_path / "rank0.sqlite")), 0o000)
    assert_one_line_error(unprivileged("sql", "SELECT 1", report), "rank0.sqlite: cannot be read (Permission denied)")


def test_unreadable_run_directory(tmp_path, locked):
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(REPORT, run / "rank0.sqlite")
    locked(run, 0o000)
    assert_one_line_error(unprivileged("report", run), "run: cannot be read (Permission denied)")


def test_unsearchable_directory_above_a_report(tmp_path, locked):
    run = tmp_path / "run"
    run.mkdir()
    report = Path(shutil.copy(REPORT, run / "rank0.sqlite"))
    locked(run, 0o600)
    assert_one_line_error(unprivileged("query", "kernels.summary", report), "cannot be read")


@pytest.mark.parametrize("make, needle", [
    (lambda d: (os.symlink(d / "b", d / "a"), os.symlink(d / "a", d / "b"), d / "a")[-1], "is a symbolic link loop"),
    (lambda d: (os.symlink(d / "gone.sqlite", d / "rank0.sqlite"), d / "rank0.sqlite")[-1], "is a broken symbolic link"),
    (lambda d: (os.mkdir(d / "rank0.sqlite"), d / "*.sqlite")[-1], "is a directory inside a run directory"),
    (lambda d: d / "\udcff.sqlite", "does not exist"),
], ids=["symlink-loop", "broken-symlink", "directory-named-sqlite", "non-utf8-name"])
def test_paths_that_lead_nowhere(cli, tmp_path, make, needle):
    assert_one_line_error(cli("sql", "SELECT 1", make(tmp_path)), needle)


@pytest.mark.parametrize("pattern, needle", [
    ("rank(", "is not a regular expression"),
    (r"rank\d+", "has no group for the rank number"),
])
def test_bad_rank_pattern(cli, pattern, needle):
    assert_one_line_error(cli("sql", "SELECT 1", REPORT, "--rank-pattern", pattern), f"--rank-pattern {pattern}: {needle}")


# --- outputs, checked before the work --------------------------------------------------------------

@pytest.mark.parametrize("command", [
    ["query", "kernels.summary", REPORT, "-f", "csv", "-o"],
    ["report", REPORT, "-f", "json", "-o"],
    ["report", REPORT, "--html"],
    ["timeline", REPORT, "-o"],
], ids=["query", "report", "html", "timeline"])
def test_output_in_a_missing_directory(cli, tmp_path, command):
    out = tmp_path / "nope" / "out.txt"
    assert_one_line_error(cli(*command, out), "does not exist")
    assert not out.parent.exists()


def test_output_that_is_a_directory(cli, tmp_path):
    assert_one_line_error(cli("sql", "SELECT 1", REPORT, "-f", "csv", "-o", tmp_path, "--force"), "is a directory")


def test_output_in_a_read_only_directory(tmp_path, locked):
    folder = locked(tmp_path / "ro", 0o555) if (tmp_path / "ro").mkdir() is None else None
    assert_one_line_error(unprivileged("query", "kernels.summary", REPORT, "-f", "csv", "-o", folder / "out.csv"),
                          "out.csv: cannot be written (Permission denied)")


def test_read_only_output_file_with_force(tmp_path, locked):
    out = tmp_path / "out.csv"
    out.write_text("keep")
    locked(out, 0o444)
    assert_one_line_error(unprivileged("sql", "SELECT 1", REPORT, "-f", "csv", "-o", out, "--force"),
                          "out.csv: cannot be written (Permission denied)")
    assert out.read_text() == "keep"


# --- parameters ------------------------------------------------------------------------------------

def test_a_reversed_step_window_in_query_is_the_error_of_report_steps(cli):
    assert_one_line_error(cli("report", REPORT, "--steps", "5:2"), "selects no step")
    assert_one_line_error(cli("query", "gaps.idle", REPORT, "-p", "step_from=5", "-p", "step_to=2"),
                          "-p step_from=5 -p step_to=2: selects no step (step_to must exceed step_from)")
