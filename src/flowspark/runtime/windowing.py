"""Clocks and windowers in plain Python (bytewax 0.17 / Numaflow semantics), times in ms.

Everything here is a pure function of its inputs and of ``now`` — the
micro-batch's start time, flowspark's notion of system time — so a replayed
batch computes exactly what the first attempt did.

A window kind is a config (pure data, :mod:`flowspark.api.window`) and a
:class:`Windower` that serves it: a subclass of :class:`RegisteredWindower`
names the config type it serves (and the family: bytewax's window operators or
Numaflow's ``reduce_stream``) and registers itself, and :func:`build_windower`
picks it from the config's type. Adding a window kind touches its config class
and its windower, nothing else.

>>> from datetime import timedelta
>>> w = build_windower(SlidingWindow(timedelta(seconds=10), timedelta(seconds=5)))
>>> w.assign(12_000), w.close_at((5_000, 15_000)), w.late((5_000, 15_000), 15_001)
([(5000, 15000), (10000, 20000)], 15000, True)
>>> s = build_windower(SessionWindow(gap=timedelta(seconds=1)))
>>> s.merge((2_500, 2_500), [(0, 2_000), (9_000, 9_000)])
((0, 2500), [(0, 2000)])
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar, Protocol, Self

from flowspark.api.window import (
    ClockConfig,
    EventClockConfig,
    SessionWindow,
    SlidingWindow,
    SystemClockConfig,
    TumblingWindow,
    WindowConfig,
)
from flowspark.runtime.errors import step_failure
from flowspark.shared.times import aware_to_ms, datetime_from_ms, duration_ms, event_ms

__all__ = [
    "MIN_MS",
    "MAX_MS",
    "EOF_MS",
    "BYTEWAX",
    "NUMAFLOW",
    "Window",
    "WindowBounds",
    "Windower",
    "RegisteredWindower",
    "ClockLogic",
    "SlidingWindower",
    "TumblingWindower",
    "SessionWindower",
    "NumaflowWindower",
    "NumaflowSlidingWindower",
    "NumaflowFixedWindower",
    "GlobalWindower",
    "build_clock",
    "build_windower",
    "windower_types",
]

MIN_MS = -(2**62)
MAX_MS = 2**62
# The time a bounded input's end is announced at (year 9000): every timer fires.
EOF_MS = 221_845_392_000_000


class WindowBounds:
    """A window's ``(start, end)`` in ms as datetimes, made once for all the keys that
    close it (the latest 4,096 windows are kept).

    >>> bounds = WindowBounds()
    >>> bounds((0, 1000))[1].isoformat()
    '1970-01-01T00:00:01+00:00'
    >>> bounds((0, 1000)) is bounds((0, 1000))
    True
    """

    __slots__ = ("_made",)

    def __init__(self) -> None:
        self._made: dict[tuple[int, int], tuple[datetime, datetime]] = {}

    def __call__(self, window: tuple[int, int]) -> tuple[datetime, datetime]:
        bounds = self._made.get(window)
        if bounds is None:
            if len(self._made) >= 4096:
                self._made.clear()
            bounds = self._made[window] = (datetime_from_ms(window[0]), datetime_from_ms(window[1]))
        return bounds


class ClockLogic:
    """Item times and watermarks for one key.

    ``state`` is ``(max_event_ms, system_ms_when_seen)`` or ``None`` before any item.
    """

    def __init__(self, config: ClockConfig) -> None:
        self.system = isinstance(config, SystemClockConfig)
        # The event clock's: None on the system clock.
        self.getter: Callable[[Any], datetime] | None = None
        self.wait = 0
        if isinstance(config, EventClockConfig):
            self.getter = config.dt_getter
            self.wait = duration_ms(config.wait_for_system_duration)
        elif not self.system:
            raise TypeError(f"unknown clock config {type(config).__name__}")

    def time_for(self, state: tuple[int, int] | None, value: Any, now: int) -> tuple[int, Any]:
        """The item's time and the clock state after seeing it."""
        if self.getter is None:  # the system clock
            return now, None
        t = aware_to_ms(self.getter(value))
        # Keep the (item time, system time) pair that gives the later watermark:
        # a newer item that arrives late in system time must not pull it back.
        if state is None or t > state[0] + (now - state[1]):
            return t, (t, now)
        return t, state

    def event_times(self, step_id: str, key: str, values: Sequence[Any]) -> list[int]:
        """Each value's event time in ms (the event clock's); a failure names the
        step, the ``dt_getter`` and the item."""
        getter = self.getter
        assert getter is not None  # the event clock
        times: list[int] = []
        v: Any = None
        try:
            for v in values:
                times.append(event_ms(getter(v)))
        except Exception as exc:
            raise step_failure(step_id, getter, (key, v), exc) from None
        return times

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


def build_clock(config: ClockConfig) -> ClockLogic:
    """The logic of a clock config."""
    if not isinstance(config, ClockConfig):
        raise TypeError(
            f"clock_config must be EventClockConfig or SystemClockConfig; got {config!r:.80}"
        )
    return ClockLogic(config)


