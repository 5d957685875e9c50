"""Import face of bytewax's ``bytewax.inputs``: the input families.

The types are defined in :mod:`flowspark.api.inputs`; this module re-exports them.
"""

from flowspark.api.inputs import (
    DynamicInput,
    Input,
    PartitionedInput,
    SeekableInput,
    SourceWatermark,
    Split,
    StatefulSource,
    StatelessSource,
    batch,
)

__all__ = [
    "Input",
    "PartitionedInput",
    "StatefulSource",
    "DynamicInput",
    "StatelessSource",
    "SeekableInput",
    "Split",
    "batch",
    "SourceWatermark",
]
