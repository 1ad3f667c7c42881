"""What the MoE, pipeline and ring programs (nsyswrap.synth.moe, .pipeline, .ring) share:
keyed draws, kernel groups and the optimizer.

Every random duration of these shapes is drawn from a generator keyed by what it is for
(seed, rank, step, ...), never from a stream consumed in order: a scenario with its plant
removed (``dataclasses.replace(sc, hot_expert=None)``) simulates with the very same draws,
so the difference of two runs is the plant's effect alone. (The host's API call and gap
durations come from the timeline's ordered streams; a plant adds or removes no call.)
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from nsyswrap.synth.program import RankProgram

OPTIMIZER_KERNELS = 2
OPTIMIZER_NS = (8_000, 12_000)


def keyed(seed: int, *key: int) -> np.random.Generator:
    """A generator of its own for one purpose (the ints of ``key`` name it)."""
    return np.random.default_rng([seed, 4242, *key])


class ShapeProgram(RankProgram):
    """RankProgram's step (data loading, forward, backward, optimizer) with keyed draws."""

    def draw(self, lo_hi: tuple[int, int], n: int, *key: int) -> list[int]:
        """``n`` durations in [lo, hi] for (this rank, ``key``)."""
        rank = self.sc.work_seed(self.rank)  # same_work: rank 0's draws
        return keyed(self.sc.seed, rank, *key).integers(lo_hi[0], lo_hi[1] + 1, n).tolist()

    def kernels(self, phase: str, durations: list[int]) -> None:
        """Compute kernels of ``phase`` on the compute stream, one after the other."""
        for k, dur in enumerate(durations):
            self.compute(phase, k, dur)

    def optimizer(self, i: int) -> Iterator[None]:
        """Wait for the gradients' all-reduce, zero-grad memset, update kernels, step sync."""
        tl, sc = self.tl, self.sc
        tl.push("optimizer")
        yield from tl.settle()
        for d in self.devices:
            tl.wait(d.compute, self.comm_stream(d, self.dp))
            tl.memset(d.compute, sc.bucket_bytes, 1_000 + sc.bucket_bytes // 1_000)
        self.kernels("optimizer", self.draw(OPTIMIZER_NS, OPTIMIZER_KERNELS, i, 99))
        if sc.step_sync:
            yield from tl.settle()
            for d in self.devices:
                tl.sync(d.compute)
        tl.pop()
