"""Each rule of the diagnosis (nsyswrap/report/diagnosis/rules/) on small hand-built
facts, milliseconds each; the rules as data (thresholds documented, printed by `nsyswrap
list --rules`, the docs generated from them); the diagnosis never writes into a report.
End-to-end tests of each finding on real runs stay in test_diagnosis.py,
test_efficiency.py and the crossrank tests."""

from __future__ import annotations

import ast
import copy
import json

import pytest
from helpers.paths import ROOT
from helpers.rule_facts import activity, count, facts, fix, frac, ledger, ns, report

from nsyswrap.report.diagnosis import Finding, decide
from nsyswrap.report.diagnosis.docs import stale
from nsyswrap.report.diagnosis.facts import Totals
from nsyswrap.report.diagnosis.rule import Rule, Threshold
from nsyswrap.report.diagnosis.rules import (
    RULES,
    crossrank_label,
    device_bound,
    device_label,
    hot_expert,
    moving_stalls,
    naive_overlap,
    run_label,
    slow_rank,
    slow_stage,
    step_figures,
    step_window,
    straggler,
    straggler_named,
)

COMM = {"compute_busy": 5 * 10**6, "comm_busy": 4 * 10**6, "both": 10**6, "comm_only": 3 * 10**6}
COMM |= {"idle": 2 * 10**6}


def _limits(rule):
    return rule.RULE.limits()


def test_device_label_decides_by_shares_and_waits():
    t = Totals(span_ns=10**7, compute_busy_ns=5 * 10**6, comm_busy_ns=4 * 10**6)
    t.both_ns, t.exposed_comm_ns, t.idle_ns = 10**6, 3 * 10**6, 2 * 10**6
    assert device_label.label(t, 100, 0, 0)["label"] == "communication-bound"
    waiting = device_label.label(t, 100, waited=3 * 10**6, inside=4 * 10**6)
    assert waiting["label"] == "waiting-for-peers"
    assert waiting["reason"] == (
        "it waits 3.00 ms in collectives for slower ranks, 75% of its time in them; compute "
        "runs 50%, exposed communication 30%, copies alone 0%, idle 20% of the time"
    )
    strict = device_label.RULE.limits(peer_wait_share=0.9)  # thresholds are arguments
    assert device_label.label(t, 100, 3 * 10**6, 4 * 10**6, strict)["label"] == (
        "communication-bound"
    )
    few = facts({"single_rank.ledger": [ledger(0, **COMM)], "trace.activity": [activity(0, n=5)]})
    assert few.labels[(0, 0)] == {
        "label": "not enough data",
        "reason": "only 5 GPU activities (kernels, copies, sets); a verdict needs at least 10",
    }


def test_run_label_waits_for_peers_when_most_gpus_do():
    waits = [{"rank": r, "waited": ns(3 * 10**6)} for r in (0, 1)]
    split = [{"step": "all", "rank": r, "in_collectives": ns(4 * 10**6)} for r in (0, 1)]
    f = facts(
        {
            "single_rank.ledger": [ledger(0, **COMM), ledger(1, **COMM)],
            "crossrank.rank_waits": waits,
            "crossrank.comm_split": split,
        }
    )
    v = run_label.find(f, _limits(run_label))
    assert v["label"] == "waiting-for-peers"
    assert v["reason"].startswith("2 of 2 GPUs mostly wait for slower ranks in collectives; ")
    assert run_label.find(facts({}), _limits(run_label)) == {
        "label": None,
        "reason": "no device has GPU activity in the window",
    }


def test_ranks_sharing_one_gpu_are_figures_per_rank_not_per_gpu():
    """Two ranks on one physical GPU (trace.gpus) are not two GPUs: the headline counts
    ranks, a finding's mean is per rank; on two GPUs both say GPU."""
    idle = {"idle": 8 * 10**6, "compute_busy": 10**6}
    gaps = [{"rank": r, "device": 0, "cause": "host_bound", "total": ns(8 * 10**6)} for r in (0, 1)]
    tables = {
        "single_rank.ledger": [ledger(0, **idle), ledger(1, **idle)],
        "single_rank.idle_gaps": gaps,
        "trace.activity": [activity(0), activity(1)],
    }
    for gpus, unit in (((0, 0), "rank"), ((0, 1), "GPU")):
        physical = [{"rank": r, "device": 0, "gpu": g} for r, g in zip((0, 1), gpus)]
        d = decide(report(tables | {"trace.gpus": physical}))
        assert d.headline() == f"HOST-BOUND (2 of 2 {unit}s)"
        assert d.findings[0].text.endswith(f"(8.00 ms over the window per {unit}).")
        assert f"per {unit} " in d.findings[0].advice
        assert ("per GPU" in d.findings[0].advice) == (unit == "GPU")


