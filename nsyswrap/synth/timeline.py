"""Host thread and GPU streams of one rank: CUDA calls, kernels, copies, syncs, NVTX.

The host clock ``t`` advances by each API call's duration plus a host gap. A GPU op
starts at ``max(call start + launch latency, stream free + small GPU gap, not_before)``.
NCCL kernels leave their stream pending (``free_at is None``) until the collective
is resolved across ranks; ``settle()`` is the generator step that waits for that.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from nsyswrap.synth.catalog import API_INDEX, KernelType
from nsyswrap.synth.scenario import Scenario
from nsyswrap.synth.trace import NSYSWRAP_DOMAIN, RankTrace, Stream

LAUNCH_KERNEL = API_INDEX["cudaLaunchKernel_v7000"]
MEMCPY = API_INDEX["cudaMemcpyAsync_v3020"]
MEMSET = API_INDEX["cudaMemsetAsync_v3020"]
STREAM_SYNC = API_INDEX["cudaStreamSynchronize_v3020"]
EVENT_RECORD = API_INDEX["cudaEventRecord_v3020"]
STREAM_WAIT = API_INDEX["cudaStreamWaitEvent_v3020"]
SYNC_STREAM_WAIT, SYNC_STREAM = 2, 3  # ENUM_CUPTI_SYNC_TYPE
NO_EVENT = 4294967295  # eventId of stream syncs in real exports
SYNC_INSET_NS = 500  # SYNCHRONIZATION rows sit just inside their API call
HELD_RECORD_NS = 1_000  # held_wait: its event record call and the gaps around


def draws(rng: np.random.Generator, lo: int, hi: int, chunk: int = 1 << 15) -> Iterator[int]:
    """Endless seeded ints in [lo, hi], drawn in chunks."""
    while True:
        yield from rng.integers(lo, hi + 1, chunk).tolist()


class StreamPending(RuntimeError):
    """A GPU op was queued behind an unresolved collective (a generator bug)."""


class Timeline:
    """The main thread of one rank and the GPU streams it drives."""

    def __init__(self, trace: RankTrace, scenario: Scenario, start: int):
        seed = [scenario.seed, scenario.work_seed(trace.rank)]
        self.trace = trace
        self._api_ns = draws(np.random.default_rng([*seed, 1]), *scenario.launch_api_ns)
        self._host_gap = draws(np.random.default_rng([*seed, 2]), *scenario.host_gap_ns)
        self._gpu_gap = draws(np.random.default_rng([*seed, 3]), *scenario.gpu_gap_ns)
        self.latency = scenario.launch_latency_ns
        self.back_to_back_every = scenario.back_to_back_every
        self.wake = scenario.sync_wake_ns
        self.t = start
        self.tid = trace.pid  # thread making the calls (the main thread: TID = PID)
        self.corr = 0
        self.events = 0
        self.unresolved = 0
        self._stack: list[int] = []
        self._type_index: dict[KernelType, int] = {}
        self._type_api: list[int] = []

    # -- host ------------------------------------------------------------------

    def host(self, ns: int) -> None:
        """CPU work on the main thread (no CUDA calls)."""
        self.t += ns

    def _record(self, api: int, start: int, end: int) -> int:
        """One CUDA API call row on the calling thread; returns its correlationId."""
        self.corr += 1
        tr = self.trace
        tr.r_start.append(start)
        tr.r_end.append(end)
        tr.r_corr.append(self.corr)
        tr.r_api.append(api)
        tr.r_tid.append(self.tid)
        return self.corr

    def call(self, api: int) -> tuple[int, int]:
        """One CUDA API call; returns (start, correlationId)."""
        start = self.t
        end = start + next(self._api_ns)
        corr = self._record(api, start, end)
        self.t = end + next(self._host_gap)
        return start, corr

    def push(self, text: str, domain: int = NSYSWRAP_DOMAIN) -> None:
        """Open an NVTX push/pop range (recorded in push order; the end is set by pop)."""
        self._stack.append(len(self.trace.nvtx))
        self.trace.nvtx.append((self.t, None, text, domain))
        self.trace.nvtx_tid.append(self.tid)

    def pop(self) -> None:
        index = self._stack.pop()
        start, _, text, domain = self.trace.nvtx[index]
        self.trace.nvtx[index] = (start, self.t, text, domain)

    def create_domain(self, name: str, domain: int) -> None:
        self.trace.nvtx_domains.append((self.t, name, domain))

    def settle(self) -> Iterator[None]:
        """Yield until every collective this rank issued has its end time."""
        while self.unresolved:
            yield

    # -- GPU -------------------------------------------------------------------

    def kernel_type(self, kt: KernelType) -> int:
        index = self._type_index.get(kt)
        if index is None:
            index = self._type_index[kt] = len(self.trace.kernel_types)
            self.trace.kernel_types.append(kt)
            self._type_api.append(API_INDEX[kt.api])
        return index

    def _ready(self, stream: Stream, api_start: int, not_before: int, back_to_back: bool) -> int:
        free = stream.free_at
        if free is None:
            raise StreamPending(f"stream {stream.sid} of rank {self.trace.rank} is pending")
        stream.ops += 1
        if not back_to_back and (
            not self.back_to_back_every or stream.ops % self.back_to_back_every
        ):
            free += next(self._gpu_gap)
        return max(api_start + self.latency, free, not_before)

    def kernel(
        self, stream: Stream, ktype: int, dur: int, not_before: int = 0, back_to_back: bool = False
    ) -> tuple[int, int]:
        """Launch a kernel; returns its (start, end)."""
        api_start, corr = self.call(self._type_api[ktype])
        start = self._ready(stream, api_start, not_before, back_to_back)
        end = stream.free_at = start + dur
        tr = self.trace
        tr.k_start.append(start)
        tr.k_end.append(end)
        tr.k_stream.append(stream.index)
        tr.k_corr.append(corr)
        tr.k_type.append(ktype)
        return start, end

    def nccl_kernel(self, stream: Stream, ktype: int) -> tuple[int, int]:
        """Launch an NCCL kernel whose end is set later; returns (start, kernel index)."""
        api_start, corr = self.call(self._type_api[ktype])
        start = self._ready(stream, api_start, 0, True)
        tr = self.trace
        index = len(tr.k_start)
        tr.k_start.append(start)
        tr.k_end.append(-1)
        tr.k_stream.append(stream.index)
        tr.k_corr.append(corr)
        tr.k_type.append(ktype)
        stream.free_at = None
        self.unresolved += 1
        return start, index

    def memcpy(
        self,
        stream: Stream,
        nbytes: int,
        dur: int,
        copy_kind: int,
        src_kind: int,
        dst_kind: int,
        src_device: int | None = None,
        dst_device: int | None = None,
    ) -> None:
        api_start, corr = self.call(MEMCPY)
        start = self._ready(stream, api_start, 0, False)
        end = stream.free_at = start + dur
        self.trace.memcpys.append(
            (
                start,
                end,
                stream.index,
                corr,
                nbytes,
                copy_kind,
                src_kind,
                dst_kind,
                src_device,
                dst_device,
            )
        )

    def memset(self, stream: Stream, nbytes: int, dur: int) -> None:
        api_start, corr = self.call(MEMSET)
        start = self._ready(stream, api_start, 0, False)
        end = stream.free_at = start + dur
        self.trace.memsets.append((start, end, stream.index, corr, nbytes))

    def sync(self, stream: Stream, until: int = 0) -> None:
        """cudaStreamSynchronize: the host blocks until the stream drained (and ``until``)."""
        if stream.free_at is None:
            raise StreamPending(f"sync on pending stream {stream.sid}")
        start = self.t
        end = max(start + next(self._api_ns), stream.free_at + self.wake, until)
        corr = self._record(STREAM_SYNC, start, end)
        inset = min(SYNC_INSET_NS, (end - start) // 4)
        self.trace.syncs.append(
            (start + inset, end - inset, stream.index, corr, SYNC_STREAM, NO_EVENT, 0)
        )
        self.t = end + next(self._host_gap)

    def wait(self, waiter: Stream, on: Stream) -> None:
        """cudaEventRecord on ``on`` + cudaStreamWaitEvent: ``waiter``'s next op waits for
        ``on``."""
        if waiter.free_at is None or on.free_at is None:
            raise StreamPending(f"wait between pending streams {waiter.sid}, {on.sid}")
        self.events += 1
        self.call(EVENT_RECORD)
        start, corr = self.call(STREAM_WAIT)
        tr = self.trace
        end = tr.r_end[-1]
        inset = min(SYNC_INSET_NS, (end - start) // 4)
        tr.syncs.append(
            (
                start + inset,
                end - inset,
                waiter.index,
                corr,
                SYNC_STREAM_WAIT,
                self.events,
                self.events,
            )
        )
        waiter.free_at = max(waiter.free_at, on.free_at)

    def held_wait(self, waiter: Stream, on: Stream, until: int) -> None:
        """cudaEventRecord on ``on`` + a cudaStreamWaitEvent the driver holds until ``until``
        (the host blocked in a non-synchronizing call; the GPU waits for nothing when ``on``
        has drained). Fixed durations: no draws, so a planted one leaves the others alone."""
        if waiter.free_at is None or on.free_at is None:
            raise StreamPending(f"wait between pending streams {waiter.sid}, {on.sid}")
        self.events += 1
        self._record(EVENT_RECORD, self.t, self.t + HELD_RECORD_NS)
        start = self.t + 2 * HELD_RECORD_NS
        end = max(until, start + HELD_RECORD_NS)
        corr = self._record(STREAM_WAIT, start, end)
        self.t = end + HELD_RECORD_NS
        inset = min(SYNC_INSET_NS, (end - start) // 4)
        self.trace.syncs.append(
            (
                start + inset,
                end - inset,
                waiter.index,
                corr,
                SYNC_STREAM_WAIT,
                self.events,
                self.events,
            )
        )
        waiter.free_at = max(waiter.free_at, on.free_at)

    def drain(self, device: int) -> int:
        """When the last op queued so far on ``device`` ends (all streams resolved)."""
        ends = [s.free_at for s in self.trace.streams if s.device == device]
        if None in ends:
            raise StreamPending(f"drain of device {device} with a pending stream")
        return max(ends)
