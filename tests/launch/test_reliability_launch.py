"""launch and export under faults: nothing of the user's is deleted, a stuck nsys is stopped
and said so, a run that cannot be written is refused before anything starts."""

from __future__ import annotations

import os
import sys
import time

import pytest
from helpers.bad_input import assert_one_line_error
from helpers.nsys_standin import HOST, manifest

from nsyswrap.errors import NsysWrapError
from nsyswrap.launch.config import LaunchConfig
from nsyswrap.launch.export import export_run
from nsyswrap.launch.run import launch

FIXTURE = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "run2", "rank0.sqlite")


def test_force_never_deletes_a_directory_that_is_not_a_run(standin, tmp_path, cli):
    out = tmp_path / "d"
    out.mkdir()
    important = out / "important.sqlite"
    important.write_bytes(open(FIXTURE, "rb").read())
    result = cli(
        "launch", "--out", out, "--force", "--no-export", "--", sys.executable, "-c", "pass"
    )
    assert_one_line_error(result, "is not a run nsyswrap launch wrote")
    assert important.read_bytes() == open(FIXTURE, "rb").read() and not standin.calls()


@pytest.mark.parametrize(
    "text",
    ["[" * 200_000 + "]" * 200_000, '{"nsyswrap_version": ' + "[" * 200_000 + "]" * 200_000],
    ids=["list", "object"],  # the text as id: $PYTEST_CURRENT_TEST too long for exec (E2BIG)
)
def test_force_over_a_manifest_nested_too_deep_is_one_line(standin, tmp_path, cli, text):
    """A manifest.json that cannot be read (nested too deep: a RecursionError, not a
    ValueError) is no run launch wrote: refused in one line, nothing deleted."""
    out = tmp_path / "d"
    out.mkdir()
    (out / "manifest.json").write_text(text)
    (out / "rank0.sqlite").write_bytes(open(FIXTURE, "rb").read())
    result = cli("launch", "--out", out, "--force", "--no-export", "--", sys.executable, "-c", "")
    assert_one_line_error(result, "is not a run nsyswrap launch wrote")
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json", "rank0.sqlite"]


def test_force_replaces_exactly_the_files_of_the_previous_run(standin, tmp_path):
    out = tmp_path / "run"
    cfg = LaunchConfig.build([sys.executable, "-c", "pass"], out=out, force=True)
    assert launch(cfg) == 0
    before = sorted(p.name for p in out.iterdir())
    (out / "notes.txt").write_text("mine")  # not a report: kept, and not in the way
    assert launch(cfg) == 0
    assert sorted(p.name for p in out.iterdir()) == sorted(before + ["notes.txt"])
    assert (out / "notes.txt").read_text() == "mine"


def test_a_manifest_cannot_point_outside_its_run(standin, tmp_path):
    out = tmp_path / "run"
    cfg = LaunchConfig.build([sys.executable, "-c", "pass"], out=out, force=True)
    assert launch(cfg) == 0
    victim = tmp_path / "victim.sqlite"
    victim.write_text("keep")
    data = manifest(out)
    data["sqlite"].append(str(victim))
    data["ranks"][0]["reports"].append("../victim.nsys-rep")
    (out / "manifest.json").write_text(__import__("json").dumps(data))
    assert launch(cfg) == 0
    assert victim.read_text() == "keep"


def test_a_stuck_nsys_profile_is_stopped_and_reported(standin, tmp_path, monkeypatch, capfd):
    monkeypatch.setenv("NSYS_STANDIN_HANG", "1")
    monkeypatch.setenv("NSYSWRAP_NSYS_STALL_S", "1")
    out = tmp_path / "run"
    started = time.monotonic()
    code = launch(LaunchConfig.build([sys.executable, "-c", "pass"], out=out, export=False))
    assert time.monotonic() - started < 60 and code != 0
    (rank,) = manifest(out)["ranks"]
    assert rank["status"] == "stuck" and "made no progress for 1 s" in rank["note"]
    assert rank["reports"] == [f"{out}/{HOST}.rank0.nsys-rep"]  # what it wrote is kept
    assert "made no progress" in capfd.readouterr().err


def test_a_stuck_nsys_export_is_stopped_and_the_rest_kept(standin, tmp_path, monkeypatch):
    (tmp_path / "h.rank0.nsys-rep").write_text("report")
    monkeypatch.setenv("NSYS_STANDIN_EXPORT_HANG", "1")
    monkeypatch.setenv("NSYSWRAP_NSYS_STALL_S", "1")
    started = time.monotonic()
    with pytest.raises(NsysWrapError, match="nsys export made no progress for 1 s and was stopped"):
        export_run(tmp_path)
    assert time.monotonic() - started < 30
    assert (tmp_path / "h.rank0.nsys-rep").read_text() == "report"


# --- rank selections of any size (round 3) --------------------------------------------------


