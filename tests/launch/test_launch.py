"""The launcher and export, with a stand-in `nsys` on PATH that records its arguments."""

from __future__ import annotations

import io
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from helpers.nsys_standin import HOST, manifest
from helpers.paths import ROOT
from rich.console import Console

from nsyswrap.annotate.ranks import env_rank, parse_ranks
from nsyswrap.errors import NsysWrapError
from nsyswrap.launch.config import LaunchConfig
from nsyswrap.launch.export import export_run
from nsyswrap.launch.nsys import nsys_argv
from nsyswrap.launch.rewrite import rewrite
from nsyswrap.launch.run import launch

WRAP = ["W", "--"]  # stands for the per-rank wrapper in rewrite tests


def script(tmp_path: Path, body: str, name: str = "train.py") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


# --- the nsys command of one rank -----------------------------------------------------------------


def test_nsys_argv_for_training():
    cfg = LaunchConfig.build(["python", "train.py"], out="/runs/a")
    assert nsys_argv(3, cfg, "node7") == [
        "nsys",
        "profile",
        "--trace=cuda,nvtx,osrt",
        "--sample=none",
        "--cpuctxsw=none",
        "--output=/runs/a/node7.rank3",
        "python",
        "train.py",
    ]


def test_nsys_argv_with_window_force_and_own_options():
    cfg = LaunchConfig.build(
        ["python", "train.py"],
        out="/runs/a",
        steps="100:110",
        every=1000,
        trace="nvtx",
        nsys_args=["--sample=process-tree", "--cuda-memory-usage=true"],
        force=True,
    )
    assert nsys_argv(0, cfg, "h") == [
        "nsys",
        "profile",
        "--trace=nvtx",
        "--cpuctxsw=none",
        "--capture-range=nvtx",
        "--nvtx-capture=capture@nsyswrap",
        "--capture-range-end=repeat",
        "--force-overwrite=true",
        "--sample=process-tree",
        "--cuda-memory-usage=true",
        "--output=/runs/a/h.rank0",
        "python",
        "train.py",
    ]
    assert cfg.annotate == ("steps",)  # a step window needs step ranges
    once = LaunchConfig.build(["python"], out="/o", steps="2:4")
    assert "--capture-range-end=stop" in nsys_argv(0, once, "h")


@pytest.mark.parametrize(
    "options, complaint",
    [
        ({}, "no training command"),
        ({"ranks": "1,x"}, "not a list of ranks"),
        ({"ranks": "3-1"}, "not a list of ranks"),
        ({"steps": "10"}, "not a step window"),
        ({"steps": "1:5", "every": 2}, "at least as long as the window"),
        ({"every": 5}, "needs a step window"),
        ({"annotate": "modules,kernels"}, "unknown kind"),
        ({"nsys_args": ["-o", "x"]}, "--name=value form"),
        ({"nsys_args": ["--output=x"]}, "report name"),
        ({"command": ["--rank", "1", "python"]}, "not an option of nsyswrap launch"),
    ],
)
def test_bad_options_are_clear_errors(options, complaint):
    command = options.pop("command", ["python", "train.py"] if options else [])
    with pytest.raises(NsysWrapError, match=complaint):
        LaunchConfig.build(command, out="/o", **options)


def test_wrapper_receives_the_same_configuration():
    cfg = LaunchConfig.build(
        ["python", "train.py", "--lr", "0.1"],
        out="/o",
        ranks="0-2,7",
        steps="5:9",
        every=100,
        trace="nvtx,osrt",
        nsys_args=["--stats=true"],
        annotate="modules",
        force=True,
        nsys="/opt/nsys",
    )
    assert LaunchConfig.from_wrapper_args(cfg.wrapper_args() + ["--", *cfg.command]) == cfg


def test_ranks_from_the_launcher_environment():
    assert env_rank({}) is None
    assert env_rank({"SLURM_PROCID": "3"}) == 3
    assert env_rank({"RANK": "5", "SLURM_PROCID": "1", "PMI_RANK": "2"}) == 5
    assert env_rank({"OMPI_COMM_WORLD_RANK": "4"}) == env_rank({"PMI_RANK": "4"}) == 4
    assert parse_ranks("0, 2-4") == {0, 2, 3, 4}


