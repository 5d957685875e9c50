"""How a picture looks, whatever its format: a step's label lines and the colours.

>>> clip("a\\tstep id far longer than a box should ever be drawn at all")
'a step id far longer than a box should ever…'
"""

from __future__ import annotations

from flowspark.visualize.figures import Figures
from flowspark.visualize.graph import EXCHANGE, KEYED, LATE, PLAIN, Node, join_words

__all__ = ["COLORS", "EDGE_COLORS", "MAX_CHARS", "clip", "node_lines", "printable"]

MAX_CHARS = 44


def printable(text: str) -> str:
    """``text`` without control characters (they break Mermaid lines and XML)."""
    return "".join(c if c.isprintable() else " " for c in text)


def clip(text: str, limit: int = MAX_CHARS) -> str:
    """``text`` printable and at most ``limit`` characters (an ellipsis ends a cut)."""
    text = printable(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def node_lines(node: Node, figures: Figures) -> list[str]:
    """A node's label lines: its step id, its kind and detail, its figures."""
    kinds = [join_words(node.kind, node.detail)]
    if len(kinds[0]) > MAX_CHARS:
        kinds = [node.kind, node.detail]
    return [line for line in (node.step_id, *kinds, figures.label(node.step_id)) if line]


# Each family's (fill, stroke) and each edge style's colour.
COLORS = {
    "input": ("#e6f4ea", "#2f7d43"),
    "output": ("#e7f0fb", "#2f5fa8"),
    "stateless": ("#ffffff", "#6b7280"),
    "exchange": ("#f3e8ff", "#7e3fb3"),
    "keyed": ("#fff1e0", "#c2570c"),
}
EDGE_COLORS = {PLAIN: "#555555", KEYED: "#c2570c", EXCHANGE: "#7e3fb3", LATE: "#b91c1c"}
