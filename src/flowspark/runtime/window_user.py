"""bytewax 0.21's user-defined clocks and windowers inside the ``window`` kind.

A :class:`~flowspark.api.windowing.Clock` or
:class:`~flowspark.api.windowing.Windower` subclass of the user's own builds its
logic from the snapshot kept in the key's state, each time the key has work
(:class:`~flowspark.runtime.window_run.WindowRun` keeps that snapshot, as it keeps a
window logic's). These adapters give
:class:`~flowspark.runtime.window_run.WindowRun` the logics in its own terms: times
in whole milliseconds, a failure naming the step, the user's method and the key.

>>> from datetime import datetime, timedelta, timezone
>>> from flowspark.api.windowing import WindowerLogic, Windower, WindowMetadata
>>> T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
>>> HOUR = timedelta(hours=1)
>>> class Hourly(Windower):  # a window per hour of the day, whatever the date
...     def build(self, resume_state):
...         return HourlyLogic(dict(resume_state or {}))
>>> class HourlyLogic(WindowerLogic):
...     def __init__(self, opened):
...         self.opened = opened  # {hour: its window's start}
...     def open_for(self, t):
...         self.opened.setdefault(t.hour, t.replace(minute=0, second=0, microsecond=0))
...         return [t.hour]
...     def late_for(self, t):
...         return [t.hour]
...     def merged(self):
...         return []
...     def close_for(self, watermark):
...         done = [h for h, start in self.opened.items() if start + HOUR <= watermark]
...         return [(h, WindowMetadata(self.opened[h], self.opened.pop(h) + HOUR)) for h in done]
...     def notify_at(self):
...         return min((start + HOUR for start in self.opened.values()), default=None)
...     def is_empty(self):
...         return not self.opened
...     def snapshot(self):
...         return dict(self.opened)
>>> ids = UserWindowerIds("w", Hourly())
>>> live = ids.load(None, "k")
>>> ids.open_for(live, aware_to_ms(T0 + timedelta(minutes=90)))
[1]
>>> [(h, meta.open_time.hour, meta.close_time.hour) for h, meta in
...  ids.close_for(live, aware_to_ms(T0 + timedelta(hours=3)))]
[(1, 1, 2)]
>>> ids.is_empty(live), ids.save(live)
(True, {})
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from flowspark.api.windowing import UTC_MAX, UTC_MIN, Clock, Windower, WindowMetadata
from flowspark.runtime.errors import step_failure
from flowspark.runtime.windowing import EOF_MS
from flowspark.shared.times import aware_to_ms, datetime_from_ms

__all__ = ["UserClockCall", "UserWindowerIds", "is_user_defined"]

_MIN_MS = aware_to_ms(UTC_MIN)
_MAX_MS = aware_to_ms(UTC_MAX)


def is_user_defined(config: Any, base: type, builtins: tuple[type, ...]) -> bool:
    """Whether ``config`` is a ``base`` (``Clock``, ``Windower``) of the user's own,
    one that is none of flowspark's ``builtins``."""
    return isinstance(config, base) and not isinstance(config, builtins)


def _datetime(ms: int) -> datetime:
    """``ms`` as an aware datetime, clamped to :data:`UTC_MIN`..:data:`UTC_MAX` (the
    engine's ends of time lie beyond what a datetime holds)."""
    if ms >= _MAX_MS:
        return UTC_MAX
    if ms <= _MIN_MS:
        return UTC_MIN
    return datetime_from_ms(ms)


