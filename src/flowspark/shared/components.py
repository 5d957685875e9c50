"""The strongly connected components of a small directed graph (a pipeline's
vertices and edges): the groups of nodes that can each reach every other.

>>> strongly_connected(["in", "cat", "retry", "out"],
...                    [("in", "cat"), ("cat", "retry"), ("retry", "cat"), ("retry", "out")])
[['in'], ['cat', 'retry'], ['out']]
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

__all__ = ["strongly_connected"]


def strongly_connected(nodes: Sequence[str], edges: Iterable[tuple[str, str]]) -> list[list[str]]:
    """Each node in exactly one group; groups and their nodes in ``nodes``' order.

    Quadratic (a walk from every node), which a pipeline's tens of vertices allow.
    """
    targets: dict[str, list[str]] = {node: [] for node in nodes}
    for source, target in edges:
        targets[source].append(target)

    def reach(start: str) -> set[str]:
        seen, todo = {start}, [start]
        while todo:
            for target in targets[todo.pop()]:
                if target not in seen:
                    seen.add(target)
                    todo.append(target)
        return seen

    reaches = {node: reach(node) for node in nodes}
    groups: list[list[str]] = []
    placed: set[str] = set()
    for node in nodes:
        if node not in placed:
            group = [m for m in nodes if m in reaches[node] and node in reaches[m]]
            placed.update(group)
            groups.append(group)
    return groups
