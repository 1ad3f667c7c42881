"""The machine's limits: open files stay bounded whatever the number of reports, and the
open files limit or a disk that fills up part way is one line naming the limit and the fix;
what killed runs leave behind (cache `.build-*`, temporary `nsyswrap-spill-*`) is removed
when the next run starts."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from helpers.bad_input import assert_one_line_error
from helpers.paths import FIXTURES, ROOT

RUN = FIXTURES / "run2"
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
SYSTEM_TEMP = tempfile.gettempdir()  # before any test points tempfile elsewhere


@pytest.fixture
def short_temp():
    """A fresh temporary folder with a short path, for TMPDIR (removed after the test):
    multiprocessing's forkserver binds a socket under it, and AF_UNIX paths are at most
    107 bytes (a pytest-xdist worker's tmp_path is longer)."""
    temp = Path(tempfile.mkdtemp(prefix="nsw-", dir=SYSTEM_TEMP))
    yield temp
    shutil.rmtree(temp, ignore_errors=True)


def _python(
    code: str, *args, env: dict | None = None, timeout: float = 300
) -> tuple[int, str, str]:
    done = subprocess.run(
        [sys.executable, "-c", code, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**ENV, **(env or {})},
    )
    return done.returncode, done.stdout, done.stderr


# --- open files ---------------------------------------------------------------------------

VIEWS_UNDER_A_LIMIT = """
import resource, sys
from pathlib import Path
import duckdb
from nsyswrap.engine.connection import create_view
folder, n = Path(sys.argv[1]), int(sys.argv[2])
con = duckdb.connect()
for view in ("kernels", "session"):
    for i in range(n):
        (folder / str(i)).mkdir(exist_ok=True)
        file = folder / str(i) / f"{view}.parquet"
        con.execute(f"COPY (SELECT {i} AS x, range AS y FROM range(3)) TO '{file}'")
resource.setrlimit(resource.RLIMIT_NOFILE, (64, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
for view in ("kernels", "session"):
    files = [(i, Path(f"rank{i}.sqlite"), folder / str(i) / f"{view}.parquet") for i in range(n)]
    create_view(con, view, files)
print(con.execute("SELECT count(*), count(DISTINCT k.rank), min(k.rank), max(k.report), "
                  "bool_and(k.x = k.rank) "
                  "FROM kernels k JOIN session s USING (rank, report)").fetchall())
"""


@pytest.mark.parametrize("reports", [150, 400])
def test_views_over_many_reports_hold_few_files_open(tmp_path, reports):
    """A query over every report's views holds a few files open at a time (under a limit of
    64 open files here), not one per report and view."""
    code, out, err = _python(VIEWS_UNDER_A_LIMIT, tmp_path, reports)
    assert code == 0, err
    assert out.strip() == str(
        [(9 * reports, reports, 0, f"rank{max(range(reports), key=str)}.sqlite", True)]
    )


ONE_LIMIT = """
import os, resource, sys
import duckdb, pandas, pyarrow.parquet, adbc_driver_sqlite.dbapi  # loaded before the limit
import nsyswrap.cli, nsyswrap.engine.run
held = len(os.listdir("/proc/self/fd"))
hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
resource.setrlimit(resource.RLIMIT_NOFILE, (held + int(sys.argv[1]), hard))
nsyswrap.cli.main(sys.argv[2:])
"""


@pytest.mark.parametrize("spare", [2, 9, 17])
def test_the_open_files_limit_is_one_line_naming_it(tmp_path, spare):
    result = _python(
        ONE_LIMIT,
        spare,
        "sql",
        "SELECT count(*) FROM kernels",
        RUN,
        env={"NSYSWRAP_CACHE_DIR": str(tmp_path / "cache")},
    )
    line = assert_one_line_error(result, "open files: the limit of")
    assert "(ulimit -n) was reached; raise it, e.g. ulimit -n 4096" in line


def test_limit_errors_name_the_file_and_the_fix():
    import errno

    from nsyswrap.errors import limit_error

    duck = (
        'IO Error: Async write failed: {"exception_message":"Could not write file \\"/c/e/.build-x/'
        'v.parquet\\": No space left on device","errno":"28"}'
    )
    assert str(limit_error(Exception(duck))).startswith("/c/e: cannot be written: no space")
    assert str(limit_error(Exception(duck), "/c/e")).startswith("/c/e: cannot be written")
    assert "quota" in str(limit_error(OSError(errno.EDQUOT, "Disk quota exceeded", "/q/f")))
    assert "open files" in str(limit_error(OSError(errno.EMFILE, "Too many open files")))
    assert (
        limit_error(ValueError("no")) is None and limit_error(OSError(errno.ENOENT, "gone")) is None
    )


# --- a disk that fills up part way --------------------------------------------------------

FULL = """
import sys
import nsyswrap.storage.cache_keys
nsyswrap.storage.cache_keys.MIN_FREE_BYTES = 0  # the start-up check passes: the disk fills up later
from nsyswrap.cli import main
main(sys.argv[1:])
"""


@pytest.mark.parametrize("size", ["48k", "160k", "400k"])
def test_a_cache_that_fills_up_part_way_is_one_line(tmp_path, size):
    """A cache on a small tmpfs (mounted in a user namespace of the test's own), filling up
    while views, per-report objects or run objects are written (-j 1: the start-up check is
    lowered in this process only)."""
    if not shutil.which("unshare"):
        pytest.skip("no unshare")
    cache, out = tmp_path / "small", tmp_path / "report.json"
    cache.mkdir()
    script = (
        f"mount -t tmpfs -o size={size} tmpfs {cache} && cd {ROOT} && "
        f'exec {sys.executable} -c "$0" report {RUN} -j 1 -f json -o {out}'
    )
    try:
        done = subprocess.run(
            ["unshare", "-Urm", "sh", "-c", script, FULL],
            capture_output=True,
            text=True,
            timeout=300,
            env={**ENV, "NSYSWRAP_CACHE_DIR": str(cache / "c")},
        )
    except OSError:
        pytest.skip("unshare cannot run here")
    if "mount" in done.stderr and done.returncode != 0 and "Error:" not in done.stderr:
        pytest.skip(f"no tmpfs in a user namespace here ({done.stderr.strip()})")
    if done.returncode == 0:  # all but the stored answer fitted: the answer is whole, and a note
        assert size != "48k" and json.loads(out.read_text())["sections"], done.stderr
        return
    line = assert_one_line_error(
        (done.returncode, done.stdout, done.stderr), "cannot be written: no space"
    )
    assert str(cache / "c") in line and "NSYSWRAP_CACHE_DIR" in line and not out.exists()


# --- a temporary folder too long for the workers' socket ----------------------------------


def test_a_temporary_folder_too_long_for_the_workers_socket_works_in_one_process(
    tmp_path, short_temp
):
    """multiprocessing's forkserver binds an AF_UNIX socket (at most 107 bytes) under the
    temporary folder: with a longer TMPDIR the report works in one process and says so in
    one line (it was a traceback, 'OSError: AF_UNIX path too long'), its answer the same."""
    long_temp = short_temp / ("t" * (108 - len(str(short_temp))))
    long_temp.mkdir()
    answers = []
    for temp in (short_temp, long_temp):
        code, out, err = _python(
            "import sys, nsyswrap.cli; nsyswrap.cli.main(sys.argv[1:])",
            *("report", RUN, "-j", "2", "--format", "json"),
            env={"TMPDIR": str(temp), "NSYSWRAP_CACHE_DIR": str(tmp_path / temp.name)},
        )
        assert code == 0, err
        answers.append(json.loads(out))
    notes = [line for line in err.splitlines() if "too long a path" in line]
    assert len(notes) == 1 and "working in one process; set TMPDIR" in notes[0], err
    assert answers[0] == answers[1]


# --- leftovers of killed runs ---------------------------------------------------------------


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_work_directories_of_dead_processes_are_removed_when_a_run_starts(
    cli, cache, short_temp, monkeypatch
):
    from nsyswrap.storage.leftovers import host

    temp = short_temp
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    cli("sql", "SELECT 1", RUN)  # the store exists
    views, objects = cache / "views", cache / "objects"
    dead, alive = _dead_pid(), os.getpid()
    gone = [
        views / f".build-{host()}-{dead}-abc",
        objects / f".build-{host()}-{dead}-q",
        views / f".damaged-{host()}-{dead}-rank0-0123abcd",
        objects / f".evicted-{host()}-{dead}-ledger.devices-77aa",
        temp / f"nsyswrap-spill-{host()}-{dead}-x1",
        temp / f"nsyswrap-wal-{host()}-{dead}-x2",
        temp / f"nsyswrap-cache-{host()}-{dead}-x3",
    ]
    kept = [
        views / f".build-{host()}-{alive}-abc",
        temp / f"nsyswrap-spill-{host()}-{alive}-y",
        views / f".build-otherhost-{dead}-abc",
        temp / "nsyswrap-spill-abc",
        temp / "unrelated",
    ]
    for path in gone + kept:
        path.mkdir(parents=True)
        (path / "half.parquet").write_bytes(b"PAR1")
    tallies = [cache / f".build-{host()}-{dead}-t", cache / f".build-{host()}-{alive}-t"]
    for tally in tallies:  # the store's tally half rewritten: a file
        tally.write_text("12")
    code, _, err = cli("sql", "SELECT count(*) FROM session", RUN)
    assert code == 0, err
    assert [p for p in gone if p.exists()] == [] and not tallies[0].exists()
    assert all(p.exists() for p in kept) and tallies[1].exists()


def test_a_killed_run_leaves_nothing_once_the_next_has_started(tmp_path, generated_run, short_temp):
    """A cold report killed (kill -9, its workers with it) while it writes the cache."""
    cache, temp = tmp_path / "cache", short_temp
    env = {**ENV, "NSYSWRAP_CACHE_DIR": str(cache), "TMPDIR": str(temp)}
    from nsyswrap.synth import preset

    _, run = generated_run(preset("run2").replace(steps=30))

    child = subprocess.Popen(
        [sys.executable, "-m", "nsyswrap", "report", run],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not list(cache.rglob(".build-*")):
        time.sleep(0.05)
    os.killpg(child.pid, signal.SIGKILL)
    child.wait()
    time.sleep(1.5)  # the workers see their parent gone (processes.POLL_S) and end
    left = list(cache.rglob(".build-*")) + list(temp.glob("nsyswrap-*"))
    assert left, "the run was killed before it wrote anything"
    done = subprocess.run(
        [sys.executable, "-m", "nsyswrap", "sql", "SELECT 1", FIXTURES / "run2" / "rank0.sqlite"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert list(cache.rglob(".build-*")) == [] and list(temp.glob("nsyswrap-*")) == []


def test_a_bug_in_nsyswrap_keeps_its_traceback(cli, cache, monkeypatch):
    """The limits are recognised by what they say; any other failure is a bug and is raised
    as it is (no one-line error hides it)."""
    import nsyswrap.report.data_quality

    def broken(inputs):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(nsyswrap.report.data_quality, "data_quality_section", broken)
    with pytest.raises(ZeroDivisionError):
        cli("report", RUN)
