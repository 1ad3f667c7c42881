"""What would a fix save: the replay (nsyswrap.crossrank.replay, .whatif) against the
generator's planted gains (each plant's scenario simulated again without it), the replay
check, the critical path, the persistent / intermittent rule and the diagnosis by gain."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from helpers.paths import ROOT, SHARED
from helpers.properties import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from nsyswrap import open_run
from nsyswrap.crossrank import fixes, lanes, whatif
from nsyswrap.crossrank.replay import Graph
from nsyswrap.engine import planner
from nsyswrap.engine.queries import run_module
from nsyswrap.report import ReportOptions, build_report
from nsyswrap.report.figures import rows
from nsyswrap.synth import generate_run, preset
from nsyswrap.synth.pairs import write_fault_pair
from nsyswrap.synth.scenario import Straggler


def _analysed(generated_run, name: str) -> dict:
    truth, out = generated_run(name)
    with open_run([out]) as run:
        report = build_report(run, ReportOptions())
        fixes = run_module(run, "crossrank.whatif")
        per_step = run.df("SELECT * FROM xr_whatif")
        path = run_module(run, "crossrank.critical_path")
        check = run_module(run, "crossrank.replay_check")
        planner.prepare(run, "xr_whatif", {"step_pattern": "step:%"})  # binds what it reads
        model = lanes.build_model(*lanes.inputs(lambda name: run.df(f'SELECT * FROM "{name}"')))
        exposure = run_module(run, "collectives.exposure")
    return {
        "truth": truth,
        "report": report,
        "fixes": fixes,
        "per_step": per_step,
        "path": path,
        "check": check,
        "model": model,
        "exposure": exposure,
    }


@pytest.fixture(scope="module")
def dp(generated_run) -> dict:
    return _analysed(generated_run, "dp_straggler")


@pytest.fixture(scope="module")
def stalls(generated_run) -> dict:
    return _analysed(generated_run, "intermittent")


def _gains(per_step: pd.DataFrame, kind: str, rank=None, phase=None) -> list[int]:
    rows = per_step[
        (per_step["kind"] == kind)
        & (per_step["rank"].isna() if rank is None else per_step["rank"] == rank)
        & (per_step["phase"].isna() if phase is None else per_step["phase"] == phase)
    ]
    return rows.sort_values("step")["gain_ns"].tolist()


def _per_step(folder) -> pd.DataFrame:
    """The replay's rows per candidate and step (xr_whatif) of the run in `folder`."""
    with open_run([folder]) as run:
        run_module(run, "crossrank.whatif")
        return run.df("SELECT * FROM xr_whatif")


def _planted(truth) -> list[int]:
    return [s["gain_ns"] for s in truth.planted_gain["steps"]]


@pytest.mark.parametrize("name", ["dp", "stalls"])
def test_replaying_the_recorded_durations_gives_the_recorded_step_times(name, request):
    run = request.getfixturevalue(name)
    assert (run["check"]["residual_ns"] == 0).all() and len(run["check"])
    assert not run["model"].graph.clamped.any()
    per_step = run["per_step"]
    assert (per_step["recorded_ns"] == per_step["replayed_ns"]).all()
    recorded = [s["recorded_ns"] for s in run["truth"].planted_gain["steps"]]
    assert (
        per_step[per_step["kind"] == "all"].sort_values("step")["recorded_ns"].tolist() == recorded
    )


def test_a_persistent_straggler_gains_exactly_what_removing_it_saves(dp):
    """Every rank does the same work, collectives end together: idealising the straggler's
    data loading is the unplanted run, to the ns, step by step."""
    planted = _planted(dp["truth"])
    assert _gains(dp["per_step"], "rank_phase", 1, "data_loading") == planted
    assert _gains(dp["per_step"], "rank", 1) == planted
    row = dp["fixes"][(dp["fixes"]["kind"] == "rank_phase") & (dp["fixes"]["rank"] == 1)].iloc[0]
    assert row["gain_ns_per_step"] == dp["truth"].planted_gain["gain_ns_total"] / len(planted)
    assert row["pattern"] == "persistent" and row["residual_ns"] == 0


