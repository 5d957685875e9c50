"""Where an SVG puts each step: longest-path layers, a few barycenter sweeps, straight
polylines (laid out here, so a picture needs no script and no network).

:func:`lay_out` gives each node a :class:`Box` (centre ``x``, top ``y``) and each
edge a polyline from its source's bottom to its target's top.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from flowspark.visualize.graph import FlowGraph

__all__ = ["LINE_H", "MARGIN", "PAD_Y", "Box", "Layout", "lay_out"]

_CHAR_W = 7.4  # 12 px monospace
LINE_H = 16.0
_PAD_X, PAD_Y = 12.0, 8.0
_GAP_X, _GAP_Y = 28.0, 58.0
_DUMMY_W = 14.0
MARGIN = 20.0


@dataclass
class Box:
    """A node's box, or a bend point of an edge that spans layers."""

    node: int | None  # index into the graph's nodes; None for a bend point of a long edge
    layer: int
    width: float
    height: float
    x: float = 0.0  # center
    y: float = 0.0  # top


@dataclass
class Layout:
    """Every box, each layer's extent and each edge's polyline, in a width x height area."""

    boxes: list[Box]
    rows: list[tuple[float, float]]  # each layer's (top, bottom)
    paths: list[list[tuple[float, float]]]  # one polyline per graph edge
    width: float
    height: float


def _layers(n: int, pairs: list[tuple[int, int]]) -> tuple[list[int], set[int]]:
    """Longest-path layers; the indices of the edges that close a cycle (drawn upward)."""
    out: dict[int, list[tuple[int, int]]] = {i: [] for i in range(n)}
    for e, (u, v) in enumerate(pairs):
        out[u].append((v, e))
    state = [0] * n  # 0 new, 1 on the DFS path, 2 done
    back: set[int] = set()
    for root in range(n):
        if state[root]:
            continue
        state[root] = 1
        stack = [(root, iter(out[root]))]
        while stack:
            u, children = stack[-1]
            for v, e in children:
                if state[v] == 1:
                    back.add(e)
                elif state[v] == 0:
                    state[v] = 1
                    stack.append((v, iter(out[v])))
                    break
            else:
                state[u] = 2
                stack.pop()
    forward = [(v, u) if e in back else (u, v) for e, (u, v) in enumerate(pairs)]
    indegree = [0] * n
    after: dict[int, list[int]] = {i: [] for i in range(n)}
    for u, v in forward:
        indegree[v] += 1
        after[u].append(v)
    layer = [0] * n
    ready = [i for i in range(n) if indegree[i] == 0]
    while ready:
        u = ready.pop(0)
        for v in after[u]:
            layer[v] = max(layer[v], layer[u] + 1)
            indegree[v] -= 1
            if indegree[v] == 0:
                ready.append(v)
    return layer, back


def lay_out(graph: FlowGraph, labels: list[list[str]]) -> Layout:
    """Boxes sized for each node's ``labels`` (one list of lines per node), in layers."""
    index = {node.id: i for i, node in enumerate(graph.nodes)}
    pairs = [(index[e.source], index[e.target]) for e in graph.edges]
    loops = {e for e, (u, v) in enumerate(pairs) if u == v}
    others = [(e, p) for e, p in enumerate(pairs) if e not in loops]
    node_layer, back_local = _layers(len(graph.nodes), [p for _, p in others])
    back = {others[i][0] for i in back_local}

    boxes = []
    for i, lines in enumerate(labels):
        width = max(len(line) for line in lines) * _CHAR_W + 2 * _PAD_X
        boxes.append(Box(i, node_layer[i], max(width, 90.0), len(lines) * LINE_H + 2 * PAD_Y))
    chains: dict[int, list[int]] = {}
    for e, (u, v) in others:
        a, b = (v, u) if e in back else (u, v)
        chain = [a]
        for layer in range(node_layer[a] + 1, node_layer[b]):
            boxes.append(Box(None, layer, _DUMMY_W, 0.0))
            chain.append(len(boxes) - 1)
        chain.append(b)
        chains[e] = chain
    preds: dict[int, list[int]] = {i: [] for i in range(len(boxes))}
    succs: dict[int, list[int]] = {i: [] for i in range(len(boxes))}
    for chain in chains.values():
        for a, b in zip(chain, chain[1:]):
            succs[a].append(b)
            preds[b].append(a)

    depth = max((box.layer for box in boxes), default=0) + 1
    rows: list[list[int]] = [[] for _ in range(depth)]
    for i, box in enumerate(boxes):
        rows[box.layer].append(i)
    _order(rows, preds, succs)
    _place(rows, boxes, preds, succs)

    tops = []
    y = MARGIN
    for row in rows:
        height = max((boxes[i].height for i in row), default=0.0)
        for i in row:
            boxes[i].y = y + (height - boxes[i].height) / 2
        tops.append((y, y + height))
        y += height + _GAP_Y
    paths = _paths(graph, boxes, tops, chains, back, loops)
    right = max((b.x + b.width / 2 for b in boxes), default=0.0)
    right = max([right] + [x for path in paths for x, _ in path])
    return Layout(boxes, tops, paths, right + MARGIN, y - _GAP_Y + MARGIN)


