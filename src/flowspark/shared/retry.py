"""The fields of Numaflow's sink ``retryStrategy``, shared by the pipeline spec's
``RetryStrategy`` and the sink's ``RetryPolicy``."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

__all__ = ["RetryFields"]


@dataclass(frozen=True)
class RetryFields:
    """``on_failure`` (``retry``, ``fallback`` or ``drop``) and the backoff: ``interval``,
    at most ``steps`` retries (``None``: unbounded), ``factor``, ``cap`` (``None``:
    unbounded) and ``jitter``."""

    on_failure: str = "retry"
    interval: timedelta = timedelta(milliseconds=1)
    steps: int | None = None
    factor: float = 1.0
    cap: timedelta | None = None
    jitter: float = 0.0