def test_stalls_that_move_between_ranks_gain_exactly_what_removing_them_saves(stalls):
    planted = _planted(stalls["truth"])
    assert _gains(stalls["per_step"], "rank_phase", None, "data_loading") == planted
    for rank, step in ((3, 2), (6, 4), (1, 7), (4, 8)):
        gains = _gains(stalls["per_step"], "rank_phase", rank, "data_loading")
        assert gains == [planted[step] if s == step else 0 for s in range(len(planted))]
    fixes = stalls["fixes"]
    row = fixes[(fixes["kind"] == "rank_phase") & (fixes["rank"] == 3)].iloc[0]
    assert (
        row["phase"] == "data_loading" and row["pattern"] == "intermittent" and row["steps"] == "2"
    )


def test_the_critical_path_adds_up_to_each_step_time(dp, stalls):
    for run in (dp, stalls):
        total = run["path"].groupby("step")["ns"].sum()
        steps = run["per_step"][run["per_step"]["kind"] == "all"].set_index("step")["replayed_ns"]
        assert total.to_dict() == steps.to_dict()
    # a straggler step rests on the straggler's data loading
    path = dp["path"][dp["path"]["step"] == 3]
    assert ((path["rank"] == 1) & (path["phase"] == "data_loading")).any()


def test_hiding_a_collective_saves_at_most_its_exposed_time(stalls):
    exposure = stalls["exposure"]
    steps = stalls["fixes"]["steps_in_window"].iloc[0]
    hidden = stalls["fixes"][stalls["fixes"]["kind"] == "collective"]
    assert set(hidden["op"]) == {"all_gather", "reduce_scatter"}
    for fix in hidden.itertuples():
        kernels = exposure[exposure["name"].str.contains(fix.op.title().replace("_", ""))]
        exposed = kernels.groupby("rank")["exposed_ns"].sum().max() / steps
        assert 0 < fix.gain_ns_per_step <= exposed


def test_the_diagnosis_names_the_planted_cause_first_with_its_gain(dp, stalls):
    first = dp["report"]["diagnosis"]["findings"][0]
    assert dp["report"]["diagnosis"]["headline"] == "STRAGGLER: RANK 1"
    assert first["gain"]["value"] == dp["truth"].planted_gain["gain_ns_total"] / 8
    assert "would save" in first["text"] and "wait" in first["text"]
    d = stalls["report"]["diagnosis"]
    assert d["headline"].startswith("INTERMITTENT: DATA_LOADING STALLS")
    for rank, step in ((3, 2), (6, 4), (1, 7), (4, 8)):
        assert f"RANK {rank} IN STEP {step}" in d["headline"]
    assert d["findings"][0]["gain"]["value"] == stalls["truth"].planted_gain["gain_ns_total"] / 10
    assert d["findings"][0]["evidence"]["stalls"] == [
        {"step": s, "rank": r} for r, s in ((3, 2), (6, 4), (1, 7), (4, 8))
    ]
    gains = [f["gain"]["value"] for f in d["findings"] if f["gain"]["value"] is not None]
    assert gains == sorted(gains, reverse=True)


