"""What the simulator records for one rank: compact columns, in true time (ns).

True time is shared by all ranks; a report's session clock is ``true - session_start``.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field

import numpy as np

from nsyswrap.synth.catalog import KernelType

UTC_BASE_NS = 1_779_782_400_000_000_000  # 2026-05-26T08:00:00Z: true time 0 of every run
NSYSWRAP_DOMAIN = 1  # NVTX domain ids as this process registers them
NCCL_DOMAIN = 2


def _round_half_even(num, den: int):
    """num / den (ints or int64 arrays, den > 0) rounded to an integer, ties to even."""
    q, r = np.divmod(num, den)
    return q + ((2 * r > den) | ((2 * r == den) & (q % 2 == 1)))


def recorded(elapsed, ppb: int):
    """Session ns after ``elapsed`` true ns (int or int64 array) on a clock that gains
    ``ppb`` ns per 1e9 ns of its own reading: the least x whose true elapsed time
    ``x - round_half_even(x * ppb / 1e9)`` reaches ``elapsed``. That is the clock model of
    nsyswrap's alignment (offset + drift_ppb per session ns, ns rounded half to even)
    with drift_ppb = -ppb, so a clock that runs fast (ppb > 0) is inverted exactly; one
    that runs slow skips true ns and comes back to within 1 ns."""
    if not ppb:
        return elapsed
    e = np.asarray(elapsed, dtype=np.int64)
    x = e + e * ppb // (10**9 - ppb) - 2
    for _ in range(5):
        x = np.where(x - _round_half_even(x * ppb, 10**9) < e, x + 1, x)
    return x if x.ndim else int(x)


@dataclass
class Stream:
    """A CUDA stream; ``free_at`` is None while an unresolved collective is its last op."""

    index: int
    device: int
    context: int
    sid: int
    priority: int = 0
    flag: int = 2  # ENUM_CUPTI_STREAM_TYPE: 2 non-blocking, 3 null stream
    free_at: int | None = 0
    ops: int = 0


def _q() -> array:
    return array("q")


@dataclass
class RankTrace:
    rank: int
    node: int
    local_rank: int
    pid: int
    hostname: str
    session_start: int  # true ns of the report's t = 0
    clock_error: int  # recorded utcEpochNs minus true start
    devices: list[int]
    streams: list[Stream] = field(default_factory=list)
    # kernels (compute and NCCL); k_type indexes kernel_types
    k_start: array = field(default_factory=_q)
    k_end: array = field(default_factory=_q)
    k_stream: array = field(default_factory=_q)
    k_corr: array = field(default_factory=_q)
    k_type: array = field(default_factory=_q)
    kernel_types: list[KernelType] = field(default_factory=list)
    # CUDA API calls on the main thread; r_api indexes catalog.API_NAMES
    r_start: array = field(default_factory=_q)
    r_end: array = field(default_factory=_q)
    r_corr: array = field(default_factory=_q)
    r_api: array = field(default_factory=_q)
    r_tid: array = field(default_factory=_q)
    # (start, end, stream, corr, bytes, copyKind, srcKind, dstKind, srcDevice, dstDevice)
    memcpys: list[tuple] = field(default_factory=list)
    # (start, end, stream, corr, bytes)
    memsets: list[tuple] = field(default_factory=list)
    # (start, end, stream, corr, syncType, eventId, eventSyncId)
    syncs: list[tuple] = field(default_factory=list)
    # NVTX push/pop ranges in push order (start, end, text, domain);
    # domain creations (start, name, id)
    nvtx: list[tuple] = field(default_factory=list)
    nvtx_domains: list[tuple] = field(default_factory=list)
    nvtx_tid: list[int] = field(default_factory=list)  # thread of each NVTX range
    nvtx_payloads: dict[int, bytes] = field(default_factory=dict)  # NVTX range index -> binaryData
    steps: list[tuple] = field(default_factory=list)  # (step, start, end)
    nccl: list[tuple] = field(default_factory=list)  # (kernel index, pg, seq, op, bytes)
    planted_gaps: list[tuple] = field(default_factory=list)  # (device, start, end, cause)
    extras: list[tuple] = field(
        default_factory=list
    )  # planted extra collectives (step, pg, seq, op, bytes)
    # joins the trace records no call for: (kind, step, start, end, completion), true ns:
    # "unrecorded_wait" (the host idle from start to end, waiting for its GPUs to drain at
    # completion), "autograd_join" (the autograd thread's last call ended at start, the main
    # thread resumed at end)
    hidden: list[tuple] = field(default_factory=list)
    pauses: list[tuple] = field(default_factory=list)  # planted pauses (step, phase, start, end)
    end: int = 0  # true time the capture stopped
    drift_ppb: int = 0  # the session clock gains this many ns per s of its own reading (recorded)
    jump_at: int | None = None  # true time from which the clock reads jump_ns more (a clock jump)
    jump_ns: int = 0

    def session_ns(self, true_ns):
        """A true time (int or int64 array) as this report records it (``recorded`` of
        its offset from the start, + jump_ns from jump_at on)."""
        if isinstance(true_ns, int):
            jump = self.jump_ns if self.jump_at is not None and true_ns >= self.jump_at else 0
            return recorded(true_ns - self.session_start, self.drift_ppb) + jump
        t = np.asarray(true_ns, dtype=np.int64)
        out = recorded(t - self.session_start, self.drift_ppb)
        if self.jump_at is not None:
            out = out + np.where(t >= self.jump_at, self.jump_ns, 0)
        return out

    @property
    def utc_epoch_ns(self) -> int:
        """What the report records as its start (true start + clock error, on the UTC base)."""
        return UTC_BASE_NS + self.session_start + self.clock_error
