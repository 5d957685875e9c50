"""A picture of a flow: its steps and edges as Mermaid text, an SVG or an HTML page.

:func:`flow_graph` walks a :class:`~flowspark.dataflow.Dataflow`'s steps (or a
Numaflow ``PipelineSpec``'s vertices) into a :class:`FlowGraph`: one node per
step with its operator kind and a short detail (the connector's class, the
window, the function's name), one edge per upstream port. An edge into a keyed
step is a shuffle by key and is marked ``by key`` (thick); the edge out of a
``redistribute`` is ``round robin`` (dashed); a window's late stream is
``late``; a branch's two outputs are ``true``/``false``. Nothing here starts
Spark: a flow is only a description.

:func:`to_mermaid`, :func:`to_svg` and :func:`to_html` render it; the SVG is
laid out here (longest-path layers, straight lines), so the HTML page needs no
script and no network. ``figures`` (see :func:`read_progress`) add a run's
counts to the steps' labels.

>>> from flowspark.dataflow import Dataflow
>>> from flowspark.testing import TestingInput, TestingOutput
>>> flow = Dataflow("tiny")
>>> s = flow.input("inp", TestingInput([("a", 1)]))
>>> _ = s.reduce("sum", lambda a, b: a + b, lambda acc: False).output("out", TestingOutput([]))
>>> print(to_mermaid(flow))
---
title: "tiny"
---
flowchart TD
    s_inp(["inp<br/>input · TestingInput"])
    s_sum[["sum<br/>reduce"]]
    s_out(["out<br/>output · TestingOutput"])
    s_inp ==>|"by key"| s_sum
    s_sum --> s_out
    classDef input fill:#e6f4ea,stroke:#2f7d43,color:#111
    classDef keyed fill:#fff1e0,stroke:#c2570c,color:#111
    classDef output fill:#e7f0fb,stroke:#2f5fa8,color:#111
    class s_inp input
    class s_sum keyed
    class s_out output
    linkStyle 0 stroke:#c2570c,stroke-width:3px
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any
from xml.sax.saxutils import escape as _xml_escape
from xml.sax.saxutils import quoteattr as _xml_attr

__all__ = [
    "Edge",
    "Figures",
    "FlowGraph",
    "Node",
    "flow_graph",
    "read_progress",
    "to_html",
    "to_mermaid",
    "to_svg",
]

# ---------------------------------------------------------------------------------------
# The graph
# ---------------------------------------------------------------------------------------

# Edge styles: a plain edge, a shuffle by key (into a keyed step), a round-robin
# exchange (out of ``redistribute``), a window's late stream.
PLAIN, KEYED, EXCHANGE, LATE = "plain", "keyed", "exchange", "late"
_WINDOW_KINDS = {"reduce_window", "fold_window", "collect_window", "reduce_stream"}
_SPLIT_KINDS = {"branch", "merge", "route"}


@dataclass(frozen=True)
class Node:
    """One step: ``id`` is safe in Mermaid and SVG; ``family`` is the operator's
    (``input``, ``stateless``, ``exchange``, ``keyed``, ``output``); ``stage`` is
    the plan level it runs at (0: in the source readers; ``None``: unknown)."""

    id: str
    step_id: str
    kind: str
    family: str
    detail: str = ""
    stage: int | None = None


@dataclass(frozen=True)
class Edge:
    """``source`` → ``target`` (node ids), drawn in ``style`` with ``label``."""

    source: str
    target: str
    label: str = ""
    style: str = PLAIN


@dataclass(frozen=True)
class FlowGraph:
    """A flow's nodes (in step order, a topological order for a Dataflow) and edges."""

    name: str
    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]

    def node(self, step_id: str) -> Node:
        """The node of step ``step_id`` (``KeyError`` if there is none)."""
        for node in self.nodes:
            if node.step_id == step_id:
                return node
        raise KeyError(step_id)

    def step_of(self, node_id: str) -> str:
        """The step id of node ``node_id`` (``KeyError`` if there is none)."""
        for node in self.nodes:
            if node.id == node_id:
                return node.step_id
        raise KeyError(node_id)


