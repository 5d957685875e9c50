"""A level with keyed steps runs as ONE transformWithState (Row API, RocksDB state).

Rows reaching the level are grouped by their key column: ``"<port>\\x1f<key>"``
for a keyed step's values (packed: one row per key per upstream chunk), null
for everything else (sink chunks, clock markers, items for stateless entries),
which passes through. Per key and batch the processor reads ONE state blob,
runs the step's :class:`~flowspark.runtime.keyed.KeyedLogic` over all the
key's values, writes ONE blob back, and keeps one event-time timer at the wake
time the logic asked for. The downstream stateless steps of the level run right
there on what the logic emitted.

Time: every row carries its micro-batch's start time (``ts``); Spark's watermark
(``WATERMARK_LAG_MS`` behind the newest row) is therefore flowspark's system
clock, and timers are system-time deadlines. The end of a bounded input moves it
to ``EOF_MS`` so every timer fires, in the batch after the last data. When a
fresh bounded run reads its whole input in one batch, rows carry
``WHOLE_INPUT_MS`` instead: each key's values are handled at the batch's time
and everything closes right there, without state or timers; the watermark stays
put, so Spark runs no further batch.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from typing import Any

from pyspark.sql import Row
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import BinaryType, StringType, StructField, StructType

from flowspark.engine.compat import processor_init_on_driver
from flowspark.runtime.codec import (
    BUCKET_SEPARATOR,
    HANDLED_COUNT_PORT,
    KEY_SEPARATOR,
    LATE_COUNT_PORT,
    ROW_SCHEMA,
    STATE_BUCKET_SEPARATOR,
    STDOUT_PORT,
    WHOLE_INPUT_MS,
    WRITTEN_COUNT_PORT,
    decode_items,
    decode_ordered,
    encode_count,
)
from flowspark.runtime.keyed import KeyedCall, Outcome, Wal, on_value_runs
from flowspark.runtime.windowing import EOF_MS
from flowspark.shared.times import datetime_from_ms, naive_as_utc_to_ms

__all__ = ["LevelProcessor", "streaming_keyed_level"]

_BLOB = StructType([StructField("blob", BinaryType())])
_USER_KEY = StructType([StructField("key", StringType())])
_WHOLE_INPUT_TS = datetime_from_ms(WHOLE_INPUT_MS)
# A whole-input partition's results leave in pieces of about this many items.
_WHOLE_INPUT_FLUSH = 65536
# Spark's watermark trails the newest row time by this much, so rows at
# WHOLE_INPUT_MS leave it at its start (0); timers are registered this much early.
WATERMARK_LAG_MS = WHOLE_INPUT_MS
# A state bucket keeps its keys' states inline in one blob up to this size.
INLINE_BUCKET_BYTES = 64 * 1024


class LevelProcessor(StatefulProcessor):
    """The processor of one level: every keyed step of the level, by port."""

    def __init__(self, program: bytes, logics: bytes, spread: int, uses_wal: bool) -> None:
        self.program_bytes = program
        self.logics_bytes = logics
        self.spread = spread
        self.uses_wal = uses_wal

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.state = handle.getValueState("flowspark", _BLOB)
        self.wal: Wal | None = (
            _ListStateWal(handle.getListState("wal", _BLOB)) if self.uses_wal else None
        )
        # A state bucket (grouping key ``port\x1db``): one blob with the bucket's
        # wake times ({user key: ms}) and, while small, its keys' states; a map of
        # each user key's state once the bucket outgrows that blob.
        self.key_states = handle.getMapState("keys", _USER_KEY, _BLOB)
        self.bucket_wakes = handle.getValueState("wakes", _BLOB)
        if processor_init_on_driver(handle):
            return  # Spark only collects the state's schemas there
        self.load()

    def load(self) -> None:
        """Unpickle the level's program and logics in the task that runs them."""
        from flowspark.runtime.task import task_context, tune_gc  # noqa: PLC0415 pyarrow: tasks only

        tune_gc()
        self.program = pickle.loads(self.program_bytes)
        self.logics = pickle.loads(self.logics_bytes)
        self.ctx = task_context()
        self.emitted_chunks = 0
        if self.uses_wal:
            from flowspark.runtime.numaflow.handler_host import HostHandlers  # noqa: PLC0415 Numaflow runtime: tasks only

            for logic in self.logics.values():
                if getattr(logic, "use_host", False):  # handlers stay in the partition's host
                    logic.handlers = HostHandlers(logic.run_id, self.ctx.worker)

    # -- Spark hooks -------------------------------------------------------------

    def handleInputRows(self, key: Any, rows: Iterable[Row], timerValues: Any) -> Iterator[Row]:
        composite = key[0]
        rows = list(rows)
        now = max(naive_as_utc_to_ms(r.ts) for r in rows)  # Spark's ts: naive UTC
        if composite is None:
            yield from self.pass_through(rows, now)
            return
        if STATE_BUCKET_SEPARATOR in composite:
            yield from self.bucket_values(composite, rows, now, timerValues)
            return
        if KEY_SEPARATOR not in composite:  # a partition's keys: the whole input is here
            wall = timerValues.getCurrentProcessingTimeInMs()
            yield from self.whole_input(composite, [r.data for r in rows], wall)
            return
        port_text, user_key = composite.split(KEY_SEPARATOR, 1)
        port = int(port_text)
        logic = self.logics[port]
        if now < EOF_MS and not logic.uses_wal and len({r.ts for r in rows}) > 1:
            # Values read at several system times: each run at its own (a slow batch
            # never makes an item late that was on time when it was read).
            runs = _read_time_runs(rows)
            yield from self._step(port, lambda s: on_value_runs(logic, user_key, s, runs), now)
            return
        # Back in arrival order: the shuffle may deliver upstream chunks in any order.
        chunks = sorted(decode_ordered(r.data) for r in rows)
        decoded = [(order, decode_items(chunk)) for order, chunk in chunks]
        values = _values(decoded)
        wal, origins = (self.wal, _origins(decoded)) if logic.uses_wal else (None, None)
        if now >= EOF_MS:  # flushed by an upstream keyed step as the input ended
            wall = timerValues.getCurrentProcessingTimeInMs()
            call = lambda state: logic.on_values_at_end(  # noqa: E731
                KeyedCall(user_key, state, wall, values, wal, origins)
            )
        else:
            call = lambda state: logic.on_values(  # noqa: E731
                KeyedCall(user_key, state, now, values, wal, origins)
            )
        yield from self._step(port, call, now)

    def handleExpiredTimer(
        self, key: Any, timerValues: Any, expiredTimerInfo: Any
    ) -> Iterator[Row]:
        composite = key[0]
        if composite is None:
            return
        now = timerValues.getCurrentWatermarkInMs() + WATERMARK_LAG_MS
        if STATE_BUCKET_SEPARATOR in composite:
            yield from self.bucket_timer(composite, now)
            return
        port_text, user_key = composite.split(KEY_SEPARATOR, 1)
        port = int(port_text)
        logic = self.logics[port]
        wal = self.wal if logic.uses_wal else None
        yield from self._step(
            port,
            lambda state: logic.on_timer(KeyedCall(user_key, state, now, wal=wal)),
            now,
            fired=True,
        )

    def close(self) -> None:
        """The partition's end: close the sinks of outputs written here (what they
        print then is dropped: a processor emits nothing once closed)."""
        if getattr(self, "program", None) is not None and self.program.executor_sinks:
            from flowspark.runtime.executor_writes import close_task_sinks  # noqa: PLC0415 pyarrow: tasks only

            close_task_sinks()

    # -- helpers -------------------------------------------------------------------

    def _step(self, port: int, call: Any, now: int, fired: bool = False) -> Iterator[Row]:
        """Run ``call(state)`` for one key, store what it returns, emit its output."""
        from flowspark.runtime.task import capture_stdout  # noqa: PLC0415 pyarrow: tasks only

        stored = self.state.get()  # None when the key has no state: one round trip
        state, wake = pickle.loads(stored[0]) if stored else (None, None)
        with capture_stdout() as captured:
            outcome = call(state)
        if fired and outcome.wake is not None:
            outcome.wake = _after_fired(outcome.wake, now)
        self._store(outcome, wake, fired)
        yield from self._emit(port, outcome, now, captured.take())

    # -- state buckets ---------------------------------------------------------------

    def bucket_values(
        self, composite: str, rows: list[Row], now: int, timer_values: Any
    ) -> Iterator[Row]:
        """One bucket's rows: every key's values in arrival order, handled key by key
        (in key order, as Spark hands keys over one by one), then emitted at once."""
        port = int(composite.split(STATE_BUCKET_SEPARATOR, 1)[0])
        logic = self.logics[port]
        from flowspark.runtime.task import keys_in_rows  # noqa: PLC0415 pyarrow: tasks only

        if now < EOF_MS and len(times := {r.ts for r in rows}) > 1:
            # Values read at several system times: each key's runs at their own.
            runs = [
                (naive_as_utc_to_ms(at), keys_in_rows(r.data for r in rows if r.ts == at))
                for at in sorted(times)
            ]
            keys = sorted({k for _, by_key_at in runs for k in by_key_at})

            def key_runs(k: str, state: Any) -> Outcome:
                mine = [
                    (at, [v for _, data in by_key_at[k] for v in decode_items(data)])
                    for at, by_key_at in runs
                    if k in by_key_at
                ]
                return on_value_runs(logic, k, state, mine)

            yield from self._bucket_step(port, keys, key_runs, now)
            return
        by_key = keys_in_rows(r.data for r in rows)  # decoded at each key's turn
        call: Callable[[str, Any, list[Any]], Outcome]
        if now >= EOF_MS:  # flushed by an upstream keyed step as the input ended
            wall = timer_values.getCurrentProcessingTimeInMs()
            call = lambda k, state, values: logic.on_values_at_end(  # noqa: E731
                KeyedCall(k, state, wall, values)
            )
        else:
            call = lambda k, state, values: logic.on_values(KeyedCall(k, state, now, values))  # noqa: E731
        values: Callable[[str], list[Any]] = lambda k: [  # noqa: E731
            v for _, data in by_key[k] for v in decode_items(data)
        ]
        yield from self._bucket_step(
            port, sorted(by_key), lambda k, state: call(k, state, values(k)), now
        )

    def bucket_timer(self, composite: str, now: int) -> Iterator[Row]:
        """A bucket's timer fired: every key whose wake time has come gets its turn."""
        port = int(composite.split(STATE_BUCKET_SEPARATOR, 1)[0])
        logic = self.logics[port]
        due = lambda wakes: sorted(k for k, at in wakes.items() if at <= now)  # noqa: E731
        yield from self._bucket_step(
            port, due, lambda k, state: logic.on_timer(KeyedCall(k, state, now)), now, fired=True
        )

    def _bucket_step(
        self, port: int, keys: Any, call: Any, now: int, fired: bool = False
    ) -> Iterator[Row]:
        """Run ``call(key, state)`` for ``keys`` of a bucket (a list, or a function of
        the bucket's wake times); store states, wake times and the bucket's one timer
        (at its earliest wake time); emit what the keys produced, in key order.

        A small bucket keeps its keys' states inline, in the same blob as its wake
        times: one state read and one write per bucket and batch, whatever its number
        of keys. Once that blob outgrows ``INLINE_BUCKET_BYTES`` the bucket moves its
        states to the map (a read and a write per key touched) and stays there.
        """
        from flowspark.runtime.task import capture_stdout  # noqa: PLC0415 pyarrow: tasks only

        stored = self.bucket_wakes.get()
        wakes, inline = _BucketBlob.load(stored[0] if stored else None)
        earliest = min(wakes.values(), default=None)
        total = Outcome(None)
        with capture_stdout() as captured:
            for user_key in keys(wakes) if callable(keys) else keys:
                if inline is not None:
                    outcome = call(user_key, inline.get(user_key))
                    if outcome.state is not None:
                        inline[user_key] = outcome.state
                    else:
                        inline.pop(user_key, None)
                else:
                    row = self.key_states.getValue((user_key,))
                    outcome = call(user_key, pickle.loads(row[0]) if row else None)
                    if outcome.state is not None:
                        state_blob = pickle.dumps(outcome.state, protocol=5)
                        self.key_states.updateValue((user_key,), (state_blob,))
                    elif row is not None:
                        self.key_states.removeKey((user_key,))
                if outcome.wake is not None:
                    wakes[user_key] = _after_fired(outcome.wake, now) if fired else outcome.wake
                else:
                    wakes.pop(user_key, None)
                total.add(outcome)
        blob = _BucketBlob.dump(wakes, inline)
        if blob is not None and inline is not None and len(blob) > INLINE_BUCKET_BYTES:
            for user_key, state in inline.items():  # the bucket outgrew its blob
                self.key_states.updateValue((user_key,), (pickle.dumps(state, protocol=5),))
            blob = _BucketBlob.dump(wakes, None)
        if blob is not None:
            self.bucket_wakes.update((blob,))
        elif stored:
            self.bucket_wakes.clear()
        soonest = min(wakes.values(), default=None)
        if fired:  # Spark deletes the timer that fired
            if soonest is not None:
                self.handle.registerTimer(soonest - WATERMARK_LAG_MS)
        elif soonest != earliest:
            if earliest is not None:
                self.handle.deleteTimer(earliest - WATERMARK_LAG_MS)
            if soonest is not None:
                self.handle.registerTimer(soonest - WATERMARK_LAG_MS)
        yield from self._emit(port, total, now, captured.take())

    def whole_input(self, composite: str, datas: list[bytes], now: int) -> Iterator[Row]:
        """A partition's keys when the batch holds the whole input: each key's values
        are handled at ``now`` (the batch's time), then everything closes. No state
        is read or kept, and the rows emitted carry ``WHOLE_INPUT_MS`` on downstream."""
        # MemoryWal: the WAL lives for this call.
        from flowspark.runtime.numaflow.keyed import MemoryWal  # noqa: PLC0415 Numaflow runtime: tasks only
        from flowspark.runtime.task import capture_stdout, keys_in_rows  # noqa: PLC0415 pyarrow: tasks only

        port = int(composite.split(BUCKET_SEPARATOR, 1)[0])
        logic = self.logics[port]
        if logic.uses_wal:  # nothing outlives this call: the handlers stay in this process
            from flowspark.runtime.numaflow.keyed import local_handlers  # noqa: PLC0415 Numaflow runtime: tasks only

            logic.handlers = local_handlers()
        # Values stay encoded until their key's turn: one key's values in memory at once.
        by_key = keys_in_rows(datas)
        total, text = Outcome(None), b""
        if getattr(logic, "vertex_clock", False):  # one watermark for all: none yet
            now = WHOLE_INPUT_MS
        # In key order, as Spark hands keys over when they travel one by one.
        for user_key in sorted(by_key):
            decoded = [(order, decode_items(data)) for order, data in by_key.pop(user_key)]
            wal, origins = (MemoryWal(), _origins(decoded)) if logic.uses_wal else (None, None)
            with capture_stdout() as captured:
                values = _values(decoded)
                placed = logic.on_values(KeyedCall(user_key, None, now, values, wal, origins))
                ended = logic.on_timer(KeyedCall(user_key, placed.state, EOF_MS, wal=wal))
            text += captured.take()
            total.add(placed)
            total.add(ended)
            # What a key printed goes out with its results, in order, as keys one by one.
            if text or sum(map(len, total.outputs)) >= _WHOLE_INPUT_FLUSH:
                yield from self._emit(port, total, WHOLE_INPUT_MS, text)
                total, text = Outcome(None), b""
        yield from self._emit(port, total, WHOLE_INPUT_MS, text)

    def _emit(self, port: int, outcome: Outcome, now: int, text: bytes) -> Iterator[Row]:
        """Rows for what a keyed step printed, its late, handled and written counts
        and its output (at ``now``)."""
        ts = datetime_from_ms(now)
        if text:
            yield Row(port=STDOUT_PORT, key=None, data=text, ts=ts)
        step_id = self.logics[port].step_id
        if outcome.late:
            count = encode_count(step_id, len(outcome.late))
            yield Row(port=LATE_COUNT_PORT, key=None, data=count, ts=ts)
        if outcome.handled:
            count = encode_count(step_id, outcome.handled)
            yield Row(port=HANDLED_COUNT_PORT, key=None, data=count, ts=ts)
        if outcome.written:
            count = encode_count(step_id, outcome.written)
            yield Row(port=WRITTEN_COUNT_PORT, key=None, data=count, ts=ts)
        if any(outcome.outputs):
            yield from self._run(port, outcome.outputs, ts)

    def _store(self, outcome: Outcome, wake: int | None, fired: bool) -> None:
        """Write the key's new state; move its timer if the wake time changed."""
        if outcome.state is None:
            self.state.clear()
        else:
            self.state.update((pickle.dumps((outcome.state, outcome.wake), protocol=5),))
        if wake != outcome.wake:
            if wake is not None and not fired:
                self.handle.deleteTimer(wake - WATERMARK_LAG_MS)
            if outcome.wake is not None:
                self.handle.registerTimer(outcome.wake - WATERMARK_LAG_MS)
        elif fired and outcome.wake is not None:
            self.handle.registerTimer(outcome.wake - WATERMARK_LAG_MS)

    def _run(self, entry: int, outputs: Any, ts: datetime, items: Any = ()) -> Iterator[Row]:
        from flowspark.runtime.task import capture_stdout, leaving_rows  # noqa: PLC0415 pyarrow: tasks only

        with capture_stdout() as captured:
            leaving = self.program.run_from(entry, outputs, self.ctx, items)
        text = captured.take()
        if text:
            yield Row(port=STDOUT_PORT, key=None, data=text, ts=ts)
        self.emitted_chunks += 1
        order = (self.ctx.worker << 32) + self.emitted_chunks
        whole = ts == _WHOLE_INPUT_TS
        for port, row_key, data in leaving_rows(
            self.program, leaving, self.spread, order, whole=whole
        ):
            yield Row(port=port, key=row_key, data=data, ts=ts)

    def pass_through(self, rows: list[Row], now: int) -> Iterator[Row]:
        """Rows without a key: run those bound for the level's stateless entries, pass the rest."""
        entries = self.program.orders
        ts = datetime_from_ms(now)
        for r in rows:
            if r.port in entries:
                yield from self._run(r.port, None, ts, decode_items(r.data))
            else:
                yield Row(port=r.port, key=None, data=r.data, ts=r.ts)