@settings(max_examples=examples(25), deadline=None)
@given(data=st.data())
def test_idealising_more_never_slows_the_replay(dp, data):
    """Any set of (rank, phase, side) parts idealised (host time before and after the launch
    a segment's lane rests on, GPU work), and any collectives hidden, then more: the
    replayed step times never grow."""
    model = dp["model"]
    cut = fixes.excess(model)
    rank = model.segs["rank"].to_numpy()
    sides = ("before", "after", "gpu")
    cells = sorted({(int(r), p, s) for r in rank for p in range(len(model.phases)) for s in sides})
    coll = len(model.collectives)
    small = data.draw(st.sets(st.sampled_from(cells)))
    large = small | data.draw(st.sets(st.sampled_from(cells)))
    hide_small = data.draw(st.sets(st.integers(0, coll - 1)))
    hide_large = hide_small | data.draw(st.sets(st.integers(0, coll - 1)))
    times = []
    for chosen, hidden_set in ((small, hide_small), (large, hide_large)):
        d = model.graph.d.copy()
        parts = {s: np.zeros((len(rank), 1), np.int64) for s in sides}
        for r, p, s in chosen:
            parts[s][:, 0] += np.where(rank == r, getattr(cut, s)[:, p], 0)
        hidden = np.zeros((coll, 1), bool)
        hidden[sorted(hidden_set), 0] = True
        e_nodes = np.flatnonzero((model.events["kind"] == "E").to_numpy())
        d[e_nodes[hidden[model.events["cid"].to_numpy()[e_nodes], 0]]] = 0
        w = model.replay.weights(fixes.Cut(**parts), model.gpu_ns)
        times.append(whatif.step_times(model, model.graph.replay(d[:, None], hidden, w))[0])
    assert (times[1] <= times[0]).all()


def test_the_replay_engine_is_max_plus_and_hides_collectives():
    # 0, 1: two ranks' arrivals; 2: the last arrival; 3, 4: their ends (hideable, collective 0)
    ptr = np.array([0, 0, 0, 2, 4, 6])
    pred = np.array([0, 1, 2, 0, 2, 1])
    hideable = np.array([-1, -1, 0, 0, 0, 0])
    side = np.array([-1, -1, 0, 1, 0, 1])
    g = Graph(np.array([10, 30, 30, 35, 35]), ptr, pred, hideable, side, n_hideable=1)
    assert g.d.tolist() == [10, 30, 0, 5, 5] and not g.clamped.any()
    d = np.stack([g.d, np.array([10, 20, 0, 5, 5]), g.d], axis=1)
    hidden = np.array([[False, False, True]])
    t = g.replay(d, hidden)
    assert t[:, 0].tolist() == [10, 30, 30, 35, 35]  # recorded
    assert t[:, 1].tolist() == [10, 20, 20, 25, 25]  # the late rank 10 ns faster
    assert t[:, 2].tolist() == [10, 30, 30, 15, 35]  # hidden: each ends at its own arrival + 5
    assert g.binding(3) == 2


@pytest.mark.skipif(
    not (SHARED / "nsys-sqlite" / "real-mpi").is_dir(), reason="shared real MPI run missing"
)
def test_real_captures_show_their_replay_residual(cli):
    import json

    from helpers.paths import FIXTURES

    for path, steps, replayed in (
        (SHARED / "nsys-sqlite" / "real-mpi", [], True),
        # asynchronous all-reduces with their completion marks: replayed exactly
        (FIXTURES / "real" / "h200_ddp_gloo_slow", [], True),
        (FIXTURES / "real" / "h200_ddp_gloo_slow_zero_code", [], True),
        (FIXTURES / "real" / "h200_fix_slow", [], True),
        (FIXTURES / "real" / "h200_fix_clean", [], True),
        # captured without the marks: DDP's asynchronous all-reduces have no recorded end
        # (their ranges cover the issue alone): 3.9 % over the window, no what-if
        (FIXTURES / "real" / "h100_ddp_gloo", [], False),
    ):
        code, out, err = cli("report", path, "-f", "json", *steps)
        assert code == 0, err
        crossrank = next(s for s in json.loads(out)["sections"] if s["id"] == "crossrank")
        tables = {t["id"]: t["rows"] for t in crossrank["tables"]}
        residual = tables["replay_residual"][0]
        assert residual["max"]["value"] is not None
        assert ("whatif" in tables) == replayed == (residual["max"]["value"] <= 0.02)
        if not replayed:
            assert any(
                c["what"].startswith("what a fix would save") and "2 %" in c["reason"]
                for c in crossrank["cannot_answer"]
            )


