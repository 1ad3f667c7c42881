"""launch and export under faults: nothing of the user's is deleted, a stuck nsys is stopped
and said so, a run that cannot be written is refused before anything starts."""
from __future__ import annotations

import os
import sys
import time

import pytest

from nsyswrap.errors import NsysWrapError
from nsyswrap.launch.config import LaunchConfig
from nsyswrap.launch.export import export_run
from nsyswrap.launch.run import launch
from test_launch import HOST, manifest, standin  # noqa: F401  (the stand-in nsys fixture)
from test_reliability_inputs import assert_one_line_error

FIXTURE = os.path.join(os.path.dirname(__file__), "..", "fixtures", "run2", "rank0.sqlite")


def test_force_never_deletes_a_directory_that_is_not_a_run(standin, tmp_path, cli):
    out = tmp_path / "d"
    out.mkdir()
    important = out / "important.sqlite"
    important.write_bytes(open(FIXTURE, "rb").read())
    result = cli("launch", "--out", out, "--force", "--no-export", "--", sys.executable, "-c", "pass")
    assert_one_line_error(result, "is not a run nsyswrap launch wrote")
    assert important.read_bytes() == open(FIXTURE, "rb").read() and not standin.calls()


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
