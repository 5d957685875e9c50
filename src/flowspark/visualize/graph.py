"""A flow as a graph to draw: one node per step, one edge per upstream port.

:func:`flow_graph` walks a :class:`~flowspark.dataflow.Dataflow`'s steps (or a
Numaflow :class:`~flowspark.pipeline.PipelineSpec`'s vertices) into a
:class:`FlowGraph`: one node per step with its operator kind and a short detail
(the connector's class, the window, the function's name), one edge per upstream
port. An edge into a keyed step is a shuffle by key and is marked ``by key``;
the edge out of a ``redistribute`` is ``round robin``; a window's late stream
is ``late`` (a 0.21 window's metadata: ``meta``); a branch's two outputs are
``true``/``false``. Nothing here starts Spark: a flow is only a description.

>>> from flowspark.dataflow import Dataflow
>>> from flowspark.testing import TestingInput, TestingOutput
>>> flow = Dataflow("tiny")
>>> s = flow.input("inp", TestingInput([("a", 1)]))
>>> _ = s.reduce("sum", lambda a, b: a + b, lambda acc: False).output("out", TestingOutput([]))
>>> graph = flow_graph(flow)
>>> [(n.step_id, n.family, n.stage) for n in graph.nodes]
[('inp', 'input', 0), ('sum', 'keyed', 1), ('out', 'output', 1)]
>>> [(e.source, e.target, e.label) for e in graph.edges]
[('s_inp', 's_sum', 'by key'), ('s_sum', 's_out', '')]
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from flowspark.api.steps import OPERATORS, operator
from flowspark.pipeline import PipelineSpec
from flowspark.pipeline.model import Vertex
from flowspark.plan.graph import build_plan

__all__ = [
    "EXCHANGE",
    "KEYED",
    "LATE",
    "PLAIN",
    "Edge",
    "FlowGraph",
    "Node",
    "flow_graph",
    "join_words",
    "safe_ids",
]

# Edge styles: a plain edge, a shuffle by key (into a keyed step), a round-robin
# exchange (out of ``redistribute``), a window's late stream.
PLAIN, KEYED, EXCHANGE, LATE = "plain", "keyed", "exchange", "late"


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
    if isinstance(flow, PipelineSpec):
        return _spec_graph(flow)
    steps = getattr(flow, "steps", None)
    if not isinstance(steps, list):
        raise TypeError(f"expected a flowspark Dataflow; got {type(flow).__name__}")
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
            elif port.slot == 1 and _has_late_port(port.step.kind):
                labels.append("late")
                style = LATE
            elif port.slot == 2 and _has_meta_port(port.step.kind):
                labels.append("meta")
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


def _has_late_port(kind: str) -> bool:
    op = OPERATORS.get(kind)
    return op is not None and op.late_port


def _has_meta_port(kind: str) -> bool:
    op = OPERATORS.get(kind)
    return op is not None and op.meta_port


def _stages(flow: Any) -> dict[Any, int]:
    """Each step's plan level, when the flow is valid (else nothing)."""
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
    if "windower" in args:  # bytewax 0.21's windows
        parts.append(_window(args["windower"]))
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
    """A function's readable name ('' for a lambda); a callable object's class name; for
    a wrapper that keeps the user's function as ``__wrapped__`` (bytewax 0.21's
    operators), that function's."""
    if fn is None:
        return ""
    for _ in range(4):  # wrappers of wrappers, not forever
        inner = getattr(fn, "__wrapped__", None)
        if inner is None or getattr(fn, "__qualname__", None):
            break
        fn = inner
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


def _spec_graph(spec: PipelineSpec) -> FlowGraph:
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


def _vertex_kind(vertex: Vertex) -> tuple[str, str, str]:
    """A Numaflow vertex's (kind, family, detail)."""
    if vertex.kind == "source" and vertex.source is not None:
        detail: str = vertex.source.kind
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
        return "accumulate", "keyed", join_words(what, f"timeout {_duration(window.timeout)}")
    kind = "reduce_stream" if window.streaming else "reduce"
    span = window.kind if window.length is None else f"{window.kind} {_duration(window.length)}"
    if window.slide is not None:
        span += f" every {_duration(window.slide)}"
    return kind, "keyed", join_words(what, span)


def join_words(*parts: str) -> str:
    """The non-empty ``parts`` joined with a middle dot.

    >>> join_words("reduce", "", "fixed 60s")
    'reduce · fixed 60s'
    """
    return " · ".join(p for p in parts if p)
