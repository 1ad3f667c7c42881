"""Connected components (union-find), for groups of streams and sets of tied clocks."""

from __future__ import annotations

from collections.abc import Hashable, Iterable


def components(nodes: Iterable[Hashable], links: Iterable[tuple[Hashable, Hashable]]) -> dict:
    """Each node -> a representative node of its connected component."""
    parent = {n: n for n in nodes}

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in links:
        parent[find(b)] = find(a)
    return {n: find(n) for n in parent}