def _pipeline(
    slow: float, extra: int = 0, stages: int = 4, replicas: int = 2, micro: int = 4, steps: int = 3
):
    """Frames (coll, segs, calls, steps) of a GPipe-like CPU run made with the replay's own
    rules: per step each stage runs every microbatch's forward, then every backward in
    reverse (host work, one phase range each); activations and gradients go between
    neighbouring stages of a replica as two-member send_recv collectives timed by their
    ranges (the sender's call returns at once, the receiver's when the pair ends, a wait);
    then each stage's replicas all-reduce (every member waits). Stage 2's work is `slow`
    times longer, plus `extra` per microbatch. Also the step times."""
    rng = np.random.default_rng(5)
    ranks = stages * replicas
    base = rng.integers(10, 30, (steps, 2, micro)) * 2_000  # the same work on every stage
    lane = np.zeros(ranks, np.int64)
    coll, segs, rows, seq, stream_end = [], [], [], {}, {}

    def segment(r, end, step, **row):
        if end > lane[r]:
            segs.append({"rank": r, "start_ns": lane[r], "end_ns": end, "step": step, **row})
            lane[r] = end

    def collective(pg, issue, step, op, transfer, waiters):
        """Each member arrives at its call or its group's previous end, if later."""
        k = seq[pg] = seq.get(pg, -1) + 1
        arrive = {r: max(t, stream_end.get((r, pg), 0)) for r, t in issue.items()}
        end = max(arrive.values()) + transfer
        for r in issue:
            stream_end[(r, pg)] = end
            coll.append(
                {
                    "pg": pg,
                    "seq": k,
                    "op": op,
                    "rank": r,
                    "step": step,
                    "start_ns": arrive[r],
                    "end_ns": end,
                    "on_gpu": False,
                }
            )
        for r in waiters:
            segment(
                r,
                end,
                step,
                kind="wait",
                waits_for="collective",
                for_pg=pg,
                for_seq=k,
                for_end_ns=end,
                call_ns=0,
                wake_ns=0,
            )

    for s in range(steps):
        starts = lane.copy()
        for phase, order, sign in (
            ("forward", range(micro), 1),
            ("backward", reversed(range(micro)), -1),
        ):
            for m in order:
                for p in range(stages) if sign > 0 else reversed(range(stages)):
                    src = p - sign
                    for rep in range(replicas):
                        r = rep * stages + p
                        if 0 <= src < stages:  # wait for the neighbour's activations
                            s_rank = rep * stages + src
                            issue = {s_rank: lane[s_rank], r: lane[r]}
                            collective(
                                f"p2p:{rep}:{min(p, src)}", issue, s, "send_recv", 3_000, [r]
                            )
                        work = int(base[s, int(phase == "backward"), m] * (slow if p == 2 else 1))
                        work += extra if p == 2 else 0
                        at = lane[r]
                        segment(r, at + work, s, phase=phase, phase_start_ns=at, host_ns=work)
        for p in range(stages):
            members = [rep * stages + p for rep in range(replicas)]
            collective(f"dp:{p}", {r: lane[r] for r in members}, s, "all_reduce", 5_000, members)
            for r in members:
                segment(r, lane[r] + 1_000, s, host_ns=1_000)
        for r in range(ranks):
            rows.append({"rank": r, "step": s, "start_ns": starts[r], "end_ns": lane[r]})
        for r in range(ranks):
            segment(r, lane[r] + 2_000, np.nan, host_ns=2_000)
    segs = lanes.segment_frame(segs)
    segs["host_ns"] = segs["host_ns"].astype(np.int64)
    segs["seg"] = segs.groupby("rank").cumcount()
    calls = pd.DataFrame(
        columns=["rank", "stream", "start_ns", "end_ns", "launch_ns", "ready_ns", "seg"]
    )
    ends = pd.DataFrame(rows).groupby("step")["end_ns"].max().to_numpy()
    first = pd.DataFrame(rows).query("step == 0")["start_ns"].max()
    return (pd.DataFrame(coll), segs, calls, pd.DataFrame(rows)), np.diff(np.r_[first, ends])


