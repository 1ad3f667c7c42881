"""The pipeline-parallel training loop (Scenario.pipeline; see nsyswrap.synth.scenario.Pipeline).

Per step: ``data_loading``, Megatron's 1F1B schedule of the microbatches (each forward
in a ``forward`` range, each backward in a ``backward`` range: the phases, summed over
the step), the stage's data-parallel all_reduce (once per step, on its own stream),
``optimizer``. The transfers to and from a neighbouring stage are NCCL kernels on that
peer's stream; a stage that both sends and receives in one step of the schedule does so
in one NCCL group (one kernel: ``send_forward_recv_backward``,
``send_backward_recv_forward``), so both ends of a channel issue its operations in the same
order. The compute stream waits for every receive; every operation's stream waits for
the compute before it (as PyTorch's NCCL stream does).
"""

from __future__ import annotations

from collections.abc import Iterator

from nsyswrap.synth.links import ring_transfer_ns
from nsyswrap.synth.shapes import ShapeProgram

DTYPE = "bfloat16"


class PipelineProgram(ShapeProgram):
    """One rank (stage, replica) of a pipeline-parallel run; see the module doc."""

    def __init__(self, *args):
        super().__init__(*args)
        sc = self.sc
        self.replica, self.stage = sc.replica_of(self.rank), sc.stage_of(self.rank)
        last = sc.pipeline.stages - 1
        self.up = sc.p2p_group(self.stage - 1, self.replica) if self.stage > 0 else None
        self.down = sc.p2p_group(self.stage, self.replica) if self.stage < last else None
        self.peer = {
            self.up: sc.pipe_rank(self.stage - 1, self.replica),
            self.down: sc.pipe_rank(self.stage + 1, self.replica),
        }

    @staticmethod
    def extra_groups(sc, rank: int) -> list[int]:
        """The channels to the previous and next stage (one NCCL stream each)."""
        replica, stage = sc.replica_of(rank), sc.stage_of(rank)
        return [
            sc.p2p_group(s, replica) for s in (stage - 1, stage) if 0 <= s < sc.pipeline.stages - 1
        ]

    def step(self, i: int) -> Iterator[None]:
        tl, p = self.tl, self.sc.pipeline
        start = tl.t
        tl.push(self.sc.step_name.format(i))
        self.data_loading(i)
        warm = min(p.stages - self.stage - 1, p.microbatches)
        steady = p.microbatches - warm
        f = b = 0
        for _ in range(warm):
            yield from self.p2p(self.up, send=False, recv=True)  # recv_forward
            self.microbatch("forward", i, f)
            f += 1
            yield from self.p2p(self.down, send=True, recv=False)  # send_forward
        if steady:
            yield from self.p2p(self.up, send=False, recv=True)
        for j in range(steady):
            self.microbatch("forward", i, f)
            f += 1
            yield from self.p2p(self.down, send=True, recv=True)  # send_forward_recv_backward
            self.microbatch("backward", i, b)
            b += 1
            yield from self.p2p(
                self.up, send=True, recv=j < steady - 1
            )  # send_backward(_recv_forward)
        for _ in range(warm):
            yield from self.p2p(self.down, send=False, recv=True)  # recv_backward
            self.microbatch("backward", i, b)
            b += 1
            yield from self.p2p(self.up, send=True, recv=False)  # send_backward
        yield from self.grad_all_reduce()
        yield from self.optimizer(i)
        tl.pop()
        self.trace.steps.append((i, start, tl.t))

    def microbatch(self, phase: str, step: int, m: int) -> None:
        """One microbatch's forward or backward (twice the kernels and time) on this stage."""
        tl, sc, p = self.tl, self.sc, self.sc.pipeline
        times = 1 if phase == "forward" else 2
        durs = self.draw(p.forward_ns, times * p.forward_kernels, step, m, times)
        slow = sc.slow_stage
        if slow is not None and slow.stage == self.stage and (times == 1 or slow.backward):
            extra = times * slow.extra_ns
            durs = [d + extra // len(durs) + (k < extra % len(durs)) for k, d in enumerate(durs)]
        tl.push(phase)
        if phase == "backward":  # one autograd backward call per microbatch
            self.to_autograd_thread()
        self.kernels(phase, durs)
        self.join_autograd_thread(step)
        tl.pop()

    def p2p(self, pg: int | None, send: bool, recv: bool) -> Iterator[None]:
        """One operation on the channel ``pg`` (None: this stage has no such neighbour)."""
        if pg is None:
            return
        op = "send_recv" if send and recv else ("send" if send else "recv")
        nbytes = self.sc.pipeline.activation_bytes  # a receive's range too: the tensor it fills
        yield from self.collective(
            op, nbytes, DTYPE, "partial", 0, pg=pg, send={self.peer[pg]: nbytes} if send else {}
        )
        if recv:
            yield from self.tl.settle()
            for d in self.devices:
                self.tl.wait(d.compute, self.comm_stream(d, pg))

    def grad_all_reduce(self) -> Iterator[None]:
        """The stage's gradients over its data-parallel group, once per step."""
        sc = self.sc
        nbytes = sc.pipeline.grad_bytes
        yield from self.collective(
            "all_reduce",
            nbytes,
            DTYPE,
            "exposed",
            ring_transfer_ns(sc, sc.group_members(self.dp), nbytes),
        )
