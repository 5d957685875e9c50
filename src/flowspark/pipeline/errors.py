"""The one error a Numaflow Pipeline spec raises when it cannot be loaded."""

from __future__ import annotations

__all__ = ["PipelineSpecError"]


class PipelineSpecError(ValueError):
    """A Pipeline spec flowspark cannot load: its one-line message names the field (a
    dotted path such as ``spec.vertices[0].source``) or is Numaflow's own validation text.

    >>> str(PipelineSpecError("empty vertices"))
    'empty vertices'
    """