@pytest.mark.parametrize("factor, extra", [(1.5, 0), (1.0, 7_000)])
def test_a_slow_pipeline_stage_gains_what_removing_its_slowness_saves(factor, extra):
    """Stage 2 uniformly slower, or slower by a fixed time per microbatch: either way making
    it as fast as the others saves what removing its slowness saves, bubbles included."""
    frames, slow = _pipeline(factor, extra)
    _, fast = _pipeline(1.0)
    model = lanes.build_model(*frames)
    assert fixes.stages(model) == {r: r % 4 for r in range(8)}
    out = whatif.analyse(model)
    assert (out["check"]["residual_ns"] == 0).all()
    w = out["whatif"]
    stage = w[(w["kind"] == "stage") & (w["stage"] == 2)].sort_values("step")
    assert stage["gain_ns"].tolist() == (slow - fast).tolist()
    assert stage["gain_ns"].sum() == w[w["kind"] == "stage"].groupby("stage")["gain_ns"].sum().max()
    # one replica's stage 2 alone saves nothing: its partner holds the stage's all-reduce
    assert (w.loc[w["kind"] == "rank", "gain_ns"] <= 0).all()


def _fix(kind, gain, pattern="persistent", **keys) -> dict:
    """A row of the report's whatif table (step time 25 ms, 4 steps)."""
    return {
        "kind": kind,
        "rank": None,
        "phase": None,
        "stage": None,
        "pg": None,
        "op": None,
        **keys,
        "gain_ns_per_step": {"value": gain, "unit": "ns"},
        "gain_pct": {"value": 100 * gain / 25_000_000, "unit": "%"},
        "pattern": pattern,
        "steps": "0,1,2,3" if pattern != "none" else None,
        "affected_steps": {"value": 4 if pattern != "none" else 0, "unit": "count"},
        "steps_in_window": {"value": 4, "unit": "count"},
        "gain_ns_per_affected_step": {
            "value": gain if pattern != "none" else None,
            "unit": "ns",
        },
    }


def test_a_stage_without_gpu_work_is_compared_by_its_ranges_host_time():
    """Ranges that launched no GPU work (a CPU pipeline) are compared by their host time:
    the same ranges as GPU work are cut alike, on that side."""
    frames, _ = _pipeline(1.5, 0)
    on_cpu = lanes.build_model(*frames)
    by_time = fixes.stage_excess(on_cpu, fixes.stages(on_cpu)).total()
    coll, segs, calls, steps = frames
    segs = segs.assign(gpu_ns=np.where(segs["kind"] == "work", segs["host_ns"], 0))
    on_gpu = lanes.build_model(coll, segs, calls, steps)
    by_work = fixes.stage_excess(on_gpu, fixes.stages(on_gpu)).total()
    assert by_time.gpu.sum() == 0 and by_work.before.sum() + by_work.after.sum() == 0
    assert (by_time.before + by_time.after).sum() > 0
    assert ((by_time.before + by_time.after) == by_work.gpu).all()


def test_the_diagnosis_names_a_slow_pipeline_stage_by_its_gain():
    """A whatif table alone (no straggler: its send/recv waits are structural) is enough."""
    from nsyswrap.report.diagnosis import diagnose
    from nsyswrap.report.document import finish

    fix = _fix
    rows = [
        fix("all", 3_000_000),
        fix("stage", 2_580_000, stage=2),
        fix("rank", 10_000, "none", rank=5),
        fix("collective", 40_000, pg="p2p", op="send_recv"),
    ]
    report = {
        "sections": [
            {
                "id": "crossrank",
                "verdict": {"label": "no significant straggler", "reason": ""},
                "tables": [{"id": "whatif", "rows": rows}],
            }
        ]
    }
    d = diagnose(report)
    first = d["findings"][0]
    assert d["headline"] == "SLOW PIPELINE STAGE: 2"
    assert first["gain"]["value"] == 2_580_000 and "2.58 ms per step (10 %" in first["text"]
    assert finish(report)["sections"][0]["verdict"]["label"] == "slow pipeline stage: 2"


