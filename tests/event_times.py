"""The window tests' time origin: ``ALIGN``, the ``align_to`` of bytewax's documentation
examples (2022-01-01 UTC), in milliseconds too, and ``at``: a time after it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from flowspark.shared.times import aware_to_ms

ALIGN = datetime(2022, 1, 1, tzinfo=UTC)
ALIGN_MS = aware_to_ms(ALIGN)


def at(seconds: float = 0, minutes: float = 0) -> datetime:
    """``seconds`` and ``minutes`` after ``ALIGN``."""
    return ALIGN + timedelta(seconds=seconds, minutes=minutes)
