"""Annotation helpers: the NVTX ranges they emit, recorded in place of the real NVTX calls."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from nsyswrap.errors import NsysWrapError

torch = pytest.importorskip("torch", reason="annotation needs torch (pip install torch==2.13.0)")
pytest.importorskip("nvtx", reason="annotation needs the nvtx package (pip install nvtx==0.2.10)")
pytestmark = pytest.mark.torch

from torch import nn  # noqa: E402

from nsyswrap.annotate import ranges, steps  # noqa: E402
from nsyswrap.annotate.auto import automatic_steps, parse_kinds  # noqa: E402
from nsyswrap.annotate.modules import annotate_model  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


class Recorder:
    """Stands in for the NVTX calls: keeps (kind, text-or-id) events in order."""

    def __init__(self):
        self.events: list[tuple] = []
        self._ids = itertools.count()

    def push(self, text):
        self.events.append(("push", text))

    def pop(self):
        self.events.append(("pop",))

    def start(self, text):
        range_id = next(self._ids)
        self.events.append(("start", text, range_id))
        return range_id

    def end(self, range_id):
        self.events.append(("end", range_id))

    def mark(self, text):
        self.events.append(("mark", text))

    def sequence(self) -> list[str]:
        """Every event in order as text: `push T`, `pop`, `start T`, `end T`, `mark T`."""
        texts, out = {}, []
        for event in self.events:
            if event[0] == "start":
                texts[event[2]] = event[1]
            out.append(
                event[0]
                if event[0] == "pop"
                else f"end {texts[event[1]]}"
                if event[0] == "end"
                else f"{event[0]} {event[1]}"
            )
        return out

    def texts(self, kind="push"):
        return [e[1] for e in self.events if e[0] == kind]

    def nested(self) -> list[tuple[int, str]]:
        """(depth, text) of every push; asserts that pushes and pops balance."""
        depth, out = 0, []
        for event in self.events:
            if event[0] == "push":
                out.append((depth, event[1]))
                depth += 1
            elif event[0] == "pop":
                depth -= 1
                assert depth >= 0, "pop without push"
        assert depth == 0, "unbalanced push/pop"
        return out

    def backward_spans(self) -> dict[str, list[tuple[int, int]]]:
        """text -> [(start index, end index)] of start/end ranges; asserts each one ended."""
        opened, spans = {}, {}
        for i, event in enumerate(self.events):
            if event[0] == "start":
                opened[event[2]] = (event[1], i)
            elif event[0] == "end":
                text, start = opened.pop(event[1])
                spans.setdefault(text, []).append((start, i))
        assert not opened, f"ranges never ended: {opened}"
        return spans


@pytest.fixture
def rec(monkeypatch):
    calls, recorder = ranges.nvtx_calls(), Recorder()
    for name in ("push", "pop", "start", "end", "mark"):
        monkeypatch.setattr(calls, name, getattr(recorder, name))
    monkeypatch.setattr(calls, "attributes", lambda text: text)
    monkeypatch.setattr(steps, "_state", steps._State())
    return recorder


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.act = nn.ReLU(inplace=True)

    def forward(self, x):
        return self.act(self.lin(x)) + x


def tiny():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 4), Block(), nn.Linear(4, 1))


# --- modules ---------------------------------------------------------------------------------


def test_forward_and_backward_ranges_for_every_module(rec):
    model, x = tiny(), torch.randn(2, 4)
    with annotate_model(model):
        model(x).sum().backward()
    assert rec.nested() == [
        (0, "fwd:Sequential"),
        (1, "fwd:0"),
        (1, "fwd:1"),
        (2, "fwd:1.lin"),
        (2, "fwd:1.act"),
        (1, "fwd:2"),
    ]
    spans = rec.backward_spans()
    assert sorted(spans) == sorted(
        f"bwd:{p}" for p in ("Sequential", "0", "1", "1.lin", "1.act", "2")
    )
    (outer,), (inner,) = spans["bwd:1"], spans["bwd:1.lin"]
    assert outer[0] < inner[0] < inner[1] < outer[1]  # the block's backward holds its layer's
    assert spans["bwd:2"][0][1] < spans["bwd:1"][0][0] < spans["bwd:1"][0][1] < spans["bwd:0"][0][0]


def test_model_is_unchanged(rec):
    model, x = tiny(), torch.randn(2, 4)
    keys, params = list(model.state_dict()), [p.detach().clone() for p in model.parameters()]
    plain = model(x)
    plain.sum().backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    with annotate_model(model):
        annotated = model(x)
        annotated.sum().backward()
    assert torch.equal(plain, annotated) and annotated.grad_fn.name() == plain.grad_fn.name()
    assert list(model.state_dict()) == keys
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), params))
    assert all(torch.equal(p.grad, g) for p, g in zip(model.parameters(), grads))


def test_remove_takes_every_hook_off(rec):
    model = tiny()
    handle = annotate_model(model)
    handle.remove()
    handle.remove()
    model(torch.randn(2, 4)).sum().backward()
    assert rec.events == []
    annotate_model(model).remove()  # annotating again after remove() is allowed


def test_ranges_stay_balanced_when_forward_raises(rec):
    class Fails(nn.Module):
        def forward(self, x):
            raise ValueError("boom")

    model = nn.Sequential(nn.Linear(4, 4), nn.Sequential(Fails()))
    with annotate_model(model), pytest.raises(ValueError):
        model(torch.randn(2, 4))
    assert rec.nested()[-1] == (2, "fwd:1.0")


def test_filters(rec):
    model = tiny()
    cases = {
        "depth": ({"depth": 1}, ["Sequential", "0", "1", "2"]),
        "leaf_only": ({"leaf_only": True}, ["0", "1.lin", "1.act", "2"]),
        "include": ({"include": ["1.*"]}, ["1.lin", "1.act"]),
        "exclude": ({"exclude": ["1*", "Sequential"]}, ["0", "2"]),
    }
    for name, (options, expected) in cases.items():
        rec.events.clear()
        with annotate_model(model, **options), torch.no_grad():
            model(torch.randn(2, 4))
        assert [t.removeprefix("fwd:") for t in rec.texts()] == expected, name
        assert not rec.texts("start"), "no backward ranges without autograd"


def test_bad_input_is_a_clear_error(rec):
    with pytest.raises(NsysWrapError, match="expected a torch.nn.Module"):
        annotate_model(object())
    with pytest.raises(NsysWrapError, match="no module matched"):
        annotate_model(tiny(), include=["nothing*"])
    model = tiny()
    with annotate_model(model), pytest.raises(NsysWrapError, match="already annotated"):
        annotate_model(model)


# --- steps -----------------------------------------------------------------------------------


def test_step_as_call_and_as_context_manager(rec):
    for i in range(2):
        steps.step(i)
        rec.push(f"work{i}")
        rec.pop()
    steps.end()
    with steps.step(5):
        pass
    assert rec.sequence() == [
        "start step:0",
        "push work0",
        "pop",
        "end step:0",
        "start step:1",
        "push work1",
        "pop",
        "end step:1",
        "start step:5",
        "end step:5",
    ]


def test_capture_window_brackets_its_steps(rec):
    steps.capture_window("1:3")
    for i in range(5):
        with steps.step(i):
            pass
    steps._close_all()
    assert [e for e in rec.sequence() if e.startswith(("start", "push", "pop"))] == [
        "start step:0",
        "push capture",
        "start step:1",
        "start step:2",
        "pop",
        "start step:3",
        "start step:4",
    ]


def test_capture_window_repeats_and_follows_the_environment(rec, monkeypatch):
    monkeypatch.setenv(steps.STEPS_VARIABLE, "1:2")
    monkeypatch.setenv(steps.EVERY_VARIABLE, "3")
    for i in range(6):
        steps.step(i)
    steps._close_all()
    captured, inside = [], False
    for event in rec.sequence():
        inside = event == "push capture" or (inside and event != "pop")
        captured += [event.removeprefix("start ")] if inside and event.startswith("start") else []
    assert captured == ["step:1", "step:4"]


def test_capture_window_only_on_chosen_ranks(rec, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    steps.capture_window("0:2", ranks="0")
    steps.step(0)
    steps._close_all()
    assert "capture" not in rec.texts()


@pytest.mark.parametrize(
    "steps_text, every", [("5", None), ("3:3", None), ("a:b", None), ("0:10", 5)]
)
def test_bad_capture_window(steps_text, every):
    with pytest.raises(NsysWrapError):
        steps.capture_window(steps_text, every)


def test_automatic_steps_follow_forward_and_optimizer(rec):
    model = tiny()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with automatic_steps():
        for _ in range(2):
            model(torch.randn(2, 4)).sum().backward()
            optimizer.step()
        with torch.no_grad():
            model(torch.randn(2, 4))  # evaluation confirms no step
    # step 2 opened as step 1 ended; no training forward came: it is marked unfinished
    assert [e for e in rec.sequence() if "step" in e] == [
        "start step:0",
        "end step:0",
        "start step:1",
        "end step:1",
        "start step:2",
        "mark step:2 unfinished",
        "end step:2",
    ]


def test_automatic_steps_cover_the_data_loading_before_the_forward(rec):
    """A step runs from the end of the previous optimizer step (the first: the first data
    fetch) to the end of its own: the data loading before the forward is inside it."""
    model = tiny()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    data = torch.utils.data.TensorDataset(torch.randn(4, 4))
    loader = torch.utils.data.DataLoader(data, batch_size=2)
    iterate = torch.utils.data.DataLoader.__iter__
    with automatic_steps():
        for (x,) in loader:  # the first fetch opens step 0
            rec.push("data_loading")
            rec.pop()
            model(x).sum().backward()
            optimizer.step()
    assert [e for e in rec.sequence() if "step" in e or "data" in e] == [
        "start step:0",
        "push data_loading",
        "end step:0",
        "start step:1",
        "push data_loading",
        "end step:1",
        "start step:2",
        "mark step:2 unfinished",
        "end step:2",
    ]
    assert torch.utils.data.DataLoader.__iter__ is iterate  # taken off again


def test_automatic_steps_stand_aside_for_nsyswrap_step(rec):
    model = tiny()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with automatic_steps():
        for i in range(2):
            with steps.step(10 + i):
                model(torch.randn(2, 4)).sum().backward()
                optimizer.step()
    assert [e for e in rec.sequence() if "step" in e] == [
        "start step:10",
        "end step:10",
        "start step:11",
        "end step:11",
    ]


def test_parse_kinds():
    assert parse_kinds("steps, modules") == ("modules", "steps")
    assert parse_kinds("all") == ("modules", "collectives", "steps")
    with pytest.raises(NsysWrapError, match="unknown kind 'kernels'"):
        parse_kinds("modules,kernels")


# --- start-up annotation (a fresh interpreter each) -----------------------------------------------


def _python(code: str, tmp_path: Path, before=(), after=(), **env) -> subprocess.CompletedProcess:
    """Run code in a fresh interpreter with the start-up folder on PYTHONPATH, as the launcher
    sets it."""
    startup = ROOT / "nsyswrap" / "annotate" / "startup"
    path = os.pathsep.join(map(str, [*before, startup, ROOT, *after]))
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": path, **env},
        timeout=120,
    )


def test_startup_annotates_once_torch_is_imported(tmp_path):
    done = _python(
        """
        import sys
        assert "torch" not in sys.modules
        import torch
        from torch.nn.modules import module
        from torch.optim import optimizer
        assert len(module._global_forward_pre_hooks) == 3, module._global_forward_pre_hooks  # steps, modules, DDP
        assert len(optimizer._global_optimizer_post_hooks) == 2  # steps; the DDP search's end
        assert torch.distributed.all_reduce.__wrapped__ is not None
        print("ok")
    """,  # noqa: E501  (the program text kept as written)
        tmp_path,
        NSYSWRAP_ANNOTATE="all",
    )
    assert done.stdout.strip() == "ok", done.stderr


def test_startup_runs_the_sitecustomize_it_hides(tmp_path):
    (tmp_path / "hidden").mkdir()
    (tmp_path / "hidden" / "sitecustomize.py").write_text(
        "import builtins\nbuiltins.HIDDEN_RAN = True\n"
    )
    done = _python(
        "import builtins; print(builtins.HIDDEN_RAN)",
        tmp_path,
        after=[tmp_path / "hidden"],
        NSYSWRAP_ANNOTATE="modules",
    )
    assert done.stdout.strip() == "True", done.stderr


def test_startup_without_nvtx_warns_and_the_program_runs(tmp_path):
    (tmp_path / "nvtx").mkdir()
    (tmp_path / "nvtx" / "__init__.py").write_text("raise ImportError('no nvtx here')\n")
    done = _python(
        "import torch; print(torch.nn.Linear(2, 1)(torch.ones(1, 2)).shape)",
        tmp_path,
        before=[tmp_path],
        NSYSWRAP_ANNOTATE="modules",
    )
    assert done.returncode == 0 and done.stdout.strip() == "torch.Size([1, 1])", done.stderr
    assert (
        "automatic annotation is off: nsyswrap.annotate: the nvtx package is not installed"
        in done.stderr
    )


def test_an_asynchronous_call_is_marked_when_done_and_exit_waits_for_the_mark(rec):
    """The completion mark is made by the future's callback, on the thread that completes the
    work; at exit the annotation waits for marks still to come (a backend thread taking the
    GIL while the interpreter finalizes would end the process)."""
    import threading

    from nsyswrap.annotate import collectives

    future = torch.futures.Future()
    work = type("Work", (), {"get_future": lambda self: future})()
    collectives._mark_done(work, "coll_done:all_reduce pg=0 seq=7")
    assert rec.texts("mark") == [] and len(collectives._unmarked) == 1
    threading.Timer(0.05, future.set_result, [None]).start()
    collectives._drain()
    assert rec.texts("mark") == ["coll_done:all_reduce pg=0 seq=7"]
    assert not collectives._unmarked


# --- collectives (two gloo ranks in fresh processes) ----------------------------------------------

COLLECTIVES_SCRIPT = """
import json, sys
import torch, torch.distributed as dist, torch.multiprocessing as mp
from torch import nn