# --- where the wrapper goes -----------------------------------------------------------------------


def test_rewrite_plain_srun_and_mpirun():
    assert rewrite(["python", "train.py"], WRAP) == (["W", "--", "python", "train.py"], None)
    srun = [
        "srun",
        "-N",
        "2",
        "--ntasks=8",
        "-p",
        "gpu",
        "--exclusive",
        "python",
        "train.py",
        "-n",
        "3",
    ]
    assert rewrite(srun, WRAP) == (srun[:7] + WRAP + srun[7:], 8)
    mpirun = [
        "mpirun",
        "-np",
        "4",
        "--mca",
        "btl",
        "self",
        "-x",
        "NCCL_DEBUG",
        "python",
        "-u",
        "train.py",
    ]
    assert rewrite(mpirun, WRAP) == (mpirun[:8] + WRAP + mpirun[8:], 4)
    with pytest.raises(NsysWrapError, match="no program to run"):
        rewrite(["srun", "-N", "2", "no-such-program-here"], WRAP)


def test_rewrite_torchrun_forms(tmp_path, monkeypatch):
    pytest.importorskip("torch", reason="reading torchrun options needs torch")
    fake = tmp_path / "torchrun"  # the script's interpreter comes from torchrun's own #! line
    fake.write_text("#!/usr/bin/env python3\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("PYTHON_EXEC", raising=False)
    command, _ = rewrite(["torchrun", "train.py"], WRAP)
    assert command[-3:] == [shutil.which("python3"), "-u", "train.py"]
    monkeypatch.setenv("PYTHON_EXEC", "/opt/py/bin/python")
    assert rewrite(["torchrun", "train.py"], WRAP)[0][-3] == "/opt/py/bin/python"
    monkeypatch.delenv("PYTHON_EXEC")
    command, ranks = rewrite(
        ["torchrun", "--nproc-per-node", "2", "--nnodes=1", "train.py", "--lr", "3"], WRAP
    )
    python = command[command.index("--") + 1]
    assert (
        command
        == [
            "torchrun",
            "--nproc-per-node",
            "2",
            "--nnodes=1",
            "--no-python",
            *WRAP,
            python,
            "-u",
            "train.py",
            "--lr",
            "3",
        ]
        and ranks == 2
    )
    command, _ = rewrite(["torchrun", "--nproc_per_node=4", "-m", "pkg.train", "-m", "x"], WRAP)
    assert command[:3] == ["torchrun", "--nproc_per_node=4", "--no-python"]
    assert command[-5:] == ["-u", "-m", "pkg.train", "-m", "x"]
    command, ranks = rewrite(["torchrun", "--no-python", "--nnodes", "1:2", "./run.sh"], WRAP)
    assert (
        command == ["torchrun", "--nnodes", "1:2", "--no-python", *WRAP, "./run.sh"]
        and ranks is None
    )
    command, ranks = rewrite(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "3", "t.py"], WRAP
    )
    assert command[:6] == [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc-per-node",
        "3",
        "--no-python",
    ]
    assert ranks == 3
    command, ranks = rewrite(
        ["srun", "-N", "2", "torchrun", "--nnodes", "2", "--nproc-per-node", "4", "t.py"], WRAP
    )
    assert (
        command[:8] == ["srun", "-N", "2", "torchrun", "--nnodes", "2", "--nproc-per-node", "4"]
        and ranks == 8
    )


# --- launching ------------------------------------------------------------------------------------


