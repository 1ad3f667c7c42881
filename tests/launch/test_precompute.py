"""`nsyswrap launch --precompute`: each rank's share computed where it was captured, so
the analysis of the whole run only reduces."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from helpers.paths import FIXTURES

from nsyswrap.engine.opener import Opener
from nsyswrap.errors import NsysWrapError
from nsyswrap.launch.config import LaunchConfig
from nsyswrap.launch.precompute import precompute
from nsyswrap.report import report


def test_after_each_rank_alone_the_run_only_reduces(tmp_path, monkeypatch):
    monkeypatch.setenv("NSYSWRAP_CACHE_DIR", str(tmp_path / "cache"))
    run = tmp_path / "run"
    shutil.copytree(FIXTURES / "run4_straggler", run)
    for path in sorted(run.glob("*.sqlite")):  # as each rank's wrapper does on its node
        precompute([path])
    work = []
    result = report([run], opener=Opener(progress=lambda done, total: work.append(done)))
    assert work == [], "nothing left to compute per report"
    monkeypatch.setenv("NSYSWRAP_CACHE_DIR", str(tmp_path / "cold"))
    assert report([run]) == result


def test_precompute_reaches_the_rank_wrapper_and_needs_the_export(tmp_path):
    cfg = LaunchConfig.build(["python", "x.py"], out=tmp_path, precompute=True)
    assert LaunchConfig.from_wrapper_args(cfg.wrapper_args() + ["--", "python", "x.py"]).precompute
    with pytest.raises(NsysWrapError, match="needs the export"):
        LaunchConfig.build(["python", "x.py"], out=tmp_path, precompute=True, export=False)


@pytest.mark.nsys
@pytest.mark.skipif(
    shutil.which("nsys") is None, reason="NVIDIA's nsys is not on PATH (bash .ci/install-nsys.sh)"
)
def test_launch_precompute_fills_the_cache(tmp_path):
    env_cache = tmp_path / "cache"
    out = tmp_path / "run"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "nsyswrap",
            "launch",
            "--precompute",
            "--trace",
            "nvtx,osrt",
            "--out",
            str(out),
            "--",
            sys.executable,
            "-c",
            "import time; time.sleep(0.3)",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NSYSWRAP_CACHE_DIR": str(env_cache)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(list(out.glob("*.sqlite"))) == 1
    entries = list((env_cache / "views").iterdir())
    assert len(entries) == 1 and (entries[0] / "session.parquet").exists()
    assert any(env_cache.glob("objects/*/rows.parquet"))  # per-report objects and results