@pytest.mark.parametrize("gain, steps", [(100_000, [0, 1]), (0, [])])
def test_a_straggler_whose_fix_saves_little_is_no_significant_straggler(gain, steps):
    """The section named rank 1 by the waits it imposes; the replay finds making it as fast
    as the others saves under 1 % of a step: the verdict says so, with that gain."""
    from nsyswrap.report.document import finish

    waits = "rank 1 made the others wait 9.000 ms (90% of all waiting)"
    rows = [_fix("all", 120_000), _fix("rank", gain, rank=1)] if gain else [_fix("all", 1)]
    report = {
        "window": {"steps": steps},
        "sections": [
            {
                "id": "crossrank",
                "verdict": {"label": "straggler: rank 1", "reason": waits},
                "tables": [{"id": "whatif", "rows": rows}],
            }
        ],
    }
    verdict = finish(report)["sections"][0]["verdict"]
    basis = "per step (0.4 % of the step time" if steps else "over the window (0.0 % of the window"
    assert verdict["label"] == "no significant straggler"
    assert verdict["reason"].startswith(waits + "; but the replay finds that making rank 1 as ")
    assert f"would save {'0.10' if gain else '0.00'} ms {basis}, under 1%)" in verdict["reason"]


@pytest.mark.parametrize(
    "name, rank, phase, within",
    [
        ("run4_straggler", 2, "data_loading", 0),
        # its node's clock drifts: each kernel's length on it rounds to the ns, and the
        # ranks are compared by their kernels' busy time (1-2 ns short of the truth there)
        ("hybrid8", 6, "backward", 2),
    ],
)
def test_ranks_doing_the_same_work_gain_what_removing_the_plant_saves(
    generated_run, name, rank, phase, within
):
    truth, out = generated_run(preset(name).replace(same_work=True))
    gains = _gains(_per_step(out), "rank_phase", rank, phase)
    assert max(abs(g - p) for g, p in zip(gains, _planted(truth), strict=True)) <= within


def test_the_straggler_fixture_gains_within_19_ns_of_its_plant():
    """fixtures/run4_straggler: each rank draws its own kernels, members end up to 200 ns
    apart; fixing rank 2's data loading still saves what removing its plant saves, within
    19 ns a step (367,828 ns per step against 367,826)."""
    truth = json.loads((ROOT / "fixtures" / "run4_straggler" / "truth.json").read_text())
    gains = _gains(_per_step(ROOT / "fixtures" / "run4_straggler"), "rank_phase", 2, "data_loading")
    planted = [s["gain_ns"] for s in truth["planted_gain"]["steps"]]
    assert max(abs(g - p) for g, p in zip(gains, planted, strict=True)) <= 19
    assert round(np.mean(gains)) == 367_828 and round(np.mean(planted)) == 367_826


@pytest.mark.parametrize("drift, within", [(False, 0), (True, 3)])
def test_a_generated_pipeline_gains_what_removing_its_slow_stage_saves(
    generated_run, drift, within
):
    """pipeline8 with every rank drawing the same work: stage 2 as fast as the other stages
    saves, step by step, what the generator's run without the slow stage saves: to the ns
    on clocks that do not drift, within 3 ns with node1's -30 ppm over its 8 steps
    (durations round, and the replay's path crosses a host's and a GPU lane's converted
    times; over 4 the clock solve fits no drift). Its
    compute waits for two transfers at one instant in places: one wait, the work after it
    following the later of them."""
    sc = preset("pipeline8").replace(same_work=True)
    truth, out = generated_run(sc if drift else sc.replace(clock_drift_ppm=(0,) * 8))
    with open_run([out]) as run:
        report = build_report(run, ReportOptions())
    per_step = _per_step(out)
    stage = per_step[(per_step["kind"] == "stage") & (per_step["stage"] == 2)]
    gains = stage.sort_values("step")["gain_ns"].tolist()
    assert max(abs(g - p) for g, p in zip(gains, _planted(truth), strict=True)) <= within
    first = report["diagnosis"]["findings"][0]
    assert report["diagnosis"]["headline"] == "SLOW PIPELINE STAGE: 2"
    assert first["gain"]["value"] == np.mean(gains)


