"""The diagnosis on top of the report: findings ranked by cost, cross-rank first, labels that
never contradict each other, verdicts and advice that fit the evidence."""

from __future__ import annotations

import json

import pytest
from helpers.metric_helpers import load_truth
from helpers.paths import FIXTURES, SHARED

from nsyswrap import open_run
from nsyswrap.report import ReportOptions, build_report
from nsyswrap.report.diagnosis import diagnose
from nsyswrap.report.diagnosis.advice import recommendations
from nsyswrap.report.diagnosis.evidence import Evidence
from nsyswrap.report.diagnosis.facts import Totals
from nsyswrap.report.document import finish

PUBLIC = SHARED / "nsys-sqlite" / "public"
COPY_HEAVY = ["gpu4__report2", "nsysai__h100_2gpu_1s", "sc23omp__report3"]
needs_public = pytest.mark.skipif(
    not PUBLIC.is_dir(), reason="shared/nsys-sqlite/public is missing"
)


@pytest.fixture(scope="module")
def run4() -> dict:
    with open_run([FIXTURES / "run4_straggler"]) as run:
        return build_report(run, ReportOptions())


def _public(cli, name: str) -> dict:
    code, out, err = cli("report", PUBLIC / f"{name}.sqlite", "-f", "json")
    assert code == 0, err
    return json.loads(out)


def test_straggler_comes_first_with_its_phase_and_cost(run4):
    truth = load_truth(FIXTURES / "run4_straggler")["scenario"]["straggler"]
    d = run4["diagnosis"]
    first = d["findings"][0]
    assert d["headline"] == "STRAGGLER: RANK 2"
    assert first["scope"] == "cross-rank" and first["ranks"] == [truth["rank"]]
    e = first["evidence"]
    assert e["phase"] == truth["phase"] == "data_loading"
    assert e["phase_excess_per_step"]["value"] == pytest.approx(truth["extra_ns"], rel=0.01)
    assert e["waiting_ranks"] == [0, 1, 3]
    assert first["cost_basis"] == "per step" and first["cost"]["value"] > 0
    assert "Rank 2" in first["text"] and "data_loading" in first["text"]
    assert "Ranks 0, 1 and 3 wait" in first["text"] and "per step" in first["text"]
    assert [f["scope"] for f in d["findings"]] == sorted(
        (f["scope"] for f in d["findings"]), key=lambda s: s != "cross-rank"
    )
    assert d["recommendations"][0].startswith("Make `data_loading` on rank 2")


def test_ranks_that_wait_are_not_communication_bound(run4):
    labels = {x["rank"]: x["label"] for x in run4["diagnosis"]["devices"]}
    assert labels == {
        0: "waiting-for-peers",
        1: "waiting-for-peers",
        2: "host-bound",
        3: "waiting-for-peers",
    }
    single = next(s for s in run4["sections"] if s["id"] == "single_rank")
    shares = next(t for t in single["tables"] if t["id"] == "shares")["rows"]
    assert {r["rank"]: r["verdict"] for r in shares} == labels
    assert single["verdict"]["label"] == "waiting-for-peers"
    assert "communication-bound" not in json.dumps(run4["diagnosis"])


