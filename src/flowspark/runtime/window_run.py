"""bytewax 0.21's ``window`` kind, per key: a clock, windows by id, a logic per window.

:class:`WindowRun` is the :class:`~flowspark.runtime.keyed.KeyedLogic` of
``flowspark.operators.windowing.window`` (every 0.21 window operator ends in it).
The window ids are :class:`_SlidingIds` (tumbling and sliding windows),
:class:`_SessionIds`, or a user's own windower's logic
(:class:`~flowspark.runtime.window_user.UserWindowerIds`); the clock is the 0.17
windows' :class:`ClockLogic` (:class:`_BuiltinClockCall`), or a user's own clock's
logic (:class:`~flowspark.runtime.window_user.UserClockCall`), asked once per call.

>>> from datetime import datetime, timedelta, timezone
>>> from flowspark.api.windowing import EventClock, TumblingWindower
>>> from flowspark.runtime.keyed import KeyedCall
>>> class Count:
...     fold_fns = (int, lambda n, _v: n + 1)
...     def __call__(self, resume):  # the general path's logic: not used here
...         raise AssertionError
>>> at = datetime(2024, 1, 1, tzinfo=timezone.utc)
>>> clock = EventClock(lambda v: v, wait_for_system_duration=timedelta(0))
>>> run = WindowRun("count", clock, TumblingWindower(timedelta(seconds=10), at), Count(), False)
>>> out = run.on_values(KeyedCall("k", None, 0, [at, at + timedelta(seconds=11)]))
>>> out.emitted
[('k', (0, 1))]
>>> [(key, (wid, meta.close_time.second)) for key, (wid, meta) in out.meta]
[('k', (0, 10))]
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from flowspark.api import windowing as w021
from flowspark.api.window import EventClockConfig, SystemClockConfig
from flowspark.runtime.errors import step_failure
from flowspark.runtime.keyed import KeyedCall, KeyedLogic, Outcome
from flowspark.runtime.window_user import UserClockCall, UserWindowerIds, is_user_defined
from flowspark.runtime.windowing import (
    EOF_MS,
    MAX_MS,
    MIN_MS,
    ClockLogic,
    SlidingWindower,
    WindowBounds,
)
from flowspark.shared.times import aware_to_ms, datetime_from_ms, duration_ms

__all__ = ["WindowRun"]


class _SlidingIds:
    """bytewax 0.21's sliding (and tumbling) windows by id: window ``n`` is ``[align +
    n * offset, + length)``; the grid is :class:`~flowspark.runtime.windowing.SlidingWindower`'s.
    State: the open windows, ``{id: (open ms, close ms)}`` in the order they opened."""

    def __init__(self, length: int, offset: int, align: int) -> None:
        self.grid = SlidingWindower(length, offset, align)

    def load(self, state: Any, key: str) -> Any:
        return {} if state is None else state

    def save(self, opened: Any) -> Any:
        return opened

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

    def late_for(self, opened: Any, t: int) -> list[int]:
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

    def load(self, state: Any, key: str) -> Any:
        return [w021.LATE_SESSION_ID, {}, []] if state is None else state

    def save(self, state: Any) -> Any:
        return state

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

    def late_for(self, state: Any, t: int) -> list[int]:
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


def _window_ids(step_id: str, windower: Any) -> _SlidingIds | _SessionIds | UserWindowerIds:
    """The id-keeping logic of a bytewax 0.21 windower (a built-in config or the user's
    own :class:`~flowspark.api.windowing.Windower`)."""
    if is_user_defined(windower, w021.Windower, w021.BUILTIN_WINDOWERS):
        return UserWindowerIds(step_id, windower)
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
        "windower must be TumblingWindower, SlidingWindower, SessionWindower or a "
        f"Windower subclass; got {type(windower).__name__}"
    )


def _metadata(closed: Any) -> w021.WindowMetadata:
    """A closed window's metadata: a user's windower gives its own, the built-in ids
    ``(open ms, close ms, merged ids)``."""
    if isinstance(closed, w021.WindowMetadata):
        return closed
    start, close, merged = closed
    return w021.WindowMetadata(datetime_from_ms(start), datetime_from_ms(close), set(merged))


class _BuiltinClockCall:
    """A built-in clock (:class:`ClockLogic`, ms) for one call of one key at system
    time ``now``: the interface :class:`UserClockCall` gives a user's clock."""

    __slots__ = ("run", "clock_state", "now", "key")

    def __init__(self, run: WindowRun, clock_state: Any, now: int, key: str) -> None:
        self.run, self.clock_state, self.now, self.key = run, clock_state, now, key

    def on_item(self, value: Any) -> tuple[int, int]:
        clock = self.run.clock
        assert clock is not None  # a built-in clock's call
        try:
            t, self.clock_state = clock.time_for(self.clock_state, value, self.now)
        except Exception as exc:
            raise step_failure(self.run.step_id, clock.getter, (self.key, value), exc) from None
        return t, clock.watermark(self.clock_state, self.now)

    def on_notify(self) -> int:
        assert self.run.clock is not None
        return self.run.clock.watermark(self.clock_state, self.now)

    def on_eof(self) -> int:
        return MAX_MS

    def state(self) -> Any:
        return self.clock_state

    def wake(self, needed: int) -> int:
        """The system time at which the watermark passes ``needed``."""
        run, clock = self.run, self.run.clock
        assert clock is not None
        if run.to_system is not None or run.now_getter is not None:
            # The user's sense of system time: bytewax's rule, to_system_utc(close).
            convert = run.to_system or w021.same_time
            try:
                at = convert(datetime_from_ms(needed))
                wake = EOF_MS if at is None else aware_to_ms(at)
            except Exception as exc:
                raise step_failure(run.step_id, convert, None, exc) from None
        elif clock.system:
            wake = needed
        elif self.clock_state is None:
            return EOF_MS
        else:
            max_event, seen_at = self.clock_state
            wake = seen_at + max(0, needed - (max_event - clock.wait))
        return min(wake, EOF_MS)