@pytest.mark.parametrize(
    "name, steps, headline, within",
    [
        ("pipeline8", 4, "SLOW PIPELINE STAGE: 2", 0.01),  # its ranks draw their own kernels
        ("moe8", 8, "STRAGGLER: RANK 6", 0.01),  # ... and its experts get unequal tokens
        ("pipeline8_same_work", 4, "SLOW PIPELINE STAGE: 2", 0),
        ("moe8_same_work", 4, "STRAGGLER: RANK 6", 0),
    ],
)
def test_pipeline_and_moe_runs_name_their_planted_cause_first(
    generated_run, name, steps, headline, within
):
    """The first finding's gain per step is the planted gain: to the ns where the replay's
    assumptions hold (every rank drawing the same work, moe8_same_work's experts other than
    the hot one getting the same tokens, clocks that do not drift), within 1 % where ranks
    draw their own (moe8: -0.9 % over its 8 steps, -1.1 % over 4)."""
    truth, out = generated_run(preset(name, steps=steps))
    with open_run([out]) as run:
        d = build_report(run, ReportOptions())["diagnosis"]
    planted = truth.planted_gain["gain_ns_total"] / len(truth.planted_gain["steps"])
    gain = d["findings"][0]["gain"]["value"]
    assert d["headline"] == headline
    assert abs(gain - planted) <= within * planted


def test_a_hot_experts_planted_gain_is_its_work_and_balanced_routing_saves_more(generated_run):
    """The hot expert's plant is its rank's extra expert work (the run again with it doing
    the median other expert's, routing as planted): the replay finds it step by step to the
    ns; balanced routing also shortens every all_to_all's transfers, which a trace cannot
    size, and saves about twice as much (truth's balanced_routing)."""
    truth, out = generated_run(preset("moe8_same_work", steps=4))
    assert _gains(_per_step(out), "rank", 6) == _planted(truth)
    balanced = truth.planted_gain["balanced_routing"]["gain_ns_total"]
    assert 2 * truth.planted_gain["gain_ns_total"] < balanced


@pytest.mark.parametrize("name, hot", [("moe8", True), ("moe8_kernels", False)])
def test_a_hot_expert_is_named_by_its_all_to_all_bytes(generated_run, name, hot):
    """moe8's ranges give each member's all_to_all bytes: rank 6 sends about twice the
    median rank's, and the finding says hot expert and asks for balanced routing;
    moe8_kernels' kernels give no bytes, so neither table nor advice claims it."""
    _, out = generated_run(preset(name, steps=4))
    with open_run([out]) as run:
        report = build_report(run, ReportOptions())
    first = report["diagnosis"]["findings"][0]
    (crossrank,) = [s for s in report["sections"] if s["id"] == "crossrank"]
    tables = {t["id"]: t for t in crossrank["tables"]}
    assert first["label"] == "straggler: rank 6"
    assert ("a hot expert" in first["text"]) is hot
    if not hot:
        assert "exchange_bytes" not in tables and "Balance" not in first["recommendation"]
        return
    ratio = {r["rank"]: r["vs_median"]["value"] for r in tables["exchange_bytes"]["rows"]}
    assert ratio[6] > 1.8 and all(0.9 < v < 1.1 for r, v in ratio.items() if r != 6)
    assert first["recommendation"].startswith("Balance the tokens routed to rank 6's experts")
    assert first["evidence"]["exchange_bytes_vs_median"]["value"] == ratio[6]