def safe_ids(names: Iterable[str]) -> list[str]:
    """Unique ids made of ``[A-Za-z0-9_]`` for ``names``, in order.

    >>> safe_ids(["in", "x.key", "x_key", "a->b", "end"])
    ['s_in', 's_x_key', 's_x_key_2', 's_a__b', 's_end']
    """
    ids: list[str] = []
    used: set[str] = set()
    for name in names:
        base = "s_" + re.sub(r"[^A-Za-z0-9_]", "_", name)
        candidate, n = base, 1
        while candidate in used:
            n += 1
            candidate = f"{base}_{n}"
        used.add(candidate)
        ids.append(candidate)
    return ids


def flow_graph(flow: Any) -> FlowGraph:
    """The :class:`FlowGraph` of a Dataflow, a Numaflow ``PipelineSpec`` or a FlowGraph."""
    if isinstance(flow, FlowGraph):
        return flow
    if hasattr(flow, "vertices") and hasattr(flow, "edges"):
        return _spec_graph(flow)
    steps = getattr(flow, "steps", None)
    if not isinstance(steps, list):
        raise TypeError(f"expected a flowspark Dataflow; got {type(flow).__name__}")
    from flowspark.api.steps import operator

    stages = _stages(flow)
    ids = safe_ids(s.step_id for s in steps)
    by_step = {step: node_id for step, node_id in zip(steps, ids)}
    nodes = []
    families = {}
    for step, node_id in zip(steps, ids):
        try:
            family = operator(step.kind).family
        except ValueError:
            family = "stateless"
        families[node_id] = family
        nodes.append(
            Node(node_id, step.step_id, step.kind, family, _detail(step), stages.get(step))
        )
    edges = []
    for step in steps:
        target = by_step[step]
        for port in step.upstreams:
            source = by_step.get(port.step)
            if source is None:  # a step of another flow: nothing to draw it from
                continue
            labels = []
            style = PLAIN
            if port.step.kind == "branch":
                labels.append("true" if port.slot == 0 else "false")
            elif port.slot == 1 and port.step.kind in _WINDOW_KINDS:
                labels.append("late")
                style = LATE
            elif port.slot:
                labels.append(f"out {port.slot}")
            if families[target] == "keyed":
                labels.append("by key")
                style = KEYED
            elif families[source] == "exchange":
                labels.append("round robin")
                style = EXCHANGE
            edges.append(Edge(source, target, " · ".join(labels), style))
    return FlowGraph(getattr(flow, "flow_id", "flow"), tuple(nodes), tuple(edges))


def _stages(flow: Any) -> dict[Any, int]:
    """Each step's plan level, when the flow is valid (else nothing)."""
    from flowspark.plan.graph import build_plan

    try:
        plan = build_plan(flow)
    except (TypeError, ValueError):
        return {}
    return {step: plan.levels[i] for i, step in enumerate(plan.steps)}


def _detail(step: Any) -> str:
    """A few words on what ``step`` does beyond its kind."""
    args, fns = step.args, step.fns
    if step.kind in ("input", "output"):
        return type(args.get(step.kind)).__name__ if step.kind in args else ""
    parts = []
    if "window_config" in args:
        parts.append(_window(args["window_config"]))
    if step.kind == "batch":
        parts.append(f"max {args.get('max_size')}, {_duration(args.get('timeout'))}")
    if step.kind == "accumulate" and isinstance(args.get("timeout"), timedelta):
        parts.append(f"timeout {_duration(args['timeout'])}")
    if step.kind == "route":
        tags = ", ".join(map(str, args.get("tags", ()))) or "any"
        parts.append(f"{args.get('operator', 'or')}: {tags}")
    roles = sorted(fns, key=lambda r: _ROLES.index(r) if r in _ROLES else len(_ROLES))
    names = [name for role in roles if role != "factory" and (name := _callable_name(fns[role]))]
    return " · ".join([*names[:1], *parts])


# Which of a step's functions names it, best first (stateful_map: its mapper, not its builder).
_ROLES = ("mapper", "reducer", "folder", "predicate", "inspector", "handler")


def _callable_name(fn: Any) -> str:
    """A function's readable name ('' for a lambda); a callable object's class name."""
    if fn is None:
        return ""
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    if isinstance(name, str) and (callable(fn) or isinstance(fn, type)):
        name = name.rpartition("<locals>.")[2]
        if "<lambda>" in name:
            return ""
        owner = getattr(fn, "__objclass__", None)  # str.split: a method descriptor
        if owner is not None and "." not in name:
            name = f"{owner.__name__}.{name}"
        return name
    return type(fn).__name__


