"""`nsyswrap diff`'s check of BASE's replay against the measured change (the fix check),
on pairs whose truth is known: a real fix (fixtures/real) and the generator's fault pairs.
Apart from test_diff.py, whose generated pairs take their own set-up, so that the two
spread over pytest-xdist's workers."""

from __future__ import annotations

import pytest
from helpers.paths import ROOT

from nsyswrap.comparison import diff
from nsyswrap.engine.opener import Opener


def test_a_real_fix_is_credited_to_the_rank_whose_own_work_changed():
    """fixtures/real/h200_fix_slow -> h200_fix_clean, the same job without rank 1's 15 ms
    data-loading stalls in steps 3, 7, 10 and 13: the mean step time over steps 1-15
    (stalls included) falls 5.5 ms; rank 1's `data_loading` is named with those steps and
    the replay's 4.10 ms; the rest is said to be own work nothing recorded ties to it; no
    line credits rank 0, which waited less, not worked less."""
    real = ROOT / "fixtures" / "real"
    r = diff(real / "h200_fix_slow", real / "h200_fix_clean", opener=Opener(jobs=1))
    c = r.fix_check
    assert c.steps == list(range(1, 16))
    assert c.measured_ns == pytest.approx(5.51e6, rel=0.01)
    assert (c.named["ranks"], c.named["phase"]) == ([1], "data_loading")
    assert c.named["steps"] == {1: [3, 7, 10, 13]}
    assert c.predicted_ns == pytest.approx(4.10e6, rel=0.01)
    text = "\n".join(r.headline)
    assert "the replay of BASE predicted 4.097 ms per step for it" in text
    assert "a dependency the trace does not record" in text
    assert "on rank 0" not in text, text
    # credited first to rank 1's data_loading (it credited backward on rank 1, the median
    # step's largest change, first), the median's explanations after it, said to be its
    assert r.headline[1].startswith("mean over steps 1-15")
    assert r.headline[2].startswith("rank 1's `data_loading`: its own work")
    medians = [line for line in r.headline if " on rank 1 " in line]
    assert medians and all(line.startswith("in the median step: ") for line in medians)
    # in its own steps the prediction is within 15 %; the rest, own work of the two ranks
    # on one GPU, which the replay does not slow for the other's (contention)
    assert c.in_steps_ns == pytest.approx(4.365e6, rel=0.01)
    assert abs(c.predicted_ns - c.in_steps_ns) <= 0.15 * c.in_steps_ns
    assert "in steps 3, 7, 10 and 13 alone, where it changed, NEW is 4.365 ms" in text
    assert "ranks 0 and 1 share one GPU" in text and c.shared == [0, 1]


@pytest.mark.parametrize(
    "name, named",
    [
        ("pipeline_across_hosts", "`forward` on ranks 4 and 5 (pipeline stage 2)"),
        ("moving_pauses", "`forward` on ranks"),
        ("slow_nic", "the link between hosts node0 and node1"),
    ],
)
def test_the_replay_of_a_fault_is_checked_against_the_same_job_without_it(fault_pair, name, named):
    """The generator's fault pairs (truth: both runs simulated by the generator): the mean
    step time change is the pair's measured difference to the ns, the change is named
    where it happened (a pipeline stage's ranks, pauses that move between ranks, a link
    between hosts) and BASE's replay predicted it within 5 %."""
    pair, folder = fault_pair(name)
    r = diff(folder / "fault", folder / "fixed", opener=Opener(jobs=1))
    c = r.fix_check
    assert c.measured_ns == pytest.approx(pair["step_times"]["difference_per_step_ns"], abs=1)
    assert c.predicted_ns == pytest.approx(c.measured_ns, rel=0.05)
    assert any(line.startswith(named) for line in r.headline), r.headline


def test_a_prediction_resting_on_waits_the_replay_assumed_is_a_range_that_holds_the_fix(
    fault_pair,
):
    """jit_no_sync: rank 2's data loading 2 ms slower per step, hosts that wait for their
    GPU to drain with no call recorded: the replay assumes those waits, and the saving is a
    range, 0 if the hosts waited for none of them, 2.948 ms if for each; the same job with
    the loader 2 ms faster runs 2.000 ms per step faster. `diff` gives that range as its
    prediction (it gave 2.948 ms alone: +47 %, one confident figure)."""
    pair, folder = fault_pair("jit_no_sync")
    r = diff(folder / "fault", folder / "fixed", opener=Opener(jobs=1))
    c = r.fix_check
    assert c.measured_ns == pytest.approx(pair["step_times"]["difference_per_step_ns"], abs=1)
    assert (c.named["ranks"], c.named["phase"]) == ([2], "data_loading")
    assert c.low_reason == "assumed"
    assert c.predicted_low_ns < c.measured_ns < c.predicted_ns
    text = "\n".join(r.headline)
    assert "if the hosts waited for none of the completions the replay assumed" in text
    assert "(within the range)" in text, text
