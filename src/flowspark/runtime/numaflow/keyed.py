"""Numaflow's keyed UDF kinds as keyed logic: ``accumulate`` and ``reduce_stream``.

A stream handler is a coroutine that lives across micro-batches (see
:class:`~flowspark.runtime.numaflow.run.HandlerRun`); it cannot be pickled into
Spark state. So Spark state keeps, per key, the clock, and per live handler a
*handle* ``(gen, fed, emitted)`` and a write-ahead log (WAL) of the datums fed
to it that are still retained; the handler itself lives in a registry
(:mod:`flowspark.runtime.numaflow.handlers`): in a Spark task, the resident host of the
step's partition (:mod:`flowspark.runtime.numaflow.handler_host`), where it stays for as
long as the run lives. It is rebuilt from the WAL only after a real loss.

WAL retention follows Numaflow's accumulator: a datum is kept until the
*outbound watermark* (the latest watermark carried by what the key's handler put)
passes its event time. A busy key's WAL so holds about the watermark delay's
worth of datums, not its whole history. After a restart the handler is rebuilt
from what is retained: datums older than the outbound watermark are not replayed
(Numaflow: "for data older than Outbound(Watermark) - 1, users need to bring in
an external store"). A reduce-stream window's datums go when the window closes.

Time: one clock per key (:class:`KeyClock`): the watermark is the key's latest
event time minus ``watermark_delay``; a key without datums for a while (the
accumulator's timeout, a reduce window's length) is *idle* and its open streams
end, as Numaflow's idle-source rule would move the watermark; the end of a
bounded input ends everything. A flow on a source watermark uses
:class:`VertexClock`: one watermark for all keys.

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
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, NamedTuple

from flowspark.api.udf.times import utc_from_ms
from flowspark.api.udf.types import AccumulatorMessage, Datum, IntervalWindow, Metadata
from flowspark.runtime.codec import encode_items
from flowspark.runtime.errors import short_repr, step_failure
from flowspark.runtime.keyed import HandlerFactory, KeyedCall, KeyedLogic, Outcome, Wal
from flowspark.runtime.numaflow.handlers import Handle, HandlerRegistry, LocalHandlers, Replay
from flowspark.runtime.numaflow.messages import message_parts
from flowspark.runtime.numaflow.run import HandlerRun
from flowspark.runtime.source_watermark import NO_WATERMARK_MS
from flowspark.runtime.windowing import (
    EOF_MS,
    MAX_MS,
    MIN_MS,
    GlobalWindower,
    NumaflowWindower,
    Window,
)
from flowspark.shared.times import duration_ms, naive_as_utc_to_ms

__all__ = [
    "AccumulateLogic",
    "ReduceStreamLogic",
    "MemoryWal",
    "WalIndex",
    "live_handlers",
    "local_handlers",
    "KeyedDatum",
    "REBUILD_ENV",
]

# Set to "1" to rebuild every Numaflow handler from its WAL on every micro-batch
# (read when a run's logics are built): the replay path then runs all the time, for tests.
REBUILD_ENV = "FLOWSPARK_UDF_REBUILD"
# Set to "0" to keep a Spark task's handlers in its Python worker instead of a
# resident host (each task that lands on another worker then rebuilds them).
HOST_ENV = "FLOWSPARK_HANDLER_HOST"

# Handlers kept in this process (logics that no Spark task gave a host).
_LOCAL = LocalHandlers()


def local_handlers() -> LocalHandlers:
    """This process's registry of handlers (for tests and diagnostics)."""
    return _LOCAL


def live_handlers() -> dict[tuple[str, str, str, Any], HandlerRun]:
    """This process's live handlers: (run id, step id, key, window) -> handler."""
    return _LOCAL.live


class WalIndex(NamedTuple):
    """What an accumulator key's state knows of its WAL, so it can trim it unread:
    ``trimmed`` datums of the open stream are no longer in it; ``entries`` has
    ``(latest event ms, datums)`` for each entry it holds; ``out_wm`` is the
    outbound watermark, the latest watermark of the messages the handler put."""

    trimmed: int = 0
    entries: tuple[tuple[int, int], ...] = ()
    out_wm: int = MIN_MS

    def retained(self) -> int:
        """Datums the WAL holds."""
        return sum(count for _, count in self.entries)


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


class VertexClock(KeyClock):
    """The vertex's clock, one for all keys: the flow hands every key the vertex
    watermark as ``now`` (Numaflow's source watermark, see
    :class:`~flowspark.api.inputs.SourceWatermark`, or the one the driver keeps
    from the datums' event times, see :mod:`flowspark.engine.vertex_marks`),
    less ``delay_ms``. Keys never idle on their own; the watermark moves for all
    of them (idle sources move it per their ``idleSource`` rule).
    State: ``(None, watermark when the key last had datums, same)``.
    """

    def __init__(self, delay_ms: int = 0) -> None:
        super().__init__(delay_ms, 0)

    def advance(self, state: Any, latest: dict[int, int], now: int) -> Any:
        return (None, now, now)

    def watermark(self, state: Any, now: int) -> int:
        # Rows carry a small positive time while there is no watermark yet (Spark
        # drops rows at or below its first watermark, 0): Numaflow's -1.
        if now >= EOF_MS:
            return MAX_MS
        return now - self.delay_ms if now > NO_WATERMARK_MS else MIN_MS

    def passes(self, mark: int) -> int:
        """The ``now`` at which the watermark passes ``mark`` (a timer's time)."""
        return mark + self.delay_ms + 1

    def idle(self, state: Any, now: int) -> bool:
        return now >= EOF_MS

    def idle_at(self, state: Any) -> int:
        return EOF_MS