def run(rank, folder):
    dist.init_process_group("gloo", init_method=f"file://{folder}/store", rank=rank, world_size=2)
    from nsyswrap.annotate import ranges
    from nsyswrap.annotate.collectives import annotate_collectives
    texts = []
    calls = ranges.nvtx_calls()
    calls.attributes, calls.push, calls.pop = (lambda t: t), texts.append, (lambda: None)
    original = dist.all_reduce
    handle = annotate_collectives()
    annotate_collectives().remove()  # a second call while active changes nothing, nor does its remove()
    assert dist.all_reduce is not original
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(nn.Linear(8, 2))
    for _ in range(2):
        model(torch.randn(3, 8)).sum().backward()
    t = torch.ones(4, dtype=torch.float16)
    dist.all_reduce(t)
    work = dist.all_reduce(t, async_op=True)
    work.wait()
    dist.all_gather([torch.zeros(4, dtype=torch.float16) for _ in range(2)], t)
    dist.all_gather_into_tensor(torch.zeros(8), torch.ones(4))
    dist.reduce_scatter_tensor(torch.zeros(2), torch.ones(4))
    dist.all_to_all_single(torch.zeros(4), torch.ones(4))
    dist.broadcast(torch.ones(3, dtype=torch.int64), src=0)
    dist.send(torch.ones(5), 1) if rank == 0 else dist.recv(torch.zeros(5), 0)
    dist.barrier()
    dist.all_reduce(torch.ones(2), group=dist.new_group([0, 1]))
    handle.remove()
    assert dist.all_reduce is original and dist.distributed_c10d.all_reduce is original
    dist.all_reduce(torch.ones(2))
    json.dump({"texts": texts, "work": type(work).__name__}, open(f"{folder}/rank{rank}.json", "w"))
    del model, work  # DDP's reducer alive at teardown sometimes aborts gloo (std::terminate)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    mp.spawn(run, args=(sys.argv[1],), nprocs=2)