def _window(config: Any) -> str:
    length = getattr(config, "length", None)
    gap = getattr(config, "gap", None)
    text = type(config).__name__
    if isinstance(length, timedelta):
        text += f" {_duration(length)}"
    offset = getattr(config, "offset", None)
    if isinstance(offset, timedelta):
        text += f" every {_duration(offset)}"
    if isinstance(gap, timedelta):
        text += f" gap {_duration(gap)}"
    return text


def _duration(value: Any) -> str:
    """``timedelta(seconds=90)`` → ``'90s'``; ``timedelta(milliseconds=5)`` → ``'5ms'``.

    >>> _duration(timedelta(seconds=90)), _duration(timedelta(milliseconds=5))
    ('90s', '5ms')
    """
    if not isinstance(value, timedelta):
        return str(value)
    seconds = value.total_seconds()
    if seconds and seconds < 1:
        return f"{seconds * 1000:g}ms"
    return f"{seconds:g}s"


def _spec_graph(spec: Any) -> FlowGraph:
    """A Numaflow ``PipelineSpec`` vertex by vertex (no step of it is built)."""
    vertices = list(spec.vertices)
    ids = safe_ids(v.name for v in vertices)
    node_of = {v.name: node_id for v, node_id in zip(vertices, ids)}
    nodes = []
    keyed = set()
    for vertex, node_id in zip(vertices, ids):
        kind, family, detail = _vertex_kind(vertex)
        if family == "keyed":
            keyed.add(node_id)
        nodes.append(Node(node_id, vertex.name, kind, family, detail))
    edges = []
    for edge in spec.edges:
        source, target = node_of.get(edge.source), node_of.get(edge.target)
        if source is None or target is None:
            continue
        labels = []
        if edge.tags is not None:
            labels.append(f"tags {edge.operator}: {', '.join(edge.tags)}")
        style = PLAIN
        if target in keyed:
            labels.append("by key")
            style = KEYED
        edges.append(Edge(source, target, " · ".join(labels), style))
    return FlowGraph(spec.name, tuple(nodes), tuple(edges))


def _vertex_kind(vertex: Any) -> tuple[str, str, str]:
    """A Numaflow vertex's (kind, family, detail)."""
    if vertex.kind == "source" and vertex.source is not None:
        detail = vertex.source.kind
        if vertex.source.transformer is not None:
            detail += " + transformer"
        return "source", "input", detail
    if vertex.kind == "sink" and vertex.sink is not None:
        return "sink", "output", vertex.sink.kind
    udf = vertex.udf
    if udf is None:
        return vertex.kind, "stateless", ""
    image = udf.container.image.rsplit("/", 1)[-1] if udf.container is not None else ""
    what = udf.builtin.name if udf.builtin is not None else image
    group = udf.group_by
    if group is None:
        return "map", "stateless", what
    window = group.window
    if window.kind == "accumulator":
        return "accumulate", "keyed", _join(what, f"timeout {_duration(window.timeout)}")
    kind = "reduce_stream" if window.streaming else "reduce"
    span = window.kind if window.length is None else f"{window.kind} {_duration(window.length)}"
    if window.slide is not None:
        span += f" every {_duration(window.slide)}"
    return kind, "keyed", _join(what, span)


def _join(*parts: str) -> str:
    return " · ".join(p for p in parts if p)


# ---------------------------------------------------------------------------------------
# A run's figures
# ---------------------------------------------------------------------------------------


