"""The one store (nsyswrap.storage.store): bounded by its cap, least recently used first, never an
entry in use; `nsyswrap cache info|clear`."""

from __future__ import annotations

import json

from helpers.paths import FIXTURES

from nsyswrap.storage import store

RUN = FIXTURES / "run2"


def _held(cache) -> int:
    """Bytes of every file the store's entries hold."""
    return sum(
        f.stat().st_size
        for kind in store.KINDS
        for f in (cache / kind).rglob("*")
        if f.is_file() and ".build-" not in str(f)
    )


def test_new_steps_windows_leave_the_store_within_its_cap(cli, cache):
    """The default report, then three new --steps windows on run2 (each adds per-report
    objects of its window): with a cap a little above what one report needs, every call
    leaves the store within it, the oldest windows' entries going first."""
    code, first, _ = cli("report", RUN, "-f", "json")
    assert code == 0
    cap = int(_held(cache) * 1.3)
    sizes, kept = [], []
    for window in ("0:1", "1:2", "2:3"):
        code, out, err = cli(
            "report", RUN, "--steps", window, "--cache-max", str(cap), "-f", "json"
        )
        assert code == 0 and err == "", err
        assert json.loads(out)["options"]["step_from"] == int(window[0])
        sizes.append(_held(cache))
        kept.append({e["path"].name for e in store.entries()})
    assert all(size <= cap for size in sizes), (sizes, cap)
    assert not kept[0] <= kept[2]  # the first window's entries went
    code, again, _ = cli("report", RUN, "-f", "json", "--cache-max", str(cap))
    assert code == 0 and again == first  # what was evicted is computed again, the same


def test_an_entry_in_use_is_never_evicted(cache):
    entry = store.entry("objects", "ledger.devices", "in use")  # a name with a dot
    store.write(entry, lambda work: (work / "answer.json").write_text("{}" * 1000))
    other = store.entry("answers", "report", "not in use")
    store.write(other, lambda work: (work / "answer.json").write_text("{}" * 1000))
    lease = store.Lease()
    lease.hold(entry)
    try:
        store.evict("0")
        assert entry.exists() and not other.exists()
    finally:
        lease.release()
    store.evict("0")
    assert not entry.exists()


def test_a_lease_of_a_process_that_is_gone_does_not_count(cache):
    import socket

    entry = store.entry("answers", "report", "orphan")
    store.write(entry, lambda work: (work / "answer.json").write_text("{}"))
    leases = cache / store.LEASES
    leases.mkdir()
    (leases / f"{socket.gethostname()}-999999999-0").write_text(f"{entry}\n")  # no such pid
    store.evict("0")
    assert not entry.exists() and not any(leases.iterdir())


def test_cache_info_and_clear(cli, cache):
    assert cli("report", RUN, "-f", "json")[0] == 0
    code, out, err = cli("cache", "info")
    # a long path wraps at 80 columns (pytest-xdist's worker folders make it longer)
    assert code == 0 and err == "" and f"cache {cache}:" in " ".join(out.split())
    assert all(len(line) <= 80 for line in out.splitlines())
    code, out, _ = cli("cache", "info", "-f", "json")
    kinds = {row["kind"]: row for row in json.loads(out)}
    assert set(kinds) == set(store.KINDS) and all(kinds[k]["entries"] for k in store.KINDS)
    code, out, _ = cli("cache", "clear")
    assert code == 0 and out.startswith("removed ") and not store.entries()


def test_a_bad_cap_is_one_line(cli, cache):
    code, out, err = cli("query", "kernels.summary", RUN, "--cache-max", "lots")
    assert code == 1 and err.startswith("Error: --cache-max lots: is not a size")
    assert err.count("\n") == 1


def test_a_run_object_evicted_or_damaged_after_planning_is_computed_with_its_inputs(cache, capsys):
    """A stored run object leaves its inputs out of the plan; when it is gone by the time it
    is read, what it reads is computed first, and it again."""
    from nsyswrap import open_run
    from nsyswrap.engine import planner
    from nsyswrap.engine.queries import run_module

    with open_run([RUN], jobs=1) as run:
        first = run_module(run, "crossrank.clock_offsets")
    for entry in (cache / "objects").glob("xr_*"):
        store.discard(entry, "test: evicted")
    with open_run([RUN], jobs=1) as run:
        compiled = planner.plan.compile(planner.scope(run), [("crossrank.clock_offsets", {})])
        assert "xr_rank_keys" not in {s.name for s in compiled.steps}
        for name in ("xr_clock_offsets", "xr_clock"):
            (entry,) = (cache / "runs").glob(f"{name}-*")
            (entry / "rows.parquet").write_bytes(b"PAR1 damaged")
        capsys.readouterr()
        assert run_module(run, "crossrank.clock_offsets").equals(first)
    assert "was damaged; building it again" in capsys.readouterr().err


def _counted() -> int:
    """The bytes of every entry, by their indexes."""
    return sum(e["bytes"] for e in store.entries())


def _entries_read(monkeypatch) -> list:
    """Each listing of every entry's index (`store.entries`), recorded."""
    calls, real = [], store.entries
    monkeypatch.setattr(store, "entries", lambda: calls.append(1) or real())
    return calls


def test_the_tally_is_what_the_entries_hold_after_each_change(cli, cache):
    """Entries written (a cold report, a lazy view added), one discarded, the oldest evicted,
    the store cleared: after each, the tally is the entries' bytes as counted."""
    assert cli("report", RUN, "-f", "json")[0] == 0
    assert cli("sql", "SELECT count(*) FROM launches", RUN)[0] == 0  # a lazy view added
    counts = [(store.held_bytes(), _counted())]
    store.discard(next((cache / "objects").iterdir()), "test: damaged")
    counts.append((store.held_bytes(), _counted()))
    store.evict(str(counts[-1][1] // 2))
    counts.append((store.held_bytes(), _counted()))
    store.clear()
    counts.append((store.held_bytes(), _counted()))
    assert all(tally == counted for tally, counted in counts), counts
    assert counts[0][1] > counts[1][1] > counts[2][1] > counts[3][1] == 0


def test_a_command_under_the_cap_reads_no_entry(cli, cache, monkeypatch):
    """A report over a store under its cap reads the tally when it is done, not every
    entry's index (what made each command cost as much as the store held entries)."""
    assert cli("report", RUN, "-f", "json")[0] == 0
    read = _entries_read(monkeypatch)
    assert cli("report", RUN, "--steps", "0:1", "-f", "json")[0] == 0  # a cold one
    assert cli("query", "kernels.summary", RUN)[0] == 0
    assert read == []


def test_a_wrong_or_missing_tally_is_put_right_by_a_count(cli, cache):
    """A tally that counts too much (entries removed by hand) is counted again before
    anything is removed, and nothing is; one that is missing, damaged or long is counted."""
    assert cli("report", RUN, "-f", "json")[0] == 0
    held = _counted()
    tally = cache / store.TALLY
    tally.write_text(f"{held}\n{10 * held}\n")  # over a cap of twice what it holds
    assert store.evict(str(2 * held)) == [] and store.held_bytes() == held
    tally.unlink()
    assert store.held_bytes() == held
    for wrong in ("12 x\n", "1\n" * store.TALLY_LINES):  # damaged, long
        tally.write_text(wrong)
        assert store.held_bytes() == held
