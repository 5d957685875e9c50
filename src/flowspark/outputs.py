"""Import face of bytewax's ``bytewax.outputs``: the output families.

The types are defined in :mod:`flowspark.api.outputs`; this module re-exports them.
"""

# Every name the API module exports, and its list of them.
from flowspark.api.outputs import *  # noqa: F403
from flowspark.api.outputs import __all__ as __all__
