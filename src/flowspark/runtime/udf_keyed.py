"""Numaflow's keyed UDF kinds as keyed logic: ``accumulate`` and ``reduce_stream``.

A stream handler is a coroutine that lives across micro-batches (see
:class:`~flowspark.runtime.udf_run.HandlerRun`); it cannot be pickled into
Spark state. So Spark state keeps, per key, the clock, and per live handler a
*handle* ``(gen, fed)`` — which incarnation, how many datums it has seen — and
a write-ahead log (WAL) of every datum fed to handlers that are still open.
The running handler itself stays in this Python process's registry. When the
handler found there does not match the handle (a restart, a retried batch, a
task that landed on another Python worker), it is rebuilt: a fresh handler is
fed the WAL batch by batch, and what it puts during the replay is dropped,
since those outputs were emitted before. A handler of the same incarnation that
is only behind (the key's last batches ran in the other pooled Python worker) is
fed just the datums it missed. The result is the same as if the handler had
never stopped — for handlers that are deterministic in their datums, which is
what Numaflow's own WAL replay assumes too.

Time: one clock per key (:class:`KeyClock`): the watermark is the key's latest
event time minus ``watermark_delay``; a key without datums for a while (the
accumulator's timeout, a reduce window's length) is *idle* and its open streams
end, as Numaflow's idle-source rule would move the watermark; the end of a
bounded input ends everything.

>>> from datetime import datetime, timedelta, timezone
>>> from flowspark.api.udf.types import Datum
>>> async def collect(datums, output):
...     seen = [d.value async for d in datums]
...     await output.put(Message(b"".join(seen)))
>>> from flowspark.accumulator import Message
>>> logic = AccumulateLogic("acc", lambda: collect, timedelta(seconds=5), timedelta(0))
>>> t0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
>>> d = lambda v, s: Datum(["k"], v, t0 + timedelta(seconds=s), t0)
>>> wal = MemoryWal()
>>> r = logic.on_values(KeyedCall("k", None, 0, [d(b"a", 0), d(b"b", 1)], wal))
>>> r.emitted, len(wal.read())
([], 1)
>>> [x.value for x in logic.on_timer(KeyedCall("k", r.state, 2**62, wal=wal)).emitted]
[b'ab']
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

from flowspark.api.udf.times import to_ms, utc_from_ms
from flowspark.api.udf.types import AccumulatorMessage, Datum, IntervalWindow, Metadata
from flowspark.runtime.codec import decode_items, encode_items
from flowspark.runtime.errors import RemoteStepFailure, short_repr, step_failure
from flowspark.runtime.keyed import HandlerFactory, KeyedCall, KeyedLogic, Outcome, Wal
from flowspark.runtime.messages import message_parts
from flowspark.runtime.udf_run import HandlerRun
from flowspark.runtime.windowing import (
    EOF_MS,
    MAX_MS,
    MIN_MS,
    GlobalWindower,
    NumaflowWindower,
    Window,
)

__all__ = [
    "AccumulateLogic",
    "ReduceStreamLogic",
    "MemoryWal",
    "live_handlers",
    "KeyedDatum",
    "REBUILD_ENV",
]

# Set to "1" to rebuild every Numaflow handler from its WAL on every micro-batch
# (read when a run's logics are built): the replay path then runs all the time, for tests.
REBUILD_ENV = "FLOWSPARK_UDF_REBUILD"

_MS = timedelta(milliseconds=1)
# The run each step's handlers in _LIVE belong to.
_CURRENT_RUNS: dict[str, str] = {}

# Live handlers of this process: (run id, step id, key, window) -> HandlerRun.
_LIVE: dict[tuple[str, str, str, Any], HandlerRun] = {}


def live_handlers() -> dict[tuple[str, str, str, Any], HandlerRun]:
    """This process's registry of live handlers (for tests and diagnostics)."""
    return _LIVE


class MemoryWal:
    """A :class:`~flowspark.runtime.keyed.Wal` in memory, as the Spark adapter's is in
    state (for tests, and for a whole input handled in one call, where nothing
    outlives the call)."""

    def __init__(self) -> None:
        self.entries: list[Any] = []

    def read(self) -> list[Any]:
        return list(self.entries)

    def append(self, entry: Any) -> None:
        self.entries.append(entry)

    def write(self, entries: list[Any]) -> None:
        self.entries = list(entries)

    def clear(self) -> None:
        self.entries = []