def test_straggler_named_by_its_waits_and_their_share_of_the_steps():
    row = {"rank": 2, "total_wait_ns": 9e6, "imposed_wait_ns": 9e6, "significant": True}
    row |= {"jitter_ns": 1e4, "last_count": 9, "collectives": 10, "lag_ns": 3e6}
    row |= {"affected_steps": "1,2", "phase": "data_loading", "phase_excess_ns": 6e6}
    row |= {"phase_steps": 2, "slow_steps": "1,2"}
    named = straggler_named.find(row, 10**8)
    assert named["label"] == "straggler: rank 2"
    assert named["reason"] == (
        "rank 2 made the others wait 9.000 ms (100% of all waiting), arriving last at 9 of 10 "
        "matched collectives, 3.000 ms after the median rank in total; the others waited for "
        "it in steps 1,2; its lag is in `data_loading`, +3.000 ms per step over the median "
        "rank, slow in steps 1,2"
    )
    little = straggler_named.find(row, 10**10)  # the waits are under 1 % of the steps' time
    assert little["label"] == "no significant straggler" and "under 1% of" in little["reason"]
    assert straggler_named.find(None, 0)["label"] is None


def test_step_window_sets_apart_warm_up_and_outliers_and_says_so():
    x = step_window.RULE.limits()
    found = step_window.outliers({0: 31, 1: 10, 2: 10, 3: 40, 4: 10}, 10, x)
    assert [(o["step"], o["why"], o["times"]) for o in found] == [
        (0, "warm-up", 3.1),
        (3, "outlier", 4.0),
    ]
    assert step_window.outliers({0: 31, 1: 10}, 10, x) == []  # too few steps for the rule
    assert step_window.leading_warm_up([40, 35, 10, 10, 10], x) == 2  # a rank's own warm-up
    assert step_window.leading_warm_up([40, 10], x) == 0
    window = {"source": "steps", "step_pattern": "step:%", "pattern_source": "default"}
    window |= {"steps": [0, 1, 2, 3], "step_from": 1, "step_to": None, "median_step": ns(10**6)}
    window["outliers"] = [
        {"step": 0, "duration": ns(5 * 10**6), "times_median": 5.0, "why": "warm-up"}
        | {"set_apart": True}
    ]
    outside = [{"rank": 0, "device": 0, "before": ns(6 * 10**6), "after": ns(4_000)}]
    f = facts({"single_rank.window": outside, "trace.activity": [activity(0)]}, window=window)
    assert step_window.describe(f, x) == (
        "Window: steps 1-3 of 4 (NVTX ranges like 'step:%'). Step 0 is warm-up (5.00 ms, 5x "
        "the median step of 1.00 ms): left out. Not analysed: 6.00 ms of wall time before "
        "step 1."  # not the 4 us after it: under min_outside_ns; no busy time: not said
    )


def _straggler_tables(**more) -> dict:
    """Rank 2 late at both collectives (2 steps), 6 ms more data loading; ranks 0 and 1
    wait for it; every step 10 ms."""
    rows = [
        {"step": s, "rank": 2, "lag": ns(2e6), "gap": ns(4e6), "imposed_wait": ns(3e6)}
        for s in (0, 1)
    ] + [
        {"step": "all", "rank": 2, "last": count(2), "collectives": count(2), "lag": ns(4e6)}
        | {"gap": ns(8e6)}
        | {"imposed_wait": ns(6e6), "phase": "data_loading", "phase_excess": ns(6e6)}
        | {"phase_steps": count(2)}
    ]
    steps = [
        {"rank": r, "device": 0, "step": s, "duration": ns(10**7)}
        for r in (0, 1, 2)
        for s in (0, 1)
    ]
    waits = [{"rank": r, "waited": ns(w)} for r, w in ((0, 3e6), (1, 3e6), (2, 0))]
    tables = {"crossrank.stragglers": rows, "crossrank.rank_waits": waits}
    return tables | {"single_rank.steps": steps} | more


