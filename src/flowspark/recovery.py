"""Import face of bytewax's ``bytewax.recovery``: the recovery config.

The types are defined in :mod:`flowspark.api.recovery`; this module re-exports them.
``python -m flowspark.recovery inspect DIR [--check] [--json]`` prints what a recovery
directory holds (see :mod:`flowspark.engine.recovery_cli`).
"""

from flowspark.api.recovery import (
    RecoveryConfig,
    init_db_dir,
)

__all__ = [
    "RecoveryConfig",
    "init_db_dir",
]

if __name__ == "__main__":  # python -m flowspark.recovery inspect DIR
    from flowspark.engine.recovery_cli import main

    raise SystemExit(main())