def _after_fired(wake: int, now: int) -> int:
    """A wake time asked for while a timer fired at ``now``: one at or before it moves
    just past it. Spark deletes the timer that fired once the call returns, so a timer
    registered again at the same time would be lost; the next batch whose watermark
    passes ``now + 1`` wakes the key.

    >>> _after_fired(900, 1000), _after_fired(1000, 1000), _after_fired(1500, 1000)
    (1001, 1001, 1500)
    """
    return wake if wake > now else now + 1


def _read_time_runs(rows: list[Row]) -> list[tuple[int, list[Any]]]:
    """One key's values by the system time they were read at (the rows' time),
    earliest first, each run in arrival order."""
    by_time: dict[int, list[tuple[int, Any]]] = {}
    for row in rows:
        by_time.setdefault(naive_as_utc_to_ms(row.ts), []).append(decode_ordered(row.data))
    return [
        (at, [v for _, chunk in sorted(chunks) for v in decode_items(chunk)])
        for at, chunks in sorted(by_time.items())
    ]


def _values(decoded: list[tuple[int, Any]]) -> list[Any]:
    """A key's values from its decoded upstream chunks (in arrival order)."""
    return [v for _, items in decoded for v in items]


def _origins(decoded: list[tuple[int, Any]]) -> list[tuple[int, int]]:
    """Which upstream partition (a chunk order's high half) sent how many values."""
    return [(order >> 32, len(items)) for order, items in decoded]