# -- windowers ---------------------------------------------------------------------------

# A window: ``(start, end)`` in ms. What ``end`` means is the windower's: the end
# of ``[start, end)`` for fixed windows, the latest item time of a session.
Window = tuple[int, int]

# The families of window operators: which semantics a config is run with.
BYTEWAX = "bytewax"  # reduce_window / fold_window / collect_window
NUMAFLOW = "numaflow"  # reduce_stream


class Windower(Protocol):
    """How one window kind places items and closes windows.

    Times are ms; a window closes once the watermark is past (``>``) its
    :meth:`close_at`. A logic asks :meth:`assign` for an item's windows, drops
    those :meth:`late` says it came too late for (the item is late when none is
    left), lets :meth:`merge` join each with the open windows (when ``merges``),
    and closes the windows whose close time the watermark passed.
    """

    # Whether windows merge (sessions): their accumulators then keep raw items.
    merges: ClassVar[bool]

    @property
    def fast_grid(self) -> tuple[int, int, int] | None:
        """``(length, offset, align)`` when the windows are ``[align + k*offset,
        + length)``, never merge, close at their end and take no item once the
        watermark is past their end: what a hot loop may inline instead of calling
        the methods below. ``None`` otherwise."""
        ...

    def assign(self, t: int) -> Sequence[Window]:
        """The windows an item at time ``t`` belongs to (empty: none, e.g. in a gap)."""
        ...

    def merge(self, window: Window, open_windows: Iterable[Window]) -> tuple[Window, list[Window]]:
        """``window`` joined with the open windows it touches: the merged window and
        the open windows it absorbs (``(window, [])`` for kinds that never merge)."""
        ...

    def close_at(self, window: Window) -> int:
        """The time the watermark must pass for ``window`` to close."""
        ...

    def late(self, window: Window, watermark: int) -> bool:
        """Whether an item assigned ``window`` comes too late for it at ``watermark``."""
        ...


# (family, config type) -> the windower serving it.
_WINDOWERS: dict[tuple[str, type], type[RegisteredWindower]] = {}


class RegisteredWindower:
    """Base of the windowers built from a window config.

    ``class MyWindower(RegisteredWindower, serves=MyWindow, family=BYTEWAX)``
    registers ``MyWindower.from_config`` as the windower of ``MyWindow`` configs
    in that family; a subclass without ``serves`` registers nothing.
    """

    serves: ClassVar[type | None] = None
    family: ClassVar[str] = BYTEWAX
    merges: ClassVar[bool] = False

    def __init_subclass__(
        cls, serves: type | None = None, family: str = BYTEWAX, **kwargs: Any
    ) -> None:
        super().__init_subclass__(**kwargs)
        if serves is None:
            return
        key = (family, serves)
        known = _WINDOWERS.get(key)
        if known is not None and known.__qualname__ != cls.__qualname__:
            raise TypeError(
                f"{serves.__name__} already has a {family} windower: {known.__qualname__}"
            )
        cls.serves, cls.family = serves, family
        _WINDOWERS[key] = cls

    @classmethod
    def from_config(cls, config: Any) -> Self:
        """The windower of ``config`` (an instance of ``cls.serves``)."""
        raise NotImplementedError

    @property
    def fast_grid(self) -> tuple[int, int, int] | None:
        return None

    def merge(self, window: Window, open_windows: Iterable[Window]) -> tuple[Window, list[Window]]:
        return window, []

    # What every windower defines (see :class:`Windower`).

    def assign(self, t: int) -> Sequence[Window]:
        raise NotImplementedError

    def close_at(self, window: Window) -> int:
        raise NotImplementedError

    def late(self, window: Window, watermark: int) -> bool:
        raise NotImplementedError


def windower_types(family: str = BYTEWAX) -> list[type]:
    """The config types that have a windower in ``family``, in registration order."""
    return [config for fam, config in _WINDOWERS if fam == family]


def build_windower(config: WindowConfig, family: str = BYTEWAX) -> Windower:
    """The windower serving ``config`` in ``family`` (a ``TypeError`` for other objects)."""
    for kind in type(config).__mro__:
        windower = _WINDOWERS.get((family, kind))
        if windower is not None:
            return windower.from_config(config)
    names = [t.__name__ for t in windower_types(family)]
    expected = " or ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)
    raise TypeError(f"window_config must be {expected}; got {config!r:.80}")


def _grid(t: int, length: int, offset: int, align: int) -> list[Window]:
    """Every window ``[align + k*offset, + length)`` containing ``t``."""
    last = (t - align) // offset
    first = (t - align - length) // offset + 1
    out = []
    for k in range(first, last + 1):
        start = align + k * offset
        if start <= t < start + length:
            out.append((start, start + length))
    return out


