"""Transfer times over the links between GPUs: NVLink inside a node, the network across
nodes (Scenario.link_bytes_per_ns, link_latency_ns), a slow NIC (Scenario.slow_link)."""

from __future__ import annotations

from math import ceil

from nsyswrap.synth.scenario import Scenario


def slowdown(sc: Scenario, nodes: set[int]) -> float:
    """How many times longer a transfer between ``nodes`` takes than on healthy links: the
    slow NIC's factor when they span nodes and one of them is the slow node, else 1."""
    slow = sc.slow_link
    return slow.factor if slow and len(nodes) > 1 and slow.node in nodes else 1.0


def ring_transfer_ns(sc: Scenario, members: list[int], nbytes: int) -> int:
    """A ring all-reduce of ``nbytes`` over ``members``: 2 (n-1)/n of the bytes over the
    slowest link of the ring (across nodes when it spans them), plus that link's latency
    (both times the slow NIC's factor when the ring crosses it)."""
    n = len(members)
    nodes = {m // sc.ranks_per_node for m in members}
    across = int(len(nodes) > 1)
    healthy = sc.link_latency_ns[across] + -(
        -2 * (n - 1) * nbytes // (n * sc.link_bytes_per_ns[across])
    )
    factor = slowdown(sc, nodes)
    return healthy if factor == 1 else ceil(healthy * factor)
