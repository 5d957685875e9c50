"""What one Spark task runs: chunks in, a level's program, Arrow batches of rows out.

Used by the source reader (level 0, fed by the input's splits) and by the
stage after each exchange (fed by rows). Text that user functions print is
captured per chunk and travels as rows on :data:`STDOUT_PORT`, so the driver
prints it in order, where the user (or a test's ``capsys``) sees it.
"""

from __future__ import annotations

import gc
import pickle
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pyarrow as pa

from flowspark.plan.graph import SINK_PORT_BASE
from flowspark.runtime.codec import (
    BUCKET_SEPARATOR,
    EVENT_TIME_PORT,
    KEY_SEPARATOR,
    READ_COUNT_PORT,
    STATE_BUCKET_SEPARATOR,
    STDOUT_PORT,
    WHOLE_INPUT_MS,
    decode_ordered,
    encode_count,
    encode_event_times,
    encode_items,
    encode_ordered,
    encode_range,
)
from flowspark.runtime.errors import step_failure
from flowspark.runtime.executor_writes import close_task_sinks, write_here
from flowspark.runtime.partitioning import key_for_partition, spark_partition, state_bucket
from flowspark.runtime.stage import Items, StageContext, StageProgram
from flowspark.runtime.stateful import check_keyed
from flowspark.runtime.task_context import capture_stdout, task_context
from flowspark.shared.times import naive_as_utc_to_ms

__all__ = [
    "ARROW_SCHEMA",
    "task_context",
    "run_program",
    "rows_to_batch",
    "RowBuffer",
    "pack_by_key",
    "leaving_rows",
    "task_end",
    "capture_stdout",
    "tune_gc",
]

TS_TYPE = pa.timestamp("us", tz="UTC")
ARROW_SCHEMA = pa.schema(
    [("port", pa.int32()), ("key", pa.string()), ("data", pa.binary()), ("ts", TS_TYPE)]
)
_FLUSH_BYTES = 8 << 20


_FLUSH_ROWS = 256

# CPython collects its young generation every 700 allocations by default; in a
# step that builds a tuple per item that is ~40% of the step (map over 3 M items:
# 0.26 s, 0.18 s with this). Cycles are still collected, in larger rounds.
_GC_THRESHOLD = (100_000, 20, 20)


def tune_gc() -> None:
    """Collect garbage in larger rounds in this (Spark worker) process."""
    if gc.get_threshold()[0] < _GC_THRESHOLD[0]:
        gc.set_threshold(*_GC_THRESHOLD)


def rows_to_batch(
    ports: list[int], keys: list[str | None], datas: list[bytes], ts_ms: int | list[int]
) -> pa.RecordBatch:
    """Build one Arrow batch of flowspark rows (``ts_ms``: one time for all, or per row)."""
    times = ts_ms if isinstance(ts_ms, list) else [ts_ms] * len(ports)
    return pa.RecordBatch.from_arrays(
        [
            pa.array(ports, pa.int32()),
            pa.array(keys, pa.string()),
            pa.array(datas, pa.binary()),
            pa.array([t * 1000 for t in times], pa.int64()).cast(TS_TYPE),
        ],
        schema=ARROW_SCHEMA,
    )


class RowBuffer:
    """Rows gathered into Arrow batches of at most about 8 MB or 256 rows.

    >>> rows = RowBuffer()
    >>> rows.add(1, None, b"x")
    >>> rows.take(5).num_rows, len(rows)
    (1, 0)
    """

    def __init__(self) -> None:
        self.ports: list[int] = []
        self.keys: list[str | None] = []
        self.datas: list[bytes] = []
        self.size = 0

    def __len__(self) -> int:
        return len(self.ports)

    def add(self, port: int, key: str | None, data: bytes) -> None:
        self.ports.append(port)
        self.keys.append(key)
        self.datas.append(data)
        self.size += len(data)

    def extend(self, rows: Iterable[tuple[int, str | None, bytes]]) -> None:
        for port, key, data in rows:
            self.add(port, key, data)

    def ready(self) -> bool:
        """Whether enough is gathered for one batch."""
        return self.size >= _FLUSH_BYTES or len(self.ports) >= _FLUSH_ROWS

    def take(self, ts_ms: int) -> pa.RecordBatch:
        """The gathered rows as one batch at ``ts_ms``; the buffer is empty afterwards."""
        batch = rows_to_batch(self.ports, self.keys, self.datas, ts_ms)
        self.ports, self.keys, self.datas, self.size = [], [], [], 0
        return batch