@dataclass(frozen=True)
class _SlidingGrid:
    """Windows ``[align + k*offset, + length)`` of a :class:`SlidingWindow` config (both
    families place items alike; they close and take late items differently)."""

    length: int
    offset: int
    align: int

    @classmethod
    def from_config(cls, config: SlidingWindow) -> Self:
        return cls(
            duration_ms(config.length), duration_ms(config.offset), aware_to_ms(config.align_to)
        )

    def assign(self, t: int) -> list[Window]:
        return _grid(t, self.length, self.offset, self.align)


@dataclass(frozen=True)
class _TumblingGrid:
    """Back-to-back windows ``[align + k*length, + length)`` of a :class:`TumblingWindow`
    config: one per item (placed alike in both families)."""

    length: int
    align: int

    @classmethod
    def from_config(cls, config: TumblingWindow) -> Self:
        return cls(duration_ms(config.length), aware_to_ms(config.align_to))

    def assign(self, t: int) -> list[Window]:
        start = t - (t - self.align) % self.length
        return [(start, start + self.length)]


class _ClosingAtEnd:
    """bytewax's fixed windows: closed once the watermark is past their end, and
    an item is too late for a window once the watermark is past its end."""

    def close_at(self, window: Window) -> int:
        return window[1]

    def late(self, window: Window, watermark: int) -> bool:
        return window[1] < watermark


@dataclass(frozen=True)
class SlidingWindower(_ClosingAtEnd, _SlidingGrid, RegisteredWindower, serves=SlidingWindow):
    """Windows ``[align + k*offset, + length)``: they overlap when ``offset < length``
    and leave gaps (items in no window: late) when ``offset > length``."""

    @property
    def fast_grid(self) -> tuple[int, int, int]:
        return (self.length, self.offset, self.align)


@dataclass(frozen=True)
class TumblingWindower(_ClosingAtEnd, _TumblingGrid, RegisteredWindower, serves=TumblingWindow):
    """Back-to-back windows ``[align + k*length, + length)``: one per item."""

    @property
    def fast_grid(self) -> tuple[int, int, int]:
        return (self.length, self.length, self.align)


@dataclass(frozen=True)
class SessionWindower(RegisteredWindower, serves=SessionWindow):
    """Sessions: items less than ``gap`` apart share a window ``(first, last item
    time)``, which closes once the watermark is past ``last + gap``. An item is
    late once the watermark is past its own time."""

    gap: int
    merges: ClassVar[bool] = True

    @classmethod
    def from_config(cls, config: SessionWindow) -> Self:
        return cls(duration_ms(config.gap))

    def assign(self, t: int) -> list[Window]:
        return [(t, t)]

    def merge(self, window: Window, open_windows: Iterable[Window]) -> tuple[Window, list[Window]]:
        gap = self.gap
        start, end = window
        absorbed = [w for w in open_windows if w[0] - gap < end and start < w[1] + gap]
        for w in absorbed:
            start, end = min(start, w[0]), max(end, w[1])
        return (start, end), absorbed

    def close_at(self, window: Window) -> int:
        return window[1] + self.gap

    def late(self, window: Window, watermark: int) -> bool:
        return window[1] < watermark


class NumaflowWindower(RegisteredWindower):
    """Numaflow's fixed and sliding windows ``[start, end)`` of ``length``: closed once
    the watermark reaches their end, and too late for an item from then on (the
    ``reduce_stream`` logic passes its watermark minus the allowed lateness)."""

    length: int

    def assign(self, t: int) -> list[Window]:
        raise NotImplementedError

    def close_at(self, window: Window) -> int:
        return window[1] - 1

    def late(self, window: Window, watermark: int) -> bool:
        return window[1] <= watermark


@dataclass(frozen=True)
class NumaflowSlidingWindower(
    _SlidingGrid, NumaflowWindower, serves=SlidingWindow, family=NUMAFLOW
):
    """Numaflow's sliding windows ``[align + k*offset, + length)``."""


@dataclass(frozen=True)
class NumaflowFixedWindower(
    _TumblingGrid, NumaflowWindower, serves=TumblingWindow, family=NUMAFLOW
):
    """Numaflow's fixed windows ``[align + k*length, + length)``."""


@dataclass(frozen=True)
class GlobalWindower(RegisteredWindower):
    """Numaflow's accumulator: one window per key, ``(MIN_MS, latest item time)``,
    that every item joins; it closes once the watermark is past the latest item
    time plus ``timeout``, and no item is ever late for it."""

    timeout: int
    merges: ClassVar[bool] = True

    def assign(self, t: int) -> list[Window]:
        return [(MIN_MS, t)]

    def merge(self, window: Window, open_windows: Iterable[Window]) -> tuple[Window, list[Window]]:
        absorbed = list(open_windows)
        return (MIN_MS, max([window[1], *(w[1] for w in absorbed)])), absorbed

    def close_at(self, window: Window) -> int:
        return window[1] + self.timeout

    def late(self, window: Window, watermark: int) -> bool:
        return False
