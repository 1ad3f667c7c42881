"""Megatron's interleaved 1F1B pipeline (Scenario.pipeline with chunks > 1).

Each rank holds ``chunks`` model chunks: virtual stage ``c * stages + stage``. A
microbatch goes through stage 0..stages-1 of chunk 0, then from the last stage back to
stage 0 for chunk 1, and so on, backward in reverse. The schedule is Megatron-LM's
``forward_backward_pipelining_with_interleaving`` (without overlapped communication):
warm-up forwards, steady forward + backward pairs, cool-down backwards, each followed by
one batch of point-to-point operations (a send and/or a receive to each neighbour of the
ring of stages). Each direction between two stages is a channel of its own
(Scenario.directed_group: activations go to the next stage, gradients to the previous),
one NCCL stream each; a batch's operations are issued together (collective
``grouped``), the compute waits for what it receives.
"""

from __future__ import annotations

from collections.abc import Iterator

from nsyswrap.synth.pipeline import PipelineProgram

SEND_NEXT, RECV_PREV, SEND_PREV, RECV_NEXT = "send_next", "recv_prev", "send_prev", "recv_next"


def schedule(stages: int, stage: int, microbatches: int, chunks: int) -> list[tuple]:
    """This stage's work in order: ("F" or "B", k) computes virtual microbatch k (its chunk:
    chunk_of), ("comm", ops) is one batch of point-to-point operations."""
    total = microbatches * chunks
    first, last = stage == 0, stage == stages - 1

    def chunk_of(k: int, forward: bool) -> int:
        c = (k % (stages * chunks)) // stages
        return c if forward else chunks - c - 1

    def sends(k_f: int | None, k_b: int | None) -> list[str]:
        """The outputs that go on: none from the last virtual stage forward, the first
        backward."""
        out = [] if k_f is None or (last and chunk_of(k_f, True) == chunks - 1) else [SEND_NEXT]
        return out + ([] if k_b is None or (first and chunk_of(k_b, False) == 0) else [SEND_PREV])

    warmup = min((stages - stage - 1) * 2 + (chunks - 1) * stages, total)
    remaining = total - warmup
    out: list[tuple] = [] if first else [("comm", [RECV_PREV])]
    for k in range(warmup):
        out.append(("F", k))
        recv_prev = not (first and chunk_of(k + 1, True) == 0) and k != total - 1
        ops = sends(k, None) + [RECV_PREV] * recv_prev
        if k == warmup - 1 and remaining:
            ops += [] if last else [RECV_NEXT]
        out.append(("comm", ops))
    for k in range(remaining):
        f = k + warmup
        out += [("F", f), ("B", k)]
        recv_prev = not (first and chunk_of(f - (stages - 1), True) == chunks - 1)
        recv_next = not (last and chunk_of(k - (stages - 1), False) == 0)
        recv_prev = recv_prev and k != remaining - 1
        out.append(("comm", sends(f, k) + [RECV_PREV] * recv_prev + [RECV_NEXT] * recv_next))
    if not remaining and not last:
        out.append(("comm", [RECV_NEXT]))
    for k in range(remaining, total):
        out.append(("B", k))
        recv_next = not (last and chunk_of(k + 1, False) == chunks - 1) and k != total - 1
        out.append(("comm", sends(None, k) + [RECV_NEXT] * recv_next))
    return [item for item in out if item[0] != "comm" or item[1]]


class InterleavedProgram(PipelineProgram):
    """One rank of an interleaved pipeline; see the module doc."""

    def __init__(self, *args):
        super().__init__(*args)
        sc, p = self.sc, self.sc.pipeline
        nxt = sc.pipe_rank((self.stage + 1) % p.stages, self.replica)
        prev = sc.pipe_rank((self.stage - 1) % p.stages, self.replica)
        self.channels = {  # op -> (pg, peer)
            SEND_NEXT: (sc.directed_group(self.rank, nxt), nxt),
            RECV_PREV: (sc.directed_group(prev, self.rank), prev),
            SEND_PREV: (sc.directed_group(self.rank, prev), prev),
            RECV_NEXT: (sc.directed_group(nxt, self.rank), nxt),
        }

    @staticmethod
    def extra_groups(sc, rank: int) -> list[int]:
        """The four channels to and from the next and previous stage (a stream each)."""
        p = sc.pipeline
        stage, replica = sc.stage_of(rank), sc.replica_of(rank)
        nxt = sc.pipe_rank((stage + 1) % p.stages, replica)
        prev = sc.pipe_rank((stage - 1) % p.stages, replica)
        return [
            sc.directed_group(rank, nxt),
            sc.directed_group(prev, rank),
            sc.directed_group(rank, prev),
            sc.directed_group(nxt, rank),
        ]

    def step(self, i: int) -> Iterator[None]:
        tl, p = self.tl, self.sc.pipeline
        start = tl.t
        tl.push(self.sc.step_name.format(i))
        self.data_loading(i)
        for kind, what in schedule(p.stages, self.stage, p.microbatches, p.chunks):
            if kind == "comm":
                yield from self.batch(what)
            else:
                self.microbatch("forward" if kind == "F" else "backward", i, what)
        yield from self.grad_all_reduce()
        yield from self.optimizer(i)
        tl.pop()
        self.trace.steps.append((i, start, tl.t))

    def batch(self, ops: list[str]) -> Iterator[None]:
        """One batch of point-to-point operations, issued together; the compute then
        waits for what it received."""
        nbytes = self.sc.pipeline.activation_bytes
        for n, op in enumerate(ops):
            pg, peer = self.channels[op]
            send = op in (SEND_NEXT, SEND_PREV)
            yield from self.collective(
                "send" if send else "recv",
                nbytes,
                "bfloat16",
                "partial",
                0,
                pg=pg,
                send={peer: nbytes} if send else {},
                grouped=n > 0,
            )
        yield from self.tl.settle()
        for op in ops:
            if op in (RECV_PREV, RECV_NEXT):
                for d in self.devices:
                    self.tl.wait(d.compute, self.comm_stream(d, self.channels[op][0]))