def test_launch_runs_the_rank_under_nsys_and_keeps_its_exit_code(standin, tmp_path):
    train = script(
        tmp_path,
        """
        import os, sys
        print("annotate:", os.environ.get("NSYSWRAP_ANNOTATE"))
        sys.exit(3)
    """,
    )
    out = tmp_path / "run"
    cfg = LaunchConfig.build([sys.executable, str(train)], out=out, annotate="modules,steps")
    assert launch(cfg) == 3
    (call,) = standin.calls()
    assert call == [
        "profile",
        "--trace=cuda,nvtx,osrt",
        "--sample=none",
        "--cpuctxsw=none",
        f"--output={out}/{HOST}.rank0",
        sys.executable,
        str(train),
    ]
    run = manifest(out)
    assert run["status"] == "failed" and run["exit_code"] == 3 and run["hosts"] == [HOST]
    assert run["nsys"]["version"] == "2022.4.2.1" and run["command"] == [sys.executable, str(train)]
    assert (
        run["options"]["annotate"] == ["modules", "steps"] and run["started_utc"] < run["ended_utc"]
    )
    (rank,) = run["ranks"]
    assert rank["rank"] == 0 and rank["profiled"] and rank["exit_code"] == 3
    assert rank["reports"] == [f"{out}/{HOST}.rank0.nsys-rep"]
    assert (
        run["sqlite"] == [f"{out}/{HOST}.rank0.sqlite"] and (out / f"{HOST}.rank0.sqlite").exists()
    )


@pytest.mark.parametrize(
    "export, after",
    [(True, "nsyswrap report {out}"), (False, "nsyswrap export {out}, then nsyswrap report {out}")],
)
def test_launch_ends_with_the_report_as_what_comes_next(standin, tmp_path, export, after):
    """The main job after a launch is the report (#38 item 8): its last line says so."""
    train = script(tmp_path, "print('trained')\n")
    out = tmp_path / "run"
    console = Console(file=io.StringIO(), width=200)
    cfg = LaunchConfig.build([sys.executable, str(train)], out=out, export=export)
    assert launch(cfg, console) == 0
    assert console.file.getvalue().splitlines()[-1] == "next: " + after.format(out=out)


@pytest.mark.torch
def test_only_selected_ranks_run_under_nsys(standin, tmp_path):
    pytest.importorskip("torch")
    train = script(tmp_path, "import os; print('rank', os.environ['RANK'])")
    out = tmp_path / "run"
    cfg = LaunchConfig.build(["torchrun", "--nproc-per-node", "2", str(train)], out=out, ranks="1")
    assert launch(cfg) == 0
    (call,) = standin.calls()
    assert f"--output={out}/{HOST}.rank1" in call
    ranks = manifest(out)["ranks"]
    assert [(r["rank"], r["profiled"], r["exit_code"]) for r in ranks] == [
        (0, False, 0),
        (1, True, 0),
    ]


@pytest.mark.torch
def test_a_crashing_rank_keeps_the_others_and_fails_the_launch(standin, tmp_path):
    pytest.importorskip("torch")
    train = script(
        tmp_path,
        """
        import os, sys, time
        if os.environ["RANK"] == "1":
            sys.exit(7)
        time.sleep(60)
    """,
    )
    out = tmp_path / "run"
    code = launch(LaunchConfig.build(["torchrun", "--nproc-per-node", "2", str(train)], out=out))
    assert code != 0
    run = manifest(out)
    assert run["status"] == "failed"
    by_rank = {r["rank"]: r for r in run["ranks"]}
    assert by_rank[1]["exit_code"] == 7 and by_rank[1]["status"] == "failed"
    assert by_rank[0]["exit_code"] == 128 + signal.SIGTERM  # stopped by torchrun, report kept
    assert all(Path(r["reports"][0]).exists() for r in by_rank.values())
    assert sorted(p.name for p in out.glob("*.sqlite")) == [
        f"{HOST}.rank0.sqlite",
        f"{HOST}.rank1.sqlite",
    ]


def test_ctrl_c_stops_the_ranks_and_keeps_what_was_captured(standin, tmp_path):
    train = script(tmp_path, "import time\nfor _ in range(600):\n    time.sleep(0.1)\n")
    out = tmp_path / "run"
    launcher = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "nsyswrap",
            "launch",
            "--out",
            str(out),
            "--",
            sys.executable,
            str(train),
        ],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
    )
    record = out / "ranks" / f"{HOST}.rank0.json"
    deadline = time.monotonic() + 60
    while (
        not (record.exists() and "child_pid" in record.read_text()) and time.monotonic() < deadline
    ):
        time.sleep(0.2)
    time.sleep(1)
    launcher.send_signal(signal.SIGINT)
    _, err = launcher.communicate(timeout=120)
    assert launcher.returncode == 128 + signal.SIGINT, err
    run = manifest(out)
    assert run["status"] == "interrupted" and run["stopped_by"] == "SIGINT"
    (rank,) = run["ranks"]
    assert rank["exit_code"] == 128 + signal.SIGINT and Path(rank["reports"][0]).exists()


