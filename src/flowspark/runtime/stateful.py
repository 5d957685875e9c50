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
from typing import Any

from flowspark.api.steps import operator
from flowspark.runtime.errors import step_failure
from flowspark.runtime.keyed import KeyedCall, KeyedLogic, Outcome
from flowspark.runtime.windowing import (
    EOF_MS,
    MAX_MS,
    ClockLogic,
    Window,
    WindowBounds,
    Windower,
)
from flowspark.shared.times import aware_to_ms

__all__ = [
    "ReduceLogic",
    "StatefulMapLogic",
    "BatchLogic",
    "StatefulBatchRun",
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
        self._bounds = WindowBounds()  # the (start, end) datetimes of closed windows
        self.keeps_items = windower.merges
        # The event-clock reduce/fold path over grid windows, arithmetic inlined.
        self.fast = (
            windower.fast_grid is not None and not clock.system and self.agg.how != "collect"
        )

    def _emit(self, key: str, window: Window, value: Any) -> tuple[str, Any]:
        if self.with_window:
            return (key, (self._bounds(window), value))
        return (key, value)

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
        grid = self.windower.fast_grid
        assert grid is not None  # self.fast: an event clock, a grid
        length, offset, align = grid
        tumbling, assign = offset == length, self.windower.assign
        agg = self.agg
        is_fold = agg.how == "fold"
        fold = agg.fns["folder"] if is_fold else agg.fns["reducer"]
        next_close = min((end for _, end in windows), default=MAX_MS)
        times = self.clock.event_times(self.step_id, key, values)
        v: Any = None
        try:
            for v, t in zip(values, times, strict=True):
                if max_event is None or t > max_event + (now - seen_at):
                    max_event, seen_at = t, now
                wm = max_event - wait + (now - seen_at)
                if tumbling:
                    start = t - (t - align) % length
                    spans: Sequence[Window] = ((start, start + length),)
                else:
                    spans = assign(t)
                placed = False
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
            raise step_failure(self.step_id, fold, (key, v), exc) from None
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
