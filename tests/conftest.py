"""Shared test set-up: a private cache, the CLI runner and a stand-in nsys (what test modules
share beyond fixtures is in tests/helpers)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers.nsys_standin import Standin

from nsyswrap.cli import main


@pytest.fixture(autouse=True, scope="session")
def _private_cache(tmp_path_factory):
    os.environ["NSYSWRAP_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache"))


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """A fresh, empty cache directory for this test (`NSYSWRAP_CACHE_DIR`)."""
    root = tmp_path / "cache"
    monkeypatch.setenv("NSYSWRAP_CACHE_DIR", str(root))
    return root


@pytest.fixture
def cli(capsys):
    """Run `nsyswrap ARGS...` in-process; returns (exit code, stdout, stderr)."""

    def run(*args: str) -> tuple[int, str, str]:
        try:
            main([str(a) for a in args])
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        out = capsys.readouterr()
        return code, out.out, out.err

    return run


@pytest.fixture
def standin(tmp_path, monkeypatch):
    """A stand-in `nsys` first on PATH that records its arguments (helpers.nsys_standin),
    for the tests of the launcher and export."""
    fake = Standin(tmp_path)
    monkeypatch.setenv("PATH", f"{fake.bin}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("NSYS_STANDIN_LOG", str(fake.log))
    return fake
