"""What the Numaflow connectors' arguments share: durations given as timedeltas or seconds."""

from __future__ import annotations

from datetime import timedelta
from typing import Any


def as_timedelta(value: Any, name: str, default: timedelta) -> timedelta:
    """A duration argument: a timedelta, a number of seconds, or ``None`` (the default).

    >>> as_timedelta(1.5, "duration", timedelta(0)), as_timedelta(None, "cap", timedelta(1))
    (datetime.timedelta(seconds=1, microseconds=500000), datetime.timedelta(days=1))
    """
    if value is None:
        return default
    if isinstance(value, timedelta):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return timedelta(seconds=value)
    raise TypeError(f"{name} must be a timedelta or a number of seconds; got {value!r:.80}")