@dataclass
class Figures:
    """A run's counts, summed over its micro-batches (see :func:`read_progress`).

    ``steps`` maps a step id to its ``in``/``out``/``late`` sums and its last
    ``state_keys``.

    >>> Figures({"split": {"in": 1000, "out": 5980}}).label("split")
    'in 1,000 · out 5,980'
    """

    steps: dict[str, dict[str, int]] = field(default_factory=dict)
    batches: int = 0
    duration_ms: float = 0.0
    watermark_lag_ms: float | None = None
    state_keys: int | None = None

    def label(self, step_id: str) -> str:
        """The figures of ``step_id`` as a label line ('' when there are none)."""
        counts = self.steps.get(step_id) or {}
        names = (("in", "in"), ("out", "out"), ("late", "late"), ("state_keys", "keys"))
        return " · ".join(f"{word} {counts[k]:,}" for k, word in names if k in counts)

    def summary(self) -> str:
        """One line on the whole run ('' when nothing was read).

        >>> Figures(batches=3, duration_ms=1500, watermark_lag_ms=50).summary()
        '3 micro-batches · 1.5 s in batches · watermark lag 50 ms'
        """
        parts = []
        if self.batches:
            parts.append(f"{self.batches:,} micro-batch{'es' if self.batches != 1 else ''}")
        if self.duration_ms:
            seconds = self.duration_ms / 1000
            shown = f"{seconds:,.0f}" if seconds >= 100 else f"{seconds:.3g}"
            parts.append(f"{shown} s in batches")
        if self.watermark_lag_ms is not None:
            parts.append(f"watermark lag {self.watermark_lag_ms:,.0f} ms")
        if self.state_keys is not None:
            parts.append(f"{self.state_keys:,} keys in state")
        return " · ".join(parts)


def read_progress(lines: Iterable[str]) -> Figures:
    """Sum a progress file's JSON lines (one object per micro-batch) into :class:`Figures`.

    A line looks like ``{"batch": 3, "steps": {"count": {"in": 10, "out": 8,
    "late": 0, "state_keys": 5}}, "duration_ms": 120, "watermark_lag_ms": 50}``;
    every key is optional. ``in``/``out``/``late`` and ``duration_ms`` are summed,
    ``state_keys`` and ``watermark_lag_ms`` are the last value seen. Lines shaped
    like the engine's ``BatchProgress`` are read too: ``items_read`` (per input:
    what it emitted, its ``out``), ``items_written`` (per output: its ``in``),
    ``late_items`` (per window step) and a top-level ``state_keys``. Blank lines
    are skipped; anything else that is not a JSON object raises ``ValueError``
    naming the line.

    >>> figures = read_progress([
    ...     '{"batch": 0, "steps": {"w": {"in": 10, "late": 1, "state_keys": 4}}}',
    ...     '{"batch": 1, "steps": {"w": {"in": 5, "state_keys": 6}}, "duration_ms": 80}',
    ... ])
    >>> figures.steps["w"], figures.batches, figures.duration_ms
    ({'in': 15, 'late': 1, 'state_keys': 6}, 2, 80.0)
    """
    figures = Figures()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"line {number}: not JSON ({exc.msg})") from None
        if not isinstance(obj, dict):
            raise ValueError(f"line {number}: expected a JSON object; got {type(obj).__name__}")
        try:
            _add_batch(figures, obj)
        except (TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"line {number}: {exc}") from None
    return figures


def _add_batch(figures: Figures, obj: dict[str, Any]) -> None:
    figures.batches += 1
    for step_id, counts in (obj.get("steps") or {}).items():
        if not isinstance(counts, dict):
            raise ValueError(f"steps[{step_id!r}] must be an object")
        for key in ("in", "out", "late"):
            if counts.get(key) is not None:
                _bump(figures, step_id, key, counts[key])
        if counts.get("state_keys") is not None:
            figures.steps.setdefault(step_id, {})["state_keys"] = int(counts["state_keys"])
    for name, key in (("items_read", "out"), ("items_written", "in"), ("late_items", "late")):
        for step_id, count in (obj.get(name) or {}).items():
            _bump(figures, step_id, key, count)
    if obj.get("duration_ms") is not None:
        figures.duration_ms += float(obj["duration_ms"])
    if obj.get("watermark_lag_ms") is not None:
        figures.watermark_lag_ms = float(obj["watermark_lag_ms"])
    if obj.get("state_keys") is not None:
        figures.state_keys = int(obj["state_keys"])


def _bump(figures: Figures, step_id: str, key: str, count: Any) -> None:
    if isinstance(count, bool) or not isinstance(count, int | float):
        raise ValueError(f"{step_id!r} {key}: expected a number; got {count!r}")
    counts = figures.steps.setdefault(str(step_id), {})
    counts[key] = counts.get(key, 0) + int(count)


def _figures(figures: Figures | Mapping[str, Mapping[str, int]] | None) -> Figures:
    if figures is None:
        return Figures()
    if isinstance(figures, Figures):
        return figures
    return Figures({k: dict(v) for k, v in figures.items()})


# ---------------------------------------------------------------------------------------
# Labels
# ---------------------------------------------------------------------------------------

