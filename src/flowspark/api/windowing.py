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

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Generic, TypeVar

from flowspark.api.window import UTC_MAX, UTC_MIN

__all__ = [
    "Clock",
    "ClockLogic",
    "SystemClock",
    "EventClock",
    "Windower",
    "WindowerLogic",
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
    "BUILTIN_CLOCKS",
    "BUILTIN_WINDOWERS",
    "check_window_configs",
]

V = TypeVar("V")
S = TypeVar("S")

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


class ClockLogic(ABC, Generic[V, S]):
    """A user-defined clock's logic for one key (bytewax 0.21's interface): built by
    :meth:`Clock.build` from its last :meth:`snapshot` whenever the key has work.

    Per batch of the key's values: ``before_batch()``, then ``on_item(value)`` for
    each, giving ``(item time, watermark)``; an item before the watermark is late.
    ``on_notify()`` is the watermark when the key wakes with no values,
    ``on_eof()`` at the end of the input. ``to_system_utc(t)`` is the system
    time at which the watermark reaches ``t`` (``None``: never), to wake at.
    Watermarks never go back. Times are aware datetimes, taken to the millisecond.
    """

    @abstractmethod
    def before_batch(self) -> None:
        """A batch of the key's values is about to come."""

    @abstractmethod
    def on_item(self, value: V) -> tuple[datetime, datetime]:
        """``value``'s time and the watermark after it."""

    @abstractmethod
    def on_notify(self) -> datetime:
        """The watermark now (the key woke with no values)."""

    @abstractmethod
    def on_eof(self) -> datetime:
        """The watermark at the end of the input (usually :data:`UTC_MAX`)."""

    @abstractmethod
    def to_system_utc(self, timestamp: datetime) -> datetime | None:
        """The system time at which the watermark passes ``timestamp``."""

    @abstractmethod
    def snapshot(self) -> S:
        """A picklable state :meth:`Clock.build` resumes from."""


class Clock(Generic[V, S]):
    """Base of bytewax 0.21's clocks: what time an item has and where the watermark is.

    :class:`SystemClock` and :class:`EventClock` run natively. A clock of your own
    subclasses this and :meth:`build` s its :class:`ClockLogic`.
    """

    def build(self, resume_state: Any | None) -> ClockLogic[Any, Any]:
        """The clock's logic for one key, from its last snapshot (``None``: new)."""
        raise NotImplementedError(f"{type(self).__name__} must implement build(resume_state)")


class WindowerLogic(ABC, Generic[S]):
    """A user-defined windower's logic for one key (bytewax 0.21's interface): built
    by :meth:`Windower.build` from its last :meth:`snapshot` whenever the key has work.

    ``open_for(t)`` gives the ids of the windows an on-time item at ``t`` goes to
    (opening them), ``late_for(t)`` those a late one missed; ``merged()`` the
    ``(original, target)`` id pairs merged since it was last asked;
    ``close_for(watermark)`` the ``(id, WindowMetadata)`` of the windows the
    watermark closes (forgetting them); ``notify_at()`` the next watermark that
    closes one (``None``: none open). ``is_empty()`` says the key can be forgotten.
    """

    @abstractmethod
    def open_for(self, timestamp: datetime) -> Iterable[int]:
        """The windows an on-time item at ``timestamp`` belongs to."""

    @abstractmethod
    def late_for(self, timestamp: datetime) -> Iterable[int]:
        """The windows a late item at ``timestamp`` would have belonged to."""

    @abstractmethod
    def merged(self) -> Iterable[tuple[int, int]]:
        """``(original id, target id)`` of the windows merged since the last call."""

    @abstractmethod
    def close_for(self, watermark: datetime) -> Iterable[tuple[int, WindowMetadata]]:
        """The windows ``watermark`` closes, with their metadata."""

    @abstractmethod
    def notify_at(self) -> datetime | None:
        """The watermark at which a window will close next."""

    @abstractmethod
    def is_empty(self) -> bool:
        """No window is open and none needs to be remembered."""

    @abstractmethod
    def snapshot(self) -> S:
        """A picklable state :meth:`Windower.build` resumes from."""


class Windower(Generic[S]):
    """Base of bytewax 0.21's windowers: which windows an item belongs to.

    :class:`TumblingWindower`, :class:`SlidingWindower` and :class:`SessionWindower`
    run natively. A windower of your own subclasses this and :meth:`build` s its
    :class:`WindowerLogic`.
    """

    def build(self, resume_state: Any | None) -> WindowerLogic[Any]:
        """The windower's logic for one key, from its last snapshot (``None``: new)."""
        raise NotImplementedError(f"{type(self).__name__} must implement build(resume_state)")


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


BUILTIN_CLOCKS = (SystemClock, EventClock)
"""The clocks flowspark runs natively (any other :class:`Clock` builds its logic)."""
BUILTIN_WINDOWERS = (TumblingWindower, SlidingWindower, SessionWindower)
"""The windowers flowspark runs natively (any other :class:`Windower` builds its logic)."""


def check_window_configs(step_id: str, clock: Any, windower: Any) -> None:
    """Refuse, when the flow is built, a clock or windower that is neither a built-in
    one nor a subclass with its own ``build``."""
    checks = (
        ("clock", clock, Clock, BUILTIN_CLOCKS),
        ("windower", windower, Windower, BUILTIN_WINDOWERS),
    )
    for what, config, base, builtins in checks:
        if isinstance(config, builtins):
            continue
        if not isinstance(config, base):
            names = ", ".join(b.__name__ for b in builtins)
            raise TypeError(
                f"window {step_id!r}: {what} must be one of {names}, or a {base.__name__} "
                f"subclass with a build(resume_state); got {type(config).__name__}"
            )
        if type(config).build is base.build:
            raise TypeError(
                f"window {step_id!r}: {type(config).__name__} must implement "
                f"build(resume_state), which gives its {base.__name__}Logic"
            )


@dataclass
class WindowMetadata:
    """A closed window's open and close times, and the ids of the windows merged into
    it (sessions). A sliding window's close time is its end (not in it); a
    session's is its last item's time (in it)."""

    open_time: datetime
    close_time: datetime
    merged_ids: set[int] = field(default_factory=set)
