"""bytewax's keyed stateful operators as plain Python: state in, state out.

Each operator is a :class:`~flowspark.runtime.keyed.KeyedLogic` (see that
module for the contract): given a :class:`~flowspark.runtime.keyed.KeyedCall`
— one key's state, its values of this micro-batch and ``now`` — it returns an
:class:`~flowspark.runtime.keyed.Outcome`. The window operators run a clock and
a :class:`~flowspark.runtime.windowing.Windower`.

>>> logic = ReduceLogic("sum", lambda a, b: a + b, lambda acc: acc >= 3)
>>> r = logic.on_values(KeyedCall("k", None, 0, [1, 1]))
>>> r.state, r.emitted
((2,), [])
>>> logic.on_values(KeyedCall("k", r.state, 0, [1, 1])).emitted
[('k', 3)]
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from flowspark.api import windowing as w021
from flowspark.api.steps import operator
from flowspark.api.window import EventClockConfig, SystemClockConfig
from flowspark.runtime.errors import step_failure
from flowspark.runtime.keyed import KeyedCall, KeyedLogic, Outcome
from flowspark.runtime.windowing import (
    EOF_MS,
    MAX_MS,
    ClockLogic,
    SlidingWindower,
    Window,
    Windower,
)
from flowspark.shared.times import EPOCH, ONE_MS, aware_to_ms, datetime_from_ms, duration_ms

__all__ = [
    "ReduceLogic",
    "StatefulMapLogic",
    "BatchLogic",
    "StatefulBatchRun",
    "WindowLogic",
    "WindowRun",
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


class ReduceLogic(KeyedLogic):
    """``reduce``: fold values into the first one; emit and forget when complete."""

    def __init__(self, step_id: str, reducer: Callable, is_complete: Callable) -> None:
        self.step_id, self.reducer, self.is_complete = step_id, reducer, is_complete

    def on_values(self, call: KeyedCall) -> Outcome:
        key, state = call.key, call.state
        acc = state[0] if state is not None else None
        has = state is not None
        emitted = []
        for v in call.values:
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

    def on_values(self, call: KeyedCall) -> Outcome:
        key, state = call.key, call.state
        current = state[0] if state is not None else _MISSING
        emitted = []
        for v in call.values:
            if current is _MISSING:
                args = (key,) if self.builder_takes_key else ()
                current = self._call(self.builder, (key, v), *args)
            result = self._call(self.mapper, (key, v), current, v)
            if not isinstance(result, tuple) or len(result) != 2:
                exc = TypeError(
                    "the return value of stateful_map's mapper must be a 2-tuple "
                    f"(updated_state, updated_value); got {result!r:.100}"
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

    def on_values(self, call: KeyedCall) -> Outcome:
        key, state, now = call.key, call.state, call.now
        batch, deadline = state if state is not None else ([], None)
        emitted = []
        for v in call.values:
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

    def on_timer(self, call: KeyedCall) -> Outcome:
        key, state, now = call.key, call.state, call.now
        if state is None:
            return Outcome(None)
        batch, deadline = state
        if now >= deadline or now >= EOF_MS:
            return Outcome(None, [(key, batch)] if batch else [])
        return Outcome(state, wake=deadline)


# The methods of a StatefulBatchLogic a logic object may leave out (the defaults).
_OPTIONAL = frozenset({"on_notify", "on_eof"})


class StatefulBatchRun(KeyedLogic):
    """``stateful_batch``: a logic object per key, as bytewax 0.21's ``StatefulBatchLogic``.

    ``builder(resume_state)`` makes a key's logic (``None`` for a new key). The
    state kept between calls is ``(logic.snapshot(),)``: every call rebuilds the
    logic from it, as bytewax does when it resumes. In one call: a notification
    that came due before the new values fires first (``on_notify``), then
    ``on_batch(values)``, then a notification due at ``now``; once the input has
    ended, a notification due by then (by the wall clock: the end has no system
    time) and ``on_eof()``; one not yet due never fires. Each method returns
    ``(values, discard)``: the values leave as ``(key, value)`` and a true
    ``discard`` forgets the key. The key wakes at ``notify_at()``, or at the end
    of the input so that ``on_eof`` runs. A logic object may leave out
    ``on_notify``/``on_eof`` (nothing, keep) and ``notify_at`` (never).

    >>> class Count:
    ...     def __init__(self, n):
    ...         self.n = n or 0
    ...     def on_batch(self, values):
    ...         self.n += len(values)
    ...         return [], False
    ...     def on_eof(self):
    ...         return [self.n], True
    ...     def notify_at(self):
    ...         return None
    ...     def snapshot(self):
    ...         return self.n
    >>> run = StatefulBatchRun("count", Count)
    >>> placed = run.on_values(KeyedCall("k", None, 0, ["a", "b"]))
    >>> placed.state, placed.emitted, placed.wake == EOF_MS
    ((2,), [], True)
    >>> ended = run.on_timer(KeyedCall("k", placed.state, EOF_MS))
    >>> ended.state, ended.emitted
    (None, [('k', 2)])
    """

    uses_timers = True

    def __init__(self, step_id: str, builder: Callable[[Any], Any]) -> None:
        self.step_id, self.builder = step_id, builder

    def on_values(self, call: KeyedCall) -> Outcome:
        key, now = call.key, call.now
        emitted: list[Any] = []
        logic = self._resume(key, call.state)
        if logic is not None:
            logic = self._notify(key, logic, now, emitted)
        values = list(call.values)
        if values:
            if logic is None:
                logic = self._call(self.builder, (key, values[0]), None)
            logic = self._step(key, logic, "on_batch", emitted, values)
            if logic is not None:
                logic = self._notify(key, logic, now, emitted)
        return self._settle(key, logic, now, emitted)

    def on_timer(self, call: KeyedCall) -> Outcome:
        emitted: list[Any] = []
        logic = self._resume(call.key, call.state)
        if logic is not None:
            logic = self._notify(call.key, logic, call.now, emitted)
        return self._settle(call.key, logic, call.now, emitted)

    def _resume(self, key: str, state: Any) -> Any:
        if state is None:
            return None
        return self._call(self.builder, key, state[0])

    def _notify(self, key: str, logic: Any, now: int, emitted: list[Any]) -> Any:
        """``on_notify`` if the logic's notification is due at ``now``; at the end of the
        input (no system time in ``now``), if it is due by the clock on the wall."""
        at = self._notify_ms(key, logic)
        due_by = time.time_ns() // 1_000_000 if now >= EOF_MS else now
        if at is None or at > due_by:
            return logic
        return self._step(key, logic, "on_notify", emitted)

    def _settle(self, key: str, logic: Any, now: int, emitted: list[Any]) -> Outcome:
        """``on_eof`` at the end of the input; then the state and wake time to keep."""
        if logic is not None and now >= EOF_MS:
            logic = self._step(key, logic, "on_eof", emitted)
            if logic is not None:  # kept for a later run; nothing more wakes it in this one
                return Outcome((self._call(logic.snapshot, key),), emitted)
        if logic is None:
            return Outcome(None, emitted)
        at = self._notify_ms(key, logic)
        wake = EOF_MS if at is None else min(at, EOF_MS)
        return Outcome((self._call(logic.snapshot, key),), emitted, wake=wake)

    def _notify_ms(self, key: str, logic: Any) -> int | None:
        if not hasattr(logic, "notify_at"):  # as StatefulBatchLogic's default: never
            return None
        at = self._call(logic.notify_at, key)
        if at is None:
            return None
        try:
            return aware_to_ms(at)
        except Exception as exc:
            raise step_failure(self.step_id, logic.notify_at, key, exc) from None

    def _step(self, key: str, logic: Any, method: str, emitted: list[Any], *args: Any) -> Any:
        """Call ``logic.<method>(*args)``; add what it emits; the logic, or ``None`` when
        it asked to be discarded."""
        item = (key, args[0]) if args else key
        fn = getattr(logic, method, None)
        if fn is None:
            if method in _OPTIONAL:  # as StatefulBatchLogic's defaults: nothing, keep
                return logic
            exc = TypeError(
                f"{type(logic).__name__} has no `{method}` method: the builder of a "
                "stateful_batch step must return a StatefulBatchLogic (a StatefulLogic "
                "goes to `stateful`)"
            )
            raise step_failure(self.step_id, self.builder, item, exc)
        try:
            result = fn(*args)
        except Exception as exc:  # named by the user's function a wrapper logic keeps
            raise step_failure(self.step_id, getattr(logic, "__wrapped__", fn), item, exc) from None
        try:
            values, discard = result
            emitted.extend([(key, value) for value in values])
        except Exception as exc:
            if isinstance(exc, TypeError | ValueError) and not (
                isinstance(result, tuple) and len(result) == 2
            ):
                exc = TypeError(
                    f"`{method}` must return a 2-tuple `(emit_values, discard)`; "
                    f"got {result!r:.100}"
                )
            raise step_failure(self.step_id, fn, item, exc) from None
        return None if discard else logic


class _Aggregator:
    """How a window operator accumulates: ``how`` is its kind's ``aggregates`` in
    :data:`~flowspark.api.steps.OPERATORS` (``reduce``, ``fold`` or ``collect``)."""

    def __init__(self, kind: str, fns: dict[str, Callable], logic: KeyedLogic) -> None:
        how = operator(kind).aggregates
        if how not in ("reduce", "fold", "collect"):
            raise ValueError(f"{kind!r} is not a window operator of bytewax's")
        self.how, self.fns, self.logic = how, fns, logic
        if how == "fold":
            self.builder_takes_key = _takes_key(fns["builder"])

    def empty(self, key: str) -> Any:
        if self.how == "fold":
            builder = self.fns["builder"]
            args = (key,) if self.builder_takes_key else ()
            return [self.logic._call(builder, (key, None), *args)]
        return []

    def add(self, key: str, acc: list, t: int, seq: int, value: Any) -> None:
        if self.how == "collect":
            acc.append((t, seq, value))
        elif self.how == "fold":
            acc[0] = self.logic._call(self.fns["folder"], (key, value), acc[0], value)
        elif acc:
            acc[0] = self.logic._call(self.fns["reducer"], (key, value), acc[0], value)
        else:
            acc.append(value)

    def finish(self, key: str, acc: list) -> Any:
        if self.how == "collect":
            return [v for _, _, v in sorted(acc, key=lambda e: (e[0], e[1]))]
        return acc[0]


class WindowLogic(KeyedLogic):
    """``reduce_window`` / ``fold_window`` / ``collect_window`` with a clock and windows.

    State: ``(clock_state, windows, seq)`` where ``windows`` maps each open
    window to its accumulator. Windows that merge (sessions) keep their raw
    ``(time, seq, value)`` items until they close, so that merging stays exact.
    """

    uses_timers = True

    def __init__(
        self,
        step_id: str,
        kind: str,
        clock: ClockLogic,
        windower: Windower,
        fns: dict[str, Callable],
        with_window: bool = False,
    ) -> None:
        self.step_id, self.kind, self.clock, self.windower = step_id, kind, clock, windower
        self.agg = _Aggregator(kind, fns, self)
        self.with_window = with_window
        self.keeps_items = windower.merges
        # The event-clock reduce/fold path over grid windows, arithmetic inlined.
        self.fast = (
            windower.fast_grid is not None and not clock.system and self.agg.how != "collect"
        )

    def _emit(self, key: str, window: Window, value: Any) -> tuple[str, Any]:
        if self.with_window:
            return (key, (self._bounds(window), value))
        return (key, value)

    def _bounds(self, window: Window) -> tuple[datetime, datetime]:
        """A window's (start, end) as datetimes, shared by the keys that close it."""
        cache = self.__dict__.setdefault("_bounds_cache", {})
        bounds = cache.get(window)
        if bounds is None:
            if len(cache) >= 4096:
                cache.clear()
            bounds = cache[window] = (datetime_from_ms(window[0]), datetime_from_ms(window[1]))
        return bounds

    def on_values_at_end(self, call: KeyedCall) -> Outcome:
        # Place them at the system time (system clock), or as if no time had passed
        # since the key's last item (event clock), then close everything.
        key, state = call.key, call.state
        clock_state = state[0] if state is not None else None
        at = call.now if self.clock.system else _seen_at(clock_state, EOF_MS - 1)
        placed = self._on_values(key, state, call.values, at)
        closed = self._on_timer(key, placed.state, EOF_MS)
        return Outcome(closed.state, placed.emitted + closed.emitted, placed.late, closed.wake)

    def on_values(self, call: KeyedCall) -> Outcome:
        if call.now >= EOF_MS:  # the end of the input with no system time known
            return self.on_values_at_end(call._replace(now=EOF_MS - 1))
        return self._on_values(call.key, call.state, call.values, call.now)

    def _on_values(self, key: str, state: Any, values: Sequence[Any], now: int) -> Outcome:
        if self.fast:
            return self._on_values_fast(key, state, values, now)
        return self._on_values_general(key, state, values, now)

    def _on_values_fast(self, key: str, state: Any, values: Sequence[Any], now: int) -> Outcome:
        """The event-clock, grid-window, reduce/fold path (same result as
        :meth:`_on_values_general`, with the clock and window arithmetic inlined)."""
        clock_state, windows, seq = state if state is not None else (None, {}, 0)
        late: list[Any] = []
        emitted: list[Any] = []
        max_event, seen_at = clock_state if clock_state is not None else (None, now)
        wait = self.clock.wait
        getter, grid = self.clock.getter, self.windower.fast_grid
        assert getter is not None and grid is not None  # self.fast: an event clock, a grid
        length, offset, align = grid
        tumbling, assign = offset == length, self.windower.assign
        agg = self.agg
        is_fold = agg.how == "fold"
        fold = agg.fns["folder"] if is_fold else agg.fns["reducer"]
        next_close = min((end for _, end in windows), default=MAX_MS)
        fn: Any = getter
        v: Any = None
        try:
            for v in values:
                fn = getter
                dt = getter(v)
                try:
                    t = (dt - EPOCH) // ONE_MS
                except TypeError:
                    t = aware_to_ms(dt)  # raises the clear error for naive or non-datetimes
                if max_event is None or t > max_event + (now - seen_at):
                    max_event, seen_at = t, now
                wm = max_event - wait + (now - seen_at)
                if tumbling:
                    start = t - (t - align) % length
                    spans: Sequence[Window] = ((start, start + length),)
                else:
                    spans = assign(t)
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

    def _on_values_general(self, key: str, state: Any, values: Sequence[Any], now: int) -> Outcome:
        """Any clock, any windower: through the :class:`Windower` protocol."""
        clock_state, windows, seq = state if state is not None else (None, {}, 0)
        late: list[Any] = []
        emitted: list[Any] = []
        windower, keeps_items = self.windower, self.keeps_items
        assign, too_late, close_at = windower.assign, windower.late, windower.close_at
        # No window closes while the watermark is not past this (a lower bound of
        # the open windows' close times).
        next_close = min(map(close_at, windows), default=MAX_MS)
        for v in values:
            try:
                t, clock_state = self.clock.time_for(clock_state, v, now)
            except Exception as exc:
                raise step_failure(self.step_id, self.clock.getter, (key, v), exc) from None
            wm = self.clock.watermark(clock_state, now)
            seq += 1
            placed = False
            for window in assign(t):
                if too_late(window, wm):
                    continue
                if keeps_items:
                    window = self._keep(windows, window, (t, seq, v))
                else:
                    acc = windows.get(window)
                    if acc is None:
                        acc = windows[window] = self.agg.empty(key)
                    self.agg.add(key, acc, t, seq, v)
                close = close_at(window)
                if close < next_close:
                    next_close = close
                placed = True
            if not placed:
                late.append((key, v))
            if next_close < wm:
                emitted.extend(self._close(key, windows, wm))
                next_close = min(map(close_at, windows), default=MAX_MS)
        return self._outcome(key, clock_state, windows, seq, emitted, late, now)

    def _keep(self, windows: dict, window: Window, item: tuple[int, int, Any]) -> Window:
        """Add a raw item to ``window`` merged with the open windows it joins; the
        window it landed in."""
        window, absorbed = self.windower.merge(window, windows)
        items = [item]
        for other in absorbed:
            items.extend(windows.pop(other))
        items.extend(windows.pop(window, ()))
        windows[window] = items
        return window

    def on_timer(self, call: KeyedCall) -> Outcome:
        return self._on_timer(call.key, call.state, call.now)

    def _on_timer(self, key: str, state: Any, now: int) -> Outcome:
        if state is None:
            return Outcome(None)
        clock_state, windows, seq = state
        emitted = self._close(key, windows, self.clock.watermark(clock_state, now))
        return self._outcome(key, clock_state, windows, seq, emitted, [], now)

    def _outcome(
        self,
        key: str,
        clock_state: Any,
        windows: dict[Window, list[Any]],
        seq: int,
        emitted: list[Any],
        late: list[Any],
        now: int,
    ) -> Outcome:
        if not windows:
            # Keep the clock (it never goes back) but no timer is needed.
            return Outcome((clock_state, windows, seq), emitted, late)
        close = min(map(self.windower.close_at, windows))
        return Outcome(
            (clock_state, windows, seq), emitted, late, self.clock.wake_for(clock_state, close)
        )

    def _close(self, key: str, windows: dict, wm: int) -> list[Any]:
        """Close the windows whose close time the watermark passed, in window order;
        each is emitted with the bounds ``(start, close time)``."""
        out = []
        close_at = self.windower.close_at
        for window in sorted(windows):
            close = close_at(window)
            if close < wm:
                acc = windows.pop(window)
                if self.keeps_items:
                    value = self._fold_items(key, acc)
                else:
                    value = self.agg.finish(key, acc)
                out.append(self._emit(key, (window[0], close), value))
        return out

    def _fold_items(self, key: str, items: list) -> Any:
        acc = self.agg.empty(key)
        for t, seq, v in sorted(items, key=lambda e: (e[0], e[1])):
            self.agg.add(key, acc, t, seq, v)
        return self.agg.finish(key, acc)