_MAX_CHARS = 44


def _printable(text: str) -> str:
    """``text`` without control characters (they break Mermaid lines and XML)."""
    return "".join(c if c.isprintable() else " " for c in text)


def _clip(text: str, limit: int = _MAX_CHARS) -> str:
    text = _printable(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _lines(node: Node, figures: Figures) -> list[str]:
    """A node's label lines: its step id, its kind and detail, its figures."""
    kinds = [_join(node.kind, node.detail)]
    if len(kinds[0]) > _MAX_CHARS:
        kinds = [node.kind, node.detail]
    return [line for line in (node.step_id, *kinds, figures.label(node.step_id)) if line]


# ---------------------------------------------------------------------------------------
# Mermaid
# ---------------------------------------------------------------------------------------

_COLORS = {
    "input": ("#e6f4ea", "#2f7d43"),
    "output": ("#e7f0fb", "#2f5fa8"),
    "stateless": ("#ffffff", "#6b7280"),
    "exchange": ("#f3e8ff", "#7e3fb3"),
    "keyed": ("#fff1e0", "#c2570c"),
}
_EDGE_COLORS = {PLAIN: "#555555", KEYED: "#c2570c", EXCHANGE: "#7e3fb3", LATE: "#b91c1c"}
_MERMAID_SHAPES = {
    "input": ('(["', '"])'),
    "output": ('(["', '"])'),
    "exchange": ('[/"', '"/]'),
    "keyed": ('[["', '"]]'),
}
_MERMAID_ARROWS = {PLAIN: "-->", KEYED: "==>", EXCHANGE: "-.->", LATE: "-.->"}


def mermaid_text(text: str) -> str:
    """``text`` made safe inside a quoted Mermaid label (entity codes for ``"#<>&`` …).

    >>> mermaid_text('say "hi" <b> & #1')
    'say #quot;hi#quot; #lt;b#gt; #amp; #35;1'
    """
    out = []
    for char in _printable(text):
        if char in '"#<>&`|':
            names = {'"': "quot", "<": "lt", ">": "gt", "&": "amp"}
            out.append(f"#{names.get(char, ord(char))};")
        else:
            out.append(char)
    return "".join(out)


def to_mermaid(flow: Any, figures: Figures | Mapping[str, Any] | None = None) -> str:
    """The flow as a Mermaid ``flowchart`` (top to bottom), with ``figures`` in its labels."""
    graph = flow_graph(flow)
    fig = _figures(figures)
    title = fig.summary()
    title = f"{graph.name} — {title}" if title else graph.name
    out = ["---", f"title: {json.dumps(_printable(title), ensure_ascii=False)}", "---"]
    out.append("flowchart TD")
    for node in graph.nodes:
        shape = _MERMAID_SHAPES.get(node.family, ('["', '"]'))
        if node.kind in _SPLIT_KINDS:
            shape = ('{{"', '"}}')
        label = "<br/>".join(mermaid_text(line) for line in _lines(node, fig))
        out.append(f"    {node.id}{shape[0]}{label}{shape[1]}")
    for edge in graph.edges:
        arrow = _MERMAID_ARROWS[edge.style]
        label = f'|"{mermaid_text(edge.label)}"|' if edge.label else ""
        out.append(f"    {edge.source} {arrow}{label} {edge.target}")
    colored = [n for n in graph.nodes if n.family in _COLORS and n.family != "stateless"]
    families = sorted({n.family for n in colored})
    for family in families:
        fill, stroke = _COLORS[family]
        out.append(f"    classDef {family} fill:{fill},stroke:{stroke},color:#111")
    for node in colored:
        out.append(f"    class {node.id} {node.family}")
    for i, edge in enumerate(graph.edges):
        if edge.style == KEYED:
            out.append(f"    linkStyle {i} stroke:{_EDGE_COLORS[KEYED]},stroke-width:3px")
        elif edge.style in (EXCHANGE, LATE):
            out.append(f"    linkStyle {i} stroke:{_EDGE_COLORS[edge.style]}")
    return "\n".join(out)


# ---------------------------------------------------------------------------------------
# SVG: longest-path layers, a few barycenter sweeps, straight polylines
# ---------------------------------------------------------------------------------------

_CHAR_W = 7.4  # 12 px monospace
_LINE_H = 16.0
_PAD_X, _PAD_Y = 12.0, 8.0
_GAP_X, _GAP_Y = 28.0, 58.0
_DUMMY_W = 14.0
_MARGIN = 20.0
_FONT = "DejaVu Sans Mono, Menlo, Consolas, monospace"


@dataclass
class _Box:
    node: int | None  # index into the graph's nodes; None for a bend point of a long edge
    layer: int
    width: float
    height: float
    x: float = 0.0  # center
    y: float = 0.0  # top


@dataclass
class _Layout:
    boxes: list[_Box]
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


def _layout(graph: FlowGraph, labels: list[list[str]]) -> _Layout:
    index = {node.id: i for i, node in enumerate(graph.nodes)}
    pairs = [(index[e.source], index[e.target]) for e in graph.edges]
    loops = {e for e, (u, v) in enumerate(pairs) if u == v}
    others = [(e, p) for e, p in enumerate(pairs) if e not in loops]
    node_layer, back_local = _layers(len(graph.nodes), [p for _, p in others])
    back = {others[i][0] for i in back_local}

    boxes = []
    for i, lines in enumerate(labels):
        width = max(len(line) for line in lines) * _CHAR_W + 2 * _PAD_X
        boxes.append(_Box(i, node_layer[i], max(width, 90.0), len(lines) * _LINE_H + 2 * _PAD_Y))
    chains: dict[int, list[int]] = {}
    for e, (u, v) in others:
        a, b = (v, u) if e in back else (u, v)
        chain = [a]
        for layer in range(node_layer[a] + 1, node_layer[b]):
            boxes.append(_Box(None, layer, _DUMMY_W, 0.0))
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
    y = _MARGIN
    for row in rows:
        height = max((boxes[i].height for i in row), default=0.0)
        for i in row:
            boxes[i].y = y + (height - boxes[i].height) / 2
        tops.append((y, y + height))
        y += height + _GAP_Y
    paths = _paths(graph, boxes, tops, chains, back, loops)
    right = max((b.x + b.width / 2 for b in boxes), default=0.0)
    right = max([right] + [x for path in paths for x, _ in path])
    return _Layout(boxes, tops, paths, right + _MARGIN, y - _GAP_Y + _MARGIN)


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

            def key(b: int, links: dict = links, where: dict = where, current: dict = current):
                seen = [where[o] for o in links[b] if o in where]
                return sum(seen) / len(seen) if seen else current[b]

            rows[layer].sort(key=key)


def _place(rows: list[list[int]], boxes: list[_Box], preds: dict, succs: dict) -> None:
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
        box.x += _MARGIN - left


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
    boxes: list[_Box],
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
        edges.sort(key=lambda e, first=first: toward(e, first))
        step = min(boxes[box].width / (len(edges) + 1), 22.0)
        for k, e in enumerate(edges):
            at[e] = boxes[box].x + (k - (len(edges) - 1) / 2) * step
    paths = []
    for e in range(len(graph.edges)):
        if e in loops:
            box = boxes[_node_box(graph, graph.edges[e].source)]
            right, top = box.x + box.width / 2, box.y
            paths.append(
                [
                    (right, top + box.height * 0.3),
                    (right + 22, top + box.height * 0.3),
                    (right + 22, top + box.height * 0.7),
                    (right, top + box.height * 0.7),
                ]
            )
            continue
        chain = chains[e]
        a, b = boxes[chain[0]], boxes[chain[-1]]
        path = [(start_x[e], a.y + a.height), *points[e], (end_x[e], b.y)]
        paths.append(path[::-1] if e in back else path)
    return paths


def _node_box(graph: FlowGraph, node_id: str) -> int:
    return next(i for i, n in enumerate(graph.nodes) if n.id == node_id)


def _fmt(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


def to_svg(flow: Any, figures: Figures | Mapping[str, Any] | None = None) -> str:
    """The flow as a standalone SVG document (no script, no external reference)."""
    graph = flow_graph(flow)
    fig = _figures(figures)
    labels = [[_clip(line) for line in _lines(node, fig)] for node in graph.nodes]
    layout = _layout(graph, labels)
    title = [graph.name] + ([fig.summary()] if fig.summary() else [])
    title_h = 22.0 * len(title) + 8
    legend_h = 34.0
    width = max(layout.width, 560.0, max(len(t) for t in title) * 8.0 + 2 * _MARGIN)
    height = layout.height + title_h + legend_h
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_fmt(width)}" '
        f'height="{_fmt(height)}" viewBox="0 0 {_fmt(width)} {_fmt(height)}" '
        f'font-family="{_FONT}" font-size="12">',
        f"<title>{_xml_escape(_printable(graph.name))}</title>",
        "<defs>",
    ]
    for style, color in _EDGE_COLORS.items():
        size = 12 if style == KEYED else 9
        out.append(
            f'<marker id="arrow-{style}" viewBox="0 0 10 10" refX="9" refY="5" '
            f'markerUnits="userSpaceOnUse" markerWidth="{size}" markerHeight="{size}" '
            f'orient="auto-start-reverse">'
            f'<path d="M0,0 L10,5 L0,10 z" fill="{color}"/></marker>'
        )
    out.append("</defs>")
    out.append(f'<rect width="{_fmt(width)}" height="{_fmt(height)}" fill="#ffffff"/>')
    for k, line in enumerate(title):
        size, weight = ("15", ' font-weight="bold"') if k == 0 else ("12", "")
        out.append(
            f'<text x="{_fmt(_MARGIN)}" y="{_fmt(_MARGIN + 4 + 20 * k)}" font-size="{size}"'
            f"{weight}>{_xml_escape(_clip(line, 120))}</text>"
        )
    shift = (width - layout.width) / 2  # center a narrow graph under a wide title
    out.append(f'<g transform="translate({_fmt(shift)},{_fmt(title_h)})">')
    out += _svg_edges(graph, layout)
    out += _svg_nodes(graph, layout, labels, fig)
    out.append("</g>")
    out += _svg_legend(layout.height + title_h + 8)
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _svg_edges(graph: FlowGraph, layout: _Layout) -> list[str]:
    out = []
    for edge, path in zip(graph.edges, layout.paths):
        color = _EDGE_COLORS[edge.style]
        width = "3" if edge.style == KEYED else "1.4"
        dash = ' stroke-dasharray="6 4"' if edge.style in (EXCHANGE, LATE) else ""
        points = " ".join(f"{_fmt(x)},{_fmt(y)}" for x, y in path)
        name = f"{graph.step_of(edge.source)} → {graph.step_of(edge.target)}"
        out.append(
            f'<polyline class="edge {edge.style}" points="{points}" fill="none" '
            f'stroke="{color}" stroke-width="{width}"{dash} '
            f'marker-end="url(#arrow-{edge.style})"><title>{_xml_escape(name)}</title>'
            "</polyline>"
        )
        if edge.label:
            (x1, y1), (x2, y2) = path[-2], path[-1]
            x, y = (x1 + x2) / 2 + 5, (y1 + y2) / 2 + 4
            if edge.source == edge.target:  # a loop: right of it
                x, y = path[1][0] + 6, (path[1][1] + path[2][1]) / 2 + 4
            out.append(
                f'<text x="{_fmt(x)}" y="{_fmt(y)}" '
                f'fill="{color}" font-size="11" stroke="#ffffff" stroke-width="3" '
                f'paint-order="stroke">{_xml_escape(_clip(edge.label))}</text>'
            )
    return out