STRAGGLER = {"crossrank": {"label": "straggler: rank 2", "reason": ""}}
LAG = (
    "arrives last at 2 of 2 collectives, 2.00 ms per step after the median rank; {phase}. "
    "Ranks 0 and 1 wait 1.50 ms per step each for it in collectives."
)
LAG_IN = "its lag is in `data_loading` (+3.00 ms per step)"


def test_straggler_by_its_lag_where_there_is_no_replay():
    (f,) = straggler.find(facts(_straggler_tables(), STRAGGLER), _limits(straggler))
    assert f.text == "Rank 2 is the straggler: it " + LAG.format(phase=LAG_IN)
    assert f.advice == (
        "Make `data_loading` on rank 2 as fast as on the others (+3.00 ms per step now); every "
        "other rank waits for it in the next collective."
    )
    assert (f.cost, f.cost_basis, f.share) == (ns(2e6), "per step", frac(0.2))
    assert f.saving["value"] is None and "no what-if replay" in f.saving["reason"]
    assert f.evidence["waiting_ranks"] == [0, 1] and f.evidence["wait_per_step"] == ns(1.5e6)
    replayed = facts(_straggler_tables(**{"crossrank.whatif": [fix("all", 1)]}), STRAGGLER)
    assert straggler.find(replayed, _limits(straggler)) == []  # rule slow_rank says it


def test_of_two_ranks_the_gap_to_the_other_is_said_and_the_midpoint_labelled():
    """#38 item 4: of two ranks the median is their midpoint, half the gap: the lag and the
    phase excess are said as the gap to the other rank, the midpoint as a labelled figure."""
    tables = _straggler_tables()
    tables["crossrank.rank_waits"] = [{"rank": 0, "waited": ns(3e6)}, {"rank": 2, "waited": ns(0)}]
    (f,) = straggler.find(facts(tables, STRAGGLER), _limits(straggler))
    assert f.text.startswith(
        "Rank 2 is the straggler: it arrives last at 2 of 2 collectives, 4.00 ms per step after "
        "rank 0 (the gap; after their midpoint, the median of two ranks: 2.00 ms per step); its "
        "lag is in `data_loading` (+6.00 ms against rank 0, per step). Rank 0 waits"
    )
    assert f.advice.startswith(
        "Make `data_loading` on rank 2 as fast as on the others (+6.00 ms against rank 0, per "
        "step now)"
    )
    # its cost is the gap: their midpoint is no rank to be as fast as (it was the midpoint's
    # 2.00 ms, which put h200_sampled's 15 ms stalls under its noise floor once the lag was
    # counted once)
    assert f.cost == ns(4e6)
    e = f.evidence
    assert (e["gap_to"], e["gap_per_step"], e["phase_gap_per_step"]) == (0, ns(4e6), ns(6e6))
    assert (e["lag_per_step"], e["phase_excess_per_step"]) == (ns(2e6), ns(3e6))


def test_a_straggler_late_in_some_steps_is_intermittent_as_the_replay_says_it():
    """#38 item 5: one word for one finding. Without a replay (a sample report), a rank
    whose slow steps are at most half of the observed ones is slow in some steps (id and
    label intermittent, as rule slow_rank says from the replay), else the straggler."""
    for slow, kind in (("3", "intermittent"), ("0,1,2,3,4,5", "straggler")):
        tables = _straggler_tables()
        rows = [
            {"step": s, "rank": 2, "lag": ns(1e6), "gap": ns(2e6), "imposed_wait": ns(1e6)}
            for s in range(10)
        ]
        run = tables["crossrank.stragglers"][-1] | {"slow_steps": slow}
        tables["crossrank.stragglers"] = [*rows, run]
        (f,) = straggler.find(facts(tables, STRAGGLER), _limits(straggler))
        assert (f.id, f.label) == (kind, f"{kind}: rank 2")
        start = "slow in some steps" if kind == "intermittent" else "the straggler"
        assert f.text.startswith(f"Rank 2 is {start}: it arrives last at 2 of 2 collectives")