# data loading stalls of 25-35 ms on a rank drawn at random (rank, step, ns), two in the
# last two steps; every rank draws its own work
MOVING = ((7, 6, 29_178_410), (7, 9, 29_136_805), (3, 11, 25_220_019), (6, 14, 27_677_714))
MOVING += ((1, 15, 27_328_130),)


@pytest.fixture(scope="module")
def moving(tmp_path_factory) -> dict:
    sc = preset("intermittent").replace(
        name="moving_stalls",
        steps=16,
        same_work=False,
        end_jitter_ns=200,
        data_loading_ns=2_000_000,
        stalls=tuple(
            Straggler(rank=r, phase="data_loading", extra_ns=ns, steps=(s,)) for r, s, ns in MOVING
        ),
    )
    out = tmp_path_factory.mktemp("moving_stalls")
    truth = generate_run(sc, out)
    with open_run([out]) as run:
        return {"truth": truth, "report": build_report(run, ReportOptions())}


def test_a_fix_affects_only_the_steps_where_its_stall_happened(moving):
    """Ranks drawing their own work: each rank is a few tens of us behind the others in
    some step by its own jitter, far under 3 x the run's step-to-step noise; only the stalls
    count. Each rank's fix, and its data loading's, lists exactly its stalled steps."""
    fixes = rows(moving["report"], "crossrank", "whatif")
    noise = fixes[0]["noise_ns"]["value"]
    assert 20_000 < noise < 200_000  # tens of us: how much a rank's own work varies
    for r in range(8):
        planted = [s for rank, s, _ in MOVING if rank == r]
        for kind, phase in (("rank", None), ("rank_phase", "data_loading")):
            fix = next(
                (f for f in fixes if f["kind"] == kind and f["rank"] == r and f["phase"] == phase),
                {"steps": None},
            )
            assert [int(s) for s in (fix["steps"] or "").split(",") if s] == planted, (r, fix)


def test_moving_stalls_list_their_pairs_outliers_after_the_window_included(moving):
    """Stalled steps are outliers (7-9x the median step): the last two lie after the
    window's last usual step, yet the replay counts them and the finding says so."""
    report, truth = moving["report"], moving["truth"]
    assert report["window"]["step_to"] == 14
    (first, *_) = report["diagnosis"]["findings"]
    assert first["id"] == "intermittent", first["text"]
    pairs = [(s["rank"], s["step"]) for s in first["evidence"]["stalls"]]
    assert pairs == [(r, s) for r, s, _ in MOVING]
    planted = truth.planted_gain["gain_ns_total"] / len(truth.planted_gain["steps"])
    assert first["cost"]["value"] == pytest.approx(planted, rel=0.01)
    assert first["evidence"]["outlier_steps"] == [6, 9, 11, 14, 15]
    assert "the replay counts them here" in first["text"]


@pytest.mark.parametrize("name", ["moving_pauses", "moving_pauses_late"])
def test_moving_pauses_list_exactly_their_rank_step_pairs(tmp_path, name):
    """The generator's fault pairs of 25-35 ms host pauses inside forward on a random rank
    about one step in five (and, `_late`, in both of the last two steps, outliers after
    the window): the finding lists exactly the paused (rank, step) pairs, and its saving
    is within 5 % of what the same job without the pauses measures."""
    pair = write_fault_pair(name, tmp_path)
    with open_run([tmp_path / "fault"]) as run:
        report = build_report(run, ReportOptions())
    (first, *_) = report["diagnosis"]["findings"]
    assert first["id"] == "intermittent" and first["evidence"]["phase"] == "forward"
    pairs = sorted([s["rank"], s["step"]] for s in first["evidence"]["stalls"])
    assert pairs == sorted(pair["fault"]["rank_steps"]), first["text"]
    measured = pair["step_times"]["difference_per_step_ns"]
    assert first["cost"]["value"] == pytest.approx(measured, rel=0.05)