@dataclass(frozen=True)
class RunOptions:
    """How a keyed UDF step runs its handlers (the same for both kinds).

    ``vertex_clock``: one watermark for all keys (:class:`VertexClock`) instead of
    one per key; ``use_host``: handlers live in the partition's resident host
    process; ``force_rebuild``: rebuild every handler from its WAL at every batch
    (what a lost handler costs, for tests).
    """

    vertex_clock: bool = False
    use_host: bool = False
    force_rebuild: bool = False


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
        options: RunOptions,
    ) -> None:
        self.step_id = step_id
        self.factory = factory
        self.use_host = options.use_host
        self.vertex_clock = options.vertex_clock
        self.force_rebuild = options.force_rebuild
        self.clock: KeyClock = (
            VertexClock(duration_ms(watermark_delay))
            if options.vertex_clock
            else KeyClock(duration_ms(watermark_delay), duration_ms(idle))
        )
        self.run_id = uuid.uuid4().hex  # one per run: a new run never finds old handlers
        self.handlers: HandlerRegistry = _LOCAL

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("handlers", None)  # where a task keeps handlers is the task's choice
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.handlers = _LOCAL

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
                times.append(naive_as_utc_to_ms(datum._event_time))
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

    # -- the handlers (see flowspark.runtime.numaflow.handlers) ------------------------------------

    def _start(self, key: str, window: Any) -> HandlerRun:
        raise NotImplementedError

    def _failure(self, key: str, datum: Any, exc: Exception) -> Exception:
        """The error a task raises for a handler's ``exc``: the step, key and datum."""
        return step_failure(self.step_id, self._handler_name(), KeyedDatum(key, datum), exc)

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
        options: RunOptions = RunOptions(),
    ) -> None:
        super().__init__(step_id, factory, watermark_delay, timeout, options)
        self.timeout_ms = duration_ms(timeout)
        self.windower = GlobalWindower(self.timeout_ms)

    def _start(self, key: str, window: Any) -> HandlerRun:
        handler = self.factory()
        return HandlerRun(lambda datums, output: handler(datums, output))

    def on_values(self, call: KeyedCall) -> Outcome:
        key, state, values, now, wal = call.key, call.state, call.values, call.now, self._wal(call)
        clock_state, handle, latest, streams, index = _accumulator_state(state)
        emitted: list[Any] = []
        # Datums that arrive with the end of the input (from an upstream keyed step's
        # last flush) are handled first, as any datums; then every stream ends.
        ended = now >= EOF_MS
        now = min(now, EOF_MS - 1)
        wm = self.clock.watermark(clock_state, now)
        if handle is not None and self._timed_out(clock_state, latest, now):
            # The open stream timed out before this batch (its timer is yet to fire).
            emitted += self._close(key, handle, wal, index, wm, streams)
            handle = None
        if handle is None:
            streams += 1
            wal.clear()
            index = WalIndex()
        times = self._event_times(key, values)
        clock_state, latest = self._advance(clock_state, latest, times, now, call.origins)
        shown = _utc(wm)
        feed = [_rewatermark(datum, shown) for datum in values]
        encoded = encode_items(feed)
        figures = (index.retained(), index.out_wm)
        fed = self.handlers.feed(
            self, key, None, handle, feed, encoded, _retained(wal, index), figures
        )
        messages = self._messages(key, fed.messages, fed.base, wm, streams)
        emitted += messages
        handle = fed.handle
        # The WAL holds every datum fed until the outbound watermark passes it.
        wal.append(encoded)
        index = index._replace(entries=(*index.entries, (max(times, default=MIN_MS), len(feed))))
        if ended:
            emitted += self._close(key, handle, wal, index, MAX_MS, streams)
            return self._outcome(clock_state, None, latest, streams, WalIndex(), emitted)
        index = _trim(wal, index, _outbound(messages, index.out_wm))
        return self._outcome(clock_state, handle, latest, streams, index, emitted)

    def on_timer(self, call: KeyedCall) -> Outcome:
        key, state, now = call.key, call.state, call.now
        if state is None:
            return Outcome(None)
        clock_state, handle, latest, streams, index = _accumulator_state(state)
        if handle is None:
            return Outcome(state)
        wm = self.clock.watermark(clock_state, now)
        if self._timed_out(clock_state, latest, now):
            emitted = self._close(key, handle, self._wal(call), index, wm, streams)
            return self._outcome(clock_state, None, latest, streams, WalIndex(), emitted)
        return self._outcome(clock_state, handle, latest, streams, index, [])

    def _close(
        self, key: str, handle: Handle, wal: Wal, index: WalIndex, wm: int, streams: int
    ) -> list[Any]:
        fed = self.handlers.end(self, key, None, handle, _retained(wal, index))
        wal.clear()
        return self._messages(key, fed.messages, fed.base, wm, streams)

    def _timed_out(self, clock_state: Any, latest: int, now: int) -> bool:
        """Whether the key's stream has ended: its watermark passed the close time of
        its global window (the latest event time + timeout), or no datum came for
        ``timeout`` (system time)."""
        wm = self.clock.watermark(clock_state, now)
        window = (MIN_MS, latest)  # the key's window, which every datum extends
        return self.windower.close_at(window) < wm or self.clock.idle(clock_state, now)

    def _outcome(
        self,
        clock_state: Any,
        handle: Any,
        latest: Any,
        streams: int,
        index: WalIndex,
        emitted: list,
    ) -> Outcome:
        wake = None
        if handle is not None:
            wake = self.clock.idle_at(clock_state)
            if isinstance(self.clock, VertexClock):  # the watermark passes the close
                wake = self.clock.passes(self.windower.close_at((MIN_MS, latest)))
        return Outcome((clock_state, handle, latest, streams, index), emitted, wake=wake)

    def _messages(
        self, key: str, messages: list[Any], base: int, wm_ms: int, stream: int
    ) -> list[Any]:
        """Accumulator messages become datums: their own times, else the watermark's."""
        if not messages:
            return []
        wm = _utc(wm_ms)
        out = []
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
        options: RunOptions = RunOptions(),
    ) -> None:
        idle = timedelta(milliseconds=windower.length) + allowed_lateness
        super().__init__(step_id, factory, watermark_delay, idle, options)
        self.windower = windower
        self.lateness_ms = duration_ms(allowed_lateness)

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
                handles.setdefault(window, None)  # None: a window opened by this batch
                if fed is None:
                    fed = _rewatermark(datum, shown)
                feeds.setdefault(window, []).append(fed)
            if fed is None:
                late.append(datum)
        for window, datums in sorted(feeds.items()):
            encoded = encode_items(datums)
            replay = _window_of(wal, window)
            done = self.handlers.feed(self, key, window, handles[window], datums, encoded, replay)
            emitted += self._messages(key, window, done.messages, done.base)
            handles[window] = done.handle
            wal.append((window, encoded))
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
            kept = [encoded for w, encoded in entries if w == window]
            done = self.handlers.end(self, key, window, handle, _replay_of(kept))
            emitted += self._messages(key, window, done.messages, done.base)
        wal.write([(w, d) for w, d in entries if w not in due])
        return emitted, max(floor, max(end for _, end in due))

    def _outcome(
        self, clock_state: Any, handles: dict, floor: int, emitted: list, late: list
    ) -> Outcome:
        wake = None
        if handles:
            wake = self.clock.idle_at(clock_state)
            if isinstance(self.clock, VertexClock):  # the watermark passes a close
                close_at = self.windower.close_at
                wake = self.clock.passes(min(close_at(w) for w in handles) + self.lateness_ms)
        state = (clock_state, handles, floor) if handles or clock_state is not None else None
        return Outcome(state, emitted, late, wake)

    def _messages(
        self, key: str, window: tuple[int, int], messages: list[Any], base: int
    ) -> list[Any]:
        """Reduce-stream messages become datums timed at the window's end - 1 ms."""
        if not messages:
            return []
        at = _utc(window[1] - 1)
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