def test_slow_rank_by_what_the_replay_saves_with_its_lag_beside():
    fixes = [fix("rank", 5e6, rank=2), fix("rank_phase", 4.6e6, rank=2, phase="data_loading")]
    f_ = facts(_straggler_tables(**{"crossrank.whatif": fixes}), STRAGGLER)
    (f,) = slow_rank.find(f_, _limits(slow_rank))
    assert f.text == (
        "Rank 2 is the straggler: fixing `data_loading` on it would save 4.60 ms per step (5 % "
        "of the step time, in 2 of 10 steps). It " + LAG.format(phase=LAG_IN)
    )
    assert f.saving == ns(4.6e6) and f.cost == ns(4.6e6)
    assert list(f.evidence)[:3] == ["rank", "phase", "lag_per_step"]  # the lag's first
    other = [fix("rank", 5e6, rank=2), fix("rank_phase", 4.6e6, rank=2, phase="forward")]
    other_facts = facts(_straggler_tables(**{"crossrank.whatif": other}), STRAGGLER)
    (f,) = slow_rank.find(other_facts, _limits(slow_rank))
    assert "; of its phase ranges, `data_loading` lags the most (+3.00 ms per step)" in f.text


def test_a_saving_resting_on_assumed_waits_gives_its_range_or_one_figure():
    """Its range where the ends differ once rounded, one figure where they round alike
    (h200_fix_clean said "between 0.83 ms per step ... and 0.83 ms")."""
    texts = []
    for low, high in ((3e6, 4.6e6), (4.598e6, 4.6e6)):
        assumed = {
            "assumed": True,
            "gain_low_ns_per_step": ns(low),
            "gain_high_ns_per_step": ns(high),
        }
        fixes = [
            fix("rank", 5e6, rank=2),
            fix("rank_phase", 4.6e6, rank=2, phase="data_loading") | assumed,
        ]
        (f,) = slow_rank.find(
            facts(_straggler_tables(**{"crossrank.whatif": fixes})), _limits(slow_rank)
        )
        assert f.evidence["gain_low_per_step"] == ns(low)  # the evidence keeps both ends
        texts.append(f.text)
    assert texts[0].endswith(
        "`assumed_waits`): between 3.00 ms per step if the hosts waited for none of them and "
        "4.60 ms if they waited for each."
    )
    assert texts[1].endswith(
        "`assumed_waits`): 4.60 ms per step whether the hosts waited for none of them or for each."
    )


def test_a_hot_expert_is_told_to_balance_its_routing():
    fixes = [fix("rank", 5e6, rank=2)]
    hot = [{"rank": 2, "op": "all_to_all", "vs_median": {"value": 3.0, "unit": "x"}}]
    tables = _straggler_tables(**{"crossrank.whatif": fixes, "crossrank.exchange_bytes": hot})
    (f,) = slow_rank.find(facts(tables), _limits(slow_rank))
    assert " It sends 3.0x the median rank's bytes in all_to_all: the experts" in f.text
    assert f.advice.startswith("Balance the tokens routed to rank 2's experts")
    assert f.evidence["exchange_bytes_vs_median"] == hot[0]["vs_median"]
    calm = hot_expert.RULE.limits(hot_exchange_x=4.0)
    assert hot_expert.hot_exchange(facts(tables), 2, calm) is None


def test_moving_stalls_are_one_finding_naming_each_stall():
    fixes = [
        fix("rank_phase", 6e6, None, "data_loading", (2, 4, 7), "intermittent", per_affected=20e6),
        fix("rank_phase", 2e6, 3, "data_loading", (2,), "intermittent", per_affected=20e6),
        fix("rank_phase", 2e6, 6, "data_loading", (4,), "intermittent", per_affected=20e6),
        fix("rank_phase", 2e6, 1, "data_loading", (7,), "intermittent", per_affected=20e6),
    ]
    (f,) = moving_stalls.find(facts({"crossrank.whatif": fixes}), _limits(moving_stalls))
    where = "rank 3 in step 2, rank 6 in step 4 and rank 1 in step 7"
    assert f.label == f"intermittent: data_loading stalls on {where}" and f.ranks == (1, 3, 6)
    assert f.text == (
        f"Intermittent `data_loading` stalls move between ranks: {where}. Fixing them would "
        "save 20.00 ms per affected step, 6.00 ms per step on average (6 % of the step time); "
        "no rank is slow in most steps."
    )


