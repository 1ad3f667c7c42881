"""Advice that fits the program (#38 item 7), rule by rule on hand-built facts: compile
advice by the kernels present, launch overhead said to dominate only where it does, the
DataLoader's settings each on its evidence, the capture hint only where CUDA was not
traced, the time before the window said as wall time with the GPU's busy time beside it.
Milliseconds each; the real captures are in tests/real/test_real_first_screen.py."""

from __future__ import annotations

from helpers.rule_facts import facts, ns

from nsyswrap.report.diagnosis import decide
from nsyswrap.report.diagnosis.evidence import Evidence
from nsyswrap.report.diagnosis.facts import Totals
from nsyswrap.report.diagnosis.rules import compute_advice, host_idle_advice, step_window

MS = 1_000_000
TORCH = frozenset({"pytorch"})
COMPILED = frozenset({"pytorch", "inductor"})


def _advice(long_ms: float, short_ms: float, **evidence) -> dict[str, str]:
    """Host idle advice of a GPU idle `long_ms` in long gaps (while `logging` runs) and
    `short_ms` in short gaps before launches, half of its 1,000 kernels tiny."""
    host = (long_ms + short_ms) * MS
    t = Totals(span_ns=int(100 * MS), idle_ns=int(host), gap_ns={"host_bound": int(host)})
    e = Evidence(kernels=1000, tiny_kernels=500, basis="per step", **evidence)
    e.host_work = e.host_work or [("nvtx", "logging", long_ms * MS)]
    return host_idle_advice.advice(t, e)


def test_a_compiled_program_hears_of_reduce_overhead_never_of_using_torch_compile():
    compiled = _advice(1, 12, frameworks=COMPILED)["launch"]
    assert "mode='reduce-overhead'" in compiled and "torch.compile fuses" not in compiled
    assert "compiled already (torch.compile's Inductor kernels, triton_*)" in compiled
    plain = _advice(1, 12, frameworks=TORCH)["launch"]
    assert "torch.compile fuses kernels" in plain
    graphs = _advice(1, 12, frameworks=COMPILED, graph_launches=10)["launch"]
    assert "replays CUDA graphs already" in graphs and "reduce-overhead" not in graphs
    t = Totals(span_ns=10 * MS, compute_busy_ns=9 * MS)
    told = compute_advice.advice(t, Evidence(frameworks=COMPILED), "compute-bound", {})
    assert "torch.compile" not in told["compute"] and "bf16 autocast" in told["compute"]
    told = compute_advice.advice(t, Evidence(frameworks=TORCH), "compute-bound", {})
    assert "TF32 matmuls or torch.compile" in told["compute"]


def test_launch_overhead_dominates_only_where_it_is_the_larger_share():
    """The held-out compiled capture: host work 19.13 ms per step, launch gaps 12.91."""
    smaller = _advice(19.13, 12.91, frameworks=TORCH)
    assert "while the host works" in smaller["host_work"]
    assert "are shorter than 10 us." in smaller["launch"]
    assert "dominates" not in smaller["launch"]
    larger = _advice(5, 12.91, frameworks=TORCH)["launch"]
    assert "are shorter than 10 us, so launch overhead dominates." in larger


def test_the_data_loader_settings_each_need_their_evidence():
    ddp = [("nvtx", "fwd:DistributedDataParallel", 10 * MS)]
    said = _advice(10, 1, frameworks=TORCH, host_work=ddp)["host_work"]
    assert "DataLoader" not in said  # `Data` inside a module's name is no data loading
    loading = [("nvtx", "data_loading", 10 * MS)]
    copies = {"host_copies": 100, "host_copy_bytes": 1000, "pageable_copies": 7}
    few = _advice(10, 1, frameworks=TORCH, host_work=loading, pageable_bytes=67, **copies)
    assert "another thread or process, DataLoader num_workers)." in few["host_work"]
    many = _advice(10, 1, frameworks=TORCH, host_work=loading, pageable_bytes=200, **copies)
    assert "DataLoader num_workers and pin_memory)." in many["host_work"]
    no_loading = _advice(10, 1, frameworks=TORCH, host_work=ddp, pageable_bytes=200, **copies)
    assert "DataLoader" not in no_loading["host_work"]  # pageable copies need no DataLoader
    assert "DataLoader" not in _advice(10, 1, host_work=loading)["host_work"]  # no PyTorch


def test_the_capture_hint_only_where_cuda_was_not_traced():
    def reason(traced):
        tables = {"trace.capture": [{"rank": 0, "traced": traced, "source": "nsys"}]}
        (said,) = decide(facts(tables).report).cannot_answer()
        return said["reason"]

    assert "capture with nsys profile --trace=cuda" in reason("nvtx,osrt")
    assert "--trace=cuda" not in reason("cuda,nvtx")
    assert "every capture traced CUDA" in reason("cuda,nvtx")
    assert "capture with nsys profile --trace=cuda" in reason(None)  # unknown: the hint


def test_the_time_before_the_window_is_wall_time_with_the_gpus_busy_time():
    window = [
        {"rank": r, "device": 0, "before": ns(b), "after": ns(0), "busy_before": ns(busy)}
        for r, b, busy in ((0, 4178.01 * MS, 1.77 * MS), (1, 4169.46 * MS, 1.67 * MS))
    ]
    physical = [{"rank": r, "device": 0, "gpu": 0} for r in (0, 1)]
    steps = [
        {"rank": r, "device": 0, "step": s, "duration": ns(18 * MS)}
        for r in (0, 1)
        for s in range(1, 16)
    ]
    f = facts(
        {"single_rank.window": window, "trace.gpus": physical, "single_rank.steps": steps},
        window={"source": "steps", "steps": list(range(1, 16))},
    )
    said = step_window.describe(f, step_window.RULE.limits())
    assert said.endswith(
        " Not analysed (on the rank with the most): 4,178.01 ms of wall time before step 1, "
        "the GPU busy 1.77 ms of it."
    )
