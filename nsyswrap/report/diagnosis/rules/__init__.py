"""Every rule of the diagnosis, one a file (docs/rules.md: how to add one).

RULES lists them in the order they apply: labels, what the report analyses, the replay's
causes, the findings (cross-rank by what fixing them saves, then device findings by their
share of the time, then context), their ranking (those within the run's noise last),
the advice findings give, the sections' notes and the key figures. A finding rule added
to RULES is run by the diagnosis (nsyswrap.report.diagnosis), printed by `nsyswrap list
--rules` and documented in docs/rules.md (tests/test_rules.py checks that the docs say
what the rules say).
"""

from __future__ import annotations

from nsyswrap.report.diagnosis.rules import (
    communication_advice,
    compute_advice,
    copy_advice,
    copy_bandwidth,
    crossrank_label,
    device_bound,
    device_label,
    gpu_memory,
    host_idle_advice,
    hot_expert,
    mfu,
    moving_stalls,
    naive_overlap,
    noise_floor,
    periodic_stall,
    replay_causes,
    run_label,
    slow_kernel,
    slow_link,
    slow_rank,
    slow_stage,
    step_figures,
    step_window,
    straggler,
    straggler_named,
    tensor_cores,
)

RULES = (
    device_label.RULE,
    run_label.RULE,
    straggler_named.RULE,
    crossrank_label.RULE,
    step_window.RULE,
    replay_causes.RULE,
    straggler.RULE,
    moving_stalls.RULE,
    slow_stage.RULE,
    slow_rank.RULE,
    slow_link.RULE,
    device_bound.RULE,
    tensor_cores.RULE,
    slow_kernel.RULE,
    copy_bandwidth.RULE,
    mfu.RULE,
    gpu_memory.RULE,
    periodic_stall.RULE,
    noise_floor.RULE,
    communication_advice.RULE,
    host_idle_advice.RULE,
    hot_expert.RULE,
    copy_advice.RULE,
    compute_advice.RULE,
    naive_overlap.RULE,
    step_figures.RULE,
)


def finding_rules() -> tuple:
    """The finding rules, in the order they apply."""
    return tuple(r for r in RULES if r.kind == "finding")


def rule(rule_id: str):
    """The rule of `rule_id`."""
    return next(r for r in RULES if r.id == rule_id)
