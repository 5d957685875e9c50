"""Clock and window logic in plain Python (bytewax 0.17 semantics), times in ms.

Everything here is a pure function of its inputs and of ``now`` — the
micro-batch's start time, flowspark's notion of system time — so a replayed
batch computes exactly what the first attempt did.

>>> from datetime import timedelta
>>> w = SlidingWindower(length=10_000, offset=5_000, align=0)
>>> w.windows_for(12_000)
[(5000, 15000), (10000, 20000)]
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from flowspark.window import (
    ClockConfig,
    EventClockConfig,
    SessionWindow,
    SlidingWindow,
    SystemClockConfig,
    TumblingWindow,
    WindowConfig,
)

__all__ = [
    "MIN_MS",
    "MAX_MS",
    "EOF_MS",
    "to_ms",
    "from_ms",
    "ClockLogic",
    "SlidingWindower",
    "SessionWindower",
    "build_clock",
    "build_windower",
]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MIN_MS = -(2**62)
MAX_MS = 2**62
# The time a bounded input's end is announced at (year 9000): every timer fires.
EOF_MS = 221_845_392_000_000


def to_ms(dt: Any) -> int:
    """Milliseconds since the epoch of an aware datetime (naive ones are rejected)."""
    if not isinstance(dt, datetime):
        raise TypeError(f"the clock needs a datetime; got {type(dt).__name__} {dt!r:.80}")
    if dt.tzinfo is None or dt.utcoffset() is None:
        raise ValueError(
            f"the clock needs timezone-aware datetimes (tzinfo=timezone.utc); got naive {dt!r}"
        )
    return (dt - _EPOCH) // timedelta(milliseconds=1)


def from_ms(ms: int) -> datetime:
    """The aware UTC datetime of ``ms`` since the epoch."""
    return _EPOCH + timedelta(milliseconds=ms)


def _ms(td: timedelta) -> int:
    return td // timedelta(milliseconds=1)


class ClockLogic:
    """Item times and watermarks for one key.

    ``state`` is ``(max_event_ms, system_ms_when_seen)`` or ``None`` before any item.
    """

    def __init__(self, config: ClockConfig) -> None:
        self.system = isinstance(config, SystemClockConfig)
        if not self.system and not isinstance(config, EventClockConfig):
            raise TypeError(f"unknown clock config {type(config).__name__}")
        self.getter = None if self.system else config.dt_getter
        self.wait = 0 if self.system else _ms(config.wait_for_system_duration)

    def time_for(self, state: tuple[int, int] | None, value: Any, now: int) -> tuple[int, Any]:
        """The item's time and the clock state after seeing it."""
        if self.system:
            return now, None
        t = to_ms(self.getter(value))
        # Keep the (item time, system time) pair that gives the later watermark:
        # a newer item that arrives late in system time must not pull it back.
        if state is None or t > state[0] + (now - state[1]):
            return t, (t, now)
        return t, state

    def watermark(self, state: tuple[int, int] | None, now: int) -> int:
        """The key's watermark at system time ``now`` (``EOF_MS``: the end of time)."""
        if now >= EOF_MS:
            return MAX_MS
        if self.system:
            return now
        if state is None:
            return MIN_MS
        max_event, seen_at = state
        return max_event - self.wait + max(0, now - seen_at)

    def wake_for(self, state: tuple[int, int] | None, close: int) -> int:
        """The system time at which the watermark passes ``close``."""
        if self.system or state is None:
            return close + 1
        max_event, seen_at = state
        return seen_at + max(0, close - (max_event - self.wait)) + 1


@dataclass(frozen=True)
class SlidingWindower:
    """Windows ``[align + k*offset, + length)``; tumbling is offset == length."""

    length: int
    offset: int
    align: int

    def windows_for(self, t: int) -> list[tuple[int, int]]:
        """Every window containing time ``t`` (empty in a gap)."""
        last = (t - self.align) // self.offset
        first = (t - self.align - self.length) // self.offset + 1
        out = []
        for k in range(first, last + 1):
            start = self.align + k * self.offset
            if start <= t < start + self.length:
                out.append((start, start + self.length))
        return out


@dataclass(frozen=True)
class SessionWindower:
    """Sessions: items within ``gap`` of each other share a window."""

    gap: int


def build_clock(config: ClockConfig) -> ClockLogic:
    """The logic of a clock config."""
    if not isinstance(config, ClockConfig):
        raise TypeError(
            f"clock_config must be EventClockConfig or SystemClockConfig; got {config!r:.80}"
        )
    return ClockLogic(config)


def build_windower(config: WindowConfig) -> SlidingWindower | SessionWindower:
    """The logic of a window config."""
    if isinstance(config, TumblingWindow):
        return SlidingWindower(_ms(config.length), _ms(config.length), to_ms(config.align_to))
    if isinstance(config, SlidingWindow):
        return SlidingWindower(_ms(config.length), _ms(config.offset), to_ms(config.align_to))
    if isinstance(config, SessionWindow):
        return SessionWindower(_ms(config.gap))
    raise TypeError(
        f"window_config must be TumblingWindow, SlidingWindow or SessionWindow; got {config!r:.80}"
    )
