"""The run's noise floor (#38 item 2, nsyswrap.report.diagnosis.noise) on the real captures: the
jitter of two ranks sharing one GPU (h200_fix_clean) stays under it, the planted 15 ms
stalls of the slow captures stand above it, and so do the costs the issue names."""

from __future__ import annotations

import statistics

import pytest
from helpers.paths import FIXTURES

from nsyswrap.report import report_of
from nsyswrap.report.diagnosis.noise import (
    above_noise,
    noise_floor_ns,
    robust_sigma,
    run_step_times,
)

REAL = FIXTURES / "real"
FACTORS = {"mean_factor": 1.0, "affected_factor": 3.0}  # the rule's defaults
# per capture, the labels of the findings above the floor, and of those under it
EXPECTED = {
    "h200_fix_clean": (["host-bound"], ["intermittent: rank 0"]),
    "h200_fix_slow": (["straggler: rank 1", "host-bound"], []),
    "h200_ddp_gloo_slow": (["intermittent: rank 1", "host-bound"], []),
    "h200_ddp_gloo_slow_zero_code": (["intermittent: rank 1", "host-bound"], []),
}


def _saving(finding: dict) -> tuple[float, float | None]:
    """(per step, per affected step where it saves in only some steps) of a finding."""
    evidence = finding.get("evidence") or {}
    per_affected = None
    if evidence.get("pattern") == "intermittent":
        per_affected = evidence["gain_per_affected_step"]["value"]
    return finding["cost"]["value"], per_affected


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_noise_findings_fall_under_the_floor_and_stalls_stand_above_it(name):
    report = report_of([REAL / name])
    floor = noise_floor_ns(report)
    whatif = next(t for s in report["sections"] for t in s["tables"] if t["id"] == "whatif")
    assert floor == whatif["rows"][0]["noise_ns"]["value"]  # the replay's, one definition
    above, under = [], []
    for f in report["diagnosis"]["findings"]:
        (above if above_noise(*_saving(f), floor, **FACTORS) else under).append(f["label"])
    want_above, want_under = EXPECTED[name]
    assert len(above) == len(want_above) and len(under) == len(want_under), (above, under)
    assert all(a.startswith(w) for a, w in zip(above, want_above)), above
    assert all(u.startswith(w) for u, w in zip(under, want_under)), under
    # the diagnosis says the same (rule noise_floor): those under it last, flagged
    d = report["diagnosis"]
    assert [f["label"] for f in d["findings"]] == above + under
    assert [bool(f.get("below_noise")) for f in d["findings"]] == [False] * len(above) + [
        True
    ] * len(under)
    assert d["noise_floor"]["value"] == floor
    assert d["headline"] == d["findings"][0]["label"].upper() or d["headline"].startswith(
        d["findings"][0]["label"].upper()
    )


def test_the_floor_of_the_clean_run_is_its_jitter_not_its_cost():
    """h200_fix_clean: 1.41 ms (the ranks' own work's step-to-step noise, #36), between
    the 0.83 ms per step its one jitter finding saves and the 14.74 ms per step its
    host-caused idle costs."""
    report = report_of([REAL / "h200_fix_clean"])
    assert 1.3e6 < noise_floor_ns(report) < 1.5e6


def test_without_a_replay_the_floor_is_the_recorded_steps_spread():
    """h100_ddp_gloo (the replay is refused) and a sampled run: 1.4826 x the median
    absolute deviation of each step's slowest rank, the warm-up left out."""
    for name, section, table in (
        ("h100_ddp_gloo", "single_rank", "steps"),
        ("h200_sampled", "samples", "step_times"),
    ):
        report = report_of([REAL / name])
        apart = {o["step"] for o in report["window"]["outliers"]}
        rows = next(
            t["rows"]
            for s in report["sections"]
            if s["id"] == section
            for t in s["tables"]
            if t["id"] == table
        )
        slowest = {}
        for r in rows:
            if isinstance(r["step"], int) and r["step"] not in apart:
                slowest[r["step"]] = max(slowest.get(r["step"], 0), r["duration"]["value"])
        assert slowest == run_step_times(report)
        middle = statistics.median(slowest.values())
        mad = statistics.median(abs(v - middle) for v in slowest.values())
        assert noise_floor_ns(report) == pytest.approx(1.4826 * mad)


def test_above_noise_needs_both_the_mean_and_the_affected_steps():
    assert above_noise(2e6, None, 1e6, **FACTORS)
    assert not above_noise(0.9e6, 15e6, 1e6, **FACTORS)  # too little on average
    assert not above_noise(1.1e6, 2.5e6, 1e6, **FACTORS)  # no stall stands out
    assert above_noise(1.1e6, 3e6, 1e6, **FACTORS)
    assert above_noise(0.1, 0.1, None, **FACTORS)  # no steps: nothing to measure against
    assert robust_sigma([1.0, 2.0]) is None