def test_diagnosis_reads_only_the_report_dict():
    """A hand-made report dict (no SQL anywhere) gets its diagnosis."""
    ns = lambda v: {"value": v, "unit": "ns"}  # noqa: E731
    ledger = {
        "rank": 0,
        "device": 0,
        "span": ns(10**7),
        "compute_only": ns(10**6),
        "both": ns(0),
        "comm_only": ns(0),
        "copy_only": ns(8 * 10**6),
        "idle": ns(10**6),
        "compute_busy": ns(10**6),
        "comm_busy": ns(0),
        "copy_busy": ns(8 * 10**6),
    }
    report = {
        "sections": [
            {
                "id": "single_rank",
                "verdict": {"label": "balanced", "reason": ""},
                "tables": [
                    {"id": "ledger", "rows": [ledger]},
                    {"id": "shares", "rows": [{"rank": 0, "device": 0, "verdict": "balanced"}]},
                ],
            },
            {
                "id": "trace",
                "tables": [
                    {
                        "id": "copies",
                        "rows": [
                            {
                                "rank": 0,
                                "kind": "HtoD",
                                "src": "Pageable",
                                "dst": "Device",
                                "copies": {"value": 50, "unit": "count"},
                                "bytes": {"value": 5 * 10**8, "unit": "bytes"},
                            }
                        ],
                    },
                    {
                        "id": "activity",
                        "rows": [
                            {"rank": 0, "device": 0, "activities": {"value": 60, "unit": "count"}}
                        ],
                    },
                ],
            },
        ]
    }
    d = diagnose(report)
    assert d["headline"] == "COPY-BOUND"
    assert d["findings"][0]["share"]["value"] == pytest.approx(0.8)
    assert (
        "50 of 50 host copies (0.5 GB of 0.5 GB) are from or to pageable memory"
        in d["recommendations"][0]
    )
    assert "PyTorch" not in d["recommendations"][0]
    shares = finish(report)["sections"][0]["tables"][1]["rows"]
    assert shares[0]["verdict"] == "copy-bound"  # the document shows the diagnosis' label
    assert report["sections"][0]["tables"][1]["rows"][0]["verdict"] == "balanced"  # not written


@needs_public
@pytest.mark.parametrize("name", COPY_HEAVY)
def test_copy_heavy_exports_are_copy_bound(cli, name):
    report = _public(cli, name)
    d = report["diagnosis"]
    assert d["headline"].startswith("COPY-BOUND")
    assert d["findings"][0]["label"] == "copy-bound"
    assert {x["label"] for x in d["devices"]} == {"copy-bound"}
    code, out, _ = cli("report", PUBLIC / f"{name}.sqlite")
    assert out.splitlines()[1].startswith("DIAGNOSIS: COPY-BOUND")


@needs_public
def test_pinned_memory_advice_looks_at_the_copies(cli):
    """gpu4 copies between pinned and device memory only: no pinned-memory advice."""
    advice = " ".join(_public(cli, "gpu4__report2")["diagnosis"]["recommendations"])
    assert "pinned already" in advice and "allocate those host buffers pinned" not in advice
    assert not any(w in advice for w in ("PyTorch", "torch", "DDP", "FSDP", "DataLoader"))


@needs_public
def test_a_two_kernel_capture_is_not_enough_data(cli):
    d = _public(cli, "nsysai__mock")["diagnosis"]
    assert d["headline"] == "NOT ENOUGH DATA"
    assert [x["label"] for x in d["devices"]] == ["not enough data"]
    assert "GPU activities" in d["devices"][0]["reason"]
    assert not d["findings"] and not d["recommendations"]


@needs_public
def test_a_cpu_only_capture_says_it_has_no_gpu_activity(cli):
    report = _public(cli, "tutorialvqe__report1")
    d = report["diagnosis"]
    assert d["headline"] == "NO GPU ACTIVITY"
    # it traced CUDA (nsys's own record): not told to capture with --trace=cuda (#38 item 7)
    assert "--trace=cuda" not in d["cannot_answer"][0]["reason"]
    assert "every capture traced CUDA" in d["cannot_answer"][0]["reason"]
    single = next(s for s in report["sections"] if s["id"] == "single_rank")
    steps = next(c for c in single["cannot_answer"] if c["what"] == "the step breakdown")
    assert (
        "no report has GPU activity" in steps["reason"] and "--step-pattern" not in steps["reason"]
    )


