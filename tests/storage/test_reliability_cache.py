"""The cache heals and never lies: damaged entries are found and rebuilt (with a note), a
report rewritten with the same size and mtime is read again, and a cache directory that
cannot be used falls back to a private temporary one (with a note)."""

from __future__ import annotations

import os
import shutil
import sqlite3
from pathlib import Path

import pytest
from helpers.bad_input import REPORT

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
