"""Import face of bytewax's ``bytewax.inputs``: the input families.

bytewax 0.17's (``PartitionedInput``, ``DynamicInput``, …) are defined in
:mod:`flowspark.api.inputs`, bytewax 0.21's (``FixedPartitionedSource``,
``DynamicSource``, ``SimplePollingSource``, …) in :mod:`flowspark.api.sources`,
the 0.21 batching helpers in :mod:`flowspark.api.input_batching`; this module
re-exports them.
"""

# Every name the API modules export, and the list of them.
from flowspark.api.input_batching import *  # noqa: F403
from flowspark.api.input_batching import __all__ as _batching_names
from flowspark.api.inputs import *  # noqa: F403
from flowspark.api.inputs import __all__ as _input_names
from flowspark.api.sources import *  # noqa: F403
from flowspark.api.sources import __all__ as _source_names

__all__ = [*_input_names, *_source_names, *_batching_names]
