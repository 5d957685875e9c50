"""bytewax 0.21's clocks and windowers (``bytewax.operators.windowing``): plain configs.

The 0.21 window operators (:mod:`flowspark.operators.windowing`) take one clock
(:class:`SystemClock`, :class:`EventClock`) and one windower
(:class:`TumblingWindower`, :class:`SlidingWindower`, :class:`SessionWindower`);
the logic that runs them, with bytewax 0.21's window ids, metadata and lateness,
is the ``window`` kind's (:class:`flowspark.runtime.window_run.WindowRun`). bytewax
0.17's configs stay in :mod:`flowspark.api.window`.

>>> from datetime import datetime, timedelta, timezone
>>> align_to = datetime(2024, 1, 1, tzinfo=timezone.utc)
>>> SlidingWindower(timedelta(minutes=10), timedelta(minutes=5), align_to).offset
datetime.timedelta(seconds=300)
>>> SlidingWindower(timedelta(minutes=5), timedelta(minutes=10), align_to)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ValueError: sliding window `offset` can't be longer than `length`; there would be ...
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from flowspark.api.window import UTC_MAX, UTC_MIN

__all__ = [
    "Clock",
    "SystemClock",
    "EventClock",
    "Windower",
    "TumblingWindower",
    "SlidingWindower",
    "SessionWindower",
    "WindowMetadata",
    "LATE_SESSION_ID",
    "ZERO_TD",
    "UTC_MAX",
    "UTC_MIN",
    "system_utc",
    "same_time",
]

ZERO_TD = timedelta(0)
"""A zero length of time."""

LATE_SESSION_ID = -1
"""The window id of an item late for a session window (which window it missed is
not known)."""


def system_utc() -> datetime:
    """The system time as an aware UTC datetime: :class:`EventClock`'s default
    ``now_getter``. flowspark's window logic takes it to mean the time the item
    was read (see docs/time.md), not the time a Spark worker gets to it."""
    return datetime.now(UTC)


def same_time(timestamp: datetime) -> datetime | None:
    """A window close time as the system time to wake at: itself
    (:class:`EventClock`'s default ``to_system_utc``)."""
    return timestamp


class Clock:
    """Base of bytewax 0.21's clocks: what time an item has and where the watermark is."""


class Windower:
    """Base of bytewax 0.21's windowers: which windows an item belongs to."""


@dataclass(frozen=True)
class SystemClock(Clock):
    """An item's time is the system time it was read at; so is the watermark, so no
    item is late. Every window closes when the input ends."""


@dataclass(frozen=True)
class EventClock(Clock):
    """An item's time is ``ts_getter(value)`` (an aware datetime).

    The watermark is the latest item time seen minus ``wait_for_system_duration``,
    plus the system time that passed since that item was read; an item whose
    time is before the watermark is late. ``now_getter`` (default: the read time)
    is the system time; ``to_system_utc`` turns a window's close time into the
    system time to wake at (default: the precise time the watermark gets there).
    """

    ts_getter: Callable[[Any], datetime]
    wait_for_system_duration: timedelta
    now_getter: Callable[[], datetime] = system_utc
    to_system_utc: Callable[[datetime], datetime | None] = same_time

    def __post_init__(self) -> None:
        if not callable(self.ts_getter):
            raise TypeError("EventClock: ts_getter must be callable")
        if not isinstance(self.wait_for_system_duration, timedelta):
            raise TypeError(
                "EventClock: wait_for_system_duration must be a datetime.timedelta; "
                f"got {type(self.wait_for_system_duration).__name__}"
            )


def _check_length(name: str, value: Any) -> None:
    if not isinstance(value, timedelta):
        raise TypeError(f"{name} must be a datetime.timedelta; got {type(value).__name__}")
    if value <= ZERO_TD:
        raise ValueError(f"window `{name}` must be positive; got {value}")


def _check_align(value: Any) -> None:
    if not isinstance(value, datetime) or value.utcoffset() is None:
        raise TypeError(f"align_to must be an aware datetime; got {value!r:.80}")


@dataclass(frozen=True)
class SlidingWindower(Windower):
    """Windows of ``length`` opening every ``offset`` from ``align_to``: window ``n``
    is ``[align_to + n * offset, + length)`` (open time in, close time out).
    ``offset < length`` overlaps them; ``offset > length`` is refused."""

    length: timedelta
    offset: timedelta
    align_to: datetime

    def __post_init__(self) -> None:
        _check_length("length", self.length)
        _check_length("offset", self.offset)
        _check_align(self.align_to)
        if self.offset > self.length:
            raise ValueError(
                "sliding window `offset` can't be longer than `length`; "
                "there would be undefined gaps between windows"
            )


@dataclass(frozen=True)
class TumblingWindower(Windower):
    """Back-to-back windows of ``length`` from ``align_to``: window ``n`` is
    ``[align_to + n * length, + length)``."""

    length: timedelta
    align_to: datetime

    def __post_init__(self) -> None:
        _check_length("length", self.length)
        _check_align(self.align_to)


@dataclass(frozen=True)
class SessionWindower(Windower):
    """Sessions: an item within ``gap`` of a session (before or after it) joins it;
    sessions that come within ``gap`` of each other merge. Ids count from 0 per key;
    a session closes once the watermark is more than ``gap`` past its last item."""

    gap: timedelta

    def __post_init__(self) -> None:
        if not isinstance(self.gap, timedelta):
            raise TypeError(f"gap must be a datetime.timedelta; got {type(self.gap).__name__}")
        if self.gap < ZERO_TD:
            raise ValueError("session window `gap` must not be negative")


@dataclass
class WindowMetadata:
    """A closed window's open and close times, and the ids of the windows merged into
    it (sessions). A sliding window's close time is its end (not in it); a
    session's is its last item's time (in it)."""

    open_time: datetime
    close_time: datetime
    merged_ids: set[int] = field(default_factory=set)
