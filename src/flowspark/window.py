"""Import face of bytewax's ``bytewax.window``: clocks and windows.

The types are defined in :mod:`flowspark.api.window`; this module re-exports them.
"""

# Every name the API module exports, and its list of them.
from flowspark.api.window import *  # noqa: F403
from flowspark.api.window import __all__ as __all__
