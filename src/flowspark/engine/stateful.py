"""A level with keyed steps runs as ONE transformWithState (Row API, RocksDB state).

Rows reaching the level are grouped by their key column: ``"<port>\\x1f<key>"``
for a keyed step's values (packed: one row per key per upstream chunk), null
for everything else (sink chunks, clock markers, items for stateless entries),
which passes through. Per key and batch the processor reads ONE state blob,
runs the step's :class:`~flowspark.runtime.stateful.KeyedLogic` over all the
key's values, writes ONE blob back, and keeps one event-time timer at the wake
time the logic asked for. The downstream stateless steps of the level run right
there on what the logic emitted.

Time: every row carries its micro-batch's start time (``ts``); Spark's watermark
is therefore flowspark's system clock, and timers are system-time deadlines. The
end of a bounded input moves it to ``EOF_MS`` so every timer fires.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from pyspark.sql import Row
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import BinaryType, StructField, StructType

from flowspark.runtime.codec import (
    KEY_SEPARATOR,
    LATE_COUNT_PORT,
    STDOUT_PORT,
    decode_items,
    decode_ordered,
)
from flowspark.runtime.windowing import from_ms, to_ms

__all__ = ["LevelProcessor", "keyed_level"]

_BLOB = StructType([StructField("blob", BinaryType())])


def _ms(ts: datetime) -> int:
    """Milliseconds of a row's ``ts`` (Spark hands back naive UTC datetimes)."""
    return to_ms(ts if ts.tzinfo is not None else ts.replace(tzinfo=UTC))


class LevelProcessor(StatefulProcessor):
    """The processor of one level: every keyed step of the level, by port."""

    def __init__(self, program: bytes, logics: bytes, spread: int) -> None:
        self.program_bytes = program
        self.logics_bytes = logics
        self.spread = spread

    def init(self, handle: StatefulProcessorHandle) -> None:
        from flowspark.runtime.task import task_context

        self.handle = handle
        self.state = handle.getValueState("flowspark", _BLOB)
        self.program = pickle.loads(self.program_bytes)
        self.logics = pickle.loads(self.logics_bytes)
        self.ctx = task_context()
        self.emitted_chunks = 0
        uses_wal = any(getattr(logic, "uses_wal", False) for logic in self.logics.values())
        self.wal = _ListStateWal(handle.getListState("wal", _BLOB)) if uses_wal else None

    # -- Spark hooks -------------------------------------------------------------

    def handleInputRows(self, key: Any, rows: Iterator[Row], timerValues: Any) -> Iterator[Row]:
        composite = key[0]
        rows = list(rows)
        now = max(_ms(r.ts) for r in rows)
        if composite is None:
            yield from self._pass_through(rows, now)
            return
        port_text, user_key = composite.split(KEY_SEPARATOR, 1)
        port = int(port_text)
        # Back in arrival order: the shuffle may deliver upstream chunks in any order.
        chunks = sorted(decode_ordered(r.data) for r in rows)
        decoded = [(order, decode_items(chunk)) for order, chunk in chunks]
        values = [v for _, items in decoded for v in items]
        logic = self.logics[port]
        extra: tuple[Any, ...] = ()
        if getattr(logic, "uses_wal", False):
            # Its WAL, and which upstream partition (a chunk order's high half) sent what.
            extra = (self.wal, [(order >> 32, len(items)) for order, items in decoded])
        yield from self._step(
            port, lambda state: logic.on_values(user_key, state, values, now, *extra), now
        )

    def handleExpiredTimer(
        self, key: Any, timerValues: Any, expiredTimerInfo: Any
    ) -> Iterator[Row]:
        composite = key[0]
        if composite is None:
            return
        port_text, user_key = composite.split(KEY_SEPARATOR, 1)
        port = int(port_text)
        now = timerValues.getCurrentWatermarkInMs()
        logic = self.logics[port]
        extra = (self.wal,) if getattr(logic, "uses_wal", False) else ()
        yield from self._step(
            port, lambda state: logic.on_timer(user_key, state, now, *extra), now, fired=True
        )

    def close(self) -> None:
        pass

    # -- helpers -------------------------------------------------------------------

    def _step(self, port: int, call: Any, now: int, fired: bool = False) -> Iterator[Row]:
        from flowspark.runtime.task import capture_stdout

        stored = self.state.get()  # None when the key has no state: one round trip
        state, wake = pickle.loads(stored[0]) if stored else (None, None)
        with capture_stdout() as captured:
            outcome = call(state)
        if outcome.state is None:
            self.state.clear()
        else:
            self.state.update((pickle.dumps((outcome.state, outcome.wake), protocol=5),))
        if wake != outcome.wake:
            if wake is not None and not fired:
                self.handle.deleteTimer(wake)
            if outcome.wake is not None:
                self.handle.registerTimer(outcome.wake)
        elif fired and outcome.wake is not None:
            self.handle.registerTimer(outcome.wake)
        text = captured.take()
        ts = from_ms(now)
        if text:
            yield Row(port=STDOUT_PORT, key=None, data=text, ts=ts)
        if outcome.late:
            step_id = self.logics[port].step_id
            yield Row(port=LATE_COUNT_PORT, key=step_id, data=b"%d" % len(outcome.late), ts=ts)
        if outcome.emitted or outcome.late:
            yield from self._run(port, (outcome.emitted, outcome.late), ts)

    def _run(self, entry: int, outputs: Any, ts: datetime, items: Any = ()) -> Iterator[Row]:
        from flowspark.runtime.task import capture_stdout, leaving_rows

        with capture_stdout() as captured:
            leaving = self.program.run_from(entry, outputs, self.ctx, items)
        text = captured.take()
        if text:
            yield Row(port=STDOUT_PORT, key=None, data=text, ts=ts)
        self.emitted_chunks += 1
        order = (self.ctx.worker << 32) + self.emitted_chunks
        for port, row_key, data in leaving_rows(self.program, leaving, self.spread, order):
            yield Row(port=port, key=row_key, data=data, ts=ts)

    def _pass_through(self, rows: list[Row], now: int) -> Iterator[Row]:
        entries = self.program.orders
        ts = from_ms(now)
        for r in rows:
            if r.port in entries:
                yield from self._run(r.port, None, ts, decode_items(r.data))
            else:
                yield Row(port=r.port, key=None, data=r.data, ts=r.ts)


class _ListStateWal:
    """A keyed step's write-ahead log in Spark state: a list of pickled entries."""

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


def keyed_level(df: Any, processor: LevelProcessor, first: bool) -> Any:
    """Apply a level's processor to ``df`` (the first keyed level sets the watermark)."""
    from flowspark.runtime.codec import ROW_SCHEMA

    if first:
        df = df.withWatermark("ts", "0 seconds")
    return df.groupBy("key").transformWithState(
        processor, ROW_SCHEMA, "Append", "EventTime", eventTimeColumnName="ts"
    )