def test_framework_advice_only_for_frameworks_in_the_trace():
    comm = Totals(
        span_ns=10**7,
        compute_busy_ns=5 * 10**6,
        comm_busy_ns=4 * 10**6,
        both_ns=10**6,
        exposed_comm_ns=3 * 10**6,
        idle_ns=10**6,
    )
    plain = " ".join(recommendations(comm, Evidence()).values())
    torch = " ".join(
        recommendations(comm, Evidence(frameworks=frozenset({"pytorch", "nccl"}))).values()
    )
    assert "bucket_cap_mb" not in plain and "DDP" not in plain
    assert "bucket_cap_mb" in torch and "3.00 ms" in torch


def test_pinned_memory_advice_follows_the_pageable_bytes_of_the_copies():
    """The copies themselves say whether host memory is pinned: one pinned allocation call
    elsewhere in the program does not make pageable copies fast."""
    copies = Totals(span_ns=10**7, compute_busy_ns=10**6, copy_only_ns=8 * 10**6, idle_ns=10**6)
    pageable = Evidence(
        host_copies=10, host_copy_bytes=10**9, pageable_copies=10, pageable_bytes=10**9
    )
    assert "allocate those host buffers pinned" in recommendations(copies, pageable)["copies"]
    allocates = Evidence(
        host_copies=10,
        host_copy_bytes=10**9,
        pageable_copies=10,
        pageable_bytes=10**9,
        host_alloc_calls=3,
    )
    text = recommendations(copies, allocates)["copies"]
    assert "allocate those host buffers pinned" in text and "do not use it" in text
    few = Evidence(host_copies=10, host_copy_bytes=10**9, pageable_copies=9, pageable_bytes=10**6)
    assert "allocate those" not in recommendations(copies, few)["copies"]  # 0.1% of the bytes
    pinned = Evidence(host_copies=10, host_copy_bytes=10**9, pageable_copies=0, pageable_bytes=0)
    assert "pinned already" in recommendations(copies, pinned)["copies"]


def test_host_work_on_an_os_runtime_call_is_named_and_explained():
    """Idle time that no NVTX range, MPI or CUDA call covers but an OS runtime call on the
    launching thread does (gaps.host_work source osrt) is named, with what blocks there."""
    idle = Totals(span_ns=10**7, compute_busy_ns=5 * 10**6, idle_ns=5 * 10**6)
    idle.gap_ns = {"host_bound": 5 * 10**6}
    e = Evidence(host_work=[("osrt", "write", 4 * 10**6), ("none", None, 10**6)])
    text = recommendations(idle, e)["host_work"]
    assert "4.00 ms inside write" in text and "A blocking OS call" in text
    assert "mark the loop's phases" not in text


def test_rank_lists_stay_short():
    from nsyswrap.report.diagnosis.words import ranks as _ranks

    assert _ranks([3]) == "rank 3"
    assert _ranks([0, 1, 3]) == "ranks 0, 1 and 3"
    assert _ranks([0, 1, 3, 4, 5, 6, 9]) == "ranks 0, 1, 3-6 and 9"
    assert _ranks([r for r in range(16) if r != 2], of=16) == "the other 15 ranks"


def _fix(kind, rank, phase, per_step, steps, per_affected, pattern="intermittent"):
    """A crossrank.whatif row (step time 100 ms: gain_pct = per_step / 1 ms)."""
    return {
        "kind": kind,
        "rank": rank,
        "phase": phase,
        "stage": None,
        "gain_ns_per_step": {"value": per_step, "unit": "ns"},
        "gain_pct": {"value": per_step / 1e6, "unit": "%"},
        "pattern": pattern,
        "steps": ",".join(map(str, steps)),
        "affected_steps": {"value": len(steps), "unit": "count"},
        "steps_in_window": {"value": 10, "unit": "count"},
        "gain_ns_per_affected_step": {"value": per_affected, "unit": "ns"},
    }


def _replay_causes(fixes: list[dict]) -> list[dict]:
    """Rule replay_causes on a report that has nothing but these fixes."""
    from nsyswrap.report.diagnosis.facts import Facts
    from nsyswrap.report.diagnosis.rules import replay_causes

    section = {"id": "crossrank", "tables": [{"id": "whatif", "rows": fixes}]}
    facts = Facts.of({"sections": [section]})
    return replay_causes.find(facts, replay_causes.RULE.limits())