def test_a_slow_stage_by_what_rebalancing_saves():
    fixes = [fix("all", 3e6), fix("stage", 2.58e6, stage=2)]
    (f,) = slow_stage.find(facts({"crossrank.whatif": fixes}), _limits(slow_stage))
    assert f.label == "slow pipeline stage: 2" and f.ranks == ()
    assert "would save 2.58 ms per step (3 % of the step time, in 2 of 10 steps)" in f.text
    assert f.advice.startswith("Rebalance the pipeline: move layers off stage 2")


def test_device_bound_says_what_hiding_the_costliest_collective_saves():
    hide = fix("collective", 10**6, pg="0", op="all_reduce")
    f_ = facts({"single_rank.ledger": [ledger(0, **COMM)], "crossrank.whatif": [hide]})
    (f,) = device_bound.find(f_, _limits(device_bound))
    assert f.text == (
        "Rank 0 is communication-bound: 30% of the GPU time is exposed communication (3.00 ms "
        "over the window). Hiding all_reduce (group 0) completely, waits included, would save "
        "1.00 ms per step (1 %) at most."
    )
    assert f.evidence["hide_gain_per_step"] == ns(10**6) and f.devices == ((0, 0),)
    assert "does not idealise this cause" in f.saving["reason"]
    assert f.advice.startswith("Communication is exposed for 3.00 ms over the window (30%")


def test_crossrank_label_names_what_the_replay_names_first():
    stage = slow_stage.finding({"fix": fix("stage", 2e6, stage=1), "stage": 1})
    f = facts({}, {"crossrank": {"label": "no significant straggler", "reason": "waits"}})
    found = crossrank_label.find(f, [stage], _limits(crossrank_label))
    assert found == {"label": "slow pipeline stage: 1", "reason": stage.text}
    same = facts({}, {"crossrank": {"label": "straggler: rank 2", "reason": ""}})
    label = "intermittent: rank 2"
    figures = (ns(1), "per step", frac(0.1), ns(1))
    rank = Finding("intermittent", "cross-rank", label, "", *figures, ranks=(2,))
    assert crossrank_label.find(same, [rank], _limits(crossrank_label)) is None  # same rank
    assert crossrank_label.find(facts({}), [stage], _limits(crossrank_label)) is None
    assert crossrank_label.find(same, [], _limits(crossrank_label)) is None  # no replay


def test_naive_overlap_is_noted_only_when_it_misleads():
    t = Totals(span_ns=10, compute_sum_ns=8, comm_sum_ns=4, both_ns=1, comm_busy_ns=4)
    assert naive_overlap.find(t) == (
        "Note: the usual estimate (compute + comm - span) / comm says 50% overlap, the exact "
        "overlap is 25%; summed kernel times mislead when streams run at once or the GPU idles."
    )
    assert naive_overlap.find(t, naive_overlap.RULE.limits(misleads_by=0.3)) is None


def test_step_figures_need_enough_steps():
    steps = [{"rank": 0, "device": 0, "step": 0, "duration": ns(10**7)}]
    f = facts({"single_rank.ledger": [ledger(0, **COMM)], "single_rank.steps": steps})
    row = step_figures.device_row(f, (0, 0), _limits(step_figures))
    assert row["step_mean"] == {"value": None, "unit": "ns", "reason": "fewer than 2 steps"}
    assert row["label"] == "communication-bound" and row["exposed_comm"] == frac(0.3)
    one = step_figures.RULE.limits(min_steps=1, worst_steps=1)
    assert step_figures.device_row(f, (0, 0), one)["step_mean"] == ns(10**7)
    assert len(step_figures.worst_steps(f, one)) == 1


