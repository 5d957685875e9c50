"""Import face of bytewax's ``bytewax.outputs``: the output families.

The types are defined in :mod:`flowspark.api.outputs`; this module re-exports them.
"""

from flowspark.api.outputs import (
    DynamicOutput,
    Output,
    PartitionedOutput,
    StatefulSink,
    StatelessSink,
)

__all__ = [
    "Output",
    "PartitionedOutput",
    "StatefulSink",
    "DynamicOutput",
    "StatelessSink",
]
