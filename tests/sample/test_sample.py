"""The always-on sampler in the training process: what it records and when, its schema,
CUDA events read only once complete, asynchronous collectives, and the capture rule."""

from __future__ import annotations

import json

import pytest

from nsyswrap.errors import NsysWrapError
from nsyswrap.sample import schema
from nsyswrap.sample.capture import CaptureRule, Watch, parse_rule

nvtx = pytest.importorskip("nvtx", reason="marking steps needs nvtx (pip install nvtx==0.2.10)")

from nsyswrap.annotate import phases, steps  # noqa: E402
from nsyswrap.sample import sampler as sampler_module  # noqa: E402
from nsyswrap.sample.timers import EventPool  # noqa: E402


def records(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture
def fresh(monkeypatch):
    """No sampler and no open step from an earlier test; rank 0."""
    monkeypatch.setattr(steps, "_state", steps._State())
    monkeypatch.setattr(sampler_module, "_active", None)
    monkeypatch.setenv("RANK", "0")
    yield
    if sampler_module._active is not None:
        sampler_module._active.close()


def train(n: int, start: int = 0, collectives: int = 0, sampler=None) -> None:
    for i in range(start, start + n):
        with steps.step(i):
            with phases.phase("data_loading"):
                pass
            with phases.phase("forward"):
                for k in range(collectives):
                    token = sampler.collective_begin("all_reduce", "0", 2, 64, k)
                    sampler.collective_end(token, None, False)


# --- what is recorded ---------------------------------------------------------------------------


def test_every_nth_step_between_start_and_end_with_its_phases(tmp_path, fresh):
    s = sampler_module.sampler(tmp_path, every=3, start=2, end=11, flush_every=2)
    train(14, collectives=2, sampler=s)
    s.close()
    written = records(tmp_path / "samples.rank0.jsonl")
    assert [r["kind"] for r in written] == ["run"] + ["step"] * 3 + ["end"]
    assert all(schema.problem(r) is None for r in written)
    assert [r["step"] for r in written[1:-1]] == [2, 5, 8]
    step = written[1]
    assert step["timer"] == "host"
    assert [p["name"] for p in step["phases"]] == ["data_loading", "forward"]
    first, last = step["phases"][0], step["phases"][1]
    assert step["start_ns"] <= first["start_ns"] <= last["end_ns"] <= step["end_ns"]
    calls = [(c["op"], c["seq"], c["async"]) for c in step["collectives"]]
    assert calls == [("all_reduce", 0, False), ("all_reduce", 1, False)]
    forward = step["phases"][1]
    in_calls = sum(c["end_ns"] - c["start_ns"] for c in step["collectives"])
    assert forward["host_ns"] <= forward["end_ns"] - forward["start_ns"] - in_calls + 2_000
    assert written[-1] == {"v": 1, "kind": "end", "sampled": 3, "skipped": 0, "unresolved": 0}
    run = written[0]
    assert (run["rank"], run["every"], run["start"], run["end"]) == (0, 3, 2, 11)


def test_records_are_written_flush_every_at_a_time(tmp_path, fresh):
    s = sampler_module.sampler(tmp_path, every=1, flush_every=4)
    path = tmp_path / "samples.rank0.jsonl"
    train(3)
    assert len(records(path)) == 1  # the run record only: three steps wait in memory
    train(1, start=3)
    assert len(records(path)) == 5
    s.close()


def test_a_rank_not_chosen_writes_nothing_and_pays_nothing(tmp_path, fresh, monkeypatch):
    monkeypatch.setenv("RANK", "3")
    s = sampler_module.sampler(tmp_path, ranks="0-2")
    train(4)
    s.close()
    assert not (tmp_path / "samples.rank3.jsonl").exists()
    assert s not in sampler_module.observers.STEPS


def test_bad_arguments_are_clear_errors(tmp_path, fresh):
    for bad in ({"every": 0}, {"start": -1}, {"end": 0}, {"flush_every": 0}, {"ranks": "x"}):
        with pytest.raises(NsysWrapError):
            sampler_module.sampler(tmp_path, **bad)


def test_a_second_sampler_is_the_first(tmp_path, fresh, capsys):
    first = sampler_module.sampler(tmp_path)
    assert sampler_module.sampler(tmp_path / "other") is first
    assert "already writes" in capsys.readouterr().err


def test_a_full_disk_stops_the_sampler_not_the_training(tmp_path, fresh, capsys):
    s = sampler_module.sampler(tmp_path, every=1, flush_every=2)

    class Full:
        def write(self, text):
            raise OSError(28, "No space left on device")

        def close(self):
            pass

    s.file = Full()
    train(6)
    s.close()
    assert "cannot write" in capsys.readouterr().err and s.file is None
    assert s not in sampler_module.observers.STEPS


# --- asynchronous collectives and CUDA events ------------------------------------------------


class Future:
    def __init__(self):
        self.callbacks = []

    def then(self, callback):
        self.callbacks.append(callback)

    def complete(self):
        for callback in self.callbacks:
            callback(self)


class Work:
    def __init__(self):
        self.future = Future()

    def get_future(self):
        return self.future


def test_an_async_collective_ends_when_its_work_completes(tmp_path, fresh):
    s = sampler_module.sampler(tmp_path, every=1, flush_every=1)
    work = Work()
    with steps.step(0):
        token = s.collective_begin("all_reduce", "0", 2, 64, 0)
        s.collective_end(token, work, True)
    steps.step(1)  # step 0 waits for its collective: not written yet
    assert [r["kind"] for r in records(tmp_path / "samples.rank0.jsonl")] == ["run"]
    work.future.complete()
    steps.step(2)
    step0 = [r for r in records(tmp_path / "samples.rank0.jsonl") if r["kind"] == "step"][0]
    (call,) = step0["collectives"]
    assert step0["step"] == 0
    assert call["async"] and call["end_ns"] > call["start_ns"]


class FakeEvent:
    """A CUDA event on a fake GPU: `now` is the GPU's clock (ms); it completes on `done`."""

    now = 0.0

    def __init__(self):
        self.at, self.done, self.queries = None, False, 0

    def record(self):
        self.at, self.done = FakeEvent.now, False

    def query(self):
        self.queries += 1
        return self.done

    def elapsed_time(self, later):
        return later.at - self.at


def test_cuda_steps_are_read_only_once_their_events_complete(tmp_path, fresh, monkeypatch):
    monkeypatch.setattr(sampler_module, "cuda_in_use", lambda: True)
    s = sampler_module.sampler(tmp_path, every=1, flush_every=1)
    made = []
    s.pool = EventPool(64, make=lambda: made.append(FakeEvent()) or made[-1])
    with steps.step(0):
        FakeEvent.now = 1.0
        with phases.phase("forward"):
            FakeEvent.now = 3.5
    steps.step(1)  # the GPU has not run step 0: nothing waits, nothing is written
    assert [r["kind"] for r in records(tmp_path / "samples.rank0.jsonl")] == ["run"]
    asked = [e.queries for e in made[:4]]
    for e in made:
        e.done = True
    steps.step(2)
    step0 = [r for r in records(tmp_path / "samples.rank0.jsonl") if r["kind"] == "step"][0]
    assert step0["timer"] == "cuda"
    forward = step0["phases"][0]
    assert forward["end_ns"] - forward["start_ns"] == 2_500_000  # GPU time between the events
    assert forward["start_ns"] - step0["start_ns"] == 1_000_000
    assert len(s.pool.free) == 3  # step 0's four events came back; step 2's start took one
    # each call into the CUDA runtime costs µs: once they had completed, every event was
    # asked once; reading them asked nothing again
    assert [e.queries - a for e, a in zip(made[:4], asked)] == [1, 1, 1, 1]
    assert asked[:3] == [0, 0, 0]  # made last, the step's end was the one asked before


def test_no_free_event_skips_the_step_and_a_full_queue_writes_what_is_known(
    tmp_path, fresh, monkeypatch
):
    monkeypatch.setattr(sampler_module, "cuda_in_use", lambda: True)
    s = sampler_module.sampler(tmp_path, every=1, flush_every=1)
    s.pool = EventPool(2 * (sampler_module.MAX_PENDING + 1), make=FakeEvent)
    train(sampler_module.MAX_PENDING + 3)  # the GPU never finishes: no free event after a while
    s.close()
    written = records(tmp_path / "samples.rank0.jsonl")
    end = written[-1]
    assert end["skipped"] >= 1 and end["unresolved"] >= 1
    unresolved = [r for r in written if r["kind"] == "step"][0]
    assert unresolved["end_ns"] is None and schema.problem(unresolved) is None


# --- schema -------------------------------------------------------------------------------------


def test_schema_names_what_is_wrong():
    good = {"v": 1, "kind": "end", "sampled": 1, "skipped": 0, "unresolved": 0}
    assert schema.problem(good) is None
    assert "version" in schema.problem({**good, "v": 2})
    assert "unknown kind" in schema.problem({**good, "kind": "steps"})
    assert "no field 'skipped'" in schema.problem({k: v for k, v in good.items() if k != "skipped"})
    assert "expected int" in schema.problem({**good, "sampled": "1"})
    assert "expected int" in schema.problem({**good, "sampled": True})
    step = {
        "v": 1,
        "kind": "step",
        "step": 0,
        "timer": "gpu",
        "utc_ns": 0,
        "start_ns": 0,
        "end_ns": 1,
        "phases": [],
        "collectives": [],
        "dropped": 0,
    }
    assert "timer" in schema.problem(step)
    bad_phase = {**step, "timer": "host", "phases": [{"name": "x"}]}
    assert "phase has no field" in schema.problem(bad_phase)


# --- the capture rule ---------------------------------------------------------------------------


def test_capture_rules_inline_or_from_a_file(tmp_path):
    assert parse_rule("slower=2.5,steps=3") == CaptureRule(2.5, steps=3)
    path = tmp_path / "rule.json"
    path.write_text('{"slower": 3, "captures": 2}')
    assert parse_rule(str(path)) == CaptureRule(3.0, captures=2)
    assert parse_rule(CaptureRule(1.5, steps=4).text()) == CaptureRule(1.5, steps=4)
    for bad in ("steps=3", "slower=1", "slower=x", "slower=2,when=3", "slower"):
        with pytest.raises(NsysWrapError, match="--capture-when"):
            parse_rule(bad)
    for text in ("[" * 200_000 + "]" * 200_000, '{"slower": ' + "[" * 100_000 + "]" * 100_000):
        path.write_text(text)  # nested too deep (a RecursionError), or not JSON
        with pytest.raises(NsysWrapError, match=r"rule\.json: is not a JSON capture rule"):
            parse_rule(str(path))


def test_the_rule_fires_once_on_a_slow_step_and_every_rank_opens_the_window(tmp_path):
    rule = CaptureRule(2.0, steps=3, after=4, lead=2)
    fast, other = Watch(rule, tmp_path, rank=1), Watch(rule, tmp_path, rank=5)
    for i in range(6):
        assert fast.fired(i, i, 10_000_000 + i) is None  # usual steps, and the warm-up
        assert other.window(i) is None
    trigger = fast.fired(6, 6, 25_000_000)
    assert trigger == {
        "n": 1,
        "start": 8,
        "stop": 11,
        "fired_by": 1,
        "at_step": 6,
        "step_ns": 25_000_000,
        "median_ns": 10_000_002,
    }
    assert other.fired(6, 6, 30_000_000) is None  # the other rank came second: one trigger
    assert other.window(7) == {**trigger, "start": 8}
    assert other.window(8) is None  # read once
    late = Watch(rule, tmp_path, rank=2)
    assert late.window(9)["start"] == 10  # a rank that sees it late starts at once


def test_the_sampler_opens_an_nsys_capture_window_when_the_rule_fires(tmp_path, fresh, monkeypatch):
    events = []
    calls = steps.nvtx_calls()
    monkeypatch.setattr(calls, "push", lambda a: events.append(("push", a)))
    monkeypatch.setattr(calls, "pop", lambda: events.append(("pop",)))
    monkeypatch.setattr(calls, "start", lambda a: events.append(("start", a)) or len(events))
    monkeypatch.setattr(calls, "end", lambda i: events.append(("end", i)))
    monkeypatch.setattr(calls, "attributes", lambda text: text)
    monkeypatch.setattr(phases, "_attributes", {})
    s = sampler_module.sampler(tmp_path, every=1, capture_when=CaptureRule(3.0, steps=2, after=3))
    clock = {"now": 0}
    monkeypatch.setattr(sampler_module, "perf_counter_ns", lambda: clock["now"])
    for i in range(12):
        steps.begin(i)
        clock["now"] += 50_000_000 if i == 5 else 1_000_000
    steps.end()
    s.close()
    opened = [i for i, e in enumerate(events) if e == ("push", "capture")]
    assert len(opened) == 1
    closed = next(i for i, e in enumerate(events) if i > opened[0] and e == ("pop",))
    inside = [e[1] for e in events[opened[0] : closed] if e[0] == "start"]
    assert inside == ["step:7", "step:8"]  # step 5 is read as step 6 begins: lead 2 from step 5
    assert json.loads((tmp_path / "capture.1.json").read_text())["start"] == 7
    captures = [r for r in records(tmp_path / "samples.rank0.jsonl") if r["kind"] == "capture"]
    assert [(c["start"], c["stop"], c["at_step"]) for c in captures] == [(7, 9, 5)]


# --- nsyswrap launch --sample / --capture-when -------------------------------------------------


def test_launch_sample_alone_runs_no_nsys_and_tells_every_rank_the_sampler():
    from nsyswrap.launch.config import LaunchConfig
    from nsyswrap.launch.rank import rank_command

    cfg = LaunchConfig.build(
        ["python", "train.py"], out="/runs/s", sample=True, sample_every=5, sample_steps="100:"
    )
    assert not cfg.profiles and cfg.annotate == ("steps", "sample")
    argv, env = rank_command(3, cfg, "node1", environ={})
    assert argv == ["python", "train.py"]
    assert env["NSYSWRAP_ANNOTATE"] == "steps,sample"
    assert json.loads(env["NSYSWRAP_SAMPLE"]) == {
        "out_dir": "/runs/s",
        "every": 5,
        "start": 100,
        "end": None,
    }
    assert LaunchConfig.from_wrapper_args(cfg.wrapper_args() + ["--", "python", "train.py"]) == cfg
    assert LaunchConfig.build(
        ["python", "t.py"], out="/r", annotate="steps,sample", ranks="1"
    ).profiles  # --ranks: those ranks under nsys too


def test_launch_capture_when_runs_the_ranks_under_nsys_waiting_for_the_window():
    from nsyswrap.launch.config import LaunchConfig
    from nsyswrap.launch.nsys import nsys_argv
    from nsyswrap.launch.rank import rank_command

    cfg = LaunchConfig.build(
        ["python", "train.py"], out="/runs/w", ranks="0,2", capture_when="slower=2,steps=4"
    )
    assert cfg.profiles and "sample" in cfg.annotate
    argv = nsys_argv(2, cfg, "node1")
    assert {
        "--capture-range=nvtx",
        "--nvtx-capture=capture@nsyswrap",
        "--capture-range-end=stop",
    } <= set(argv)
    again = LaunchConfig.build(
        ["python", "train.py"], out="/runs/w", capture_when="slower=2,captures=3"
    )
    assert "--capture-range-end=repeat" in nsys_argv(0, again, "node1")
    _, env = rank_command(1, cfg, "node1", environ={})
    assert env["NSYSWRAP_CAPTURE_WHEN"] == "slower=2,steps=4"
    assert rank_command(1, cfg, "node1", environ={})[0] == ["python", "train.py"]  # not chosen


@pytest.mark.parametrize(
    "options, complaint",
    [
        ({"capture_when": "slower=2", "steps": "5:9"}, "both set the capture window"),
        ({"capture_when": "faster=2"}, "unknown key"),
        ({"sample_every": "0"}, "--sample-every 0"),
        ({"sample_steps": "9:3"}, "--sample-steps 9:3"),
    ],
)
def test_bad_sampling_options_are_clear_errors(options, complaint):
    from nsyswrap.launch.config import LaunchConfig

    with pytest.raises(NsysWrapError, match=complaint):
        LaunchConfig.build(["python", "train.py"], out="/runs/x", **options)
