"""Shared test set-up: a private cache, the CLI runner and a stand-in nsys (what test modules
share beyond fixtures is in tests/helpers)."""

from __future__ import annotations

import fcntl
import hashlib
import os
import pickle
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from helpers.nsys_standin import Standin
from helpers.properties import load_profiles

from nsyswrap.cli import main

if TYPE_CHECKING:
    from nsyswrap.synth import Scenario, Truth

load_profiles()  # hypothesis: $HYPOTHESIS_PROFILE, dev or ci


@pytest.fixture(autouse=True, scope="session")
def _private_cache(tmp_path_factory):
    os.environ["NSYSWRAP_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache"))


@pytest.fixture(scope="session")
def session_root(tmp_path_factory) -> Path:
    """The test session's base temporary folder, the same for every pytest-xdist worker
    (each worker's own base is a folder inside it)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@contextmanager
def _held(lock: Path):
    """An exclusive lock on the file `lock`, held by one process of the session at a time."""
    lock.parent.mkdir(parents=True, exist_ok=True)
    with lock.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


_WRITTEN: dict[Path, object] = {}


def _written_once(out: Path, write):
    """`write(out)`'s result, run by the first worker of the session that asks; the others
    wait for it and read the result it left (the truth, pickled) beside `out`."""
    if out not in _WRITTEN:
        done = out.with_name(out.name + ".truth.pickle")
        with _held(out.with_name(out.name + ".lock")):
            if not done.exists():
                done.write_bytes(pickle.dumps(write(out)))
        _WRITTEN[out] = pickle.loads(done.read_bytes())
    return _WRITTEN[out]


@pytest.fixture(scope="session")
def generated_run(session_root):
    """`generated_run(scenario)`: the run nsyswrap.synth writes for `scenario` (a Scenario,
    or a preset's name), as (truth, its directory), generated once per test session (once
    for all pytest-xdist workers) under pytest's base temporary directory, so that its
    reports are normalised once per worker too (the cache keys a report by its file's
    version). Shared: a test that changes the run generates its own."""
    from nsyswrap.synth import generate_run, preset

    def generated(scenario: Scenario | str) -> tuple[Truth, Path]:
        if isinstance(scenario, str):
            scenario = preset(scenario)
        key = hashlib.sha256(repr(scenario).encode()).hexdigest()[:16]
        out = session_root / "generated" / f"{scenario.name}-{key}"
        return _written_once(out, lambda folder: generate_run(scenario, folder)), out

    return generated


@pytest.fixture(scope="session")
def fault_pair(session_root):
    """`fault_pair(name, **sizes)`: the generator's fault pair `name` (nsyswrap.synth.pairs:
    `fault/` and `fixed/`), as (the pair's truth, its directory), written once per test
    session like generated_run's runs. Shared: a test that changes a half writes its own."""
    from nsyswrap.synth.pairs import write_fault_pair

    def written(name: str, **sizes) -> tuple[dict, Path]:
        key = "-".join([name, *(f"{k}{v}" for k, v in sorted(sizes.items()))])
        out = session_root / "fault_pairs" / key
        return _written_once(out, lambda folder: write_fault_pair(name, folder, **sizes)), out

    return written


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


# --- tiers ------------------------------------------------------------------------------
# Plain `pytest` runs the fast tier (pyproject.toml's addopts deselect the others);
# `pytest -m ""` runs every tier, as .ci/run does. A test's tiers follow from what it uses:
# its folder, what it needs (the `nsys` and `torch` markers), the fixtures it asks for, and,
# where every test of a module analyses reports afresh, its module (docs/development.md).
TESTS = Path(__file__).parent
FOLDERS = {"e2e": "e2e", "dask": "dask", "real": "slow"}  # tests/e2e, tests/engine/dask, tests/real
NEEDS = {"nsys": "e2e", "torch": "e2e"}
FIXTURES = {
    "standin": "e2e",  # the launcher runs programs under a stand-in nsys, in processes
    "sampled_run": "e2e",  # a 4-rank torchrun job
    "permission_results": "e2e",  # nsyswrap in a process without the right to bypass permissions
    "server": "e2e",  # `nsyswrap mcp` started over stdio, as an agent starts it
    "generated_run": "slow",  # a generated multi-rank run, analysed
    "pairs": "slow",  # the generated pairs of runs `diff` compares
    "fault_pair": "slow",  # a generated fault pair (a fault and the job without it), analysed
    "original": "slow",  # crafted copies of a bundled report, each analysed cold
    "capture": "slow",  # a real capture (fixtures/real, ../shared/nsys-sqlite), analysed
}
MODULES = {  # the modules whose every test is slow or end to end for one reason
    "test_efficiency": ("slow", "planted copies of the fixtures and the real captures"),
    "test_reliability_crafted": ("slow", "crafted copies of a fixture, each analysed cold"),
    "test_reliability_data": ("slow", "damaged copies of a fixture"),
    "test_reliability_limits": ("slow", "hundreds of reports, full disks, killed runs"),
    "test_row_order": ("slow", "shuffled copies of the fixtures, each reported twice"),
    "test_stored_answer": ("slow", "a report asked again after each change it depends on"),
    "test_per_report": ("slow", "per-report results computed and stored, in worker processes"),
    "test_stream": ("slow", "each module streamed to a file and queried again"),
    "test_step_ties": ("slow", "tied step lookups on many windows and thread counts"),
    "test_window_objects": ("slow", "stored pieces against each window computed alone"),
    "test_device_timeline": ("slow", "the device timeline against the old SQL sweep"),
    "test_whatif": ("slow", "the replay on generated runs and the real captures"),
    "test_reliability_processes": ("e2e", "real worker processes and real signals"),
    "test_reliability_cache": ("slow", "damaged, swapped and cleared caches, reports cold"),
    "test_reliability_terminal": ("slow", "crafted traces through every command, cold"),
    "test_uneven_captures": ("slow", "cut copies of a fixture, each analysed cold"),
    "test_captured": ("slow", "every real capture's report"),
    "test_noise": ("slow", "the noise floor on the real captures"),
}


# What one machine has once: the tests that use it run on one worker, one at a time.
SERIAL_MARKERS = {"nsys"}  # one nsys profiler at a time (2022.4 can hang when two start)
TORCHRUN = {"standin", "sampled_run"}  # with `torch`: torchrun launched, its fixed port 29500


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(items):
    for item in items:
        found = tiers(item)
        for tier in sorted(found):
            item.add_marker(tier)
        item.add_marker(pytest.mark.xdist_group(group(item)))
    if os.environ.get("PYTEST_XDIST_WORKER"):  # every worker orders its collection alike
        items[:] = heaviest_first(items)


def group(item) -> str:
    """The pytest-xdist work unit of a test (`--dist loadgroup`): its module, so that a
    module's fixtures are built once, or `serial` for the tests that must not run beside
    each other (nsys, torchrun: one worker runs them one after another while the others
    run the rest)."""
    fixtures = set(getattr(item, "fixturenames", ()))
    if any(item.get_closest_marker(marker) for marker in SERIAL_MARKERS) or (
        item.get_closest_marker("torch") and fixtures & TORCHRUN
    ):
        return "serial"
    return item.path.relative_to(TESTS.parent).as_posix()


COSTLY = {"slow", "e2e", "dask", "hypothesis"}


def heaviest_first(items: list) -> list:
    """The tests in the order pytest-xdist hands out their work units (pyproject's
    `--no-loadscope-reorder`): `serial` first (it runs on one worker, start to end), then
    the units with the most tests of the costly tiers, so that the last units handed out
    are short and the workers finish together; a unit's tests keep their order."""
    units: dict[str, list] = {}
    for item in items:
        units.setdefault(item.get_closest_marker("xdist_group").args[0], []).append(item)

    def weight(unit: str) -> tuple:
        costly = sum(1 for item in units[unit] if costs(item))
        return (unit != "serial", -costly, -len(units[unit]))

    return [item for unit in sorted(units, key=weight) for item in units[unit]]


def costs(item) -> bool:
    """Whether a test is of a costly tier (a property test: hypothesis marks it later)."""
    marked = {marker.name for marker in item.iter_markers()}
    return bool(COSTLY & marked) or getattr(getattr(item, "obj", None), "is_hypothesis_test", False)


def tiers(item) -> set[str]:
    """The tiers of a test besides the fast one (hypothesis marks its own tests)."""
    folders = item.path.relative_to(TESTS).parts[:-1] if item.path.is_relative_to(TESTS) else ()
    found = {FOLDERS[f] for f in folders if f in FOLDERS}
    found |= {tier for marker, tier in NEEDS.items() if item.get_closest_marker(marker)}
    found |= {FIXTURES[f] for f in getattr(item, "fixturenames", ()) if f in FIXTURES}
    if item.path.stem in MODULES:
        found.add(MODULES[item.path.stem][0])
    return found