class _Live:
    """One key's built logic during one call, and how its failures are named."""

    __slots__ = ("logic", "key", "step_id")

    def __init__(self, logic: Any, key: str, step_id: str) -> None:
        self.logic, self.key, self.step_id = logic, key, step_id

    def call(self, method: str, *args: Any, as_list: bool = False) -> Any:
        """``logic.<method>(*args)`` (``as_list``: its values, in a list); a failure,
        also while the values are read, names the step, the method and the key."""
        fn = getattr(self.logic, method)
        try:
            result = fn(*args)
            return list(result) if as_list else result
        except Exception as exc:
            raise self.failure(method, args[0] if args else None, exc) from None

    def failure(self, method: str, about: Any, exc: Exception) -> Exception:
        """The step's failure in ``method``, about ``about`` (and the key)."""
        return step_failure(self.step_id, getattr(self.logic, method), (self.key, about), exc)

    def time(self, method: str, *args: Any) -> int:
        """A time the logic gives, in ms; not an aware datetime: a failure as :meth:`call`'s."""
        time = self.maybe_time(method, *args)
        if time is None:
            error = TypeError(f"{method} must give an aware datetime; got None")
            raise self.failure(method, None, error)
        return time

    def maybe_time(self, method: str, *args: Any) -> int | None:
        """As :meth:`time`, where ``None`` means never."""
        result = self.call(method, *args)
        if result is None:
            return None
        try:
            return aware_to_ms(result)
        except (TypeError, ValueError) as exc:
            raise self.failure(method, result, exc) from None


def _build(step_id: str, config: Any, resume_state: Any, key: str) -> _Live:
    build: Callable[[Any], Any] = config.build
    try:
        return _Live(build(resume_state), key, step_id)
    except Exception as exc:
        raise step_failure(step_id, build, (key, resume_state), exc) from None


class UserWindowerIds:
    """A user's :class:`Windower` as :class:`WindowRun`'s window ids: the state kept
    between calls is its logic's snapshot; during a call, the live logic."""

    def __init__(self, step_id: str, windower: Windower) -> None:
        self.step_id, self.windower = step_id, windower

    def load(self, state: Any, key: str) -> _Live:
        return _build(self.step_id, self.windower, state, key)

    def save(self, live: _Live) -> Any:
        return live.call("snapshot")

    def open_for(self, live: _Live, t: int) -> list[int]:
        ids: list[int] = live.call("open_for", _datetime(t), as_list=True)
        return ids

    def late_for(self, live: _Live, t: int) -> list[int]:
        ids: list[int] = live.call("late_for", _datetime(t), as_list=True)
        return ids

    def merged(self, live: _Live) -> list[tuple[int, int]]:
        pairs: list[tuple[int, int]] = live.call("merged", as_list=True)
        return pairs

    def close_for(self, live: _Live, wm: int) -> list[tuple[int, WindowMetadata]]:
        """The windows the watermark closes, with the metadata the user's logic gave
        (kept as it is)."""
        closed: list[Any] = live.call("close_for", _datetime(wm), as_list=True)
        for entry in closed:
            pair = isinstance(entry, tuple) and len(entry) == 2
            if not pair or not isinstance(entry[1], WindowMetadata):
                error = TypeError(
                    f"close_for must give (window id, WindowMetadata) pairs; got {entry!r:.80}"
                )
                raise live.failure("close_for", entry, error)
        return closed

    def closes_at(self, live: _Live) -> int | None:
        return live.maybe_time("notify_at")

    def is_empty(self, live: _Live) -> bool:
        return bool(live.call("is_empty"))


class UserClockCall:
    """A user's :class:`Clock` for one call of one key: built from the key's snapshot,
    ``before_batch()`` when values come; its times in ms."""

    def __init__(self, step_id: str, clock: Clock, state: Any, key: str, batch: bool) -> None:
        self.live = _build(step_id, clock, state, key)
        if batch:
            self.live.call("before_batch")

    def on_item(self, value: Any) -> tuple[int, int]:
        live = self.live
        fn = live.logic.on_item
        try:
            at, watermark = fn(value)
            return aware_to_ms(at), aware_to_ms(watermark)
        except Exception as exc:
            raise step_failure(live.step_id, fn, (live.key, value), exc) from None

    def on_notify(self) -> int:
        return self.live.time("on_notify")

    def on_eof(self) -> int:
        return self.live.time("on_eof")

    def state(self) -> Any:
        return self.live.call("snapshot")

    def wake(self, needed: int) -> int:
        """The system time (ms) at which the watermark passes ``needed``."""
        at = self.live.maybe_time("to_system_utc", _datetime(needed))
        return EOF_MS if at is None else min(at, EOF_MS)
