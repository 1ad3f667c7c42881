"""Rule noise_floor (nsyswrap/report/diagnosis/rules/noise_floor.py) on hand-built facts:
a cross-rank finding whose saving is within the run's step-to-step noise comes after the
others, says so, is not headlined and advises nothing; one above it keeps its place.
Milliseconds each; the real captures are in tests/real/test_real_first_screen.py."""

from __future__ import annotations

from helpers.rule_facts import activity, count, fix, ledger, ns, report

from nsyswrap.report.diagnosis import decide
from nsyswrap.report.diagnosis.rules import noise_floor, replay_causes, slow_rank

MS = 1_000_000
STEPS = range(1, 16)


def _report(gain: float, per_affected: float, floor: float = 1.41 * MS, **more) -> dict:
    """Two ranks host-bound (14.7 ms per step of host-caused idle each, 15 steps of 18 ms)
    and the replay's one slow rank: rank 0 saving `gain` per step in step 13 alone."""
    slow = fix("rank", gain, rank=0, steps=(13,), pattern="intermittent", per_affected=per_affected)
    slow |= {"steps_in_window": count(15), "noise_ns": ns(floor)}
    idle = 14.7 * MS * len(STEPS)
    tables = {
        "single_rank.ledger": [ledger(r, span=18 * MS * len(STEPS), idle=idle) for r in (0, 1)],
        "single_rank.idle_gaps": [
            {"rank": r, "device": 0, "cause": "host_bound", "total": ns(idle)} for r in (0, 1)
        ],
        "single_rank.steps": [
            {"rank": r, "device": 0, "step": s, "duration": ns(18 * MS)}
            for r in (0, 1)
            for s in STEPS
        ],
        "trace.activity": [activity(0), activity(1)],
        "crossrank.whatif": [slow],
    }
    return report(tables | more, window={"source": "steps", "steps": list(STEPS)})


def test_a_jitter_under_the_floor_is_not_headlined_and_advises_nothing():
    """h200_fix_clean's shape: 0.83 ms per step (4.24 ms in step 13) under a 1.41 ms floor."""
    d = decide(_report(0.83 * MS, 4.24 * MS))
    assert [f.label for f in d.findings] == ["host-bound", "intermittent: rank 0"]
    assert d.headline() == "HOST-BOUND (2 of 2 GPUs)"  # no trace.gpus: a GPU each
    noise = d.findings[-1]
    assert noise.extra["below_noise"] and noise.advice is None
    assert noise.evidence["noise_floor"] == ns(1.41 * MS)
    assert noise.text.endswith(
        " That is within the run's noise: its step time varies by 1.41 ms from step to step "
        "on its own (the noise floor), more than the 0.83 ms per step it saves on average; no "
        "cause to act on."
    )
    as_json = d.as_json()
    assert as_json["noise_floor"] == ns(1.41 * MS)
    assert as_json["findings"][-1]["below_noise"] is True
    assert "below_noise" not in as_json["findings"][0]
    assert all("rank 0" not in r for r in as_json["recommendations"])


def test_a_stall_above_the_floor_keeps_its_place_first():
    """h200_fix_slow's shape: 7.27 ms per step (15 ms in the steps it hits), floor 2.3 ms."""
    d = decide(_report(7.27 * MS, 15 * MS, floor=2.3 * MS))
    assert [f.label for f in d.findings] == ["intermittent: rank 0", "host-bound"]
    assert d.headline() == "INTERMITTENT: RANK 0"
    assert not any(f.extra.get("below_noise") for f in d.findings)


def test_a_stall_must_stand_out_of_the_noise_in_the_steps_it_hits():
    """Above the floor on average, but 3 ms in its steps is under 3x a 1.41 ms floor."""
    d = decide(_report(1.5 * MS, 3 * MS))
    assert d.findings[-1].extra["below_noise"]
    assert "and the 3.00 ms it saves in the steps it hits is under 3x that" in d.findings[-1].text
    lower = noise_floor.RULE.limits(affected_factor=2.0)
    kept = noise_floor.find(d.facts, slow_rank.find(d.facts, slow_rank.RULE.limits()), lower)
    assert not kept[0].extra.get("below_noise")  # the factors are the rule's thresholds


def test_without_steps_there_is_no_floor_and_nothing_moves():
    d = decide(_report(0.83 * MS, 4.24 * MS, floor=None))
    assert d.findings[0].label == "intermittent: rank 0"
    assert d.findings[0].evidence.get("noise_floor") is None
    without = report({"single_rank.ledger": [ledger(0, idle=5 * MS)]})
    assert decide(without).as_json()["noise_floor"]["value"] is None


def test_a_range_whose_ends_round_equal_is_one_figure():
    d = decide(_report(0.83 * MS, 4.24 * MS))
    assumed = {
        "assumed": True,
        "gain_low_ns_per_step": ns(831_850),
        "gain_high_ns_per_step": ns(833_000),
    }
    one = replay_causes.replayed(d.findings[-1], assumed, frozenset())
    assert one.text.endswith(
        ": 0.83 ms per step whether the hosts waited for none of them or for each."
    )
    wide = assumed | {"gain_high_ns_per_step": ns(900_000)}
    two = replay_causes.replayed(d.findings[-1], wide, frozenset())
    assert two.text.endswith(
        ": between 0.83 ms per step if the hosts waited for none of them and 0.90 ms if they "
        "waited for each."
    )
