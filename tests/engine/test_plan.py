"""The compiled plan (nsyswrap.engine.plan) and `nsyswrap plan`: what `report` would compute, what
is stored, and why, before anything runs."""

from __future__ import annotations

import json

from helpers.paths import FIXTURES

from nsyswrap.engine import plan, sql_objects
from nsyswrap.engine.connection import CachedReport
from nsyswrap.storage import store

RUN = FIXTURES / "run2"


def _rows(cli, *args) -> list[dict]:
    code, out, err = cli("plan", RUN, "-f", "json", *args)
    assert code == 0 and err == "", err
    return json.loads(out)


def test_plan_prints_the_plan_of_report_and_computes_nothing(cli, cache):
    code, out, err = cli("plan", RUN)
    assert code == 0 and err == "" and "the answer is not stored" in out
    assert all(len(line) <= 80 for line in out.splitlines())
    assert not store.entries()  # planning reads and stores nothing
    rows = _rows(cli)
    names = [r["name"] for r in rows]
    # every step after what it needs, the results the sections ask for among them
    for r in rows:
        for needed in sql_objects.needs(r["name"])[:-1]:
            if needed in names:
                assert names.index(needed) < names.index(r["name"]), (needed, r["name"])
    asked = {r["name"] for r in rows if "asked for" in r["why"]}
    assert {"ledger.devices", "steps.ledger", "crossrank.stragglers", "rank_map"} <= asked
    assert all(r["stored"] == "0/2" for r in rows if r["stage"] == "per report")


def test_the_plan_says_what_is_stored_and_leaves_out_what_only_stored_steps_read(cli, cache):
    assert cli("report", RUN, "-f", "json")[0] == 0
    code, out, _ = cli("plan", RUN)
    assert "the answer is stored" in out
    rows = _rows(cli)
    assert all(r["compute"] in (0, "no") for r in rows if r["stage"] != "run" or r["stored"] != "-")
    assert "xr_rank_keys" not in {r["name"] for r in rows}  # the stored solve needs none of it
    window = {r["name"]: r for r in _rows(cli, "--steps", "1:2")}
    edges = window["device_windows"]
    assert edges["compute"] == 2 and "step_from=1" in edges["params"]
    for stored in ("device_timeline", "device_step_regions"):  # the same for every window
        assert window[stored]["compute"] == 0, stored


def test_a_plan_without_cached_reports_computes_every_step_on_the_connection():
    compiled = plan.compile(plan.Scope(()), [("gaps.by_cause", {})])
    assert [s.kind for s in compiled.steps if s.name == "idle_gap_rows"] == ["run"]
    assert compiled.per_report_work() == []


def test_per_report_steps_have_one_entry_per_report(tmp_path, cache):
    cached = tuple(
        CachedReport(r, tmp_path / f"rank{r}.sqlite", tmp_path / f"v{r}") for r in (1, 0)
    )
    compiled = plan.compile(plan.Scope(cached), [("ledger.devices", {})])
    work = compiled.per_report_work()
    assert [c.rank for c, _ in work] == [0, 1]  # in rank order
    assert [n for n, _, _ in work[0][1]][-1] == "ledger.devices"


def test_the_plan_takes_every_report_option(cli, cache):
    """`plan` takes the options `report` takes: the MFU inputs reach compute.mfu's
    parameters, and --whole-capture the window."""
    mfu = {r["name"]: r for r in _rows(cli, "--flops-per-step", "1e12")}["compute.mfu"]
    assert "flops_per_step=1000000000000.0" in mfu["params"]
    whole = {r["name"]: r for r in _rows(cli, "--whole-capture")}
    assert "step_from" not in whole["ledger.devices"]["params"]
