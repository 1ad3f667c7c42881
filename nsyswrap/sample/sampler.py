"""`nsyswrap.sampler(out_dir, every=10, ...)`: time every Nth step on this rank, cheaply.

The sampler observes the annotation helpers (nsyswrap.annotate.observers): steps from
`nsyswrap.step(i)` or the zero-code steps, phases from `nsyswrap.phase(name)` or the
zero-code forward/backward/optimizer edges, collectives from `annotate_collectives`
(which it turns on when torch is imported). On a sampled step it reads the host clock at
every edge and, when the process uses CUDA, records a CUDA event there as well; on any
other step it only counts. Nothing waits for the GPU: a finished step joins a short queue
and is written once all its events have completed (`query()`), checked at the next step
starts; a step still pending when the queue is full is written with what is known and the
rest null. Records are written `flush_every` at a time to `samples.rank<R>.jsonl` in
out_dir (schema: nsyswrap.sample.schema). Asynchronous collectives (`async_op=True`,
DDP's gradient all-reduce) end when their work completes, seen by a callback on the work's
future.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import sys
import time
from collections import deque
from collections.abc import Iterable
from pathlib import Path

from nsyswrap.annotate import observers, steps
from nsyswrap.annotate.observers import INSIDE
from nsyswrap.annotate.ranks import env_rank, parse_ranks, short_host
from nsyswrap.errors import NsysWrapError
from nsyswrap.sample import schema
from nsyswrap.sample.capture import CaptureRule, Watch
from nsyswrap.sample.timers import Clock, EventPool, cuda_in_use, elapsed_ns, perf_counter_ns

VARIABLE = "NSYSWRAP_SAMPLE"  # JSON of sampler()'s arguments, set by `nsyswrap launch --sample`
MAX_COLLECTIVES = 512  # per sampled step; more are counted in `dropped`
MAX_PENDING = 8  # finished steps waiting for their CUDA events
_active: Sampler | None = None


# A mark is one edge: on a host step the host clock (perf_counter_ns); on a CUDA step
# (host clock, its CUDA event or None when none was free).


class _Call:
    __slots__ = ("op", "pg", "size", "nbytes", "seq", "begin", "end", "is_async", "step")

    def __init__(self, op, pg, size, nbytes, seq, begin, step):
        self.op, self.pg, self.size, self.nbytes, self.seq = op, pg, size, nbytes, seq
        self.begin, self.end, self.is_async, self.step = begin, None, False, step


class _Step:
    __slots__ = (
        "index",
        "cuda",
        "utc_ns",
        "start",
        "end",
        "phases",
        "open",
        "nested",
        "calls",
        "call_host",
        "dropped",
        "emitted",
        "mark",
    )

    def __init__(self, index: int, cuda: bool, start: tuple, mark):
        self.index, self.cuda, self.utc_ns = index, cuda, time.time_ns()
        self.start, self.end, self.mark = start, None, mark  # mark(): a new edge of this step
        self.phases: list = []  # [name, begin mark, end mark, host ns in calls at begin, at end]
        self.open: list = []  # the phase open now (at most one: nested ones are not phases)
        self.nested = 0
        self.calls: list[_Call] = []
        self.call_host = 0  # host ns spent inside collective calls so far
        self.dropped = 0
        self.emitted = False

    def events(self) -> list:
        """The CUDA events of a CUDA step."""
        marks = [
            self.start,
            self.end,
            *(m for p in self.phases for m in p[1:3]),
            *(m for c in self.calls for m in (c.begin, c.end)),
        ]
        return [m[1] for m in marks if m is not None and m[1] is not None]

    def ready(self) -> bool:
        if any(c.end is None for c in self.calls if c.is_async):
            return False
        if not self.cuda:
            return True
        end = self.end[1]
        if end is not None and not end.query():
            return False  # the step's last event on its stream: one query while it runs
        return all(e.query() for e in self.events() if e is not end)


class Sampler(observers.Observer):
    """The sampler of this process; `close()` (or the end of a `with` block, or exit)
    writes what is left."""

    def __init__(
        self,
        out_dir: Path,
        every: int,
        start: int,
        end: int | None,
        ranks: frozenset[int] | None,
        flush_every: int,
        rule: CaptureRule | None = None,
    ):
        self.every, self.start, self.end, self.flush_every = every, start, end, flush_every
        self.rank = _rank()
        self.enabled = ranks is None or self.rank in ranks
        self.path = Path(out_dir) / f"samples.rank{self.rank}.jsonl"
        self.clock = Clock()
        self.pool = EventPool()
        self.step: _Step | None = None
        self.current: int | None = None  # the step begun last, sampled or not
        self.pending: deque[_Step] = deque()
        self.lines: list = []  # lines to write, or host steps to format then (_step_line)
        self.counts = {"sampled": 0, "skipped": 0, "unresolved": 0}
        self.watch = Watch(rule, Path(out_dir), self.rank) if rule is not None else None
        self.file = None
        self._stops = []
        if not self.enabled and self.watch is None:
            return
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        self.file = open(self.path, "a", encoding="utf-8")  # a restarted job appends a segment
        self._write(
            [
                {
                    "v": schema.VERSION,
                    "kind": "run",
                    "rank": self.rank,
                    "host": short_host(),
                    "pid": os.getpid(),
                    "utc_epoch_ns": self.clock.utc_epoch_ns,
                    "monotonic_ns": self.clock.zero,
                    "every": every,
                    "start": start,
                    "end": end,
                    "ranks": sorted(ranks) if ranks is not None else None,
                    "flush_every": flush_every,
                    "nsyswrap": _version(),
                }
            ],
            flush=True,
        )
        self._stops.append(observers.observe(self, first=True))
        self._stops.append(_annotate_collectives())
        atexit.register(self.close)

    # --- observer -------------------------------------------------------------------------
    def step_begin(self, i: int) -> None:
        self.current = i
        if self.pending:
            self._drain()
        if self.watch is not None:
            self._follow_rule(i)
        if (
            not self.enabled
            or i < self.start
            or (i - self.start) % self.every
            or (self.end is not None and i >= self.end)
        ):
            return
        if cuda_in_use():
            first = self._cuda_mark()
            if first[1] is None:
                self.counts["skipped"] += 1  # every event is lent: no step is waited for
                return
            self.step = _Step(i, True, first, self._cuda_mark)
        else:
            self.step = _Step(i, False, perf_counter_ns(), perf_counter_ns)
        INSIDE.append(self)  # its phases and collectives: this step only

    def step_end(self) -> None:
        step = self.step
        if step is None:
            return
        self.step = None
        INSIDE.remove(self)
        if not steps.is_confirmed():  # opened ahead of an iteration that never came
            if step.cuda:
                self.pool.give(step.events())
            return
        if step.open:  # a phase still open ends with its step
            step.nested = 0
            self.phase_end(step.open[0][0])
        step.end = step.mark()
        self.pending.append(step)
        self._drain()

    def phase_begin(self, name: str) -> None:
        step = self.step
        if step is None:
            return
        if step.open:  # a phase inside a phase is not a phase of the step (as in the reports)
            step.nested += 1
        else:
            step.open.append([name, step.mark(), None, step.call_host, 0])

    def phase_end(self, name: str) -> None:
        step = self.step
        if step is None:
            return
        if step.nested:
            step.nested -= 1
        elif step.open:
            phase = step.open.pop()
            phase[2], phase[4] = step.mark(), step.call_host
            step.phases.append(phase)

    def collective_begin(self, op, pg, size, nbytes, seq) -> _Call | None:
        step = self.step
        if step is None:
            return None
        if len(step.calls) >= MAX_COLLECTIVES:
            step.dropped += 1
            return None
        call = _Call(op, pg, size, nbytes, seq, step.mark(), step)
        step.calls.append(call)
        return call

    def collective_end(self, call: _Call | None, work, async_op: bool) -> None:
        if call is None:
            return
        step = call.step
        end = step.mark()
        step.call_host += (end[0] - call.begin[0]) if step.cuda else (end - call.begin)
        future = getattr(work, "get_future", None) if async_op else None
        if future is None:
            call.end = end
            return
        call.is_async = True

        def done(_) -> None:  # on the thread that completes the work
            if step.emitted:
                return
            try:
                call.end = step.mark()
            except Exception:  # a timing must never break the training's communication
                call.end = (perf_counter_ns(), None) if step.cuda else perf_counter_ns()

        try:
            future().then(done)
        except Exception:  # a work without a future (some backends): timed at its issue
            call.is_async, call.end = False, end

    # --- recording ------------------------------------------------------------------------
    def _cuda_mark(self) -> tuple:
        host, event = perf_counter_ns(), self.pool.take()
        if event is not None:
            event.record()
        return host, event

    def _drain(self, force: bool = False) -> None:
        pending = self.pending
        while pending:
            complete = pending[0].ready()
            if not (complete or force or len(pending) > MAX_PENDING):
                return
            self._emit(pending.popleft(), complete)

    def _emit(self, step: _Step, complete: bool) -> None:
        """Write `step` (`complete`: all its events have completed, so they are read without
        another query each)."""
        step.emitted = True
        self.counts["sampled"] += 1
        self.counts["unresolved"] += not complete
        time_of = _times(step, self.clock.zero, complete)
        begun, ended = time_of(step.start), time_of(step.end)
        if step.cuda:  # read its events now: they go back to the pool
            self.lines.append(_step_line(step, time_of, begun, ended))
            self.pool.give(step.events())
        else:  # written with the others at the next flush (cheaper all at once)
            self.lines.append((step, time_of, begun, ended))
        trigger = None
        if self.watch is not None and begun is not None and ended is not None:
            trigger = self.watch.fired(self.current, step.index, ended - begun)
        self._write([{"v": schema.VERSION, "kind": "capture", **trigger}] if trigger else [])

    def _follow_rule(self, i: int) -> None:
        window = self.watch.window(i)
        if window is not None:
            from nsyswrap.annotate.steps import capture_window

            capture_window(f"{window['start']}:{window['stop']}")

    def _write(self, records: list[dict], flush: bool = False) -> None:
        self.lines += (json.dumps(r, separators=(",", ":")) + "\n" for r in records)  # rare ones
        if self.file is not None and (flush or len(self.lines) >= self.flush_every):
            try:
                self.file.write(
                    "".join(x if isinstance(x, str) else _step_line(*x) for x in self.lines)
                )
                self.file.flush()
            except OSError as exc:  # a full disk stops the sampler, never the training
                print(
                    f"nsyswrap: sampler: cannot write {self.path} ({exc}); sampling stops",
                    file=sys.stderr,
                )
                file, self.file = self.file, None
                with contextlib.suppress(OSError):
                    file.close()
                self.close()
            self.lines = []

    def close(self) -> None:
        """Stop sampling; write the steps still pending (waiting for their CUDA events
        here, off the training's path) and the `end` record."""
        global _active
        for stop in self._stops:
            stop()
        self._stops = []
        if _active is self:
            _active = None
        if self.file is None:
            return
        if any(s.cuda for s in self.pending) and cuda_in_use():
            try:
                sys.modules["torch"].cuda.synchronize()
            except Exception:
                pass  # written as far as known
        self._drain(force=True)
        self._write([{"v": schema.VERSION, "kind": "end", **self.counts}], flush=True)
        if self.file is not None:
            self.file.close()
            self.file = None

    def __enter__(self) -> Sampler:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _times(step: _Step, zero: int, complete: bool):
    """mark -> ns on the rank's clock (None when unknown): the host time on a host step; on a
    CUDA step the step's first event at its host time plus the GPU time since that event
    (each event asked whether it completed, unless the whole step has)."""
    if not step.cuda:
        return lambda mark: None if mark is None else mark - zero
    first = step.start[1]

    def time_of(mark) -> int | None:
        if mark is None or mark[1] is None or not (complete or mark[1].query()):
            return None
        try:
            return step.start[0] - zero + elapsed_ns(first, mark[1])
        except RuntimeError:  # e.g. an event recorded on another device: unknown, never fatal
            return None

    return time_of


_heads: dict = {}  # the constant start of a phase's or a collective's JSON object, by its names


def _phase_head(name: str) -> str:
    head = _heads.get(name)
    if head is None:
        head = _heads[name] = f'{{"name":{json.dumps(name)},"start_ns":'
    return head


def _call_head(c: _Call) -> str:
    key = (c.op, c.pg, c.size, c.nbytes)
    head = _heads.get(key)
    if head is None:
        head = _heads[key] = (
            f'{{"op":{json.dumps(c.op)},"pg":{json.dumps(c.pg)},"size":{c.size},'
            f'"bytes":{c.nbytes},"seq":'
        )
    return head


def _n(value) -> str:
    return "null" if value is None else str(value)


def _step_line(step: _Step, time_of, begun, ended) -> str:
    """The `step` record (schema.FIELDS["step"]) as one JSON line, written out by hand from
    cached heads: a sampled step's cost is mostly this (json.dumps of the same dict takes
    three times as long); tests check every line against the schema."""
    host = (lambda m: m) if not step.cuda else (lambda m: m[0])
    phases = ",".join(
        f'{_phase_head(name)}{_n(time_of(b))},"end_ns":{_n(time_of(e))},'
        f'"host_ns":{host(e) - host(b) - (calls_end - calls_begin)}}}'
        for name, b, e, calls_begin, calls_end in step.phases
    )
    calls = ",".join(
        f'{_call_head(c)}{c.seq},"start_ns":{_n(time_of(c.begin))},"end_ns":{_n(time_of(c.end))},'
        f'"async":{"true" if c.is_async else "false"}}}'
        for c in step.calls
    )
    timer = "cuda" if step.cuda else "host"
    return (
        f'{{"v":{schema.VERSION},"kind":"step","step":{step.index},"timer":"{timer}",'
        f'"utc_ns":{step.utc_ns},"start_ns":{_n(begun)},"end_ns":{_n(ended)},'
        f'"phases":[{phases}],"collectives":[{calls}],"dropped":{step.dropped}}}\n'
    )


def sampler(
    out_dir: str | Path,
    every: int = 10,
    start: int = 0,
    end: int | None = None,
    ranks: Iterable[int] | str | None = None,
    flush_every: int = 50,
    capture_when: CaptureRule | None = None,
) -> Sampler:
    """Sample every `every`-th step from `start` (to `end`, exclusive) on `ranks` (default
    every rank; this process's rank comes from the launcher's environment), writing
    `samples.rank<R>.jsonl` into out_dir, `flush_every` records at a time. Steps are
    `nsyswrap.step(i)` (or the zero-code steps), phases `nsyswrap.phase(name)`. Returns the
    sampler; `close()` stops it (it also stops at exit). A second call while one runs
    returns the running one."""
    global _active
    if _active is not None:
        print(f"nsyswrap: note: a sampler already writes {_active.path}; using it", file=sys.stderr)
        return _active
    where = "nsyswrap.sampler"
    for name, value, low in (
        ("every", every, 1),
        ("start", start, 0),
        ("flush_every", flush_every, 1),
    ):
        if not isinstance(value, int) or value < low:
            raise NsysWrapError(
                where, f"{name}={value!r} is not a whole number >= {low}", f"pass e.g. {name}={low}"
            )
    if end is not None and (not isinstance(end, int) or end <= start):
        raise NsysWrapError(
            where, f"end={end!r} is not a step after start={start}", "pass end > start, or None"
        )
    if isinstance(ranks, str):
        ranks = parse_ranks(ranks, f"{where}(ranks=...)")
    chosen = None if ranks is None else frozenset(map(int, ranks))
    _active = Sampler(Path(out_dir), every, start, end, chosen, flush_every, capture_when)
    return _active


def from_environment() -> Sampler | None:
    """The sampler `nsyswrap launch --sample` asks for ($NSYSWRAP_SAMPLE), if any."""
    from nsyswrap.sample.capture import VARIABLE as RULE_VARIABLE
    from nsyswrap.sample.capture import parse_rule

    text = os.environ.get(VARIABLE)
    if not text:
        return None
    options = json.loads(text)
    rule = os.environ.get(RULE_VARIABLE)
    return sampler(**options, capture_when=parse_rule(rule) if rule else None)


def _rank() -> int:
    rank = env_rank()
    if rank is not None:
        return rank
    torch = sys.modules.get("torch")
    dist = torch.distributed if torch is not None else None
    if dist is not None and dist.is_available() and dist.is_initialized():
        return dist.get_rank()
    return 0


def _annotate_collectives():
    """Turn on annotate_collectives when torch is imported; the call that undoes it."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.distributed.is_available():
        return lambda: None
    from nsyswrap.annotate.collectives import annotate_collectives

    return annotate_collectives().remove


def _version() -> str:
    import nsyswrap

    return nsyswrap.__version__
