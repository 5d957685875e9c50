"""Import face of bytewax's ``bytewax.inputs``: the input families.

The types are defined in :mod:`flowspark.api.inputs`; this module re-exports them.
"""

# Every name the API module exports, and its list of them.
from flowspark.api.inputs import *  # noqa: F403
from flowspark.api.inputs import __all__ as __all__