def test_nsys_dying_before_the_program_starts_is_retried(standin, tmp_path, monkeypatch):
    flaky = tmp_path / "agent.pid"
    monkeypatch.setenv("NSYS_STANDIN_FAIL_ONCE", str(flaky))
    train = script(tmp_path, f"open({str(tmp_path / 'runs.txt')!r}, 'a').write('ran\\n')")
    out = tmp_path / "run"
    assert launch(LaunchConfig.build([sys.executable, str(train)], out=out)) == 0
    assert (tmp_path / "runs.txt").read_text() == "ran\n" and len(standin.calls()) == 2
    (rank,) = manifest(out)["ranks"]
    assert rank["nsys_attempts"] == 2 and rank["exit_code"] == 0
    agent = int(flaky.read_text())
    deadline = time.monotonic() + 10
    while (
        Path(f"/proc/{agent}").exists()
        and b"Z" not in _state(agent)
        and time.monotonic() < deadline
    ):
        time.sleep(0.1)
    assert not Path(f"/proc/{agent}").exists() or b"Z" in _state(agent), (
        "the stray agent was not stopped"
    )


def test_a_program_that_fails_after_starting_is_not_run_again(standin, tmp_path):
    train = script(
        tmp_path,
        f"import sys; open({str(tmp_path / 'runs.txt')!r}, 'a').write('ran\\n'); sys.exit(5)",
    )
    out = tmp_path / "run"
    assert launch(LaunchConfig.build([sys.executable, str(train)], out=out)) == 5
    assert (tmp_path / "runs.txt").read_text() == "ran\n" and manifest(out)["ranks"][0][
        "nsys_attempts"
    ] == 1


def _state(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/stat").read_bytes().split(b")")[-1][:3]
    except OSError:
        return b"Z"


def test_missing_or_old_nsys_stops_before_anything_starts(standin, tmp_path, monkeypatch):
    out = tmp_path / "run"
    cfg = LaunchConfig.build([sys.executable, "-c", "open('ran', 'w')"], out=out)
    monkeypatch.setenv("NSYS_STANDIN_VERSION", "2019.5.1")
    with pytest.raises(NsysWrapError, match="older than 2021.1"):
        launch(cfg)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(NsysWrapError, match="nsys: was not found on PATH"):
        launch(cfg)
    assert not out.exists() and not (tmp_path / "ran").exists()


def test_an_existing_run_is_replaced_only_with_force(standin, tmp_path):
    out = tmp_path / "run"
    cfg = LaunchConfig.build([sys.executable, "-c", "pass"], out=out)
    assert launch(cfg) == 0
    with pytest.raises(NsysWrapError, match="already holds a run"):
        launch(cfg)
    forced = LaunchConfig.build([sys.executable, "-c", "pass"], out=out, force=True)
    assert launch(forced) == 0
    assert "--force-overwrite=true" in standin.calls()[-1]
    (out / "old.rank9.nsys-rep").write_text("not listed in the manifest")
    with pytest.raises(NsysWrapError, match="old.rank9.nsys-rep: is not listed in"):
        launch(forced)
    assert (out / "old.rank9.nsys-rep").read_text() == "not listed in the manifest"


def test_a_qdstrm_left_by_nsys_is_imported_or_reported(standin, tmp_path, monkeypatch):
    monkeypatch.setenv("NSYS_STANDIN_SUFFIX", ".qdstrm")
    importer = (
        tmp_path / "host-linux-x64" / "QdstrmImporter"
    )  # where nsys keeps it, beside its own folder
    importer.parent.mkdir()
    importer.write_text(
        f"#!{sys.executable}\nimport sys, shutil\n"
        "shutil.copy(sys.argv[2], sys.argv[2][:-len('.qdstrm')] + '.nsys-rep')\n"
    )
    importer.chmod(0o755)
    out = tmp_path / "run"
    assert launch(LaunchConfig.build([sys.executable, "-c", "pass"], out=out)) == 0
    assert (out / f"{HOST}.rank0.nsys-rep").exists() and (out / f"{HOST}.rank0.sqlite").exists()

    importer.write_text("#!/bin/sh\nexit 1\n")
    out2 = tmp_path / "run2"
    assert launch(LaunchConfig.build([sys.executable, "-c", "pass"], out=out2)) == 0
    (rank,) = manifest(out2)["ranks"]
    assert rank["reports"] == [] and "QdstrmImporter" in rank["note"]
    with pytest.raises(NsysWrapError, match="raw capture that was never turned into a report"):
        export_run(out2)