def _order(rows: list[list[int]], preds: dict, succs: dict) -> None:
    """Reorder each layer by its neighbours' mean position (a few sweeps down and up)."""
    for sweep in range(8):
        down = sweep % 2 == 0
        layers = range(1, len(rows)) if down else range(len(rows) - 2, -1, -1)
        for layer in layers:
            near = rows[layer - 1] if down else rows[layer + 1]
            where = {b: k for k, b in enumerate(near)}
            links = preds if down else succs
            current = {b: k for k, b in enumerate(rows[layer])}

            def key(
                b: int, links: dict = links, where: dict = where, current: dict = current
            ) -> float:
                seen = [where[o] for o in links[b] if o in where]
                return sum(seen) / len(seen) if seen else current[b]

            rows[layer].sort(key=key)


def _place(rows: list[list[int]], boxes: list[Box], preds: dict, succs: dict) -> None:
    """x of each box: near its neighbours' mean, keeping the layer's order and gaps."""
    for row in rows:
        x = 0.0
        for i in row:
            boxes[i].x = x + boxes[i].width / 2
            x += boxes[i].width + _GAP_X
        for i in row:
            boxes[i].x -= (x - _GAP_X) / 2
    for sweep in range(6):
        down = sweep % 2 == 0
        links = preds if down else succs
        layers = range(1, len(rows)) if down else range(len(rows) - 2, -1, -1)
        for layer in layers:
            row = rows[layer]
            want = []
            for i in row:
                near = [boxes[o].x for o in links[i]]
                want.append(sum(near) / len(near) if near else boxes[i].x)
            for i, x in zip(row, _spread(want, [boxes[i].width for i in row])):
                boxes[i].x = x
    left = min((b.x - b.width / 2 for b in boxes), default=0.0)
    for box in boxes:
        box.x += MARGIN - left


def _spread(want: list[float], widths: list[float]) -> list[float]:
    """Positions as near ``want`` as the order and the gaps allow (the mean of pushing
    right and pushing left, both feasible, so the mean is too).

    >>> _spread([0.0, 0.0], [100.0, 100.0])
    [-64.0, 64.0]
    """
    n = len(want)
    right = list(want)
    for k in range(1, n):
        right[k] = max(right[k], right[k - 1] + (widths[k - 1] + widths[k]) / 2 + _GAP_X)
    left = list(want)
    for k in range(n - 2, -1, -1):
        left[k] = min(left[k], left[k + 1] - (widths[k] + widths[k + 1]) / 2 - _GAP_X)
    return [(a + b) / 2 for a, b in zip(right, left)]


def _paths(
    graph: FlowGraph,
    boxes: list[Box],
    rows: list[tuple[float, float]],
    chains: dict[int, list[int]],
    back: set[int],
    loops: set[int],
) -> list[list[tuple[float, float]]]:
    """Each edge's polyline, from the source's bottom to the target's top; edges that
    share a box leave/enter it side by side, ordered by where they go/come from."""
    points: dict[int, list[tuple[float, float]]] = {}
    for e, chain in chains.items():
        path = []
        for b in chain[1:-1]:
            top, bottom = rows[boxes[b].layer]
            path += [(boxes[b].x, top), (boxes[b].x, bottom)]
        points[e] = path
    starts: dict[int, list[int]] = {}
    ends: dict[int, list[int]] = {}
    for e, chain in chains.items():
        starts.setdefault(chain[0], []).append(e)
        ends.setdefault(chain[-1], []).append(e)

    def toward(e: int, first: bool) -> float:
        chain = chains[e]
        return boxes[chain[1] if first else chain[-2]].x

    start_x: dict[int, float] = {}
    end_x: dict[int, float] = {}
    for box, edges, at, first in [(b, es, start_x, True) for b, es in starts.items()] + [
        (b, es, end_x, False) for b, es in ends.items()
    ]:
        edges.sort(key=functools.partial(toward, first=first))
        step = min(boxes[box].width / (len(edges) + 1), 22.0)
        for k, e in enumerate(edges):
            at[e] = boxes[box].x + (k - (len(edges) - 1) / 2) * step
    paths = []
    for e in range(len(graph.edges)):
        if e in loops:
            node = boxes[_node_box(graph, graph.edges[e].source)]
            right, top = node.x + node.width / 2, node.y
            paths.append(
                [
                    (right, top + node.height * 0.3),
                    (right + 22, top + node.height * 0.3),
                    (right + 22, top + node.height * 0.7),
                    (right, top + node.height * 0.7),
                ]
            )
            continue
        chain = chains[e]
        source, target = boxes[chain[0]], boxes[chain[-1]]
        path = [(start_x[e], source.y + source.height), *points[e], (end_x[e], target.y)]
        paths.append(path[::-1] if e in back else path)
    return paths


def _node_box(graph: FlowGraph, node_id: str) -> int:
    return next(i for i, n in enumerate(graph.nodes) if n.id == node_id)