def _svg_nodes(
    graph: FlowGraph, layout: _Layout, labels: list[list[str]], fig: Figures
) -> list[str]:
    out = []
    for i, node in enumerate(graph.nodes):
        box = layout.boxes[i]
        fill, stroke = _COLORS.get(node.family, _COLORS["stateless"])
        rx = box.height / 2 if node.family in ("input", "output") else 6
        rx = min(rx, 16)
        left = box.x - box.width / 2
        width = "2.2" if node.family == "keyed" else "1.2"
        tip = f"{_printable(node.step_id)} ({node.kind})"
        if node.stage is not None:
            tip += f", stage {node.stage}"
        out.append(f'<g class="step {node.family}" id={_xml_attr(node.id)}>')
        out.append(f"<title>{_xml_escape(tip)}</title>")
        out.append(
            f'<rect x="{_fmt(left)}" y="{_fmt(box.y)}" width="{_fmt(box.width)}" '
            f'height="{_fmt(box.height)}" rx="{_fmt(rx)}" fill="{fill}" stroke="{stroke}" '
            f'stroke-width="{width}"/>'
        )
        for k, line in enumerate(labels[i]):
            y = box.y + _PAD_Y + _LINE_H * k + 12
            style = ' font-weight="bold"' if k == 0 else ' fill="#444444"'
            if k and k == len(labels[i]) - 1 and fig.label(node.step_id):
                style = ' fill="#0b5394"'
            out.append(
                f'<text x="{_fmt(box.x)}" y="{_fmt(y)}" text-anchor="middle"{style}>'
                f"{_xml_escape(line)}</text>"
            )
        out.append("</g>")
    return out