class WindowRun(KeyedLogic):
    """``window``: bytewax 0.21's windows, per key.

    The clock gives each value a time and a watermark (:class:`ClockLogic`, the
    0.17 windows' clock: the watermark formula is the same; or a user's own
    ``Clock``, built from its snapshot in the key's state); a value whose time
    is before the watermark is late (``.late``: ``(key, (window_id, value))``,
    ``LATE_SESSION_ID`` for a session). The others are queued; with ``ordered``
    the values the watermark has reached are taken in time order, otherwise all
    at once in arrival order; each goes to its windows' logics (``builder(None)``
    for a window that opens). Then sessions merge (``on_merge``) and the windows
    the watermark has passed close (``on_close``, then their metadata). A call
    sees the key's values of one read time, as one bytewax batch.

    Emits ``(key, (window_id, value))`` for what a logic returns (slot 0) and ``(key,
    (window_id, WindowMetadata))`` for a closed window (slot 2, ``meta``: only when
    that slot leads to an output, see :meth:`use_slots`). State: ``(clock
    state, windower state, {window id: logic snapshot}, queue)``; a logic is
    rebuilt with ``builder(snapshot)`` when its window has work.
    """

    uses_timers = True

    def __init__(
        self, step_id: str, clock: Any, windower: Any, builder: Callable, ordered: bool
    ) -> None:
        self.step_id, self.builder, self.ordered = step_id, builder, ordered
        self.ids = _window_ids(step_id, windower)
        # A clock of the user's own (built per call from its snapshot), else the built-in's logic.
        self.user_clock: w021.Clock | None = None
        self.clock: ClockLogic | None = None
        self.now_getter: Callable[[], Any] | None = None
        self.to_system: Callable[[Any], Any] | None = None
        if is_user_defined(clock, w021.Clock, w021.BUILTIN_CLOCKS):
            self.user_clock = clock
        elif isinstance(clock, w021.EventClock):
            self.clock = ClockLogic(EventClockConfig(clock.ts_getter))
            self.clock.wait = duration_ms(clock.wait_for_system_duration)  # bytewax: any sign
            self.now_getter = None if clock.now_getter is w021.system_utc else clock.now_getter
            self.to_system = None if clock.to_system_utc is w021.same_time else clock.to_system_utc
        elif isinstance(clock, w021.SystemClock):
            self.clock = ClockLogic(SystemClockConfig())
        else:
            raise TypeError(
                "clock must be SystemClock, EventClock or a Clock subclass; "
                f"got {type(clock).__name__}"
            )
        # A plain fold (``builder.fold_fns``: its logic's snapshot is the accumulator)
        # taking values as they come, over grid windows on an event clock: one pass
        # with the accumulators as the snapshots (:meth:`_run_fold`).
        fold_fns = getattr(builder, "fold_fns", None)
        grid = (
            isinstance(self.ids, _SlidingIds)
            and self.clock is not None
            and self.clock.getter is not None
        )
        self.fold_fns: tuple[Callable, Callable] | None = (
            fold_fns if fold_fns is not None and grid and not ordered else None
        )
        self._bounds = WindowBounds()
        self.with_meta = True  # whether closed windows' metadata is wanted (slot 2)

    def use_slots(self, slots: frozenset[int]) -> None:
        self.with_meta = 2 in slots

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
        event_clock = self.clock is not None and not self.clock.system
        if event_clock and state is not None and state[0] is not None:
            now = state[0][1]
        return self._run(call.key, state, call.values, self._now(now), True)

    def on_timer(self, call: KeyedCall) -> Outcome:
        if call.state is None:
            return Outcome(None)
        at_end = call.now >= EOF_MS
        now = call.now if at_end else self._now(call.now)
        return self._run(call.key, call.state, (), now, at_end)

    def _run(self, key: str, state: Any, values: Sequence[Any], now: int, at_end: bool) -> Outcome:
        if self.fold_fns is not None:
            return self._run_fold(key, state, values, now, at_end)
        ids = self.ids
        if state is None:
            clock_state, win_state, snapshots, queue = None, None, {}, []
        else:
            clock_state, win_state, snapshots, queue = state
        clock: _BuiltinClockCall | UserClockCall
        if self.user_clock is not None:
            clock = UserClockCall(self.step_id, self.user_clock, clock_state, key, bool(values))
        else:
            clock = _BuiltinClockCall(self, clock_state, now, key)
        win = ids.load(win_state, key)
        late: list[Any] = []
        wm = MIN_MS
        for v in values:
            t, wm = clock.on_item(v)
            if t < wm:
                late.extend((key, (wid, v)) for wid in ids.late_for(win, t))
            else:
                queue.append((v, t))
        if at_end:
            wm = clock.on_eof()
        elif not values:
            wm = clock.on_notify()
        emitted: list[Any] = []
        meta: list[Any] = []
        logics: dict[int, Any] = {}
        queue = self._flush(key, wm, win, snapshots, logics, queue, emitted, meta)
        for wid, logic in logics.items():
            snapshots[wid] = self._method(key, logic, "snapshot")
        if not snapshots and not queue and ids.is_empty(win):
            return Outcome(None, emitted, late, meta=meta)
        state = (clock.state(), ids.save(win), snapshots, queue)
        wake = None if at_end else self._wake(clock, win, queue)
        return Outcome(state, emitted, late, wake, meta)

    def _run_fold(
        self, key: str, state: Any, values: Sequence[Any], now: int, at_end: bool
    ) -> Outcome:
        """:meth:`_run` for a plain fold without ``ordered`` over grid windows on an
        event clock, in one pass: the same outputs and the same state (the snapshots
        are the accumulators, the queue stays empty), without a logic per window."""
        assert self.fold_fns is not None and isinstance(self.ids, _SlidingIds)
        make, folder = self.fold_fns
        if state is None:
            clock_state, opened, accs, queue = None, {}, {}, []
        else:
            clock_state, opened, accs, queue = state
        clock, grid = self.clock, self.ids.grid
        assert clock is not None  # a built-in event clock (self.fold_fns)
        wait = clock.wait
        length, offset, align = grid.length, grid.offset, grid.align
        tumbling = offset == length
        max_event, seen_at = clock_state if clock_state is not None else (None, now)
        # System time since the latest event time was seen (0 once a value moves it).
        since = now - seen_at
        late: list[Any] = []
        times = clock.event_times(self.step_id, key, values)  # an event clock (self.fold_fns)
        fn: Any = make
        v: Any = None
        try:
            for v, t in zip(values, times, strict=True):
                if max_event is None or t > max_event + since:
                    max_event, seen_at, since = t, now, 0
                wids = [(t - align) // length] if tumbling else self.ids.ids(t)
                if t < max_event - wait + (since if since > 0 else 0):
                    late.extend((key, (wid, v)) for wid in wids)
                    continue
                for wid in wids:
                    acc = accs.get(wid)
                    if acc is None:
                        if wid not in opened:
                            start = align + wid * offset
                            opened[wid] = (start, start + length)
                        fn = make
                        acc = make()
                    fn = folder
                    accs[wid] = folder(acc, v)
        except Exception as exc:
            item = (key, None) if fn is make else (key, v)
            raise step_failure(self.step_id, fn, item, exc) from None
        if max_event is not None:
            clock_state = (max_event, seen_at)
        wm = MAX_MS if at_end else clock.watermark(clock_state, now)
        emitted: list[Any] = []
        meta: list[Any] = []
        for wid, span in [(wid, span) for wid, span in opened.items() if span[1] <= wm]:
            del opened[wid]
            emitted.append((key, (wid, accs.pop(wid, None))))
            if self.with_meta:
                meta.append((key, (wid, w021.WindowMetadata(*self._bounds(span), set()))))
        if not accs and not queue and not opened:
            return Outcome(None, emitted, late, meta=meta)
        state = (clock_state, opened, accs, queue)
        clock_call = _BuiltinClockCall(self, clock_state, now, key)
        wake = None if at_end else self._wake(clock_call, opened, queue)
        return Outcome(state, emitted, late, wake, meta)

    def _flush(
        self,
        key: str,
        wm: int,
        win_state: Any,
        snapshots: dict[int, Any],
        logics: dict[int, Any],
        queue: list[tuple[Any, int]],
        emitted: list[Any],
        meta: list[Any],
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
                emitted.extend((key, (wid, w)) for w in out)
        for orig, target in ids.merged(win_state):
            if orig != target:
                original = logic_of(orig)
                del logics[orig]
                out = self._method(key, logic_of(target), "on_merge", original)
                emitted.extend((key, (target, w)) for w in out)
        for wid, closed in ids.close_for(win_state, wm):
            out = self._method(key, logic_of(wid), "on_close")
            del logics[wid]
            emitted.extend((key, (wid, w)) for w in out)
            if self.with_meta:
                meta.append((key, (wid, _metadata(closed))))
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

    def _wake(
        self, clock: _BuiltinClockCall | UserClockCall, win: Any, queue: list[tuple[Any, int]]
    ) -> int:
        """When to be called next: once the watermark closes a window or makes a
        queued value due, as a system time; at the latest the end of the input."""
        needed = self.ids.closes_at(win)
        if self.ordered and queue:
            first = min(t for _, t in queue)
            needed = first if needed is None else min(needed, first)
        return EOF_MS if needed is None else clock.wake(needed)