"""  # noqa: E501  (the program text kept as written)


def test_collectives_carry_op_bytes_dtype_group_and_sequence(tmp_path):
    (tmp_path / "run.py").write_text(COLLECTIVES_SCRIPT)
    done = subprocess.run(
        [sys.executable, "run.py", str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rank0, rank1 = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1))
    assert (
        rank0["work"] != "NoneType"
    )  # async_op=True still hands back the work; nothing waited on it
    grads = (8 * 2 + 2) * 4
    assert rank0["texts"] == [
        # DDP's gradient all-reduce
        f"coll:all_reduce bytes={grads} dtype=float32 pg=0 size=2 seq=0",
        f"coll:all_reduce bytes={grads} dtype=float32 pg=0 size=2 seq=1",
        "coll:all_reduce bytes=8 dtype=float16 pg=0 size=2 seq=2",
        "coll:all_reduce bytes=8 dtype=float16 pg=0 size=2 seq=3",
        "coll:all_gather bytes=16 dtype=float16 pg=0 size=2 seq=4",
        "coll:all_gather_into_tensor bytes=32 dtype=float32 pg=0 size=2 seq=5",
        "coll:reduce_scatter_tensor bytes=16 dtype=float32 pg=0 size=2 seq=6",
        "coll:all_to_all_single bytes=16 dtype=float32 pg=0 size=2 seq=7",
        "coll:broadcast bytes=24 dtype=int64 pg=0 size=2 seq=8",
        "coll:send bytes=20 dtype=float32 pg=0:0-1 size=2 seq=0",
        "coll:barrier bytes=0 dtype=none pg=0 size=2 seq=9",
        "coll:all_reduce bytes=8 dtype=float32 pg=1 size=2 seq=0",
    ]
    assert rank1["texts"] == [t.replace("coll:send", "coll:recv") for t in rank0["texts"]]


def test_the_search_for_ddp_models_ends_with_the_first_optimizer_step():
    from torch.nn.modules import module

    from nsyswrap.annotate.collectives import annotate_collectives

    before = len(module._global_forward_pre_hooks)
    handle = annotate_collectives()
    assert len(module._global_forward_pre_hooks) == before + 1  # every module call pays for it
    model = nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model(torch.ones(2)).sum().backward()
    optimizer.step()
    assert len(module._global_forward_pre_hooks) == before
    handle.remove()
