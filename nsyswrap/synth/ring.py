"""Context parallelism's ring attention (Scenario.ring; see nsyswrap.synth.scenario.Ring).

Per step: ``data_loading``; ``forward``: per layer ``fwd:layers.<l>.qkv`` (projection
kernels), ``fwd:layers.<l>.attn`` (the ring: one attention block per rank of the ring,
the key/value block for the next one in flight beside it), ``fwd:layers.<l>.mlp``;
``backward`` in reverse (the ring carries key/value blocks and their gradients); the
gradients' all_reduce over all ranks; ``optimizer``. Each ring hop is one NCCL group per
rank: a send to the next rank and a receive from the previous one, each on the stream of
its direction (Scenario.directed_group), both waiting for the compute launched before
them (the buffer they fill is the one the last block read); the next block waits for the
receive.
"""

from __future__ import annotations

from collections.abc import Iterator

from nsyswrap.synth.links import ring_transfer_ns
from nsyswrap.synth.shapes import ShapeProgram

DTYPE = "bfloat16"
QKV, ATTENTION, MLP = 0, 1, 2  # draw keys (backward: + 3)


class RingProgram(ShapeProgram):
    """One rank of a context-parallel ring; see the module doc."""

    def __init__(self, *args):
        super().__init__(*args)
        sc, n = self.sc, self.sc.ranks
        self.send_pg = sc.directed_group(self.rank, (self.rank + 1) % n)
        self.recv_pg = sc.directed_group((self.rank - 1) % n, self.rank)
        self.next = (self.rank + 1) % n

    @staticmethod
    def extra_groups(sc, rank: int) -> list[int]:
        """The ring's two directions through this rank (one NCCL stream each)."""
        n = sc.ranks
        return [sc.directed_group(rank, (rank + 1) % n), sc.directed_group((rank - 1) % n, rank)]

    def forward(self, i: int) -> Iterator[None]:
        tl, ring = self.tl, self.sc.ring
        tl.push("forward")
        for layer in range(ring.layers):
            self.module(f"fwd:layers.{layer}.qkv", "forward", i, layer, QKV)
            tl.push(f"fwd:layers.{layer}.attn")
            yield from self.ring_attention("forward", i, layer)
            tl.pop()
            self.module(f"fwd:layers.{layer}.mlp", "forward", i, layer, MLP)
        tl.pop()

    def backward(self, i: int) -> Iterator[None]:
        tl, sc, ring = self.tl, self.sc, self.sc.ring
        tl.push("backward")
        self.to_autograd_thread()
        for layer in reversed(range(ring.layers)):
            self.module(f"bwd:layers.{layer}.mlp", "backward", i, layer, MLP + 3)
            tl.push(f"bwd:layers.{layer}.attn")
            yield from self.ring_attention("backward", i, layer)
            tl.pop()
            self.module(f"bwd:layers.{layer}.qkv", "backward", i, layer, QKV + 3)
        transfer = ring_transfer_ns(sc, sc.group_members(self.dp), ring.grad_bytes)
        yield from self.collective("all_reduce", ring.grad_bytes, DTYPE, "exposed", transfer)
        self.join_autograd_thread(i)
        tl.pop()

    def module(self, text: str, phase: str, step: int, layer: int, key: int) -> None:
        """A range of ``other_kernels`` projection/MLP kernels."""
        ring = self.sc.ring
        self.tl.push(text)
        self.kernels(phase, self.draw(ring.other_ns, ring.other_kernels, step, layer, key))
        self.tl.pop()

    def block(self, phase: str, step: int, layer: int, j: int) -> list[int]:
        """Attention kernel durations of block ``j`` (backward: twice as many, twice as long;
        the slow rank's x its factor)."""
        ring, slow = self.sc.ring, self.sc.slow_attention
        times = 1 if phase == "forward" else 2
        lo, hi = ring.attention_ns
        key = ATTENTION if phase == "forward" else ATTENTION + 3
        durs = self.draw(
            (times * lo, times * hi), times * ring.attention_kernels, step, layer, key, j
        )
        if slow and slow.rank == self.rank and (phase == "forward" or slow.backward):
            durs = [round(d * slow.factor) for d in durs]
        return durs

    def ring_attention(self, phase: str, step: int, layer: int) -> Iterator[None]:
        """One attention block per rank of the ring, the next key/value block (backward:
        and its gradient) in flight beside each but the last."""
        sc = self.sc
        nbytes = sc.ring.kv_bytes * (1 if phase == "forward" else 2)
        for j in range(sc.ranks):
            hop = j < sc.ranks - 1
            if hop:
                yield from self.hop(nbytes)
            self.kernels(phase, self.block(phase, step, layer, j))
            if hop:
                yield from self.tl.settle()
                for d in self.devices:
                    self.tl.wait(d.compute, self.comm_stream(d, self.recv_pg))

    def hop(self, nbytes: int) -> Iterator[None]:
        """One NCCL group: send ``nbytes`` to the next rank, receive from the previous."""
        yield from self.collective(
            "send", nbytes, DTYPE, "partial", 0, pg=self.send_pg, send={self.next: nbytes}
        )
        yield from self.collective(
            "recv", nbytes, DTYPE, "partial", 0, pg=self.recv_pg, send={}, grouped=True
        )
