"""A flow as a standalone SVG document: no script, no external reference."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from xml.sax.saxutils import escape as _xml_escape
from xml.sax.saxutils import quoteattr as _xml_attr

from flowspark.visualize.figures import Figures, as_figures
from flowspark.visualize.graph import EXCHANGE, KEYED, LATE, PLAIN, FlowGraph, flow_graph
from flowspark.visualize.layout import LINE_H, MARGIN, PAD_Y, Layout, lay_out
from flowspark.visualize.style import COLORS, EDGE_COLORS, clip, node_lines, printable

__all__ = ["to_svg"]

_FONT = "DejaVu Sans Mono, Menlo, Consolas, monospace"


def _fmt(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


def to_svg(flow: Any, figures: Figures | Mapping[str, Any] | None = None) -> str:
    """The flow as a standalone SVG document (no script, no external reference)."""
    graph = flow_graph(flow)
    fig = as_figures(figures)
    labels = [[clip(line) for line in node_lines(node, fig)] for node in graph.nodes]
    layout = lay_out(graph, labels)
    title = [graph.name] + ([fig.summary()] if fig.summary() else [])
    title_h = 22.0 * len(title) + 8
    legend_h = 34.0
    width = max(layout.width, 560.0, max(len(t) for t in title) * 8.0 + 2 * MARGIN)
    height = layout.height + title_h + legend_h
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_fmt(width)}" '
        f'height="{_fmt(height)}" viewBox="0 0 {_fmt(width)} {_fmt(height)}" '
        f'font-family="{_FONT}" font-size="12">',
        f"<title>{_xml_escape(printable(graph.name))}</title>",
        "<defs>",
    ]
    for style, color in EDGE_COLORS.items():
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
        font_size, weight = ("15", ' font-weight="bold"') if k == 0 else ("12", "")
        out.append(
            f'<text x="{_fmt(MARGIN)}" y="{_fmt(MARGIN + 4 + 20 * k)}" font-size="{font_size}"'
            f"{weight}>{_xml_escape(clip(line, 120))}</text>"
        )
    shift = (width - layout.width) / 2  # center a narrow graph under a wide title
    out.append(f'<g transform="translate({_fmt(shift)},{_fmt(title_h)})">')
    out += _svg_edges(graph, layout)
    out += _svg_nodes(graph, layout, labels, fig)
    out.append("</g>")
    out += _svg_legend(layout.height + title_h + 8)
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _svg_edges(graph: FlowGraph, layout: Layout) -> list[str]:
    out = []
    for edge, path in zip(graph.edges, layout.paths):
        color = EDGE_COLORS[edge.style]
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
                f'paint-order="stroke">{_xml_escape(clip(edge.label))}</text>'
            )
    return out


def _svg_nodes(
    graph: FlowGraph, layout: Layout, labels: list[list[str]], fig: Figures
) -> list[str]:
    out = []
    for i, node in enumerate(graph.nodes):
        box = layout.boxes[i]
        fill, stroke = COLORS.get(node.family, COLORS["stateless"])
        rx = box.height / 2 if node.family in ("input", "output") else 6
        rx = min(rx, 16)
        left = box.x - box.width / 2
        width = "2.2" if node.family == "keyed" else "1.2"
        tip = f"{printable(node.step_id)} ({node.kind})"
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
            y = box.y + PAD_Y + LINE_H * k + 12
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
    out = [f'<g class="legend" font-size="11" transform="translate({_fmt(MARGIN)},{_fmt(y)})">']
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
            f'stroke="{EDGE_COLORS[style]}" stroke-width="{width}"{dash}/>'
        )
        out.append(f'<text x="{_fmt(x + 36)}" y="12">{text}</text>')
        x += 36 + len(text) * 6.8 + 22
    out.append("</g>")
    return out
