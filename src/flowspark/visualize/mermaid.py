"""A flow as a Mermaid ``flowchart``: paste it into Markdown or mermaid.live.

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

import json
from collections.abc import Mapping
from typing import Any

from flowspark.visualize.figures import Figures, as_figures
from flowspark.visualize.graph import EXCHANGE, KEYED, LATE, PLAIN, flow_graph
from flowspark.visualize.style import COLORS, EDGE_COLORS, node_lines, printable

__all__ = ["mermaid_text", "to_mermaid"]

# Steps that split or join streams: drawn as hexagons.
_SPLIT_KINDS = {"branch", "merge", "route"}
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
    for char in printable(text):
        if char in '"#<>&`|':
            names = {'"': "quot", "<": "lt", ">": "gt", "&": "amp"}
            out.append(f"#{names.get(char, ord(char))};")
        else:
            out.append(char)
    return "".join(out)


def to_mermaid(flow: Any, figures: Figures | Mapping[str, Any] | None = None) -> str:
    """The flow as a Mermaid ``flowchart`` (top to bottom), with ``figures`` in its labels."""
    graph = flow_graph(flow)
    fig = as_figures(figures)
    title = fig.summary()
    title = f"{graph.name} — {title}" if title else graph.name
    out = ["---", f"title: {json.dumps(printable(title), ensure_ascii=False)}", "---"]
    out.append("flowchart TD")
    for node in graph.nodes:
        shape = _MERMAID_SHAPES.get(node.family, ('["', '"]'))
        if node.kind in _SPLIT_KINDS:
            shape = ('{{"', '"}}')
        label = "<br/>".join(mermaid_text(line) for line in node_lines(node, fig))
        out.append(f"    {node.id}{shape[0]}{label}{shape[1]}")
    for edge in graph.edges:
        arrow = _MERMAID_ARROWS[edge.style]
        label = f'|"{mermaid_text(edge.label)}"|' if edge.label else ""
        out.append(f"    {edge.source} {arrow}{label} {edge.target}")
    colored = [n for n in graph.nodes if n.family in COLORS and n.family != "stateless"]
    families = sorted({n.family for n in colored})
    for family in families:
        fill, stroke = COLORS[family]
        out.append(f"    classDef {family} fill:{fill},stroke:{stroke},color:#111")
    for node in colored:
        out.append(f"    class {node.id} {node.family}")
    for i, edge in enumerate(graph.edges):
        if edge.style == KEYED:
            out.append(f"    linkStyle {i} stroke:{EDGE_COLORS[KEYED]},stroke-width:3px")
        elif edge.style in (EXCHANGE, LATE):
            out.append(f"    linkStyle {i} stroke:{EDGE_COLORS[edge.style]}")
    return "\n".join(out)