def test_stalls_of_one_size_move_between_ranks_a_blip_does_not_make_them_move():
    _causes = _replay_causes

    moving = [
        _fix("rank_phase", None, "data_loading", 6e6, [2, 4, 7], 20e6),
        _fix("rank_phase", 3, "data_loading", 2e6, [2], 20e6),
        _fix("rank_phase", 6, "data_loading", 2e6, [4], 20e6),
        _fix("rank_phase", 1, "data_loading", 2e6, [7], 20e6),
    ]
    (cause,) = _causes(moving)
    assert cause["pairs"] == [(2, 3), (4, 6), (7, 1)]
    blip = [  # rank 1's 100 ms stalls in steps 3 and 4, rank 0 2 ms slower in step 7
        _fix("rank", 1, None, 20e6, [3, 4], 100e6),
        _fix("rank_phase", None, "data_loading", 20.2e6, [3, 4, 7], 67e6),
        _fix("rank_phase", 1, "data_loading", 20e6, [3, 4], 100e6),
        _fix("rank_phase", 0, "data_loading", 0.2e6, [7], 2e6),
    ]
    (cause,) = _causes(blip)
    assert (cause["rank"], cause["phase"], cause["fix"]["kind"]) == (
        1,
        "data_loading",
        "rank_phase",
    )


def test_a_rank_keeps_its_finding_beside_another_phases_moving_stalls():
    _causes = _replay_causes

    fixes = [
        _fix("rank", 1, None, 6e6, [2, 3, 4, 7], 15e6, "persistent"),
        _fix("rank_phase", 1, "data_loading", 4e6, [3, 7], 15e6),
        _fix("rank_phase", None, "backward", 2e6, [1, 2], 3e6),
        _fix("rank_phase", 0, "backward", 1e6, [1], 3e6),
        _fix("rank_phase", 1, "backward", 1e6, [2], 3e6),
    ]
    first, second = _causes(fixes)
    assert (first["rank"], first["phase"]) == (1, None)
    assert first["part"]["phase"] == "data_loading"  # its largest phase's part, told
    assert second["pairs"] == [(1, 0), (2, 1)]


def test_a_rank_slow_only_in_its_steps_of_moving_stalls_is_not_named_twice():
    _causes = _replay_causes

    fixes = [
        _fix("rank", 0, None, 0.37e6, [1], 3.7e6),
        _fix("rank_phase", 0, "forward", 0.28e6, [1], 2.8e6),
        _fix("rank_phase", None, "forward", 0.56e6, [1, 13], 2.8e6),
        _fix("rank_phase", 1, "forward", 0.28e6, [13], 2.8e6),
    ]
    (cause,) = _causes(fixes)
    assert cause["pairs"] == [(1, 0), (13, 1)]


def test_a_rank_whose_gain_moving_stalls_hold_little_of_keeps_its_finding():
    """Rank 1's data loading stalls steps 3 and 4 by 100 ms; its forward, slower after
    each stall, is one of the moving forward stalls there: the data loading comes first."""
    _causes = _replay_causes

    fixes = [
        _fix("rank", 1, None, 20e6, [3, 4], 100e6),
        _fix("rank_phase", 1, "data_loading", 19.8e6, [3, 4], 99e6),
        _fix("rank_phase", None, "data_loading", 19.8e6, [3, 4], 99e6),
        _fix("rank_phase", None, "forward", 0.3e6, [1, 3, 4], 1e6),
        _fix("rank_phase", 0, "forward", 0.1e6, [1], 1e6),
        _fix("rank_phase", 1, "forward", 0.2e6, [3, 4], 1e6),
    ]
    first, second = _causes(fixes)
    assert (first["rank"], first["phase"]) == (1, "data_loading")
    assert second["pairs"] == [(1, 0), (3, 1), (4, 1)]
