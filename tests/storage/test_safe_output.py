"""An input is never an output (nsyswrap.storage.safe_output): every command that writes a file
refuses, `--force` or not, an output that is one of its inputs, however it is named (the
path itself, `./` or `..` forms, a symbolic link, a hard link, a file of an input
directory or glob, the manifest read beside a report); `--force` overwrites only files
that are no report, and files the command itself wrote before."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from helpers.bad_input import assert_one_line_error
from helpers.paths import FIXTURES

RUN2 = FIXTURES / "run2"


@pytest.fixture
def run(tmp_path) -> Path:
    """A copy of fixtures/run2 in tmp_path/run, with the manifest a launch would write."""
    folder = Path(shutil.copytree(RUN2, tmp_path / "run"))
    (folder / "manifest.json").write_text('{"ranks": []}')
    return folder


# each: (what names the output, given the run directory) -> the output path
FORMS = {
    "itself": lambda run: run / "rank0.sqlite",
    "dot-dot": lambda run: run / ".." / run.name / "rank1.sqlite",
    "symlink": lambda run: _link(run, os.symlink, "rank0.sqlite"),
    "hard-link": lambda run: _link(run, os.link, "rank1.sqlite"),
    "symlink-to-dir": lambda run: _dir_link(run) / "rank0.sqlite",
    "manifest": lambda run: run / "manifest.json",
}
# each: the command's arguments, given the run directory and the output
COMMANDS = {
    "report -o": lambda run, out: ["report", run, "-o", out],
    "report --html": lambda run, out: ["report", run / "rank*.sqlite", "--html", out],
    "report -f json -o": lambda run, out: ["report", run, "-f", "json", "-o", out],
    "sql -o": lambda run, out: ["sql", "SELECT 1 AS one", run, "-f", "csv", "-o", out],
    "query -o": lambda run, out: ["query", "kernels.summary", run, "-f", "parquet", "-o", out],
    "timeline -o": lambda run, out: ["timeline", run, "-o", out],
    "diff -o": lambda run, out: ["diff", run / "rank0.sqlite", run / "rank1.sqlite", "-o", out],
    "diff --html": lambda run, out: ["diff", run, run, "--html", out],
    "plan -o": lambda run, out: ["plan", f"{run}/*", "-o", out],
}


def _link(run: Path, how, target: str) -> Path:
    link = run.parent / f"link-to-{target}"
    how(run / target, link)
    return link


def _dir_link(run: Path) -> Path:
    link = run.parent / "the-run"
    link.symlink_to(run, target_is_directory=True)
    return link


def _contents(run: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(run.iterdir())}


@pytest.mark.parametrize("force", [[], ["--force"]], ids=["", "force"])
@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("command", COMMANDS)
def test_an_input_is_never_an_output(cli, run, command, form, force):
    before = _contents(run)
    output = FORMS[form](run)
    if form == "manifest" and command.startswith("diff"):
        output = run / "rank0.sqlite"  # (diff reads no manifest beside a report it is given)
    result = cli(*COMMANDS[command](run, output), *force)
    assert_one_line_error(result, "is one of the inputs")
    assert _contents(run) == before


@pytest.mark.parametrize("name", ["rank7.sqlite", "summary.json"])
def test_a_name_an_input_glob_would_read_is_refused(cli, run, name):
    result = cli("report", f"{run}/*", "-o", run / name)
    assert_one_line_error(result, "would be read as an input")
    assert not (run / name).exists()


def test_a_report_is_never_overwritten_even_forced(cli, run, tmp_path):
    """A report that is not an input of this command is still a report: --force does not
    replace it (a SQLite file, a capture, a sample file)."""
    others = {
        "other.sqlite": (RUN2 / "rank1.sqlite").read_bytes(),
        "vm.rank0.nsys-rep": b"not really, but a capture by its name",
        "samples.rank0.jsonl": b'{"v": 1, "kind": "run"}\n',
    }
    for name, data in others.items():
        (tmp_path / name).write_bytes(data)
        result = cli(
            "sql", "SELECT 1 AS one", run / "rank0.sqlite", "-o", tmp_path / name, "--force"
        )
        assert_one_line_error(result, "which is never overwritten (--force or not)")
        assert (tmp_path / name).read_bytes() == data


def test_force_overwrites_what_is_no_report(cli, run, tmp_path):
    out = tmp_path / "kernels.csv"
    assert cli("query", "kernels.summary", run, "-f", "csv", "-o", out)[0] == 0
    first = out.read_bytes()
    assert_one_line_error(cli("query", "kernels.summary", run, "-f", "csv", "-o", out), "--force")
    out.write_text("stale")
    assert cli("query", "kernels.summary", run, "-f", "csv", "-o", out, "--force")[0] == 0
    assert out.read_bytes() == first


@pytest.mark.parametrize("device", ["/dev/null", "/dev/full"])
@pytest.mark.parametrize(
    "command",
    [
        lambda run, out: ["sql", "SELECT 1 AS one", run / "rank0.sqlite", "-o", out],
        lambda run, out: ["report", run / "rank0.sqlite", "--html", out],
        lambda run, out: ["timeline", run, "-o", out, "--force"],
    ],
    ids=["sql -o", "report --html", "timeline -o --force"],
)
def test_a_character_device_is_written_not_refused(cli, run, device, command):
    """/dev/null takes the output; /dev/full says there is no space (never "already
    exists")."""
    code, out, err = cli(*command(run, Path(device)))
    if device == "/dev/null":
        assert code == 0 and "Error" not in err, err
    else:
        line = assert_one_line_error((code, out, err), "no space is left")
        assert line.startswith(f"Error: {device}: ")


LIST = "SELECT [1, NULL] AS l"
WRITERS = {
    "query -f csv": lambda run, out: ["query", "kernels.summary", run, "-f", "csv", "-o", out],
    "query -f parquet": lambda run, out: ["query", "gaps.idle", run, "-f", "parquet", "-o", out],
    "sql -f parquet": lambda run, out: ["sql", LIST, run, "-f", "parquet", "-o", out],
    "sql -f json": lambda run, out: ["sql", "SELECT 1 AS one", run, "-f", "json", "-o", out],
    "report -f json": lambda run, out: ["report", run, "-f", "json", "-o", out],
}


@pytest.mark.parametrize("target", ["/dev/full", "/dev/null", "a file"])
@pytest.mark.parametrize("command", WRITERS)
def test_a_link_is_written_through_never_replaced(cli, run, tmp_path, command, target):
    """An output that is a symbolic link (to a device, to a file) is written through it:
    never replaced by a new file, and a failed write never removes it (DuckDB's COPY
    renamed a temporary file over the output, pyarrow removed a path it failed to write:
    as root, /dev/null or /dev/full itself)."""
    aim = tmp_path / "kept.out" if target == "a file" else Path(target)
    if target == "a file":
        aim.touch()
    out = tmp_path / "out.link"
    out.symlink_to(aim)
    code, _, err = cli(*WRITERS[command](run / "rank0.sqlite", out), "--force")
    assert out.is_symlink() and os.readlink(out) == str(aim)
    if target == "/dev/full":
        line = assert_one_line_error((code, "", err), "no space is left on its device")
        assert line.startswith(f"Error: {out}: ") and "write the output elsewhere" in line
    else:
        assert code == 0 and "Error" not in err, err
    if target == "a file":
        assert aim.stat().st_size > 0


def test_generate_force_replaces_only_what_it_wrote(cli, tmp_path):
    out = tmp_path / "gen"
    assert cli("generate", "run2", out, "--steps", "2")[0] == 0
    scenario = out / "truth.json"
    # the truth file as the scenario: both the input and an output
    assert_one_line_error(cli("generate", scenario, out, "--force"), "is one of the inputs")
    stranger = out / "rank9.sqlite"  # not listed by truth.json: not written by generate
    shutil.copy(RUN2 / "rank0.sqlite", stranger)
    assert_one_line_error(cli("generate", "run2", out, "--force"), "generate did not write it")
    stranger.unlink()
    assert cli("generate", "run2", out, "--force", "--steps", "3")[0] == 0


def test_export_never_replaces_its_capture(standin, cli, tmp_path):
    """An export that is the capture itself (a link to it) is refused, --force or not."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "vm.rank0.nsys-rep").write_bytes(b"capture")
    os.link(run / "vm.rank0.nsys-rep", run / "vm.rank0.sqlite")
    assert_one_line_error(cli("export", run, "--force"), "is one of the inputs")
    assert cli("export", run)[0] == 0  # (without --force an export that exists is kept)
    assert (run / "vm.rank0.nsys-rep").read_bytes() == b"capture" and not standin.calls("export")