def _seen_at(clock_state: Any, default: int) -> int:
    """The system time an event clock last moved at (``default`` without one)."""
    return clock_state[1] if clock_state is not None else default


# -- bytewax 0.21's windows -----------------------------------------------------------


class _SlidingIds:
    """bytewax 0.21's sliding (and tumbling) windows by id: window ``n`` is ``[align +
    n * offset, + length)``; the grid is :class:`~flowspark.runtime.windowing.SlidingWindower`'s.
    State: the open windows, ``{id: (open ms, close ms)}`` in the order they opened."""

    def __init__(self, length: int, offset: int, align: int) -> None:
        self.grid = SlidingWindower(length, offset, align)

    def fresh(self) -> Any:
        return {}

    def ids(self, t: int) -> list[int]:
        grid = self.grid
        return [(start - grid.align) // grid.offset for start, _ in grid.assign(t)]

    def open_for(self, opened: dict[int, tuple[int, int]], t: int) -> list[int]:
        ids = self.ids(t)
        grid = self.grid
        for wid in ids:
            if wid not in opened:
                start = grid.align + wid * grid.offset
                opened[wid] = (start, start + grid.length)
        return ids

    def late_for(self, t: int) -> list[int]:
        return self.ids(t)

    def merged(self, opened: Any) -> list[tuple[int, int]]:
        return []

    def close_for(self, opened: dict[int, tuple[int, int]], wm: int) -> list[tuple[int, Any]]:
        closed = [(wid, span) for wid, span in opened.items() if span[1] <= wm]
        for wid, _ in closed:
            del opened[wid]
        return [(wid, (start, close, set())) for wid, (start, close) in closed]

    def closes_at(self, opened: dict[int, tuple[int, int]]) -> int | None:
        """The least watermark that closes a window (``None``: none open)."""
        return min((close for _, close in opened.values()), default=None)

    def is_empty(self, opened: Any) -> bool:
        return not opened


class _SessionIds:
    """bytewax 0.21's session windows by id (0, 1, … per key, in the order they
    open): an item within ``gap`` (inclusive) of a session's open or close time joins
    it; sessions within ``gap`` of each other merge into the one that opens first.
    State: ``[last id, {id: [open ms, close ms, merged ids]}, pending merges]``."""

    def __init__(self, gap: int) -> None:
        self.gap = gap

    def fresh(self) -> Any:
        return [w021.LATE_SESSION_ID, {}, []]

    def open_for(self, state: list[Any], t: int) -> list[int]:
        gap, sessions = self.gap, state[1]
        for wid, meta in sessions.items():
            until_open, since_close = meta[0] - t, t - meta[1]
            if until_open <= 0 and since_close <= 0:
                return [wid]
            if 0 < until_open <= gap:
                meta[0] = t
                self._find_merges(state)
                return [wid]
            if 0 < since_close <= gap:
                meta[1] = t
                self._find_merges(state)
                return [wid]
        state[0] += 1
        sessions[state[0]] = [t, t, set()]
        return [state[0]]

    def _find_merges(self, state: list[Any]) -> None:
        sessions = state[1]
        if len(sessions) < 2:
            return
        ordered = sorted(sessions.items(), key=lambda id_meta: id_meta[1][0])
        last_id, last = ordered[0]
        for this_id, this in ordered[1:]:
            if this[0] - last[1] <= self.gap:
                last[1] = max(last[1], this[1])
                last[2].add(this_id)
                state[2].append((this_id, last_id))
                del sessions[this_id]
            else:
                last_id, last = this_id, this

    def late_for(self, t: int) -> list[int]:
        return [w021.LATE_SESSION_ID]

    def merged(self, state: list[Any]) -> list[tuple[int, int]]:
        merges, state[2] = state[2], []
        return merges

    def close_for(self, state: list[Any], wm: int) -> list[tuple[int, Any]]:
        sessions = state[1]
        closed = [(wid, meta) for wid, meta in sessions.items() if meta[1] < wm - self.gap]
        for wid, _ in closed:
            del sessions[wid]
        return [(wid, tuple(meta)) for wid, meta in closed]

    def closes_at(self, state: list[Any]) -> int | None:
        least = min((meta[1] for meta in state[1].values()), default=None)
        return None if least is None else least + self.gap + 1

    def is_empty(self, state: Any) -> bool:
        return False  # ids keep counting: a reused id would confuse a downstream join


def _window_ids(windower: Any) -> _SlidingIds | _SessionIds:
    """The id-keeping logic of a bytewax 0.21 windower config."""
    if isinstance(windower, w021.TumblingWindower):
        length = duration_ms(windower.length)
        return _SlidingIds(length, length, aware_to_ms(windower.align_to))
    if isinstance(windower, w021.SlidingWindower):
        return _SlidingIds(
            duration_ms(windower.length),
            duration_ms(windower.offset),
            aware_to_ms(windower.align_to),
        )
    if isinstance(windower, w021.SessionWindower):
        return _SessionIds(duration_ms(windower.gap))
    raise TypeError(
        "windower must be TumblingWindower, SlidingWindower or SessionWindower; "
        f"got {type(windower).__name__}"
    )


class WindowRun(KeyedLogic):
    """``window``: bytewax 0.21's windows, per key.

    The clock gives each value a time and a watermark (:class:`ClockLogic`, the
    0.17 windows' clock: the watermark formula is the same); a value whose time
    is before the watermark is late (``.late``: ``(key, (window_id, value))``,
    ``LATE_SESSION_ID`` for a session). The others are queued; with ``ordered``
    the values the watermark has reached are taken in time order, otherwise all
    at once in arrival order; each goes to its windows' logics (``builder(None)``
    for a window that opens). Then sessions merge (``on_merge``) and the windows
    the watermark has passed close (``on_close``, then their metadata). A call
    sees the key's values of one read time, as one bytewax batch.

    Emits ``(key, (window_id, "E", value))`` for what a logic returns and ``(key,
    (window_id, "M", WindowMetadata))`` for a closed window. State: ``(clock
    state, windower state, {window id: logic snapshot}, queue)``; a logic is
    rebuilt with ``builder(snapshot)`` when its window has work.
    """

    uses_timers = True

    def __init__(
        self, step_id: str, clock: Any, windower: Any, builder: Callable, ordered: bool
    ) -> None:
        self.step_id, self.builder, self.ordered = step_id, builder, ordered
        self.ids = _window_ids(windower)
        if isinstance(clock, w021.EventClock):
            self.clock = ClockLogic(EventClockConfig(clock.ts_getter))
            self.clock.wait = duration_ms(clock.wait_for_system_duration)  # bytewax: any sign
            self.now_getter = None if clock.now_getter is w021.system_utc else clock.now_getter
            self.to_system = None if clock.to_system_utc is w021.same_time else clock.to_system_utc
        elif isinstance(clock, w021.SystemClock):
            self.clock = ClockLogic(SystemClockConfig())
            self.now_getter = self.to_system = None
        else:
            raise TypeError(f"clock must be SystemClock or EventClock; got {type(clock).__name__}")

    def _now(self, now: int) -> int:
        """The system time: the values' read time, or the clock's ``now_getter``."""
        if self.now_getter is None:
            return now
        try:
            return aware_to_ms(self.now_getter())
        except Exception as exc:
            raise step_failure(self.step_id, self.now_getter, None, exc) from None

    def on_values(self, call: KeyedCall) -> Outcome:
        if call.now >= EOF_MS:  # flushed at the end of the input: no system time known
            return self.on_values_at_end(call._replace(now=time.time_ns() // 1_000_000))
        return self._run(call.key, call.state, call.values, self._now(call.now), False)

    def on_values_at_end(self, call: KeyedCall) -> Outcome:
        # As if no system time had passed since the key's last value (event clock),
        # or at the wall clock (system clock); then the end of the input.
        state = call.state
        now = call.now
        if not self.clock.system and state is not None and state[0] is not None:
            now = state[0][1]
        return self._run(call.key, state, call.values, self._now(now), True)

    def on_timer(self, call: KeyedCall) -> Outcome:
        if call.state is None:
            return Outcome(None)
        at_end = call.now >= EOF_MS
        now = call.now if at_end else self._now(call.now)
        return self._run(call.key, call.state, (), now, at_end)

    def _run(self, key: str, state: Any, values: Sequence[Any], now: int, at_end: bool) -> Outcome:
        clock, ids = self.clock, self.ids
        if state is None:
            clock_state, win_state, snapshots, queue = None, ids.fresh(), {}, []
        else:
            clock_state, win_state, snapshots, queue = state
        late: list[Any] = []
        wm = clock.watermark(clock_state, now) if not at_end or values else MAX_MS
        for v in values:
            try:
                t, clock_state = clock.time_for(clock_state, v, now)
            except Exception as exc:
                raise step_failure(self.step_id, clock.getter, (key, v), exc) from None
            wm = clock.watermark(clock_state, now)
            if t < wm:
                late.extend((key, (wid, v)) for wid in ids.late_for(t))
            else:
                queue.append((v, t))
        if at_end:
            wm = MAX_MS
        emitted: list[Any] = []
        logics: dict[int, Any] = {}
        queue = self._flush(key, wm, win_state, snapshots, logics, queue, emitted)
        for wid, logic in logics.items():
            snapshots[wid] = self._method(key, logic, "snapshot")
        if not snapshots and not queue and ids.is_empty(win_state):
            return Outcome(None, emitted, late)
        state = (clock_state, win_state, snapshots, queue)
        wake = None if at_end else self._wake(clock_state, win_state, queue)
        return Outcome(state, emitted, late, wake)

    def _flush(
        self,
        key: str,
        wm: int,
        win_state: Any,
        snapshots: dict[int, Any],
        logics: dict[int, Any],
        queue: list[tuple[Any, int]],
        emitted: list[Any],
    ) -> list[tuple[Any, int]]:
        """Apply the due values, merge, close: bytewax 0.21's flush of a key's queue.
        ``logics`` gets every logic this touched (and still open); the queue left."""
        ids = self.ids
        if self.ordered:
            due = sorted((e for e in queue if e[1] <= wm), key=lambda e: e[1])
            queue = [e for e in queue if e[1] > wm]
        else:
            due, queue = queue, []

        def logic_of(wid: int) -> Any:
            logic = logics.get(wid)
            if logic is None:
                resume = snapshots.pop(wid, None)
                logic = logics[wid] = self._call(self.builder, (key, resume), resume)
            return logic

        for v, t in due:
            for wid in ids.open_for(win_state, t):
                out = self._method(key, logic_of(wid), "on_value", v)
                emitted.extend((key, (wid, "E", w)) for w in out)
        for orig, target in ids.merged(win_state):
            if orig != target:
                original = logic_of(orig)
                del logics[orig]
                out = self._method(key, logic_of(target), "on_merge", original)
                emitted.extend((key, (target, "E", w)) for w in out)
        for wid, (start, close, merged) in ids.close_for(win_state, wm):
            out = self._method(key, logic_of(wid), "on_close")
            del logics[wid]
            emitted.extend((key, (wid, "E", w)) for w in out)
            opened, closed = datetime_from_ms(start), datetime_from_ms(close)
            emitted.append((key, (wid, "M", w021.WindowMetadata(opened, closed, set(merged)))))
        return queue

    def _method(self, key: str, logic: Any, method: str, *args: Any) -> Any:
        """``logic.<method>(*args)``, its values as a list (``snapshot``: as it is); a
        failure names the user's function a wrapper logic keeps."""
        fn = getattr(logic, method)
        try:
            result = fn(*args)
            return result if method == "snapshot" else list(result)
        except Exception as exc:
            item = (key, args[0]) if args else key
            raise step_failure(self.step_id, getattr(logic, "__wrapped__", fn), item, exc) from None

    def _wake(self, clock_state: Any, win_state: Any, queue: list[tuple[Any, int]]) -> int:
        """When to be called next: once the watermark closes a window or makes a
        queued value due, as a system time; at the latest the end of the input."""
        needed = self.ids.closes_at(win_state)
        if self.ordered and queue:
            first = min(t for _, t in queue)
            needed = first if needed is None else min(needed, first)
        if needed is None:
            return EOF_MS
        if self.to_system is not None or self.now_getter is not None:
            # The user's sense of system time: bytewax's rule, to_system_utc(close).
            convert = self.to_system or w021.same_time
            try:
                at = convert(datetime_from_ms(needed))
                wake = EOF_MS if at is None else aware_to_ms(at)
            except Exception as exc:
                raise step_failure(self.step_id, convert, None, exc) from None
        elif self.clock.system:
            wake = needed
        elif clock_state is None:
            return EOF_MS
        else:
            max_event, seen_at = clock_state
            wake = seen_at + max(0, needed - (max_event - self.clock.wait))
        return min(wake, EOF_MS)
