"""`planted_run`: a small multi-rank run built with `make_report`, and its truth.

Every step on every rank is data_loading, forward, backward, a blocking
`coll:all_reduce` range, optimizer, a `coll:all_gather` range. With `gpu`,
forward and backward launch one kernel each and every collective an NCCL
kernel that starts when the rank's stream is free and ends on all ranks at
once; a straggler's forward/backward extra then runs on the GPU only. Times are chosen
on one run clock (ns since rank 0's aligned session start) and written to each
report shifted by that rank's UTC start difference and planted clock offset,
so aligning the reports must give the run clock back exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from helpers.report_builder import make_report

UTC0 = 1_700_000_000_000_000_000
FIRST_STEP_NS = 20_000_000
PHASES = {"data_loading": 200_000, "forward": 300_000, "backward": 400_000, "optimizer": 100_000}
LAUNCH_TO_KERNEL_NS = 10_000
RANGE_TAIL_NS = 2_000
ALPHA_NS = {"all_reduce": 20_000, "all_gather": 8_000}
BYTES_PER_NS = {"all_reduce": 10.0, "all_gather": 4.0}
NCCL_NAMES = {
    "all_reduce": "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
    "all_gather": "ncclDevKernel_AllGather_RING_LL",
}


@dataclass
class Collective:
    pg: str
    seq: int
    op: str
    step: int
    bytes: int
    start_ns: dict[int, int]
    end_ns: dict[int, int]

    @property
    def last_rank(self) -> int:
        latest = max(self.start_ns.values())
        return min(r for r, t in self.start_ns.items() if t == latest)

    @property
    def wait_ns(self) -> dict[int, int]:
        latest = max(self.start_ns.values())
        return {r: latest - t for r, t in self.start_ns.items()}

    @property
    def transfer_ns(self) -> int:
        return min(self.end_ns[r] - self.start_ns[r] for r in self.start_ns)


@dataclass
class Truth:
    offset_ns: dict[int, int]
    shift_ns: dict[int, int]
    collectives: list[Collective] = field(default_factory=list)
    straggler: tuple[int, str, int] | None = None
    extra_collective_rank: int | None = None


def _transfer_ns(op: str, nbytes: int) -> int:
    return ALPHA_NS[op] + round(nbytes / BYTES_PER_NS[op])


def planted_run(
    out: Path,
    ranks: int = 4,
    steps: int = 3,
    straggler: tuple[int, str, int] | None = (2, "data_loading", 150_000),
    gpu: bool = True,
    extra_collective_rank: int | None = None,
    coll_ranges: bool = True,
) -> Truth:
    """Write rank<N>.sqlite files into `out` and return what was planted."""
    out.mkdir(parents=True, exist_ok=True)
    utc_delta = {r: r * 1_234_567 for r in range(ranks)}
    offset = {r: 0 if r == 0 else (r * 337_001) % 2_000_000 - 1_000_000 for r in range(ranks)}
    truth = Truth(
        offset,
        {r: utc_delta[r] + offset[r] for r in range(ranks)},
        straggler=straggler,
        extra_collective_rank=extra_collective_rank,
    )
    events = {r: {"nvtx": [], "kernels": [], "runtime": []} for r in range(ranks)}
    corr = iter(range(10_000, 1 << 30))

    def collective(
        op: str, seq: int, step: int, nbytes: int, arrive: dict[int, tuple[int, int]]
    ) -> int:
        """arrive: rank -> (host time, time its GPU stream is free); returns the end on the host."""
        coll = Collective("0", seq, op, step, nbytes, {}, {})
        if gpu:
            coll.start_ns = {
                r: max(t + LAUNCH_TO_KERNEL_NS, free) for r, (t, free) in arrive.items()
            }
        else:
            coll.start_ns = {r: t for r, (t, _) in arrive.items()}
        end = max(coll.start_ns.values()) + _transfer_ns(op, nbytes)
        coll.end_ns = {r: end for r in arrive}
        host_end = end + RANGE_TAIL_NS if gpu else end
        for r, (t, _) in arrive.items():
            text = f"coll:{op} bytes={nbytes} dtype=float32 pg=0 size={ranks} seq={seq}"
            if coll_ranges:
                events[r]["nvtx"].append((t, host_end, text))
            if gpu:
                c = next(corr)
                events[r]["runtime"].append((t + 1_000, t + 4_000, "cudaLaunchKernel_v7000", c))
                events[r]["kernels"].append((coll.start_ns[r], end, r, 7, NCCL_NAMES[op], c))
        truth.collectives.append(coll)
        return host_end

    now = FIRST_STEP_NS
    for step in range(steps):
        arrive = {}
        for r in range(ranks):
            t = gpu_free = now
            for phase in ("data_loading", "forward", "backward"):
                dur = PHASES[phase] + (r * 1_000 if phase == "forward" else 0)
                extra = straggler[2] if straggler and straggler[:2] == (r, phase) else 0
                on_gpu = gpu and phase != "data_loading"
                host = dur if on_gpu else dur + extra  # slow GPU work leaves the host range as is
                events[r]["nvtx"].append((t, t + host, phase))
                if on_gpu:
                    c = next(corr)
                    start = max(t + 5_000, gpu_free)
                    gpu_free = start + dur - 10_000 + extra
                    events[r]["runtime"].append((t + 1_000, t + 4_000, "cudaLaunchKernel_v7000", c))
                    events[r]["kernels"].append((start, gpu_free, r, 7, f"{phase}_gemm", c))
                t += host
            arrive[r] = (t, gpu_free)
        t = collective("all_reduce", 2 * step, step, (1 + step % 3) << 20, arrive)
        for r in range(ranks):
            events[r]["nvtx"].append((t, t + PHASES["optimizer"], "optimizer"))
        t += PHASES["optimizer"]
        t = collective(
            "all_gather", 2 * step + 1, step, 256 << 10, {r: (t, t) for r in range(ranks)}
        )
        for r in range(ranks):
            events[r]["nvtx"].append((now, t + 1_000, f"step:{step}"))
        now = t + 1_000
    if extra_collective_rank is not None:
        text = f"coll:all_reduce bytes=4 dtype=float32 pg=0 size={ranks} seq={2 * steps}"
        events[extra_collective_rank]["nvtx"].append((now, now + 50_000, text))

    for r in range(ranks):
        shift = truth.shift_ns[r]
        ev = events[r]
        make_report(
            out / f"rank{r}.sqlite",
            kernels=[(s - shift, e - shift, *rest) for s, e, *rest in ev["kernels"]],
            nvtx=[(s - shift, e - shift, *rest) for s, e, *rest in ev["nvtx"]],
            runtime=[(s - shift, e - shift, *rest) for s, e, *rest in ev["runtime"]],
            utc_epoch_ns=UTC0 + utc_delta[r],
        )
    return truth
