"""Shared test set-up: a private cache, the CLI runner and a stand-in nsys (what test modules
share beyond fixtures is in tests/helpers)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from helpers.nsys_standin import Standin

from nsyswrap.cli import main

if TYPE_CHECKING:
    from nsyswrap.synth import Scenario, Truth


@pytest.fixture(autouse=True, scope="session")
def _private_cache(tmp_path_factory):
    os.environ["NSYSWRAP_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache"))


@pytest.fixture(scope="session")
def generated_run(tmp_path_factory):
    """`generated_run(scenario)`: the run nsyswrap.synth writes for `scenario` (a Scenario,
    or a preset's name), as (truth, its directory), generated once per test session under
    pytest's base temporary directory, so that its reports are normalised once too (the
    cache keys a report by path, size and mtime). Shared: a test that changes the run
    generates its own."""
    from nsyswrap.synth import generate_run, preset

    made: dict[str, tuple[Truth, Path]] = {}

    def generated(scenario: Scenario | str) -> tuple[Truth, Path]:
        if isinstance(scenario, str):
            scenario = preset(scenario)
        key = hashlib.sha256(repr(scenario).encode()).hexdigest()[:16]
        if key not in made:
            out = tmp_path_factory.getbasetemp() / "generated" / f"{scenario.name}-{key}"
            made[key] = generate_run(scenario, out), out
        return made[key]

    return generated


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
