"""A flow as one self-contained HTML page: its SVG, a table of the steps, the Mermaid
text."""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from typing import Any

from flowspark.visualize.figures import Figures, as_figures
from flowspark.visualize.graph import flow_graph
from flowspark.visualize.mermaid import to_mermaid
from flowspark.visualize.style import printable
from flowspark.visualize.svg import to_svg

__all__ = ["to_html"]

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
    fig = as_figures(figures)
    esc = escape
    rows = []
    sources: dict[str, list[str]] = {}
    for edge in graph.edges:
        text = graph.step_of(edge.source) + (f" ({edge.label})" if edge.label else "")
        sources.setdefault(edge.target, []).append(text)
    for node in graph.nodes:
        counts = fig.steps.get(node.step_id, {})
        cells = [
            esc(printable(node.step_id)),
            esc(node.kind),
            esc(printable(node.detail)),
            "" if node.stage is None else str(node.stage),
            esc(", ".join(printable(s) for s in sources.get(node.id, []))),
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
    name = esc(printable(graph.name))
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
