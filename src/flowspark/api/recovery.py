"""Recovery: the recovery directory is the Spark query's checkpoint.

Spark's checkpoint keeps source offsets, operator state and the commit log; the
sinks keep their snapshots beside it. Restarting a flow on the same directory
resumes after the last committed micro-batch, and exactly-once sinks rewind a
replayed batch, so the output is as if the flow had never stopped.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

__all__ = ["RecoveryConfig", "init_db_dir"]


@dataclass(frozen=True)
class RecoveryConfig:
    """Where to keep recovery data (bytewax 0.17's signature).

    ``backup_interval`` and ``snapshot_serde`` are accepted for compatibility;
    Spark's checkpoint decides how long old state is kept.
    """

    db_dir: str | Path
    backup_interval: timedelta | None = None
    snapshot_serde: Any = None


def init_db_dir(db_dir: str | Path, count: int = 1) -> None:
    """Create the recovery directory (``count`` is accepted for compatibility)."""
    Path(db_dir).mkdir(parents=True, exist_ok=True)
