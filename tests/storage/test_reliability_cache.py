"""The cache heals and never lies: damaged entries are found and rebuilt (with a note), a
report rewritten with the same size and mtime is read again, and a cache directory that
cannot be used falls back to a private temporary one (with a note)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.bad_input import REPORT
from helpers.paths import FIXTURES, ROOT

RUN2 = FIXTURES / "run2"

COUNT = "SELECT count(*) AS n FROM kernels"


@pytest.fixture
def report(tmp_path) -> Path:
    return Path(shutil.copy(REPORT, tmp_path / "rank0.sqlite"))


def _count(cli, report: Path, *extra) -> tuple[int, str]:
    code, out, err = cli("sql", COUNT, report, "-f", "csv", *extra)
    assert code == 0 and "Traceback" not in err, err
    return int(out.split()[1]), err


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, Path]:
    """(report, a store holding its views, per-report objects and per-rank results)."""
    from nsyswrap.launch.precompute import precompute

    folder = tmp_path_factory.mktemp("built")
    report = Path(shutil.copy(REPORT, folder / "rank0.sqlite"))
    saved, os.environ["NSYSWRAP_CACHE_DIR"] = (
        os.environ["NSYSWRAP_CACHE_DIR"],
        str(folder / "cache"),
    )
    try:
        precompute([report])  # per-report objects and the report's per-rank results
    finally:
        os.environ["NSYSWRAP_CACHE_DIR"] = saved
    return report, folder / "cache"


def _views(store: Path) -> Path:
    return next((store / "views").iterdir())


@pytest.mark.parametrize(
    "damage",
    [
        lambda store: _truncate(_views(store) / "kernels.parquet"),
        lambda store: (_views(store) / "nvtx.parquet").unlink(),
        lambda store: (_views(store) / "session.parquet").write_bytes(b"PAR1 not really"),
        lambda store: [_truncate(p) for p in store.glob("objects/window_unions-*/rows.parquet")],
        lambda store: [_truncate(p) for p in store.glob("objects/device_windows-*/rows.parquet")],
    ],
    ids=["truncated-view", "missing-view", "garbage-view", "truncated-unions", "truncated-window"],
)
def test_a_damaged_entry_is_rebuilt_and_said_so(cli, cache, built, damage):
    """A damaged view is found when its report is opened, a damaged object or result when
    it is read (ledger.devices reads window_unions and device_windows; what only they read
    is not read while they are stored; the report's steps window and the query's whole
    capture each store their own, so every one is damaged)."""
    report, pristine = built
    expected = cli("query", "ledger.devices", report, "-f", "csv")[1]
    shutil.rmtree(cache)
    shutil.copytree(pristine, cache)
    damage(cache)
    code, out, err = cli("query", "ledger.devices", report, "-f", "csv")
    assert code == 0 and out == expected
    assert f"cache entry {cache}/" in err and "was damaged; building it again" in err
    assert cli("query", "ledger.devices", report, "-f", "csv") == (0, expected, "")  # healed


def test_a_report_rewritten_with_the_same_size_and_mtime_is_read_again(cli, cache, report):
    before, _ = _count(cli, report)
    stat = report.stat()
    con = sqlite3.connect(report)
    con.execute(
        "DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL "
        "WHERE rowid = (SELECT min(rowid) FROM CUPTI_ACTIVITY_KIND_KERNEL)"
    )
    con.commit()
    con.close()
    os.utime(report, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert report.stat().st_size == stat.st_size and report.stat().st_mtime_ns == stat.st_mtime_ns
    assert _count(cli, report)[0] == before - 1


@pytest.mark.parametrize(
    "make",
    [
        lambda tmp: Path("/proc/nsyswrap-cache"),
        lambda tmp: (tmp / "file").write_text("x") and tmp / "file",
        lambda tmp: (tmp / "file").write_text("x") and tmp / "file" / "cache",
    ],
    ids=["cannot-be-created", "is-a-file", "under-a-file"],
)
def test_an_unusable_cache_falls_back_to_a_private_directory(
    cli, report, tmp_path, monkeypatch, make
):
    monkeypatch.setenv("NSYSWRAP_CACHE_DIR", str(make(tmp_path)))
    count, err = _count(cli, report)
    assert count > 0 and f"cache {make(tmp_path)} cannot be used" in err and "caching in" in err


@pytest.mark.parametrize("jobs", ["1", "2", "4"])
@pytest.mark.parametrize("command", ["report", "query"])
def test_the_fallback_note_is_said_once_and_the_workers_share_it(tmp_path, jobs, command):
    """A cache that cannot be used: one note, however many worker processes read the
    reports, and the workers cache where the run does (no other fallback directory)."""
    unusable = tmp_path / "file"
    unusable.write_text("x")
    args = {"report": ["report", FIXTURES / "run4_straggler"], "query": ["query", "ledger.devices"]}
    args["query"].append(FIXTURES / "run4_straggler")
    done = subprocess.run(
        [sys.executable, "-m", "nsyswrap", *map(str, args[command]), "-j", jobs],
        env={**os.environ, "NSYSWRAP_CACHE_DIR": str(unusable / "cache"), "TMPDIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("nsyswrap: note:") == 1 and "caching in" in done.stderr
    assert not list(tmp_path.glob("nsyswrap-cache-*"))  # (removed when the run ended)


def test_a_full_cache_falls_back_to_a_private_directory(cli, report, tmp_path, monkeypatch):
    import nsyswrap.storage.cache_keys

    monkeypatch.setattr(
        nsyswrap.storage.cache_keys, "MIN_FREE_BYTES", 1 << 62
    )  # more than any disk has free
    monkeypatch.setenv("NSYSWRAP_CACHE_DIR", str(tmp_path / "full"))
    count, err = _count(cli, report)
    assert count > 0 and "MB free); caching in" in err
    assert not any((tmp_path / "full").iterdir())


def test_an_entry_another_process_is_writing_is_not_damaged(cli, cache, built):
    report, pristine = built
    shutil.copytree(pristine, cache)
    partial = cache / "objects" / ".build-other" / "rows.parquet"
    partial.parent.mkdir(parents=True)
    partial.write_bytes(b"PAR1 half written")
    assert _count(cli, report)[1] == "" and partial.exists()


# --- the cache knows its files: swapped, replaced and rewritten reports ---------------------

SUMS = "SELECT rank, count(*) AS n, sum(dur_ns) AS busy FROM kernels GROUP BY rank ORDER BY rank"


def _sums(cli, *inputs) -> list[str]:
    code, out, err = cli("sql", SUMS, *inputs, "-f", "csv")
    assert code == 0, err
    return out.splitlines()[1:]


def _answer(cli, *inputs) -> list[dict]:
    code, out, err = cli("report", *inputs, "-f", "json")
    assert code == 0, err
    (dq,) = [s for s in json.loads(out)["sections"] if s["id"] == "data_quality"]
    return [
        {"rank": r["rank"], "kernels": r["kernels"]["value"], "capture": r["capture"]["value"]}
        for r in dq["tables"][0]["rows"]
    ]


@pytest.fixture
def twins(tmp_path) -> Path:
    """run2's two reports copied with `cp -a`, then given the same modification time to the
    ns (the same size already): only their content and identity tell them apart."""
    run = tmp_path / "twins"
    run.mkdir()
    for name in ("rank0.sqlite", "rank1.sqlite"):
        shutil.copy2(RUN2 / name, run / name)
    stamp = (run / "rank0.sqlite").stat()
    for name in ("rank0.sqlite", "rank1.sqlite"):
        os.utime(run / name, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    assert (run / "rank0.sqlite").stat().st_size == (run / "rank1.sqlite").stat().st_size
    return run


def _swap(a: Path, b: Path) -> None:
    a.rename(a.with_name("swap.tmp"))
    b.rename(a)
    a.with_name("swap.tmp").rename(b)


@pytest.mark.parametrize("given", ["directory", "files", "glob"])
def test_reports_swapped_by_name_are_never_served_stale(cli, cache, twins, given):
    inputs = {
        "directory": [twins],
        "files": [twins / "rank0.sqlite", twins / "rank1.sqlite"],
        "glob": [f"{twins}/rank*.sqlite"],
    }[given]
    sums, answer = _sums(cli, *inputs), _answer(cli, *inputs)
    _swap(twins / "rank0.sqlite", twins / "rank1.sqlite")
    swapped = _sums(cli, *inputs)
    assert [s.split(",", 1)[1] for s in swapped] == [s.split(",", 1)[1] for s in sums[::-1]]
    again = _answer(cli, *inputs)
    assert [(a["kernels"], a["capture"]) for a in again] == [
        (a["kernels"], a["capture"]) for a in answer[::-1]
    ]


@pytest.mark.parametrize("how", ["cp -a over it", "moved over it", "linked in its place"])
def test_a_report_replaced_by_its_twin_is_read_again(cli, cache, twins, how):
    """rank0 replaced by a copy of rank1 of the same size and mtime, three ways: written
    into the same inode (`cp -a`), another file renamed onto its name, a hard link."""
    first = _sums(cli, twins / "rank0.sqlite")
    other = _sums(cli, twins / "rank1.sqlite")[0].split(",", 1)[1]
    target, source = twins / "rank0.sqlite", twins / "rank1.sqlite"
    if how == "cp -a over it":
        subprocess.run(["cp", "-a", str(source), str(target)], check=True)
    elif how == "moved over it":
        shutil.copy2(source, twins / "new.sqlite")
        (twins / "new.sqlite").rename(target)
    else:
        target.unlink()
        os.link(source, target)
    assert target.stat().st_mtime_ns == source.stat().st_mtime_ns
    again = _sums(cli, target)
    assert again != first and again[0].split(",", 1)[1] == other


def test_content_key_changes_with_a_sampled_page_of_a_large_report(tmp_path, monkeypatch):
    """Past WHOLE_FILE_BYTES the digest reads SAMPLED_PAGES pages spread over the file, the
    first and the last among them; below, the whole file (any byte)."""
    from nsyswrap.storage import cache_keys

    page, pages = 4096, 300
    monkeypatch.setattr(cache_keys, "WHOLE_FILE_BYTES", page * 10)
    data = bytearray(RUN2.joinpath("rank0.sqlite").read_bytes()[:100].ljust(page * pages, b"."))
    report = tmp_path / "big.sqlite"
    report.write_bytes(data)
    keys = {cache_keys.content_key(report)}
    for sampled in (0, pages - 1, (pages - 1) * 21 // 63):  # the first, last and a middle one
        changed = bytearray(data)
        changed[sampled * page + 200] ^= 0xFF
        report.write_bytes(changed)
        keys.add(cache_keys.content_key(report))
    assert len(keys) == 4
    small = tmp_path / "small.sqlite"
    small.write_bytes(data[: page * 5])
    before = cache_keys.content_key(small)
    small.write_bytes(data[: page * 2] + b"!" + data[page * 2 + 1 : page * 5])
    assert cache_keys.content_key(small) != before


# --- a busy cache: cleared while a run reads it ----------------------------------------------


def test_cache_clear_keeps_what_a_cold_run_holds(cli, cache, report, monkeypatch):
    """`cache clear` between the views being built and the run opening them (the moment the
    previous round's report died at) removes nothing the run holds."""
    from nsyswrap.engine import opening
    from nsyswrap.storage import store

    real, said = opening.open_cached, []

    def clear_first(*args, **kwargs):
        said.append(store.clear())
        return real(*args, **kwargs)

    monkeypatch.setattr(opening, "open_cached", clear_first)
    count, err = _count(cli, report)
    assert count > 0 and err == ""
    assert said and said[0][0] == 0 and said[0][2] > 0  # none removed, the run's kept


def test_an_entry_removed_under_a_run_is_built_again(cli, cache, report, monkeypatch):
    """An entry removed by hand (not by nsyswrap, which keeps entries in use) while a run
    reads it: the command runs once more and builds it, with a note."""
    from nsyswrap.engine import opening

    real, removed = opening.open_cached, []

    def remove_first(cached, **kwargs):
        if not removed:
            removed.append(cached[0].views_dir)
            shutil.rmtree(cached[0].views_dir)
        return real(cached, **kwargs)

    monkeypatch.setattr(opening, "open_cached", remove_first)
    code, out, err = cli("sql", COUNT, report, "-f", "csv")
    assert code == 0 and int(out.split()[1]) > 0, err
    assert str(removed[0]) in err and "while in use; running again" in err
    assert "Traceback" not in err


def test_cache_clear_in_a_loop_never_breaks_a_cold_report(tmp_path, cache):
    """Another process runs `nsyswrap cache clear` over and over while cold reports run:
    each report succeeds (three in a row, each on an emptied cache)."""
    env = {**os.environ, "NSYSWRAP_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)}
    clear = [sys.executable, "-c", CLEAR_LOOP]
    clearing = subprocess.Popen(clear, env=env, stdout=subprocess.DEVNULL)
    try:
        for _ in range(3):
            done = subprocess.run(
                [sys.executable, "-m", "nsyswrap", "report", RUN2, "-f", "json", "-j", "2"],
                env=env,
                capture_output=True,
                text=True,
                timeout=600,
            )
            assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    finally:
        clearing.kill()
        clearing.wait()


CLEAR_LOOP = """
import time
from nsyswrap.storage import store
while True:
    store.clear()
    time.sleep(0.001)
"""
