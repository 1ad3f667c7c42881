"""`nsyswrap diff`: planted differences between generated pairs of runs are found with the
right sign and size, noise is not, the gate decides right, incomparable runs are refused."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pandas as pd
import pytest
from helpers.paths import PUBLIC

import nsyswrap
from nsyswrap.comparison import diff
from nsyswrap.comparison.gate import gate
from nsyswrap.comparison.samples import add_samples, identify
from nsyswrap.comparison.significance import MIN_STEPS, compare_medians
from nsyswrap.crossrank import comm_split
from nsyswrap.engine.opener import Opener
from nsyswrap.errors import NsysWrapError
from nsyswrap.report.options import ReportOptions
from nsyswrap.synth.catalog import COVER_KERNEL
from nsyswrap.synth.pairs import BASE, FIXED_NS, STRAGGLER_RANK, write_pair

MFU_BEFORE = next((p for p in PUBLIC if p.stem == "nsysai__mfu_2gpu_before"), None)


@pytest.fixture(scope="session")
def pairs(tmp_path_factory):
    """name -> (base dir, new dir), generated once."""
    root = tmp_path_factory.mktemp("pairs")
    out = {}
    for name in ("straggler_fixed", "overlap_improved", "kernels_faster", "noise"):
        write_pair(name, root / name)
        out[name] = (root / name / "base", root / name / "new")
    return out


@pytest.fixture(scope="session")
def diffs(pairs):
    """name -> DiffResult of BASE vs NEW."""
    return {name: diff(*dirs, opener=Opener(jobs=1)) for name, dirs in pairs.items()}


def test_straggler_fixed_step_time_and_cause(diffs):
    r = diffs["straggler_fixed"]
    step = r.figure("step_time")
    assert step.significant and step.n_base == step.n_new == BASE.steps
    assert abs(step.delta + FIXED_NS) < 0.05 * FIXED_NS  # -2 ms per step
    assert step.ci_low < -0.95 * FIXED_NS and step.ci_high > -1.05 * FIXED_NS
    phase = r.figure(f"phase.host:rank={STRAGGLER_RANK},data_loading")
    assert phase.significant and abs(phase.delta + FIXED_NS) < 0.01 * FIXED_NS
    assert "± " in r.headline[0] and f"p50 over {BASE.steps} vs {BASE.steps} steps" in r.headline[0]
    assert r.headline[0].startswith("step time \u2212")
    assert r.headline[1].startswith(f"data_loading on rank {STRAGGLER_RANK} \u22122.0")
    assert not r.warnings
    s = r.stragglers.set_index("run")
    assert (s["rank"] == STRAGGLER_RANK).all()
    assert s.loc[r.base, "phase_excess_per_step_ns"] - s.loc[
        r.new, "phase_excess_per_step_ns"
    ] == pytest.approx(FIXED_NS, rel=0.01)


def test_overlap_improved(diffs):
    r = diffs["overlap_improved"]
    assert r.figure("step_time").significant and r.figure("step_time").delta < 0
    for rank, device in {(0, 0), (1, 1), (2, 0), (3, 1)}:
        exposed = r.figure(f"share.exposed_comm:rank={rank},device={device}")
        both = r.figure(f"share.both:rank={rank},device={device}")
        assert exposed.significant and exposed.delta < -0.1
        assert both.significant and both.delta > 0.1
    assert "exposed communication beyond waiting on all ranks" in r.headline[1]


def test_waited_and_transfer_are_the_comm_split(pairs):
    """One definition of waiting vs transfer: diff's figures are crossrank.comm_split's."""
    options = ReportOptions()
    with nsyswrap.open_run([pairs["straggler_fixed"][0]]) as run:
        found = identify(run, "base", options)
        add_samples(run, found, options)
        split = comm_split(run).dropna(subset=["step"]).set_index(["rank", "step"])
    s = found.samples
    for metric, column in (("waited", "wait_ns"), ("transfer", "transfer_ns")):
        got = s[s["metric"] == metric].groupby(["rank", "step"])["value"].agg(["min", "max"])
        assert (got["min"] == got["max"]).all()  # one value per rank on all its devices
        assert got.loc[split.index, "min"].tolist() == split[column].astype(float).tolist()
        assert (got.drop(split.index)["min"] == 0).all()
    assert split["wait_ns"].sum() > 0 and split["transfer_ns"].sum() > 0


def test_kernels_faster(diffs):
    r = diffs["kernels_faster"]
    assert r.figure("step_time").significant and r.figure("step_time").delta < 0
    kernels = r.section("kernel")
    planted = kernels[
        ~kernels["item"].str.match("nccl|memcpy|memset") & (kernels["item"] != COVER_KERNEL.short)
    ]
    assert len(planted) >= 4
    assert planted["significant"].all()
    assert planted["rel_delta"].between(-0.35, -0.15).all()  # a quarter shorter
    assert (kernels["delta"].abs().diff().dropna() <= 0).all()  # top movers first
    assert r.headline[1].startswith("backward on all ranks \u2212")
    assert r.headline[2].startswith("forward on all ranks \u2212")


def test_noise_is_not_a_change(diffs, pairs, cli):
    r = diffs["noise"]
    assert not r.figure("step_time").significant
    assert "no significant change" in r.headline[0] and len(r.headline) == 1
    kernels = r.section("kernel")
    assert not (kernels["significant"] & (kernels["rel_delta"].abs() > 0.1)).any()
    base, new = pairs["noise"]
    for a, b in ((base, new), (new, base)):
        code, out, err = cli("diff", a, b, "--fail-on-regression", "5", "-f", "csv")
        assert code == 0 and err.strip().splitlines()[-1].startswith("PASS: step_time")
        assert out.splitlines()[0].startswith("id,section,metric,rank,device,item,unit")


def test_gate_both_ways(pairs, diffs, cli):
    base, new = pairs["straggler_fixed"]
    code, out, err = cli("diff", base, new, "--fail-on-regression", "5")
    assert code == 0 and err.strip().splitlines()[-1].startswith("PASS: step_time")
    assert out.startswith("step time \u2212")
    assert max(len(line) for line in out.splitlines()) <= 80
    code, _, err = cli("diff", new, base, "--fail-on-regression", "5", "-f", "json")
    last = err.strip().splitlines()[-1]
    assert code == 3 and last.startswith("FAIL: step_time +") and "more than 5 %" in last
    fixed = diffs["straggler_fixed"]
    assert gate(fixed, 5)[0] == 0
    assert gate(fixed, 5, f"phase.host:rank={STRAGGLER_RANK},data_loading")[0] == 0
    assert gate(fixed, 5, "collective.busbw:all_reduce 25 MiB")[0] == 0  # higher is better
    worse = diffs["noise"]
    assert gate(worse, 0)[0] == 0  # not significant
    with pytest.raises(NsysWrapError, match="--metric nope"):
        gate(fixed, 5, "nope")


def test_different_rank_counts_are_refused(pairs, generated_run, cli):
    _, two = generated_run(BASE.replace(ranks=2, clock_error_ns=None))
    base, _ = pairs["noise"]
    code, out, err = cli("diff", base, two)
    assert code == 1 and not out
    lines = err.strip().splitlines()
    assert (
        len(lines) == 1 and "not comparable" in lines[0] and "ranks: 4 (0-3) vs 2 (0,1)" in lines[0]
    )
    assert "--force" in lines[0]
    with pytest.raises(NsysWrapError, match="ranks"):
        diff(base, two)
    forced = diff(base, two, force=True)
    assert not forced.checks.set_index("check").loc["ranks", "ok"]
    assert forced.figure("step_time").n_new == BASE.steps


def test_different_capture_options_are_refused(pairs, tmp_path):
    runs = []
    for side, trace in zip(pairs["noise"], ("cuda,nvtx,osrt", "cuda,nvtx")):
        copy = tmp_path / side.name
        shutil.copytree(side, copy)
        (copy / "manifest.json").write_text(json.dumps({"options": {"trace": trace}}))
        runs.append(copy)
    with pytest.raises(NsysWrapError, match="launch --trace: cuda,nvtx,osrt vs cuda,nvtx"):
        diff(*runs, opener=Opener(jobs=1))


def test_machine_formats_and_html(pairs, tmp_path, cli):
    base, new = pairs["straggler_fixed"]
    code, out, _ = cli("diff", base, new, "-f", "json")
    doc = json.loads(out)
    assert code == 0 and doc["headline"][0].startswith("step time")
    assert "bootstrap" in doc["method"] and doc["checks"] and doc["stragglers"]
    step = next(f for f in doc["figures"] if f["id"] == "step_time")
    assert {"base", "new", "delta", "rel_delta", "ci_low", "ci_high", "significant"} <= set(step)
    target, page = tmp_path / "d.parquet", tmp_path / "d.html"
    assert cli("diff", base, new, "-f", "parquet")[0] == 1  # needs --output
    code, _, _ = cli("diff", base, new, "-f", "parquet", "-o", target, "--html", page)
    assert code == 0 and len(pd.read_parquet(target)) == len(doc["figures"])
    text = page.read_text()
    assert text.startswith("<!doctype html>") and "data_loading" in text and "<polyline" in text
    code, _, err = cli("diff", base, new, "--html", page)  # refused before any work
    assert code == 1 and "already exists" in err


def test_window_options_and_few_steps(pairs, cli):
    base, new = pairs["straggler_fixed"]
    r = nsyswrap.diff(str(base), str(new), ReportOptions.parse("2:12"))
    step = r.figure("step_time")
    assert step.n_base == step.n_new == 10 < MIN_STEPS
    assert r.warnings and "fewer than 20" in r.warnings[0]
    assert step.significant and abs(step.delta + FIXED_NS) < 0.05 * FIXED_NS
    code, _, err = cli("diff", base, new, "--step-pattern", "nothing:%")
    assert code == 1 and "has no steps in the window" in err


def test_manifest_stands_for_its_directory(pairs, tmp_path):
    from nsyswrap.comparison.samples import run_inputs

    assert run_inputs(tmp_path / "manifest.json") == [tmp_path]


def test_bootstrap_is_seeded_and_finds_shifts():
    rng = np.random.default_rng(0)
    base = pd.DataFrame({"a": rng.normal(100, 5, 30), "b": rng.normal(100, 5, 30)})
    new = pd.DataFrame({"a": rng.normal(100, 5, 30), "b": rng.normal(110, 5, 30)})
    out = compare_medians(base, new).set_index("id")
    assert not out.loc["a", "significant"] and out.loc["b", "significant"]
    assert out.loc["b", "ci_low"] < 10 < out.loc["b", "ci_high"]
    pd.testing.assert_frame_equal(compare_medians(base, new), compare_medians(base, new))


@pytest.mark.skipif(
    MFU_BEFORE is None, reason="shared/nsys-sqlite/public is not beside the repository"
)
def test_a_real_report_against_itself(cli):
    code, out, err = cli(
        "diff",
        MFU_BEFORE,
        MFU_BEFORE,
        "--step-pattern",
        "AllToAll%",
        "--fail-on-regression",
        "0",
        "-f",
        "json",
    )
    assert code == 0 and err.strip().splitlines()[-1].startswith("PASS: step_time +0.0 %")
    doc = json.loads(out)
    assert "no significant change" in doc["headline"][0]
    assert all(f["delta"] == 0 and not f["significant"] for f in doc["figures"])
    assert {f["section"] for f in doc["figures"]} >= {"step_time", "share", "kernel", "range"}


def test_nsyswrap_diff_is_callable_however_it_was_imported():
    import subprocess
    import sys

    code = (
        "import nsyswrap; f = nsyswrap.diff; import nsyswrap.comparison.gate; "
        "assert callable(f) and callable(nsyswrap.diff), type(nsyswrap.diff)"
    )
    for script in (
        code,
        "import nsyswrap.comparison.render, nsyswrap; assert callable(nsyswrap.diff)",
    ):
        subprocess.run([sys.executable, "-c", script], check=True)


def test_the_replay_of_base_is_checked_against_the_partial_fix(diffs):
    """BASE's rank 2 loads data 2.4 ms longer than the others, NEW's 0.4 ms: its own work is
    2 ms per step shorter; the replay of BASE predicted making it as fast as the others,
    and that less what NEW still lacks is the measured change, within 5 %."""
    c = diffs["straggler_fixed"].fix_check
    assert (c.named["ranks"], c.named["phase"]) == ([STRAGGLER_RANK], "data_loading")
    assert c.named["delta_ns"] == pytest.approx(-FIXED_NS, rel=0.01)
    assert c.left_ns == pytest.approx(400_000, rel=0.05)
    assert c.predicted_ns - c.left_ns == pytest.approx(c.measured_ns, rel=0.05)
    assert any("(the fix is partial)" in line for line in diffs["straggler_fixed"].headline)
    own = diffs["straggler_fixed"].figure(f"own_work:rank={STRAGGLER_RANK},data_loading")
    assert own.significant and own.delta == pytest.approx(-FIXED_NS, rel=0.01)
