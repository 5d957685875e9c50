"""Keyed stateful operators as plain Python: state in, state out.

Each operator is a :class:`KeyedLogic`: given one key's state (``None`` for a
new key), the values that arrived for it in this micro-batch (in arrival
order) and ``now`` (the batch's system time in ms), it returns the new state
(``None`` forgets the key), what to emit, late values, and when it wants to be
woken (``None``: no timer). The Spark adapter stores the state as one blob per
key and turns wake times into timers; the logic itself never sees Spark.

>>> logic = ReduceLogic("sum", lambda a, b: a + b, lambda acc: acc >= 3)
>>> r = logic.on_values("k", None, [1, 1], now=0)
>>> r.state, r.emitted
((2,), [])
>>> logic.on_values("k", r.state, [1, 1], now=0).emitted
[('k', 3)]
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from flowspark.runtime.errors import step_failure
from flowspark.runtime.windowing import (
    EOF_MS,
    MAX_MS,
    ClockLogic,
    SessionWindower,
    SlidingWindower,
    from_ms,
    to_ms,
)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_MS = timedelta(milliseconds=1)

__all__ = [
    "Outcome",
    "KeyedLogic",
    "ReduceLogic",
    "StatefulMapLogic",
    "BatchLogic",
    "WindowLogic",
    "KEY_ERROR",
    "check_keyed",
]

KEY_ERROR = (
    "Dataflow requires a `(key, value)` 2-tuple as input to every stateful operator "
    "for routing; got {item!r:.200} instead"
)
KEY_TYPE_ERROR = "Stateful operators require `str` keys; got key {key!r:.100} of type {kind}"


def check_keyed(item: Any) -> tuple[str, Any]:
    """Split a ``(key, value)`` item, with bytewax's ``TypeError`` texts otherwise."""
    if not isinstance(item, tuple) or len(item) != 2:
        raise TypeError(KEY_ERROR.format(item=item))
    key = item[0]
    if not isinstance(key, str):
        raise TypeError(KEY_TYPE_ERROR.format(key=key, kind=type(key).__name__))
    return item


@dataclass
class Outcome:
    """What one call of a logic produced."""

    state: Any
    emitted: list[Any] = field(default_factory=list)
    late: list[Any] = field(default_factory=list)
    wake: int | None = None


def _takes_key(fn: Callable[..., Any]) -> bool:
    """Whether a builder wants the key (one positional parameter) or nothing."""
    try:
        params = [
            p
            for p in inspect.signature(fn).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
        ]
    except (TypeError, ValueError):  # builtins like list or int: call with nothing
        return False
    return len(params) == 1


