"""The two errors of the expression language: one while parsing, one while evaluating.

Both are shown (tracebacks, messages, pickles) as :mod:`flowspark.runtime.numaflow.expr`'s,
where they are imported from.
"""

from __future__ import annotations


class ExprError(Exception):
    """An expression failed while evaluating (bad ``int``, ``nil`` field, type mismatch …)."""

    __module__ = "flowspark.runtime.numaflow.expr"


class ExprSyntaxError(ValueError):
    """An expression that does not parse; ``position`` is the 0-based offset of the error."""

    __module__ = "flowspark.runtime.numaflow.expr"

    def __init__(self, text: str, message: str, position: int) -> None:
        super().__init__(f"invalid expression {text!r}: {message} at position {position}")
        self.text, self.message, self.position = text, message, position