def test_a_finding_has_ranks_or_devices_and_keeps_the_json_layout():
    with pytest.raises(ValueError):
        Finding("x", "device", "x", "", ns(1), "per step", frac(0.1), ns(1), ranks=(1,), devices=())
    f = Finding("x", "device", "x", "t", ns(1), "per step", frac(0.1), ns(None), devices=((0, 1),))
    assert list(f.as_json()) == [
        "id",
        "scope",
        "label",
        "devices",
        "cost",
        "cost_basis",
        "share",
        "text",
        "recommendation",
        "evidence",
        "gain",
    ]


def test_the_diagnosis_never_writes_into_the_report():
    fixes = [fix("rank", 5e6, rank=2), fix("collective", 10**6, pg="0", op="all_reduce")]
    tables = _straggler_tables(**{"crossrank.whatif": fixes})
    tables["single_rank.ledger"] = [ledger(r, **COMM) for r in (0, 1, 2)]
    tables["single_rank.shares"] = [{"rank": r, "device": 0, "verdict": "x"} for r in (0, 1, 2)]
    given = report(tables, STRAGGLER)
    kept = copy.deepcopy(given)
    d = decide(given)
    assert given == kept
    assert d.crossrank_label is None  # the replay names rank 2 too: its own verdict stands
    assert [f.id for f in d.findings][:1] == ["straggler"]
    json.dumps(d.as_json())  # plain JSON


def test_every_threshold_is_named_documented_and_defaulted():
    ids = [r.id for r in RULES]
    assert len(ids) == len(set(ids))
    for r in RULES:
        assert r.doc.strip() and r.prose()
        for t in r.thresholds:
            assert "{" + t.name + "}" in r.doc, (r.id, t.name)  # the doc says where it acts
            assert t.doc and t.name.islower() and " " not in t.name
    with pytest.raises(KeyError):
        device_label.RULE.limits(no_such_threshold=1)
    assert Threshold("x", 1 / 3, "a third").text() == "33 %"
    assert Threshold("x", 100_000, "gap", "ns").text() == "100 us"
    assert Threshold("x", 3.0, "times", "x").text() == "3x"
    with pytest.raises(ValueError):
        Rule("x", "doc", "finding")  # a finding rule says how its findings rank


def test_no_rule_function_is_over_60_lines():
    folder = ROOT / "nsyswrap" / "report" / "diagnosis" / "rules"
    for path in folder.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef):
                lines = node.end_lineno - node.lineno + 1
                assert lines <= 60, f"{path.name}: {node.name} is {lines} lines"


def test_the_docs_say_what_the_rules_say():
    """Every generated block of the README and docs/ (python -m nsyswrap.report.diagnosis.docs
    FILE writes them) is what the rules say; docs/rules.md holds them all."""
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    for path in docs:
        assert stale(path.read_text()) == [], f"{path}: python -m nsyswrap.report.diagnosis.docs"
    reference = (ROOT / "docs" / "rules.md").read_text()
    assert "<!-- rules (generated" in reference
    assert all(f"### `{r.id}`" in reference for r in RULES)


def test_list_rules_prints_every_threshold(cli):
    code, out, err = cli("list", "--rules")
    assert code == 0, err
    for r in RULES:
        assert r.id in out
        for t in r.thresholds:
            assert f"{t.name} = {t.text()}" in out, t.name
    assert all(len(line) <= 80 for line in out.splitlines())
    code, out, _ = cli("list", "--rules", "-f", "json")
    rows = json.loads(out)
    assert {"rule", "kind", "threshold", "default", "unit", "doc"} <= set(rows[0])
    assert sum(r["threshold"] is not None for r in rows) == sum(len(r.thresholds) for r in RULES)


def test_rule_files_stand_alone():
    """A rule reads facts and other rules, never a section, the engine or pandas (so the
    stored answer is drawn without them)."""
    folder = ROOT / "nsyswrap" / "report" / "diagnosis"
    allowed = ("nsyswrap.report.diagnosis", "nsyswrap.report.figures", "nsyswrap.report.options")
    for path in [*folder.glob("*.py"), *folder.glob("rules/*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            for name in names:
                assert not name.startswith(("pandas", "numpy", "duckdb")), (path.name, name)
                if name.startswith("nsyswrap") and name != "nsyswrap.crossrank.lanes":
                    assert name.startswith(allowed), (path.name, name)