def pack_by_key(
    step_id: str,
    items: Items,
    combiner: Callable[[Any, Any], Any] | None = None,
    groups: dict[str, list[Any]] | None = None,
) -> dict[str, list[Any]]:
    """Group ``(key, value)`` items by key (into ``groups``), keeping arrival order.

    With a ``combiner`` each key's values are reduced to one (``[acc]``).
    """
    if groups is None:
        groups = {}
    for item in items:
        if type(item) is not tuple or len(item) != 2 or type(item[0]) is not str:
            try:
                check_keyed(item)
            except TypeError as exc:
                raise step_failure(step_id, "routing by key", item, exc) from None
        key, value = item
        group = groups.get(key)
        if group is None:
            groups[key] = [value]
        elif combiner is None:
            group.append(value)
        else:
            try:
                group[0] = combiner(group[0], value)
            except Exception as exc:
                raise step_failure(step_id, combiner, item, exc) from None
    return groups


def _encode(items: Items) -> bytes:
    if isinstance(items, range):
        return encode_range(items)
    return encode_items(items if isinstance(items, list) else list(items))


def _pieces(items: Items, n: int) -> list[Items]:
    if n <= 1 or len(items) < 2 * n:
        return [items]
    size = -(-len(items) // n)
    return [items[i : i + size] for i in range(0, len(items), size)]


class KeyedBuffer:
    """Values bound for keyed steps, gathered per key across a task's chunks.

    One row per key per task (not per chunk) keeps the shuffle and the state
    store's per-row costs proportional to keys, not to data. In a batch holding
    the whole input (``whole``; keyed steps keep no state then), one row per
    step and partition carries all the keys Spark would send to that partition:
    its key column is :func:`~flowspark.runtime.partitioning.key_for_partition`
    of ``f"{port}{BUCKET_SEPARATOR}"``, its data the pickled list of
    ``(key, encoded values)``; Spark's per-key costs become per partition.
    """

    LIMIT = 1_000_000  # values held before an early flush

    def __init__(self, program: StageProgram, whole: bool = False) -> None:
        self.program = program
        self.whole = whole
        self.groups: dict[int, dict[str, list[Any]]] = {}
        self.size = 0
        self.order: int | None = None
        # The least and latest event time (ms) of the datums drained for Numaflow keyed
        # steps, when the flow runs on the vertex watermark (program.event_times).
        self.least: int | None = None
        self.latest: int | None = None

    def add(self, port: int, items: Items, order: int) -> None:
        step_id, combiner = self.program.keyed[port]
        if self.order is None:
            self.order = order
        groups = self.groups.setdefault(port, {})
        route = self.program.part_routes.get(port)
        if route is not None:  # an output's items, gathered by the part they go to
            route.group(items, groups)
        else:
            pack_by_key(step_id, items, combiner, groups)
        self.size += len(items)

    def full(self) -> bool:
        return self.size >= self.LIMIT

    def drain(self) -> Iterator[tuple[int, str | None, bytes]]:
        """Rows for everything gathered; the buffer is empty afterwards."""
        groups, order = self.groups, self.order or 0
        self.groups, self.size, self.order = {}, 0, None
        for port, by_key in groups.items():
            if self.whole:
                yield from self._drain_whole(port, by_key, order)
            elif port in self.program.bucketed:
                yield from self._drain_buckets(port, by_key, order)
            else:
                if self.program.event_times and port not in self.program.part_routes:
                    self._note_event_times(by_key)
                for key, values in by_key.items():
                    data = encode_ordered(order, encode_items(values))
                    yield port, f"{port}{KEY_SEPARATOR}{key}", data

    def _note_event_times(self, by_key: dict[str, list[Any]]) -> None:
        """Widen the least/latest event time seen by the datums' (a datum whose time
        cannot be read is left to the keyed step, which names it)."""
        times = []
        for values in by_key.values():
            for datum in values:
                try:
                    times.append(naive_as_utc_to_ms(datum._event_time))
                except Exception:  # noqa: BLE001, S112 - reported by the keyed step
                    continue
        if times:
            least, latest = min(times), max(times)
            self.least = least if self.least is None else min(self.least, least)
            self.latest = latest if self.latest is None else max(self.latest, latest)

    @staticmethod
    def _drain_buckets(
        port: int, by_key: dict[str, list[Any]], order: int
    ) -> Iterator[tuple[int, str, bytes]]:
        """One row per state bucket (a streamed batch)."""
        pieces = _group_keys(by_key, state_bucket)
        for bucket, piece in pieces.items():
            yield port, f"{port}{STATE_BUCKET_SEPARATOR}{bucket}", _piece_data(order, piece)

    def _drain_whole(
        self, port: int, by_key: dict[str, list[Any]], order: int
    ) -> Iterator[tuple[int, str, bytes]]:
        """One row per partition, keyed so Spark places it there (a whole-input batch)."""
        partitions = self.program.key_partitions
        place = lambda key: spark_partition(f"{port}{KEY_SEPARATOR}{key}", partitions)  # noqa: E731
        for partition, piece in _group_keys(by_key, place).items():
            row_key = key_for_partition(f"{port}{BUCKET_SEPARATOR}", partition, partitions)
            yield port, row_key, _piece_data(order, piece)


def _group_keys(
    by_key: dict[str, list[Any]], group_of: Callable[[str], int]
) -> dict[int, list[tuple[str, bytes]]]:
    """``(key, encoded values)`` of every key, gathered by ``group_of(key)``."""
    pieces: dict[int, list[tuple[str, bytes]]] = {}
    for key, values in by_key.items():
        pieces.setdefault(group_of(key), []).append((key, encode_items(values)))
    return pieces


def _piece_data(order: int, piece: list[tuple[str, bytes]]) -> bytes:
    """The data of a row carrying many keys (read back by :func:`keys_in_rows`)."""
    return encode_ordered(order, pickle.dumps(piece, protocol=5))


def keys_in_rows(datas: Iterable[bytes]) -> dict[str, list[tuple[int, bytes]]]:
    """Each key's ``(order, encoded values)`` from rows carrying many keys, in
    arrival order (the shuffle may deliver upstream chunks in any order)."""
    by_key: dict[str, list[tuple[int, bytes]]] = {}
    for order, payload in sorted(decode_ordered(data) for data in datas):
        for user_key, data in pickle.loads(payload):
            by_key.setdefault(user_key, []).append((order, data))
    return by_key


def task_end(program: StageProgram, ts_ms: int) -> Iterator[pa.RecordBatch]:
    """The end of a task that ran ``program``: close the sinks it wrote outputs
    through (runtime/executor_writes.py); a batch of what they printed, at ``ts_ms``."""
    if program.executor_sinks:
        text = close_task_sinks()
        if text:
            yield rows_to_batch([STDOUT_PORT], [None], [text], ts_ms)


def leaving_rows(
    program: StageProgram,
    leaving: list[tuple[int, Items]],
    spread: int,
    order: int = 0,
    keyed: KeyedBuffer | None = None,
    whole: bool = False,
) -> Iterator[tuple[int, str | None, bytes]]:
    """Encode what leaves a level as rows; keyed steps get one row per key
    (per partition when the batch holds the ``whole`` input, see :class:`KeyedBuffer`).
    Items for an output written on the executors are written here, and leave as
    count rows (see runtime/executor_writes.py).

    Keyed rows carry ``order`` (the upstream partition and chunk), so the keyed
    step can put a key's rows back in arrival order after the shuffle. With a
    ``keyed`` buffer, keyed items are gathered there instead (see its ``drain``).
    """
    own = keyed is None
    buffer = KeyedBuffer(program, whole) if keyed is None else keyed
    written_here = program.executor_sinks
    for port, out in leaving:
        if port in program.keyed:
            buffer.add(port, out, order)
        elif port in written_here:  # an output this task writes itself
            yield from write_here(written_here[port], out)
        else:
            for piece in _pieces(out, 1 if port >= SINK_PORT_BASE else spread):
                yield port, None, _encode(piece)
    if own:
        yield from buffer.drain()


def _reading(
    step_id: str | None, feeds: Iterable[tuple[Any, ...]], ts_ms: int
) -> Iterator[tuple[int, Items, int]]:
    """``feeds`` as ``(entry, items, ts)`` (a feed without its own time has the
    batch's); a failure to read them (a file input's bad byte) names the input step."""
    feeding = iter(feeds)
    while True:
        try:
            feed = next(feeding)
        except StopIteration:
            return
        except Exception as exc:
            if step_id is None:
                raise
            raise step_failure(step_id, "reading the input", "its next items", exc) from exc
        yield (feed[0], feed[1], feed[2] if len(feed) > 2 else ts_ms)


def run_program(
    program: StageProgram,
    feeds: Iterable[tuple[int, Items] | tuple[int, Items, int]],
    ctx: StageContext,
    spread: int = 1,
    ts_ms: int = 0,
    upstream: int | None = None,
) -> Iterator[pa.RecordBatch]:
    """Run ``program`` over ``(entry step, items[, ts])`` feeds; yield rows of what
    leaves, at the feed's ``ts`` (the system time its items were read at) or else at
    ``ts_ms``.

    Items bound for a later level are cut into ``spread`` pieces so the
    exchange in between can spread them over partitions. Keyed chunks carry
    their order: ``upstream`` (a stable id of the input part read, see
    ``runtime.input_offsets.upstream_id``; default the task's partition) in the high 32
    bits, then the chunk's number.
    """
    tune_gc()
    rows = RowBuffer()
    captured = capture_stdout()
    order = upstream if upstream is not None else ctx.worker << 32
    keyed = KeyedBuffer(program, whole=ts_ms == WHOLE_INPUT_MS)
    read = 0
    at = ts_ms  # the time of the rows gathered so far
    for entry, items, feed_ts in _reading(program.reads, feeds, ts_ms):
        if feed_ts != at:  # rows at another time: what is gathered leaves first
            rows.extend(keyed.drain())
            if rows:
                yield rows.take(at)
            at = feed_ts
        order += 1
        read += len(items)
        with captured:
            leaving = program.run(entry, items, ctx)
        text = captured.take()
        if text:
            rows.add(STDOUT_PORT, None, text)
        rows.extend(leaving_rows(program, leaving, spread, order, keyed))
        if keyed.full():
            rows.extend(keyed.drain())
        if rows.ready():
            yield rows.take(at)
    rows.extend(keyed.drain())
    if program.reads is not None and read:  # what the input step read, for observers
        rows.add(READ_COUNT_PORT, None, encode_count(program.reads, read))
    if program.reads is not None and keyed.least is not None and keyed.latest is not None:
        part = (upstream if upstream is not None else ctx.worker << 32) >> 32
        times = encode_event_times(program.reads, part, keyed.least, keyed.latest)
        rows.add(EVENT_TIME_PORT, None, times)
    if rows:
        yield rows.take(at)