class KeyedDatum:
    """What an error message shows: the key and the datum being handled."""

    def __init__(self, key: str, datum: Any) -> None:
        self.key, self.datum = key, datum

    def __repr__(self) -> str:
        keys = key_list(self.key)
        shown = repr(keys[0]) if len(keys) == 1 else repr(keys)
        return f"key {shown}, datum {short_repr(self.datum, 150)}"


class KeyClock:
    """One key's event clock: ``({upstream: (latest event ms, system ms)}, system ms of
    the key's last datum, watermark ms)``.

    As Numaflow takes the minimum over the upstream partitions' watermarks, the
    key's watermark is the minimum, over the upstream partitions (source splits,
    or the tasks of an upstream keyed step) that have sent it datums, of their
    latest event time, minus ``delay_ms``: a lagging input holds it back instead
    of seeing its datums overtaken. An upstream that has sent the key nothing for
    ``idle_ms`` while others did no longer holds it back (Numaflow's idle-source
    rule), and the watermark never goes back. It moves only when the key gets
    data. ``idle`` says whether the key has had no datum for ``idle_ms`` of system
    time (or the input ended).
    """

    def __init__(self, delay_ms: int, idle_ms: int) -> None:
        self.delay_ms, self.idle_ms = delay_ms, idle_ms

    def advance(self, state: Any, latest: dict[int, int], now: int) -> Any:
        """The clock after a batch whose datums' latest times per upstream are ``latest``."""
        upstreams = dict(state[0]) if state is not None else {}
        for upstream, t in latest.items():
            before = upstreams.get(upstream)
            upstreams[upstream] = (t if before is None or t > before[0] else before[0], now)
        active = [t for t, seen in upstreams.values() if now - seen < self.idle_ms]
        mark = min(active or [t for t, _ in upstreams.values()]) - self.delay_ms
        if state is not None and state[2] > mark:
            mark = state[2]
        return (upstreams, now, mark)

    def watermark(self, state: Any, now: int) -> int:
        if now >= EOF_MS:
            return MAX_MS
        return MIN_MS if state is None else state[2]

    def idle(self, state: Any, now: int) -> bool:
        return now >= EOF_MS or (state is not None and now - state[1] >= self.idle_ms)

    def idle_at(self, state: Any) -> int:
        """The system time at which the key becomes idle."""
        return state[1] + self.idle_ms


# Rows' time while a flow on the vertex clock has no watermark yet (engine/source.py).
_NO_WATERMARK_MS = 2


class VertexClock(KeyClock):
    """The vertex's clock, one for all keys: a flow on Numaflow's source watermark
    (see :class:`~flowspark.api.inputs.SourceWatermark`) hands every key that
    watermark as ``now``. Keys never idle on their own; the watermark moves for
    all of them (idle sources move it per their ``idleSource`` rule).
    State: ``(None, watermark when the key last had datums, same)``.
    """

    def __init__(self) -> None:
        super().__init__(0, 0)

    def advance(self, state: Any, latest: dict[int, int], now: int) -> Any:
        return (None, now, now)

    def watermark(self, state: Any, now: int) -> int:
        # Rows carry a small positive time while there is no watermark yet (Spark
        # drops rows at or below its first watermark, 0): Numaflow's -1.
        return MAX_MS if now >= EOF_MS else (now if now > _NO_WATERMARK_MS else MIN_MS)

    def idle(self, state: Any, now: int) -> bool:
        return now >= EOF_MS

    def idle_at(self, state: Any) -> int:
        return EOF_MS