def _accumulator_state(state: Any) -> tuple[Any, Any, Any, int, WalIndex]:
    """``(clock, handle, latest event ms, streams opened, WAL index)`` of a key."""
    if state is None:
        return None, None, None, 0, WalIndex()
    clock_state, handle, latest, streams, *rest = state
    return clock_state, handle, latest, streams, rest[0] if rest else WalIndex()


def _retained(wal: Wal, index: WalIndex) -> Replay:
    """The open stream's WAL as a replay (read only if a rebuild needs it)."""
    return lambda: (index.trimmed, list(wal.read()))


def _window_of(wal: Wal, window: Any) -> Replay:
    return lambda: (0, [encoded for w, encoded in wal.read() if w == window])


def _replay_of(kept: list[bytes]) -> Replay:
    """A window's WAL datums, read already, as a replay."""
    return lambda: (0, kept)


def _outbound(messages: list[Any], out_wm: int) -> int:
    """The outbound watermark after ``messages`` (datums) were put."""
    for message in messages:
        mark = message._watermark
        if mark is not None:
            ms = naive_as_utc_to_ms(mark)
            if ms > out_wm:
                out_wm = ms
    return out_wm


def _trim(wal: Wal, index: WalIndex, out_wm: int) -> WalIndex:
    """Drop the WAL's oldest entries whose datums the outbound watermark has passed."""
    drop = trimmed = 0
    for latest, count in index.entries:
        if latest >= out_wm:
            break
        drop += 1
        trimmed += count
    if drop == len(index.entries) and drop:
        wal.clear()
    elif drop:
        wal.write(wal.read()[drop:])
    return WalIndex(index.trimmed + trimmed, index.entries[drop:], out_wm)
