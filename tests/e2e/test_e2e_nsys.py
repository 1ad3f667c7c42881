"""End to end with NVIDIA's real nsys: launch a 2-rank CPU DDP run, export it, read it back
with the views."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import nsyswrap
from nsyswrap.engine.queries import run_module
from nsyswrap.report.figures import rows

ROOT = Path(__file__).resolve().parents[2]
NEEDS = [m for m in ("torch", "nvtx") if importlib.util.find_spec(m) is None]
pytestmark = [
    pytest.mark.nsys,
    pytest.mark.torch,
    pytest.mark.skipif(
        shutil.which("nsys") is None,
        reason="NVIDIA's nsys is not on PATH (bash .ci/install-nsys.sh)",
    ),
    pytest.mark.skipif(
        bool(NEEDS), reason=f"needs {' and '.join(NEEDS)} (pip install torch==2.13.0 nvtx==0.2.10)"
    ),
]
STEPS = 3


def nsyswrap_cli(*args, cwd=ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "nsyswrap", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def ddp_run(tmp_path_factory) -> Path:
    """One annotated 2-rank run of examples/train_ddp.py, exported to SQLite."""
    out = tmp_path_factory.mktemp("e2e") / "run"
    done = nsyswrap_cli(
        "launch",
        "--annotate",
        "modules,collectives,steps",
        "--trace",
        "nvtx,osrt",
        "--out",
        out,
        "--",
        "torchrun",
        "--nproc-per-node",
        "2",
        "examples/train_ddp.py",
        "--steps",
        STEPS,
        "--mark-phases",
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert len(list(out.glob("*.sqlite"))) == 2, done.stderr[-4000:]
    return out


def test_manifest_records_both_ranks(ddp_run):
    run = json.loads((ddp_run / "manifest.json").read_text())
    assert (
        run["status"] == "ok" and run["exit_code"] == 0 and run["nsys"]["version"].startswith("20")
    )
    assert [(r["rank"], r["profiled"], r["exit_code"]) for r in run["ranks"]] == [
        (0, True, 0),
        (1, True, 0),
    ]
    assert len(run["sqlite"]) == 2


def test_forward_and_backward_module_ranges_on_both_ranks(ddp_run):
    rows = nsyswrap.sql(
        """
        SELECT rank, text, event_type, count(*) AS n FROM nvtx
        WHERE text LIKE 'fwd:%' OR text LIKE 'bwd:%' GROUP BY ALL""",
        [ddp_run],
    )
    for rank in (0, 1):
        mine = rows[rows["rank"] == rank]
        ranges = dict(zip(mine.text, mine.n))
        for path in (
            "DistributedDataParallel",
            "module",
            "module.layers.0",
            "module.layers.1.mlp.0",
            "module.head",
        ):
            assert ranges.get(f"fwd:{path}") == STEPS, (rank, path, ranges)
            assert ranges.get(f"bwd:{path}") == STEPS, (rank, path, ranges)
        assert set(mine[mine.text.str.startswith("fwd:")].event_type) == {"push_pop"}
        assert set(mine[mine.text.str.startswith("bwd:")].event_type) == {"start_end"}


def test_backward_ranges_nest_and_forward_comes_first(ddp_run):
    rows = nsyswrap.sql(
        """
        SELECT rank, text, start_ns, end_ns FROM nvtx
        WHERE text IN ('fwd:module.layers.1', 'bwd:module.layers.1', 'bwd:module.layers.1.mlp')
        ORDER BY rank, start_ns""",
        [ddp_run],
    )
    for (rank, text), group in rows.groupby(["rank", "text"]):
        assert len(group) == STEPS and (group.end_ns > group.start_ns).all(), (rank, text)
    for rank in (0, 1):
        mine = rows[rows["rank"] == rank]
        fwd, bwd, inner = (
            mine[mine.text == t].reset_index()
            for t in ("fwd:module.layers.1", "bwd:module.layers.1", "bwd:module.layers.1.mlp")
        )
        assert (fwd.end_ns < bwd.start_ns).all()
        assert ((bwd.start_ns <= inner.start_ns) & (inner.end_ns <= bwd.end_ns)).all()


def test_collective_ranges_carry_bytes_and_sequence(ddp_run):
    sys.path.insert(0, str(ROOT / "examples"))
    from train_ddp import TinyNet

    gradient_bytes = sum(p.numel() * p.element_size() for p in TinyNet().parameters())
    coll = nsyswrap.sql(
        "SELECT rank, op, bytes, dtype, pg, group_size, seq FROM collectives ORDER BY rank, seq",
        [ddp_run],
    )
    for rank in (0, 1):
        mine = coll[coll["rank"] == rank]
        assert mine.seq.tolist() == list(range(STEPS + 1))
        # One DDP bucket per step (through the communication hook), then the script's final barrier.
        assert mine.op.tolist() == ["all_reduce"] * STEPS + ["barrier"]
        assert mine.bytes.tolist() == [gradient_bytes] * STEPS + [0]
        assert set(mine.pg) == {"0"} and set(mine.group_size) == {2}
        assert mine.dtype.tolist()[:STEPS] == ["float32"] * STEPS


def test_asynchronous_all_reduces_are_marked_when_done(ddp_run):
    """DDP issues its gradient all-reduce with async_op=True: gloo completes it on its own
    thread, where the annotation marks `coll_done:` (its end); the blocking barrier has none.
    The mark may come before the call returns (gloo can finish first: a race of the run's)."""
    coll = nsyswrap.sql(
        "SELECT op, coalesce(done_ns >= start_ns, false) AS marked FROM collectives"
        " ORDER BY rank, seq",
        [ddp_run],
    )
    assert coll.values.tolist() == ([["all_reduce", True]] * STEPS + [["barrier", False]]) * 2


def test_collectives_pair_up_across_ranks(ddp_run):
    matched = nsyswrap.query("crossrank.collectives", [ddp_run])
    pairs = matched.groupby(["pg", "seq"])["rank"].apply(sorted)
    assert len(pairs) == STEPS + 1 and all(ranks == [0, 1] for ranks in pairs)
    assert nsyswrap.query("crossrank.mismatches", [ddp_run]).empty


def test_step_ranges_hold_each_training_step(ddp_run):
    rows = nsyswrap.sql(
        """
        SELECT s.rank, s.text AS step, count(f.text) AS forwards
        FROM nvtx s LEFT JOIN nvtx f
          ON f.rank = s.rank AND f.text = 'fwd:DistributedDataParallel'
         AND f.start_ns >= s.start_ns AND f.end_ns <= s.end_ns
        WHERE s.text LIKE 'step:%' AND s.event_type = 'start_end'
        GROUP BY ALL ORDER BY ALL""",
        [ddp_run],
    )
    # the step opened after the last optimizer step holds no forward: marked unfinished
    assert rows.values.tolist() == [
        [rank, f"step:{i}", int(i < STEPS)] for rank in (0, 1) for i in range(STEPS + 1)
    ]
    marks = nsyswrap.sql(
        "SELECT rank, text FROM nvtx WHERE event_type = 'mark' AND text LIKE 'step:%' ORDER BY ALL",
        [ddp_run],
    )
    assert marks.values.tolist() == [[rank, f"step:{STEPS} unfinished"] for rank in (0, 1)]


def test_zero_code_steps_cover_the_whole_iteration(ddp_run):
    """--annotate steps: a step runs from the end of the previous optimizer step (the first:
    the first data fetch) to the end of its own, so the data loading before the forward is
    one of its phases; the unfinished step after the loop is no step."""
    phases = nsyswrap.query("crossrank.step_phases", [ddp_run])
    steps = phases[phases.phase.isna()]
    by_rank = steps.groupby("rank").step.apply(list).to_dict()
    assert by_rank == {r: list(range(STEPS)) for r in (0, 1)}
    named = (
        phases.dropna(subset=["phase"])
        .sort_values(["rank", "step", "start_ns"])
        .groupby(["rank", "step"])
        .phase.apply(list)
    )
    assert len(named) == 2 * STEPS, named
    for (rank, step), names in named.items():  # (a range around optimizer.step() ends after it)
        assert names[:3] == ["data_loading", "forward", "backward"], (rank, step, names)
    loads = nsyswrap.sql("SELECT count(*) AS n FROM nvtx WHERE text = 'data_loading'", [ddp_run]).n[
        0
    ]
    assert loads == 2 * STEPS  # every one of them is inside a step


def test_the_cpu_loop_report_gives_host_step_times(ddp_run):
    """The README's loop on CPU: no GPU activity, so the report answers with each rank's
    host step times and phases from the NVTX ranges, and no NCCL table for gloo. (Its
    headline is NO GPU ACTIVITY unless the replay finds a rank that slowed the steps: the
    CPU ranks of a loaded machine are now and then descheduled.)"""
    done = nsyswrap_cli("report", ddp_run)
    assert done.returncode == 0, done.stderr[-4000:]
    out = done.stdout
    assert "Cannot answer where the GPU time goes: no report has GPU activity" in " ".join(
        out.split()
    )
    assert "host step times" in out
    assert re.search(r"^Window: steps \d", out, re.M)  # (step 0 may be set apart as warm-up)
    first = out[: out.index("──")]
    assert all(
        re.search(rf"^{rank} +[{STEPS - 1}{STEPS}] +\d+\.\d\d", first, re.M) for rank in (0, 1)
    ), first
    assert re.search(r"^1 +data_loading ", out, re.M)  # a phase of every step (host_phases)
    assert "NCCL bandwidth per op" not in out


def test_step_window_captures_only_those_steps(tmp_path):
    train = tmp_path / "steps.py"
    train.write_text(
        textwrap.dedent("""
        import time
        import nsyswrap
        for i in range(6):
            with nsyswrap.step(i):
                time.sleep(0.02)
    """)
    )
    out = tmp_path / "run"
    done = nsyswrap_cli(
        "launch", "--steps", "2:4", "--trace", "nvtx", "--out", out, "--", sys.executable, train
    )
    assert done.returncode == 0, done.stderr[-4000:]
    texts = nsyswrap.sql(
        "SELECT text FROM nvtx WHERE text LIKE 'step:%' ORDER BY start_ns", [out]
    ).text.tolist()
    assert texts == ["step:2", "step:3"]


def _slow_loader_report(out: Path) -> dict:
    """`report --steps 1:` (JSON) of a new capture in `out` of 8 steps of two CPU ranks over
    gloo, rank 1's data loading 100 ms slower in steps 3 and 4."""
    done = nsyswrap_cli(
        "launch", "--annotate", "modules,collectives,steps", "--trace", "nvtx,osrt",
        "--out", out, "--", "torchrun", "--nproc-per-node", "2", "examples/train_ddp.py",
        "--steps", 8, "--mark-steps", "--slow", "1:3:5:100",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    done = nsyswrap_cli("report", out, "--format", "json", "--steps", "1:")
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout)


def _max_residual(report: dict) -> float:
    (residual,) = rows(report, "crossrank", "replay_residual")
    return residual["max"]["value"]


def _disturbed(report: dict) -> bool:
    """Whether a busy machine disturbed the capture: the replay more than 2 % off, or rank 1
    named slow in a step where nothing was planted (its phase then holds less than the
    share of its gain that names it)."""
    (first, *_) = report["diagnosis"]["findings"]
    unplanted = set(first["evidence"].get("affected_steps") or []) - {3, 4}
    return _max_residual(report) >= 0.02 or (first["ranks"] == [1] and bool(unplanted))


def test_a_slow_data_loader_in_some_steps_is_named_with_its_gain(tmp_path):
    """Rank 1's data loading 100 ms slower in steps 3 and 4 of 8 (CPU ranks over gloo): one
    host's clock, DDP's asynchronous all-reduces ended at their completion marks, so the
    replay reproduces the step times and, over steps 1-7 (step 0's first data fetch starts
    the loader: warm-up), the first finding is rank 1's data loading, which saves about
    100 ms in each of those steps and next to nothing in the others. A completion mark that
    a busy machine delays past the wait it ends (its callback waits for the GIL) can put a
    2-10 ms step's replay more than 2 % off, and the report then gives no what-if figure;
    or slow rank 1 in another step too (seen at load 5: 'in 3 of 7 steps: 1,3,4', its
    data loading then under the share of its gain that names it): such a capture is made
    once more."""
    out = tmp_path / "slow"
    report = _slow_loader_report(out)
    if _disturbed(report):
        out = tmp_path / "again"
        report = _slow_loader_report(out)
    assert _max_residual(report) < 0.02
    (first, *_) = report["diagnosis"]["findings"]
    assert first["ranks"] == [1] and first["evidence"]["phase"] == "data_loading", first["text"]
    with nsyswrap.open_run([out]) as run:
        run_module(run, "crossrank.whatif", step_from=1)
        gains = run.df(
            "SELECT step, gain_ns FROM xr_whatif "
            "WHERE kind = 'rank_phase' AND rank = 1 AND phase = 'data_loading' ORDER BY step"
        ).set_index("step")["gain_ns"]
    assert all(85e6 < gains[s] < 115e6 for s in (3, 4)), gains
    assert (gains.drop([3, 4]) < 15e6).all(), gains