class _BucketBlob:
    """A state bucket's one blob: its keys' wake times, and their states while the
    bucket keeps them inline (``None`` once they live in the map state)."""

    @staticmethod
    def load(blob: bytes | None) -> tuple[dict[str, int], dict[str, Any] | None]:
        if blob is None:
            return {}, {}
        wakes, inline = pickle.loads(blob)
        return wakes, inline

    @staticmethod
    def dump(wakes: dict[str, int], inline: dict[str, Any] | None) -> bytes | None:
        """The blob to store, or ``None`` when the bucket holds nothing at all."""
        if not wakes and inline is not None and not inline:
            return None
        return pickle.dumps((wakes, inline), protocol=5)


class _ListStateWal:
    """A keyed step's :class:`~flowspark.runtime.keyed.Wal` in Spark state: a list of
    pickled entries."""

    def __init__(self, state: Any) -> None:
        self.state = state

    def read(self) -> list[Any]:
        return [pickle.loads(row[0]) for row in self.state.get()]

    def append(self, entry: Any) -> None:
        self.state.appendValue((pickle.dumps(entry, protocol=5),))

    def write(self, entries: list[Any]) -> None:
        if entries:
            self.state.put([(pickle.dumps(e, protocol=5),) for e in entries])
        else:
            self.state.clear()

    def clear(self) -> None:
        self.state.clear()


def streaming_keyed_level(df: Any, processor: LevelProcessor, first: bool) -> Any:
    """Apply a level's processor to the streaming ``df`` with ``transformWithState``
    (the first keyed level sets the watermark)."""
    if first:
        df = df.withWatermark("ts", f"{WATERMARK_LAG_MS} milliseconds")
    return df.groupBy("key").transformWithState(
        processor, ROW_SCHEMA, "Append", "EventTime", eventTimeColumnName="ts"
    )