@pytest.mark.parametrize(
    "ranks, needle",
    [
        ("0-1000000000", "selects 1,000,000,001 ranks"),
        ("0-70000,80000", "selects 70,002 ranks"),
        ("3,5-2147483648", "names a rank above 2,147,483,647"),
        ("99999999999999999999", "names a rank above"),
    ],
)
def test_a_huge_rank_selection_is_one_line(cli, tmp_path, ranks, needle):
    result = cli(
        "launch", "--ranks", ranks, "--out", tmp_path / "run", "--", sys.executable, "-c", "pass"
    )
    assert_one_line_error(result, needle)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "ranks, passed",
    [("0-29999", "0-29999"), ("5,1,3,2", "1-3,5"), ("0-9999,10000-20000,7", "0-20000")],
)
def test_a_large_rank_selection_reaches_every_rank_as_ranges(standin, tmp_path, ranks, passed):  # noqa: F811
    out = tmp_path / "run"
    cfg = LaunchConfig.build([sys.executable, "-c", "pass"], out=out, ranks=ranks, export=False)
    args = cfg.wrapper_args()
    assert args[args.index("--ranks") + 1] == passed
    assert LaunchConfig.from_wrapper_args([*args, "--", "x"]).ranks == cfg.ranks
    assert launch(cfg) == 0
    data = manifest(out)
    assert data["status"] == "ok" and len(data["options"]["ranks"]) == len(cfg.ranks)
    assert [r["status"] for r in data["ranks"]] == ["ok"]


def test_a_launcher_that_cannot_start_leaves_the_manifest_failed(standin, tmp_path):  # noqa: F811
    out = tmp_path / "run"
    too_long = "x" * 300_000  # one argument over Linux's limit (128 KiB): "Argument list too long"
    cfg = LaunchConfig.build([sys.executable, "-c", "pass", too_long], out=out, export=False)
    with pytest.raises(NsysWrapError, match="cannot be started"):
        launch(cfg)
    data = manifest(out)
    assert data["status"] == "failed" and "cannot be started" in data["note"]
    assert "ended_utc" in data


def test_nsys_removed_during_export_is_one_line(tmp_path, monkeypatch):
    """nsys answers `--version` and `help`, then is gone when the export starts."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    nsys = bin_dir / "nsys"
    nsys.write_text(
        f"#!{sys.executable}\nimport os, sys\n"
        "if sys.argv[1:] == ['--version']:\n"
        "    print('NVIDIA Nsight Systems version 2024.6.2')\n"
        "else:\n    os.remove(sys.argv[0])\n"
    )
    nsys.chmod(0o755)
    run = tmp_path / "run"
    run.mkdir()
    for rank in range(2):
        (run / f"h.rank{rank}.nsys-rep").write_text("report")
    with pytest.raises(NsysWrapError) as caught:
        export_run(run, nsys=str(nsys))
    message = str(caught.value)
    assert "nsys export failed (2 of 2 reports)" in message and "cannot be started" in message
    assert "\n" not in message and not list(run.glob("*.sqlite"))


@pytest.mark.parametrize("listed", [".", "", "..", "ranks", "./", "/"])
@pytest.mark.parametrize("field", ["sqlite", "samples", "reports"])
def test_force_with_a_manifest_naming_the_run_itself(standin, tmp_path, cli, listed, field):
    """A hand-edited manifest listing `.`, `""`, `..` or a folder among the run's files:
    launch --force replaces the run's own files and nothing else (no traceback, the
    directory and what is beside it kept)."""
    import json

    out = tmp_path / "run"
    command = ["--", sys.executable, "-c", "pass"]
    assert cli("launch", "--out", out, "--no-export", *command)[0] == 0
    data = json.loads((out / "manifest.json").read_text())
    if field == "reports":
        data["ranks"][0]["reports"].append(listed)
    else:
        data[field] = [*(data.get(field) or []), listed]
    (out / "manifest.json").write_text(json.dumps(data))
    (tmp_path / "beside.txt").write_text("keep")
    code, _, err = cli("launch", "--out", out, "--force", "--no-export", *command)
    assert code == 0 and "Traceback" not in err, err
    assert out.is_dir() and (out / "manifest.json").is_file()
    assert (tmp_path / "beside.txt").read_text() == "keep"


def test_force_never_deletes_a_file_the_training_command_names(standin, tmp_path, cli):
    """A manifest edited to list the training script (in the run directory): launch
    --force refuses to delete it."""
    import json

    out = tmp_path / "run"
    out.mkdir()
    script = out / "train.py"
    script.write_text("pass\n")
    assert cli("launch", "--out", out, "--no-export", "--", sys.executable, script)[0] == 0
    data = json.loads((out / "manifest.json").read_text())
    data["sqlite"] = [*(data.get("sqlite") or []), "train.py"]
    (out / "manifest.json").write_text(json.dumps(data))
    for config in ([script], [f"--config={script}"]):
        result = cli(
            "launch", "--out", out, "--force", "--no-export", "--", sys.executable, *config
        )
        assert_one_line_error(result, "is one of the inputs")
        assert script.read_text() == "pass\n"


@pytest.mark.parametrize("terminal", [False, True])
def test_export_draws_a_bar_only_on_a_terminal(standin, tmp_path, terminal):
    import io

    from rich.console import Console

    run = tmp_path / "run"
    run.mkdir()
    for rank in range(2):
        (run / f"h.rank{rank}.nsys-rep").write_text("report")
    shown = io.StringIO()
    export_run(run, console=Console(file=shown, force_terminal=terminal, width=80))
    assert ("exporting" in shown.getvalue()) is terminal
