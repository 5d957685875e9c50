"""Import face of bytewax's ``bytewax.recovery``: the recovery config.

The types are defined in :mod:`flowspark.api.recovery`; this module re-exports them.
"""

from flowspark.api.recovery import (
    RecoveryConfig,
    init_db_dir,
)

__all__ = [
    "RecoveryConfig",
    "init_db_dir",
]