def test_dry_run_prints_every_rank_and_starts_nothing(cli, tmp_path):
    pytest.importorskip("torch", reason="reading torchrun options needs torch")
    out = tmp_path / "run"
    code, _, err = cli(
        "launch",
        "--dry-run",
        "--ranks",
        "1",
        "--steps",
        "2:4",
        "--out",
        out,
        "--",
        "torchrun",
        "--nproc-per-node",
        "2",
        "train.py",
        "--steps",
        "9",
    )
    assert code == 0
    lines = err.replace("\n ", " ").splitlines()
    assert lines[0].startswith("launch: torchrun --nproc-per-node 2 --no-python")
    assert lines[1].startswith("rank 0: env ") and "NSYSWRAP_ANNOTATE=steps" in lines[1]
    assert "NSYSWRAP_CAPTURE_STEPS=2:4" in lines[1] and "nsys profile" not in lines[1]
    assert "nsys profile" in lines[2] and f"--output={out}/{HOST}.rank1" in lines[2]
    assert lines[2].endswith("train.py --steps 9") and not out.exists()


def test_cli_launch_errors_are_one_line(cli):
    code, _, err = cli("launch", "--ranks", "x", "--", "python", "t.py")
    assert (
        code == 1
        and err.strip() == "Error: --ranks: 'x' is not a list of ranks; write e.g. 0,1,7 or 0-3,8"
    )


# --- export ---------------------------------------------------------------------------------------


def test_export_is_parallel_resumable_and_overwrites_only_with_force(standin, tmp_path, cli):
    run = tmp_path / "run"
    run.mkdir()
    for rank in range(3):
        (run / f"h.rank{rank}.nsys-rep").write_text("report")
    assert export_run(run, jobs=2) == [run / f"h.rank{r}.sqlite" for r in range(3)]
    assert len(standin.calls("export")) == 3
    (run / "h.rank1.sqlite").unlink()
    code, out, _ = cli("export", run)
    assert code == 0 and out.split() == [str(run / f"h.rank{r}.sqlite") for r in range(3)]
    assert len(standin.calls("export")) == 4  # only the missing one again
    export_run(run, force=True)
    assert len(standin.calls("export")) == 7 and not (run / ".export-tmp").exists()


def test_export_failures_are_clear(standin, tmp_path, monkeypatch):
    with pytest.raises(NsysWrapError, match="is not a directory"):
        export_run(tmp_path / "nope")
    with pytest.raises(NsysWrapError, match="holds no .nsys-rep reports"):
        export_run(tmp_path)
    (tmp_path / "h.rank0.nsys-rep").write_text("report")
    monkeypatch.setenv("NSYS_STANDIN_EXPORT_FAIL", "1")
    with pytest.raises(
        NsysWrapError, match="nsys export failed .1 of 1 reports.: Error: the report is damaged"
    ):
        export_run(tmp_path)
    assert not (tmp_path / "h.rank0.sqlite").exists()


def test_import_without_torch_or_nvtx():
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            textwrap.dedent("""
        import sys
        sys.modules["torch"] = sys.modules["nvtx"] = None  # importing them now fails
        import nsyswrap, nsyswrap.annotate, nsyswrap.annotate.steps, nsyswrap.launch.run
        assert "pandas" not in sys.modules and "duckdb" not in sys.modules
        nsyswrap.NsysWrapError, nsyswrap.sql
        try:
            nsyswrap.step(0)
        except nsyswrap.NsysWrapError as exc:
            print(exc)
    """),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "the nvtx package is not installed" in done.stdout
