"""Rule periodic_stall (nsyswrap/report/diagnosis/rules/periodic_stall.py), the worked
example of docs/rules.md: unit tests on hand-built facts, and one end-to-end test on a
generated run whose rank 0 stalls 20 ms in data loading every 5 steps (the generator's
own simulation: tests/sql/test_periodic_steps.py checks the table)."""

from __future__ import annotations

import json

from helpers.rule_facts import count, facts, ns

from nsyswrap.report.diagnosis.rules import periodic_stall
from nsyswrap.synth import Scenario, Straggler

STALL_NS = 20_000_000


def _row(rank=0, phase="data_loading", extra=STALL_NS, stalls=3) -> dict:
    """A single_rank.periodic_steps row (a 100 ms median step)."""
    return {
        "rank": rank,
        "period": count(5),
        "steps": "5,10,15",
        "stalls": count(stalls),
        "median_step": ns(10**8),
        "noise": ns(10**5),
        "extra": ns(extra),
        "phase": phase,
        "phase_extra": ns(extra if phase else None),
    }


def _facts(*rows):
    """Facts of 18 steps on rank 0 and 1 (device 0) and the periodic rows given."""
    every = [(r, s) for r in (0, 1) for s in range(18)]
    steps = [{"rank": r, "device": 0, "step": s, "duration": ns(10**8)} for r, s in every]
    return facts({"single_rank.steps": steps, "single_rank.periodic_steps": list(rows)})


def test_a_periodic_stall_names_its_period_phase_and_time_per_step():
    (found,) = periodic_stall.find(_facts(_row()), periodic_stall.RULE.limits())
    assert found.id == "periodic-stall" and found.ranks == (0,)
    assert found.text == (
        "Rank 0: every 5 steps a step runs 20.00 ms longer than its median step of 100.00 ms "
        "(steps 5, 10, 15), 20.00 ms of it in phase 'data_loading': 3.33 ms per step of the "
        "window (3 % of its mean step)."
    )
    assert found.advice.startswith("Find what the program does every 5 steps in 'data_loading'")
    assert found.cost == {"value": 60_000_000 / 18, "unit": "ns"}
    assert found.evidence["period"] == count(5)


def test_a_rank_that_only_waits_gets_no_advice_nor_a_finding_beside_the_stall():
    limits = periodic_stall.RULE.limits()
    (found,) = periodic_stall.find(_facts(_row(rank=1, phase=None)), limits)
    assert "in no phase range" in found.text and found.advice is None
    both = periodic_stall.find(_facts(_row(), _row(rank=1, phase=None)), limits)
    assert [f.ranks for f in both] == [(0,)]  # rank 1 waits for rank 0's stall


def test_a_stall_under_the_threshold_is_not_a_finding():
    small = _row(extra=5_000_000)  # 15 ms over 18 steps: 0.83 ms per step, under 1 %
    assert periodic_stall.find(_facts(small), periodic_stall.RULE.limits()) == []
    lower = periodic_stall.RULE.limits(min_step_share=0.005)
    assert len(periodic_stall.find(_facts(small), lower)) == 1
    assert periodic_stall.find(_facts(), periodic_stall.RULE.limits()) == []


def test_the_report_names_a_stall_every_five_steps(generated_run, cli):
    scenario = Scenario(
        name="periodic",
        ranks=2,
        steps=18,
        straggler=Straggler(rank=0, phase="data_loading", extra_ns=STALL_NS, steps=(5, 10, 15)),
    )
    _, run = generated_run(scenario)
    code, out, err = cli("report", str(run), "--format", "json")
    assert code == 0, err
    found = [f for f in json.loads(out)["diagnosis"]["findings"] if f["id"] == "periodic-stall"]
    assert [f["ranks"] for f in found] == [[0]]  # rank 1 only waits for it
    assert found[0]["evidence"]["phase"] == "data_loading"
    assert found[0]["evidence"]["steps"] == "5,10,15"
    assert found[0]["recommendation"].startswith("Find what the program does every 5 steps")
    assert found[0]["gain"]["value"] > 0  # the replay's saving for data_loading on rank 0
