"""Import face of bytewax's ``bytewax.outputs``: the output families.

bytewax 0.17's (``PartitionedOutput``, ``DynamicOutput``, …) are defined in
:mod:`flowspark.api.outputs`, bytewax 0.21's (``FixedPartitionedSink``,
``DynamicSink``, …) in :mod:`flowspark.api.sinks`; this module re-exports them.
"""

# Every name the API modules export, and the list of them.
from flowspark.api.outputs import *  # noqa: F403
from flowspark.api.outputs import __all__ as _output_names
from flowspark.api.sinks import *  # noqa: F403
from flowspark.api.sinks import __all__ as _sink_names

__all__ = [*_output_names, *_sink_names]