def _svg_legend(y: float) -> list[str]:
    out = [f'<g class="legend" font-size="11" transform="translate({_fmt(_MARGIN)},{_fmt(y)})">']
    x = 0.0
    for style, text in (
        (PLAIN, "item flow"),
        (KEYED, "by key (shuffle)"),
        (EXCHANGE, "round robin"),
        (LATE, "late items"),
    ):
        width = "3" if style == KEYED else "1.4"
        dash = ' stroke-dasharray="6 4"' if style in (EXCHANGE, LATE) else ""
        out.append(
            f'<line x1="{_fmt(x)}" y1="8" x2="{_fmt(x + 30)}" y2="8" '
            f'stroke="{_EDGE_COLORS[style]}" stroke-width="{width}"{dash}/>'
        )
        out.append(f'<text x="{_fmt(x + 36)}" y="12">{text}</text>')
        x += 36 + len(text) * 6.8 + 22
    out.append("</g>")
    return out


# ---------------------------------------------------------------------------------------
# HTML
# ---------------------------------------------------------------------------------------

_CSS = """
body { font-family: system-ui, sans-serif; margin: 24px; color: #111; }
h1 { font-size: 20px; margin: 0 0 4px; }
.summary { color: #444; margin: 0 0 16px; }
.graph { overflow: auto; border: 1px solid #ddd; padding: 8px; margin-bottom: 20px; }
table { border-collapse: collapse; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
pre { background: #f6f6f6; padding: 10px; overflow: auto; }
"""