class _UdfLogic(KeyedLogic):
    """What both keyed UDF kinds share: the clock, the registry and the rebuild."""

    uses_timers = True
    uses_wal = True

    def __init__(
        self,
        step_id: str,
        factory: HandlerFactory,
        watermark_delay: timedelta,
        idle: timedelta,
        force_rebuild: bool = False,
        vertex_clock: bool = False,
    ) -> None:
        self.step_id = step_id
        self.factory = factory
        self.vertex_clock = vertex_clock
        self.clock: KeyClock = (
            VertexClock() if vertex_clock else KeyClock(watermark_delay // _MS, idle // _MS)
        )
        self.force_rebuild = force_rebuild
        self.run_id = uuid.uuid4().hex  # one per run: a new run never finds old handlers

    def _wal(self, call: KeyedCall) -> Wal:
        """The key's write-ahead log, which these logics cannot do without."""
        if call.wal is None:
            raise TypeError(f"step {self.step_id!r}: a keyed UDF logic needs the key's WAL")
        return call.wal

    def _event_times(self, key: str, values: Sequence[Any]) -> list[int]:
        """The datums' event times in ms (computed once per batch)."""
        times = []
        for datum in values:
            try:
                times.append(to_ms(datum._event_time))
            except Exception as exc:
                item = KeyedDatum(key, datum)
                raise step_failure(self.step_id, "event time", item, exc) from None
        return times

    def _advance(
        self,
        clock_state: Any,
        latest: Any,
        times: list[int],
        now: int,
        origins: list[tuple[int, int]] | None,
    ) -> tuple[Any, Any]:
        """The key's clock and latest event time after a batch whose datums have ``times``.

        ``origins`` says which upstream partition sent which run of them
        (``[(upstream, count), ...]``; ``None``: all from one). Every datum of a
        batch carries the watermark from before the batch (as a Numaflow datum
        carries the watermark fetched when it was read), so the order in which
        merged inputs' datums land within a batch cannot make them late relative
        to each other.
        """
        per_upstream: dict[int, int] = {}
        pos = 0
        for upstream, count in origins if origins is not None else [(0, len(times))]:
            top = max(times[pos : pos + count], default=MIN_MS)
            pos += count
            if top > per_upstream.get(upstream, MIN_MS):
                per_upstream[upstream] = top
            if latest is None or top > latest:
                latest = top
        return self.clock.advance(clock_state, per_upstream, now), latest

    # -- the handler registry ----------------------------------------------------------

    def _start(self, key: str, window: Any) -> HandlerRun:
        raise NotImplementedError

    def _open(self, key: str, window: Any) -> HandlerRun:
        if self.step_id not in _CURRENT_RUNS or _CURRENT_RUNS[self.step_id] != self.run_id:
            # This step's handlers from an earlier run in this process can never match.
            _CURRENT_RUNS[self.step_id] = self.run_id
            for stale in [k for k in _LIVE if k[1] == self.step_id and k[0] != self.run_id]:
                _LIVE.pop(stale).close()
        try:
            run = self._start(key, window)
        except Exception as exc:
            raise step_failure(self.step_id, self.factory, KeyedDatum(key, None), exc) from None
        _LIVE[(self.run_id, self.step_id, key, window)] = run
        return run

    def _attach(
        self, key: str, window: Any, handle: tuple[str, int], replay: Callable[[], list]
    ) -> HandlerRun:
        """The live handler matching ``handle``, else one rebuilt from ``replay()``
        (the WAL's batches for it, read only when needed)."""
        run = _LIVE.get((self.run_id, self.step_id, key, window))
        if run is not None and not self.force_rebuild:
            if (run.gen, run.fed) == handle:
                return run
            if run.gen == handle[0] and run.fed < handle[1]:
                # The same incarnation, behind: the key's last batches ran in another
                # Python worker. Feed it only the datums it missed (the WAL holds every
                # datum of this incarnation, in order), not the whole history.
                self._catch_up(run, key, replay(), run.fed)
                if run.fed == handle[1]:
                    return run
        if run is not None:
            run.close()
        run = self._open(key, window)
        run.gen = handle[0]  # the same incarnation, rebuilt: a twin elsewhere may catch up
        self._catch_up(run, key, replay(), 0)
        return run

    def _catch_up(self, run: HandlerRun, key: str, batches: list[list[Any]], skip: int) -> None:
        """Feed ``run`` the WAL's datums after the first ``skip``; what it puts was
        emitted before (by this handler's twin in another process): dropped."""
        for datums in batches:
            if skip >= len(datums):
                skip -= len(datums)
                continue
            self._feed(run, key, datums[skip:])
            skip = 0

    def _forget(self, key: str, window: Any) -> None:
        run = _LIVE.pop((self.run_id, self.step_id, key, window), None)
        if run is not None:
            run.close()

    def _feed(self, run: HandlerRun, key: str, datums: list[Any]) -> list[Any]:
        """Feed ``datums`` to ``run``; a handler error names the step, key and datum."""
        try:
            return run.feed(datums)
        except Exception as exc:
            raise self._failure(run, key, exc) from None

    def _end(self, run: HandlerRun, key: str) -> list[Any]:
        """End ``run``'s stream and collect what it puts until it returns."""
        try:
            return run.end()
        except Exception as exc:
            raise self._failure(run, key, exc) from None

    def _failure(self, run: HandlerRun, key: str, exc: Exception) -> Exception:
        if isinstance(exc, RemoteStepFailure):
            return exc
        item = KeyedDatum(key, run.datums.last)
        return step_failure(self.step_id, self._handler_name(), item, exc)

    def _handler_name(self) -> Any:
        return getattr(self.factory, "handler", self.factory)


# What a handler that puts something else than a message is told.
_NOT_A_MESSAGE = "a handler must put Message objects on its output"


class AccumulateLogic(_UdfLogic):
    """``accumulate``: one handler per key over a global window with an inactivity timeout.

    The key's stream ends when its watermark passes its latest event time plus
    ``timeout`` (or the key idles that long); a later datum opens a new handler.
    State: ``(clock, handle or None, latest event ms, streams opened)``; the WAL
    holds one entry per batch fed to the open handler.
    """

    def __init__(
        self,
        step_id: str,
        factory: HandlerFactory,
        timeout: timedelta,
        watermark_delay: timedelta,
        force_rebuild: bool = False,
        *,
        vertex_clock: bool = False,
    ) -> None:
        super().__init__(step_id, factory, watermark_delay, timeout, force_rebuild, vertex_clock)
        self.timeout_ms = timeout // _MS
        self.windower = GlobalWindower(self.timeout_ms)

    def _start(self, key: str, window: Any) -> HandlerRun:
        handler = self.factory()
        return HandlerRun(lambda datums, output: handler(datums, output))

    def on_values(self, call: KeyedCall) -> Outcome:
        key, state, values, now, wal = call.key, call.state, call.values, call.now, self._wal(call)
        clock_state, handle, latest, streams = state if state is not None else (None, None, None, 0)
        emitted: list[Any] = []
        # Datums that arrive with the end of the input (from an upstream keyed step's
        # last flush) are handled first, as any datums; then every stream ends.
        ended = now >= EOF_MS
        now = min(now, EOF_MS - 1)
        wm = self.clock.watermark(clock_state, now)
        if handle is not None and self._timed_out(clock_state, latest, now):
            # The open stream timed out before this batch (its timer is yet to fire).
            emitted += self._close(key, handle, wal, wm, streams)
            handle = None
        if handle is None:
            handle = (self._open(key, None).gen, 0)
            streams += 1
            wal.clear()
        times = self._event_times(key, values)
        clock_state, latest = self._advance(clock_state, latest, times, now, call.origins)
        shown = _utc(wm)
        feed = [_rewatermark(datum, shown) for datum in values]
        run = self._attach(key, None, handle, lambda: _decoded(wal.read()))
        emitted += self._messages(key, self._feed(run, key, feed), run, wm, streams)
        if ended:
            emitted += self._close(key, (run.gen, run.fed), wal, MAX_MS, streams)
            return self._outcome(clock_state, None, latest, streams, emitted)
        wal.append(encode_items(feed))
        return self._outcome(clock_state, (run.gen, run.fed), latest, streams, emitted)

    def on_timer(self, call: KeyedCall) -> Outcome:
        key, state, now = call.key, call.state, call.now
        if state is None:
            return Outcome(None)
        clock_state, handle, latest, streams = state
        if handle is None:
            return Outcome(state)
        wm = self.clock.watermark(clock_state, now)
        if self._timed_out(clock_state, latest, now):
            emitted = self._close(key, handle, self._wal(call), wm, streams)
            return self._outcome(clock_state, None, latest, streams, emitted)
        return self._outcome(clock_state, handle, latest, streams, [])

    def _close(self, key: str, handle: Any, wal: Wal, wm: int, streams: int) -> list[Any]:
        run = self._attach(key, None, handle, lambda: _decoded(wal.read()))
        emitted = self._messages(key, self._end(run, key), run, wm, streams)
        self._forget(key, None)
        wal.clear()
        return emitted

    def _timed_out(self, clock_state: Any, latest: int, now: int) -> bool:
        """Whether the key's stream has ended: its watermark passed the close time of
        its global window (the latest event time + timeout), or no datum came for
        ``timeout`` (system time)."""
        wm = self.clock.watermark(clock_state, now)
        window = (MIN_MS, latest)  # the key's window, which every datum extends
        return self.windower.close_at(window) < wm or self.clock.idle(clock_state, now)

    def _outcome(
        self, clock_state: Any, handle: Any, latest: Any, streams: int, emitted: list
    ) -> Outcome:
        wake = None
        if handle is not None:
            wake = self.clock.idle_at(clock_state)
            if self.vertex_clock:  # the watermark passes the key's window close
                wake = self.windower.close_at((MIN_MS, latest)) + 1
        return Outcome((clock_state, handle, latest, streams), emitted, wake=wake)

    def _messages(
        self, key: str, messages: list[Any], run: HandlerRun, wm_ms: int, stream: int
    ) -> list[Any]:
        """Accumulator messages become datums: their own times, else the watermark's."""
        if not messages:
            return []
        wm = _utc(wm_ms)
        out = []
        base = run.emitted - len(messages)
        prefix = f"{self.step_id}-{':'.join(key_list(key))}-{stream}"
        for i, message in enumerate(messages):
            parts = message_parts(message, _NOT_A_MESSAGE)
            if parts is None:
                continue
            keys, value, tags = parts
            message_id = getattr(message, "id", None) or f"{prefix}-{base + i}"
            if message.__class__ is AccumulatorMessage:  # ours: times already UTCDateTime
                out.append(
                    Datum._make(
                        keys,
                        value,
                        message._event_time or wm,
                        message._watermark or wm,
                        dict(message._headers),
                        message_id,
                        tags,
                    )
                )
                continue
            out.append(
                Datum(
                    keys,
                    value,
                    getattr(message, "event_time", None) or wm,
                    getattr(message, "watermark", None) or wm,
                    getattr(message, "headers", None),
                    id=message_id,
                    tags=tags,
                )
            )
        return out


# The latest time a datetime can show (9999-12-31); the end-of-input clock goes past it.
MAX_MS_UTC = 253_402_300_799_999


class ReduceStreamLogic(_UdfLogic):
    """``reduce_stream``: a handler per key and window, emitting as it goes.

    A window ``[start, end)`` closes when the key's watermark minus
    ``allowed_lateness`` reaches ``end``; a datum whose windows have all closed
    is late (counted and sent to the late stream). Outputs carry
    ``event_time = watermark = end - 1 ms``. A key that idles for a window length
    (plus the allowed lateness) closes its windows as if its watermark had moved
    past them. State: ``(clock, {window: handle}, end of the last closed window)``;
    the WAL holds ``(window, datums)`` entries for open windows.
    """

    def __init__(
        self,
        step_id: str,
        factory: HandlerFactory,
        windower: NumaflowWindower,
        allowed_lateness: timedelta,
        watermark_delay: timedelta,
        force_rebuild: bool = False,
        *,
        vertex_clock: bool = False,
    ) -> None:
        idle = timedelta(milliseconds=windower.length) + allowed_lateness
        super().__init__(step_id, factory, watermark_delay, idle, force_rebuild, vertex_clock)
        self.windower = windower
        self.lateness_ms = allowed_lateness // _MS

    def _start(self, key: str, window: Any) -> HandlerRun:
        handler = self.factory()
        start, end = window
        md = Metadata(IntervalWindow(_utc(start), _utc(end)))
        keys = key_list(key)
        return HandlerRun(lambda datums, output: handler(list(keys), datums, output, md))

    def on_values(self, call: KeyedCall) -> Outcome:
        key, state, values, now, wal = call.key, call.state, call.values, call.now, self._wal(call)
        clock_state, handles, floor = state if state is not None else (None, {}, MIN_MS)
        handles = dict(handles)
        # Datums arriving with the end of the input are placed as any datums first.
        end_of_input = now
        now = min(now, EOF_MS - 1)
        wm = self.clock.watermark(clock_state, now)
        idle = self.clock.idle(clock_state, now)
        emitted, floor = self._close_due(
            key, handles, wal, MAX_MS if idle else wm - self.lateness_ms, floor
        )
        closed_before = max(wm - self.lateness_ms, floor)
        feeds: dict[Window, list[Any]] = {}
        late: list[Any] = []
        shown = _utc(wm)
        times = self._event_times(key, values)
        clock_state, _ = self._advance(clock_state, None, times, now, call.origins)
        for datum, t in zip(values, times):
            fed = None
            for window in self.windower.assign(t):
                if self.windower.late(window, closed_before):
                    continue
                if window not in handles:
                    handles[window] = (self._open(key, window).gen, 0)
                if fed is None:
                    fed = _rewatermark(datum, shown)
                feeds.setdefault(window, []).append(fed)
            if fed is None:
                late.append(datum)
        for window, datums in sorted(feeds.items()):
            run = self._attach(key, window, handles[window], _replay_of(wal, window))
            emitted += self._messages(key, window, self._feed(run, key, datums), run)
            handles[window] = (run.gen, run.fed)
            wal.append((window, encode_items(datums)))
        after = self.clock.watermark(clock_state, end_of_input) - self.lateness_ms
        closed, floor = self._close_due(key, handles, wal, after, floor)
        return self._outcome(clock_state, handles, floor, emitted + closed, late)

    def on_timer(self, call: KeyedCall) -> Outcome:
        key, state, now = call.key, call.state, call.now
        if state is None:
            return Outcome(None)
        clock_state, handles, floor = state
        handles = dict(handles)
        wm = self.clock.watermark(clock_state, now)
        idle = self.clock.idle(clock_state, now)
        due_before = MAX_MS if idle else wm - self.lateness_ms
        emitted, floor = self._close_due(key, handles, self._wal(call), due_before, floor)
        return self._outcome(clock_state, handles, floor, emitted, [])

    def _close_due(
        self, key: str, handles: dict, wal: Wal, closed_before: int, floor: int
    ) -> tuple[list[Any], int]:
        """Close the windows whose close time ``closed_before`` (a watermark) is past;
        return what they emitted and the new floor (no datum may open a window ending
        at or before it)."""
        close_at = self.windower.close_at
        due = sorted(w for w in handles if close_at(w) < closed_before)
        if not due:
            return [], floor
        entries = wal.read()
        emitted: list[Any] = []
        for window in due:
            handle = handles.pop(window)
            run = self._attach(key, window, handle, lambda w=window: _entries_of(entries, w))
            emitted += self._messages(key, window, self._end(run, key), run)
            self._forget(key, window)
        wal.write([(w, d) for w, d in entries if w not in due])
        return emitted, max(floor, max(end for _, end in due))

    def _outcome(
        self, clock_state: Any, handles: dict, floor: int, emitted: list, late: list
    ) -> Outcome:
        wake = None
        if handles:
            wake = self.clock.idle_at(clock_state)
            if self.vertex_clock:  # the watermark passes the first window's close
                close_at = self.windower.close_at
                wake = min(close_at(w) for w in handles) + self.lateness_ms + 1
        state = (clock_state, handles, floor) if handles or clock_state is not None else None
        return Outcome(state, emitted, late, wake)

    def _messages(
        self, key: str, window: tuple[int, int], messages: list[Any], run: HandlerRun
    ) -> list[Any]:
        """Reduce-stream messages become datums timed at the window's end - 1 ms."""
        if not messages:
            return []
        at = _utc(window[1] - 1)
        base = run.emitted - len(messages)
        prefix = f"{self.step_id}-{window[0]}-{window[1]}-{':'.join(key_list(key))}"
        out = []
        for i, message in enumerate(messages):
            parts = message_parts(message, _NOT_A_MESSAGE)
            if parts is None:
                continue
            keys, value, tags = parts
            out.append(Datum(keys, value, at, at, None, id=f"{prefix}-{base + i}", tags=tags))
        return out


# Ends each of a datum's keys in the one string Spark groups by.
KEYS_SEPARATOR = "\x1e"


def routing_key(keys: list[str]) -> str:
    """The string a datum is grouped by: its keys, each ended by a separator (so,
    unlike a ``":"`` join, it is reversible and ``[]`` differs from ``[""]``).

    >>> key_list(routing_key(["a", "b"])), key_list(routing_key([""])), key_list(routing_key([]))
    (['a', 'b'], [''], [])
    """
    return "".join(k + KEYS_SEPARATOR for k in keys)


def key_list(routing: str) -> list[str]:
    """The datum keys a :func:`routing_key` was made from (a plain string is one key)."""
    if not routing.endswith(KEYS_SEPARATOR):
        return [routing] if routing else []
    return routing.split(KEYS_SEPARATOR)[:-1]


def _utc(ms: int) -> Any:
    """The datetime a handler sees for ``ms``: no watermark yet is Numaflow's -1 ms."""
    if ms <= MIN_MS:
        return utc_from_ms(-1)
    return utc_from_ms(min(ms, MAX_MS_UTC))


def _rewatermark(datum: Datum, watermark: Any) -> Datum:
    """``datum`` as the handler sees it: carrying the step's current watermark."""
    return Datum._make(
        datum._keys,
        datum._value,
        datum._event_time,
        watermark,
        datum._headers,
        datum._id,
        datum._tags,
    )


def _decoded(entries: list[bytes]) -> list[list[Any]]:
    return [list(decode_items(entry)) for entry in entries]


def _entries_of(entries: list, window: Any) -> list:
    return [list(decode_items(datums)) for w, datums in entries if w == window]


def _replay_of(wal: Wal, window: Any) -> Callable[[], list]:
    return lambda: _entries_of(wal.read(), window)