class KeyedLogic:
    """Base of the keyed operators' logic."""

    step_id: str = ""
    uses_timers = False
    uses_wal = False  # the Numaflow logics keep a write-ahead log beside their state

    def on_values(self, key: str, state: Any, values: list[Any], now: int) -> Outcome:
        """Handle this batch's values for ``key``."""
        raise NotImplementedError

    def on_timer(self, key: str, state: Any, now: int) -> Outcome:
        """Handle a timer (``now >= EOF_MS`` means the input ended)."""
        return Outcome(state)

    def on_values_at_end(
        self, key: str, state: Any, values: list[Any], wall: int, *extra: Any
    ) -> Outcome:
        """Values that arrive with the end of the input (flushed by an upstream keyed
        step when it ended); ``wall`` is the system time. By default the logic's own
        end-of-input rule: :meth:`on_values` at ``EOF_MS``."""
        return self.on_values(key, state, values, EOF_MS, *extra)

    def _call(self, fn: Callable[..., Any], item: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except Exception as exc:
            raise step_failure(self.step_id, fn, item, exc) from None


class ReduceLogic(KeyedLogic):
    """``reduce``: fold values into the first one; emit and forget when complete."""

    def __init__(self, step_id: str, reducer: Callable, is_complete: Callable) -> None:
        self.step_id, self.reducer, self.is_complete = step_id, reducer, is_complete

    def on_values(self, key: str, state: Any, values: list[Any], now: int) -> Outcome:
        acc = state[0] if state is not None else None
        has = state is not None
        emitted = []
        for v in values:
            acc = self._call(self.reducer, (key, v), acc, v) if has else v
            has = True
            if self._call(self.is_complete, (key, acc), acc):
                emitted.append((key, acc))
                acc, has = None, False
        return Outcome((acc,) if has else None, emitted)


_MISSING = object()


class StatefulMapLogic(KeyedLogic):
    """``stateful_map``: ``mapper(state, value) -> (state, out)``; a ``None`` state forgets."""

    def __init__(self, step_id: str, builder: Callable, mapper: Callable) -> None:
        self.step_id, self.builder, self.mapper = step_id, builder, mapper
        self.builder_takes_key = _takes_key(builder)

    def on_values(self, key: str, state: Any, values: list[Any], now: int) -> Outcome:
        current = state[0] if state is not None else _MISSING
        emitted = []
        for v in values:
            if current is _MISSING:
                args = (key,) if self.builder_takes_key else ()
                current = self._call(self.builder, (key, v), *args)
            result = self._call(self.mapper, (key, v), current, v)
            if not isinstance(result, tuple) or len(result) != 2:
                exc = TypeError(
                    "stateful_map's mapper must return a 2-tuple (updated_state, "
                    f"updated_value); got {result!r:.100}"
                )
                raise step_failure(self.step_id, self.mapper, (key, v), exc)
            current, out = result
            emitted.append((key, out))
            if current is None:
                current = _MISSING
        return Outcome((current,) if current is not _MISSING else None, emitted)


class BatchLogic(KeyedLogic):
    """``batch``: emit ``(key, values)`` at ``max_size``, after ``timeout``, and at the end."""

    uses_timers = True

    def __init__(self, step_id: str, max_size: int, timeout_ms: int) -> None:
        self.step_id, self.max_size, self.timeout_ms = step_id, max_size, timeout_ms

    def on_values(self, key: str, state: Any, values: list[Any], now: int) -> Outcome:
        batch, deadline = state if state is not None else ([], None)
        emitted = []
        for v in values:
            if not batch:
                deadline = now + self.timeout_ms
            batch.append(v)
            if len(batch) >= self.max_size:
                emitted.append((key, batch))
                batch, deadline = [], None
        if deadline is not None and (now >= deadline or now >= EOF_MS) and batch:
            # Timed out, or values flushed by an upstream step at the end of the input.
            emitted.append((key, batch))
            batch, deadline = [], None
        return Outcome((batch, deadline) if batch else None, emitted, wake=deadline)

    def on_timer(self, key: str, state: Any, now: int) -> Outcome:
        if state is None:
            return Outcome(None)
        batch, deadline = state
        if now >= deadline or now >= EOF_MS:
            return Outcome(None, [(key, batch)] if batch else [])
        return Outcome(state, wake=deadline)


class _Aggregator:
    """How a window operator accumulates: ``reduce``, ``fold`` or ``collect``."""

    def __init__(self, kind: str, fns: dict[str, Callable], logic: KeyedLogic) -> None:
        self.kind, self.fns, self.logic = kind, fns, logic
        if kind == "fold_window":
            self.builder_takes_key = _takes_key(fns["builder"])

    @property
    def buffers(self) -> bool:
        """Whether values are kept until close (collect, and everything in sessions)."""
        return self.kind == "collect_window"

    def empty(self, key: str) -> Any:
        if self.kind == "fold_window":
            builder = self.fns["builder"]
            args = (key,) if self.builder_takes_key else ()
            return [self.logic._call(builder, (key, None), *args)]
        return []

    def add(self, key: str, acc: list, t: int, seq: int, value: Any) -> None:
        if self.kind == "collect_window":
            acc.append((t, seq, value))
        elif self.kind == "fold_window":
            acc[0] = self.logic._call(self.fns["folder"], (key, value), acc[0], value)
        elif acc:
            acc[0] = self.logic._call(self.fns["reducer"], (key, value), acc[0], value)
        else:
            acc.append(value)

    def finish(self, key: str, acc: list) -> Any:
        if self.kind == "collect_window":
            return [v for _, _, v in sorted(acc, key=lambda e: (e[0], e[1]))]
        return acc[0]


class WindowLogic(KeyedLogic):
    """``reduce_window`` / ``fold_window`` / ``collect_window`` with a clock and windows.

    State: ``(clock_state, windows, seq)`` where ``windows`` maps a window's
    ``(start, end)`` to its accumulator; session windows keep their raw
    ``(time, seq, value)`` items so that merging sessions stays exact.
    """

    uses_timers = True

    def __init__(
        self,
        step_id: str,
        kind: str,
        clock: ClockLogic,
        windower: SlidingWindower | SessionWindower,
        fns: dict[str, Callable],
        with_window: bool = False,
    ) -> None:
        self.step_id, self.kind, self.clock, self.windower = step_id, kind, clock, windower
        self.agg = _Aggregator(kind, fns, self)
        self.with_window = with_window
        self.sessions = isinstance(windower, SessionWindower)
        self.tumbling = not self.sessions and windower.offset == windower.length

    def _windows_for(self, t: int) -> list[tuple[int, int]]:
        w = self.windower
        if self.tumbling:  # the common case, without the general loop
            start = t - (t - w.align) % w.length
            return [(start, start + w.length)]
        return w.windows_for(t)

    def _emit(self, key: str, window: tuple[int, int], value: Any) -> tuple[str, Any]:
        if self.with_window:
            return (key, (self._bounds(window), value))
        return (key, value)

    def _bounds(self, window: tuple[int, int]) -> tuple[datetime, datetime]:
        """A window's (start, end) as datetimes, shared by the keys that close it."""
        cache = self.__dict__.setdefault("_bounds_cache", {})
        bounds = cache.get(window)
        if bounds is None:
            if len(cache) >= 4096:
                cache.clear()
            bounds = cache[window] = (from_ms(window[0]), from_ms(window[1]))
        return bounds

    def on_values_at_end(
        self, key: str, state: Any, values: list[Any], wall: int, *extra: Any
    ) -> Outcome:
        # Place them at the system time (system clock), or as if no time had passed
        # since the key's last item (event clock), then close everything.
        clock_state = state[0] if state is not None else None
        at = wall if self.clock.system else _seen_at(clock_state, EOF_MS - 1)
        placed = self.on_values(key, state, values, at)
        closed = self.on_timer(key, placed.state, EOF_MS)
        return Outcome(closed.state, placed.emitted + closed.emitted, placed.late, closed.wake)

    def on_values(self, key: str, state: Any, values: list[Any], now: int) -> Outcome:
        if now >= EOF_MS:  # the end of the input with no system time known
            return self.on_values_at_end(key, state, values, EOF_MS - 1)
        if not self.sessions and not self.clock.system and self.agg.kind != "collect_window":
            return self._on_values_fast(key, state, values, now)
        return self._on_values(key, state, values, now)

    def _on_values_fast(self, key: str, state: Any, values: list[Any], now: int) -> Outcome:
        """The event-clock, fixed-window, reduce/fold path (same result as
        :meth:`_on_values`, with the clock and window arithmetic inlined)."""
        clock_state, windows, seq = state if state is not None else (None, {}, 0)
        late: list[Any] = []
        emitted: list[Any] = []
        max_event, seen_at = clock_state if clock_state is not None else (None, now)
        wait = self.clock.wait
        getter = self.clock.getter
        w = self.windower
        tumbling, align, length = self.tumbling, w.align, w.length
        agg = self.agg
        fold = agg.fns["folder"] if agg.kind == "fold_window" else agg.fns.get("reducer")
        is_fold = agg.kind == "fold_window"
        next_close = min((end for _, end in windows), default=MAX_MS)
        fn: Any = getter
        v: Any = None
        try:
            for v in values:
                fn = getter
                dt = getter(v)
                try:
                    t = (dt - _EPOCH) // _ONE_MS
                except TypeError:
                    t = to_ms(dt)  # raises the clear error for naive or non-datetimes
                if max_event is None or t > max_event + (now - seen_at):
                    max_event, seen_at = t, now
                wm = max_event - wait + (now - seen_at)
                if tumbling:
                    start = t - (t - align) % length
                    spans = ((start, start + length),)
                else:
                    spans = w.windows_for(t)
                placed = False
                fn = fold
                for window in spans:
                    if window[1] < wm:
                        continue
                    acc = windows.get(window)
                    if acc is None:
                        windows[window] = acc = agg.empty(key)
                        if is_fold:
                            acc[0] = fold(acc[0], v)
                        else:
                            acc.append(v)
                        if window[1] < next_close:
                            next_close = window[1]
                    elif is_fold or acc:
                        acc[0] = fold(acc[0], v)
                    else:
                        acc.append(v)
                    placed = True
                if not placed:
                    late.append((key, v))
                if next_close < wm:
                    emitted.extend(self._close(key, windows, wm))
                    next_close = min((end for _, end in windows), default=MAX_MS)
        except Exception as exc:
            raise step_failure(self.step_id, fn, (key, v), exc) from None
        seq += len(values)
        clock_state = (max_event, seen_at) if max_event is not None else clock_state
        return self._outcome(key, clock_state, windows, seq, emitted, late, now)

    def _on_values(self, key: str, state: Any, values: list[Any], now: int) -> Outcome:
        clock_state, windows, seq = state if state is not None else (None, {}, 0)
        late: list[Any] = []
        emitted: list[Any] = []
        for v in values:
            try:
                t, clock_state = self.clock.time_for(clock_state, v, now)
            except Exception as exc:
                raise step_failure(self.step_id, self.clock.getter, (key, v), exc) from None
            wm = self.clock.watermark(clock_state, now)
            seq += 1
            if self.sessions:
                if t < wm:
                    late.append((key, v))
                else:
                    self._add_to_session(windows, t, seq, v)
            else:
                placed = False
                for window in self._windows_for(t):
                    if window[1] < wm:
                        continue
                    acc = windows.get(window)
                    if acc is None:
                        acc = windows[window] = self.agg.empty(key)
                    self.agg.add(key, acc, t, seq, v)
                    placed = True
                if not placed:
                    late.append((key, v))
            emitted.extend(self._close(key, windows, wm))
        return self._outcome(key, clock_state, windows, seq, emitted, late, now)

    def on_timer(self, key: str, state: Any, now: int) -> Outcome:
        if state is None:
            return Outcome(None)
        clock_state, windows, seq = state
        emitted = self._close(key, windows, self.clock.watermark(clock_state, now))
        return self._outcome(key, clock_state, windows, seq, emitted, [], now)

    def _outcome(self, key, clock_state, windows, seq, emitted, late, now) -> Outcome:
        if not windows:
            # Keep the clock (it never goes back) but no timer is needed.
            return Outcome((clock_state, windows, seq), emitted, late)
        close = (
            min(end for _, end in windows)
            if not self.sessions
            else min(w[1] + self.windower.gap for w in windows)
        )
        return Outcome(
            (clock_state, windows, seq), emitted, late, self.clock.wake_for(clock_state, close)
        )

    def _add_to_session(self, windows: dict, t: int, seq: int, value: Any) -> None:
        gap = self.windower.gap
        start, end, items = t, t, [(t, seq, value)]
        for window in [w for w in windows if w[0] - gap < t < w[1] + gap]:
            start, end = min(start, window[0]), max(end, window[1])
            items.extend(windows.pop(window))
        windows[(start, end)] = items

    def _close(self, key: str, windows: dict, wm: int) -> list[Any]:
        out = []
        for window in sorted(windows):
            close = window[1] + self.windower.gap if self.sessions else window[1]
            if close < wm:
                acc = windows.pop(window)
                if self.sessions:
                    closed = (window[0], window[1] + self.windower.gap)
                    out.append(self._emit(key, closed, self._fold_session(key, acc)))
                else:
                    out.append(self._emit(key, window, self.agg.finish(key, acc)))
        return out

    def _fold_session(self, key: str, items: list) -> Any:
        acc = self.agg.empty(key)
        for t, seq, v in sorted(items, key=lambda e: (e[0], e[1])):
            self.agg.add(key, acc, t, seq, v)
        return self.agg.finish(key, acc)


def _seen_at(clock_state: Any, default: int) -> int:
    """The system time an event clock last moved at (``default`` without one)."""
    return clock_state[1] if clock_state is not None else default


def logic_for(step: Any) -> KeyedLogic:
    """Build the logic of a keyed step (a :class:`~flowspark.api.steps.Step`)."""
    from flowspark.runtime.windowing import build_clock, build_windower

    fns, args = step.fns, step.args
    if step.kind in ("accumulate", "reduce_stream"):
        return _udf_logic_for(step)
    if step.kind == "reduce":
        return ReduceLogic(step.step_id, fns["reducer"], fns["is_complete"])
    if step.kind == "stateful_map":
        return StatefulMapLogic(step.step_id, fns["builder"], fns["mapper"])
    if step.kind == "batch":
        timeout_ms = args["timeout"] // timedelta(milliseconds=1)
        return BatchLogic(step.step_id, args["max_size"], timeout_ms)
    return WindowLogic(
        step.step_id,
        step.kind,
        build_clock(args["clock_config"]),
        build_windower(args["window_config"]),
        fns,
        with_window=args.get("with_window", False),
    )


# Set to "1" to rebuild every Numaflow handler from its WAL on every micro-batch
# (read when a run starts): the replay path then runs all the time, for tests.
REBUILD_ENV = "FLOWSPARK_UDF_REBUILD"


def _udf_logic_for(step: Any) -> KeyedLogic:
    import os

    from flowspark.runtime.udf_keyed import AccumulateLogic, ReduceStreamLogic
    from flowspark.runtime.windowing import build_windower

    args = step.args
    force = os.environ.get(REBUILD_ENV, "") not in ("", "0")
    if step.kind == "accumulate":
        return AccumulateLogic(
            step.step_id, args["factory"], args["timeout"], args["watermark_delay"], force
        )
    return ReduceStreamLogic(
        step.step_id,
        args["factory"],
        build_windower(args["window_config"]),
        args["allowed_lateness"],
        args["watermark_delay"],
        force,
    )
