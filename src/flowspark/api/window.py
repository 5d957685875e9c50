"""Clocks and windows (bytewax 0.17's ``bytewax.window``): plain frozen configs.

A clock says what time an item has and how far the watermark has got; a
window config says which windows an item belongs to. The logic that runs them
lives in :mod:`flowspark.runtime.windowing`.

>>> from datetime import datetime, timedelta, timezone
>>> align_to = datetime(2022, 1, 1, tzinfo=timezone.utc)
>>> TumblingWindow(length=timedelta(seconds=10), align_to=align_to).length
datetime.timedelta(seconds=10)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from flowspark.shared.times import EPOCH

__all__ = [
    "ClockConfig",
    "EventClockConfig",
    "SystemClockConfig",
    "WindowConfig",
    "TumblingWindow",
    "SlidingWindow",
    "SessionWindow",
    "UTC_MIN",
    "UTC_MAX",
]

UTC_MIN = datetime.min.replace(tzinfo=UTC)
UTC_MAX = datetime.max.replace(tzinfo=UTC)


def _check_timedelta(name: str, value: Any, positive: bool = True) -> None:
    if not isinstance(value, timedelta):
        raise TypeError(f"{name} must be a datetime.timedelta; got {type(value).__name__}")
    if positive and value <= timedelta(0):
        raise ValueError(f"{name} must be positive; got {value}")
    if not positive and value < timedelta(0):
        raise ValueError(f"{name} must not be negative; got {value}")


def _check_aware(name: str, value: Any) -> None:
    if not isinstance(value, datetime):
        raise TypeError(f"{name} must be a datetime; got {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(
            f"{name} must be timezone-aware (use tzinfo=timezone.utc); got naive {value!r}"
        )


class ClockConfig:
    """Base class of clock configs."""


@dataclass(frozen=True)
class SystemClockConfig(ClockConfig):
    """Item time is the system time it is processed at; so is the watermark.

    flowspark's system time is the micro-batch's start time, so a replayed batch
    sees the same times. Every window closes at the end of a bounded input.
    """


@dataclass(frozen=True)
class EventClockConfig(ClockConfig):
    """Item time from ``dt_getter(value)`` (an aware UTC ``datetime``).

    The watermark of a key is its latest item time minus
    ``wait_for_system_duration``, plus the system time passed since that item
    arrived; it never goes back, and it jumps to the end of time when a
    bounded input ends (bytewax 0.17 semantics, one clock per key).
    """

    dt_getter: Callable[[Any], datetime]
    wait_for_system_duration: timedelta = field(default=timedelta(0))

    def __post_init__(self) -> None:
        if not callable(self.dt_getter):
            raise TypeError("EventClockConfig: dt_getter must be callable")
        _check_timedelta("wait_for_system_duration", self.wait_for_system_duration, False)


class WindowConfig:
    """Base class of window configs."""


@dataclass(frozen=True)
class SlidingWindow(WindowConfig):
    """Windows of ``length`` starting every ``offset`` from ``align_to``: ``[start, end)``.

    ``offset < length`` overlaps windows; ``offset > length`` leaves gaps
    (items in a gap belong to no window and go to the late stream).
    """

    length: timedelta
    offset: timedelta
    align_to: datetime = EPOCH

    def __post_init__(self) -> None:
        _check_timedelta("length", self.length)
        _check_timedelta("offset", self.offset)
        _check_aware("align_to", self.align_to)


@dataclass(frozen=True)
class TumblingWindow(WindowConfig):
    """Back-to-back windows of ``length`` aligned to ``align_to``: ``[start, end)``."""

    length: timedelta
    align_to: datetime = EPOCH

    def __post_init__(self) -> None:
        _check_timedelta("length", self.length)
        _check_aware("align_to", self.align_to)


@dataclass(frozen=True)
class SessionWindow(WindowConfig):
    """Windows of items closer than ``gap`` to each other; overlapping sessions merge."""

    gap: timedelta

    def __post_init__(self) -> None:
        _check_timedelta("gap", self.gap)
