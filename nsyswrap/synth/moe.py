"""The MoE training loop (Scenario.moe; see nsyswrap.synth.scenario.MoE for the shape).

Per step: ``data_loading``; ``forward``: per layer ``fwd:layers.<l>.attn`` (attention
kernels), ``fwd:layers.<l>.router``, the all_to_all dispatch, ``fwd:layers.<l>.experts``,
the all_to_all combine; ``backward``: per layer in reverse the combine's gradient
(all_to_all to the experts), ``bwd:layers.<l>.experts``, the dispatch's gradient
(all_to_all back), ``bwd:layers.<l>.attn``, then that layer's dense all_reduce (issued,
not waited for: it overlaps the next layer); ``optimizer`` waits for the all-reduces.
Compute waits for each all_to_all (its output is the next kernel's input).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from nsyswrap.synth.links import ring_transfer_ns
from nsyswrap.synth.scenario import EP_PG
from nsyswrap.synth.shapes import ShapeProgram, keyed

ROUTER_NS = (5_000, 8_000)
EXPERT_BASE_NS = (2_000, 4_000)  # per expert kernel, besides the per-token time
DTYPE = "bfloat16"


def routing(sc, step: int, layer: int) -> np.ndarray:
    """tokens[src, dst]: rank src's tokens routed to the expert on rank dst in (step, layer),
    the same on every rank. Row src splits sc.moe.tokens in proportion to weights
    exp(imbalance x N(0, 1)) drawn for (step, layer, src), the hot expert's x factor
    (largest remainders, ties to the lower rank)."""
    moe, n = sc.moe, sc.ranks
    out = np.zeros((n, n), dtype=np.int64)
    for src in range(n):
        w = np.exp(moe.imbalance * keyed(sc.seed, 7, step, layer, src).standard_normal(n))
        if sc.hot_expert is not None:
            w[sc.hot_expert.rank] *= sc.hot_expert.factor
        share = moe.tokens * w / w.sum()
        row = np.floor(share).astype(np.int64)
        rest = moe.tokens - int(row.sum())
        row[np.argsort(-(share - row), kind="stable")[:rest]] += 1
        out[src] = row
    return out


class MoEProgram(ShapeProgram):
    """One rank of an expert-parallel MoE run; see the module doc."""

    def __init__(self, *args):
        super().__init__(*args)
        self._routes: dict[tuple[int, int], np.ndarray] = {}

    @staticmethod
    def extra_groups(sc, rank: int) -> list[int]:
        """Groups with an NCCL stream of their own besides the data-parallel one."""
        return [EP_PG]

    def routes(self, step: int, layer: int) -> np.ndarray:
        key = (step, layer)
        if key not in self._routes:
            self._routes[key] = routing(self.sc, step, layer)
        return self._routes[key]

    def all_to_all(self, tokens: np.ndarray) -> Iterator[None]:
        """Send ``tokens[j]`` tokens to rank j; compute then waits for what came back."""
        send = {j: int(n) * self.sc.moe.token_bytes for j, n in enumerate(tokens)}
        yield from self.collective(
            "all_to_all", sum(send.values()), DTYPE, "exposed", 0, pg=EP_PG, send=send
        )
        yield from self.tl.settle()
        for d in self.devices:
            self.tl.wait(d.compute, self.comm_stream(d, EP_PG))

    def expert_tokens(self, step: int, layer: int) -> int:
        """The tokens this rank's expert works on: those routed to it; on the hot expert's
        rank under HotExpert.median_work, the median of the other experts' (the middle
        one, or the two middle ones' mean rounded half to even)."""
        received = self.routes(step, layer).sum(axis=0)
        hot = self.sc.hot_expert
        if hot and hot.median_work and hot.rank == self.rank:
            return int(np.round(np.median(np.delete(received, self.rank))))
        return int(received[self.rank])

    def experts(self, step: int, layer: int, factor: int, tag: int) -> list[int]:
        """Expert kernel durations: a base each + the per-token time spread over them."""
        moe = self.sc.moe
        tokens = self.expert_tokens(step, layer)
        base = self.draw(EXPERT_BASE_NS, moe.expert_kernels, step, layer, tag)
        work = tokens * moe.expert_ns_per_token * factor
        return [
            b + work // moe.expert_kernels + (k < work % moe.expert_kernels)
            for k, b in enumerate(base)
        ]

    def forward(self, i: int) -> Iterator[None]:
        tl, moe = self.tl, self.sc.moe
        tl.push("forward")
        for layer in range(moe.layers):
            tokens = self.routes(i, layer)
            tl.push(f"fwd:layers.{layer}.attn")
            self.kernels("forward", self.draw(moe.attention_ns, moe.attention_kernels, i, layer, 0))
            tl.pop()
            tl.push(f"fwd:layers.{layer}.router")
            self.kernels("forward", self.draw(ROUTER_NS, 1, i, layer, 1))
            tl.pop()
            yield from self.all_to_all(tokens[self.rank])  # dispatch
            tl.push(f"fwd:layers.{layer}.experts")
            self.kernels("forward", self.experts(i, layer, 1, 2))
            tl.pop()
            yield from self.all_to_all(tokens[:, self.rank])  # combine
        tl.pop()

    def backward(self, i: int) -> Iterator[None]:
        tl, sc, moe = self.tl, self.sc, self.sc.moe
        dense = sc.moe.dense_bytes // moe.layers
        transfer = ring_transfer_ns(sc, sc.group_members(self.dp), dense)
        tl.push("backward")
        for layer in reversed(range(moe.layers)):
            tokens = self.routes(i, layer)
            yield from self.all_to_all(tokens[self.rank])  # combine's gradient
            tl.push(f"bwd:layers.{layer}.experts")
            self.kernels("backward", self.experts(i, layer, 2, 3))
            tl.pop()
            yield from self.all_to_all(tokens[:, self.rank])  # dispatch's gradient
            tl.push(f"bwd:layers.{layer}.attn")
            self.kernels(
                "backward", self.draw(moe.attention_ns, 2 * moe.attention_kernels, i, layer, 4)
            )
            tl.pop()
            yield from self.collective("all_reduce", dense, DTYPE, "partial", transfer)
        tl.pop()