def to_html(flow: Any, figures: Figures | Mapping[str, Any] | None = None) -> str:
    """A self-contained HTML page: the SVG, a table of the steps and the Mermaid text."""
    graph = flow_graph(flow)
    fig = _figures(figures)
    esc = html.escape
    rows = []
    sources: dict[str, list[str]] = {}
    for edge in graph.edges:
        text = graph.step_of(edge.source) + (f" ({edge.label})" if edge.label else "")
        sources.setdefault(edge.target, []).append(text)
    for node in graph.nodes:
        counts = fig.steps.get(node.step_id, {})
        cells = [
            esc(_printable(node.step_id)),
            esc(node.kind),
            esc(_printable(node.detail)),
            "" if node.stage is None else str(node.stage),
            esc(", ".join(_printable(s) for s in sources.get(node.id, []))),
        ]
        numbers = [
            f"{counts[k]:,}" if k in counts else "" for k in ("in", "out", "late", "state_keys")
        ]
        rows.append(
            "<tr>"
            + "".join(f"<td>{c}</td>" for c in cells)
            + "".join(f'<td class="n">{n}</td>' for n in numbers)
            + "</tr>"
        )
    summary = fig.summary()
    name = esc(_printable(graph.name))
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        f"<title>{name} · flowspark</title>",
        f"<style>{_CSS}</style>",
        "</head>",
        "<body>",
        f"<h1>{name}</h1>",
        f'<p class="summary">{esc(summary)}</p>' if summary else "",
        f'<div class="graph">\n{to_svg(graph, fig)}</div>',
        "<h2>Steps</h2>",
        "<p>Stage 0 runs in the source readers; each shuffle (by key or round robin) "
        "starts the next stage.</p>",
        "<table>",
        "<tr><th>step</th><th>kind</th><th>detail</th><th>stage</th><th>from</th>"
        "<th>in</th><th>out</th><th>late</th><th>keys</th></tr>",
        *rows,
        "</table>",
        "<h2>Mermaid</h2>",
        "<p>The same graph as Mermaid text (paste it into a Markdown file or "
        "mermaid.live to draw it with Mermaid):</p>",
        f'<pre class="mermaid-source">{esc(to_mermaid(graph, fig))}</pre>',
        "</body>",
        "</html>",
    ]
    return "\n".join(p for p in parts if p) + "\n"
