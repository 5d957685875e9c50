"""How items travel between Python and Spark: packed chunks.

A Spark row carries a whole chunk of items (``port, key, data``), not one item:
Spark's per-row cost for Python sources and stages (~1.4 M rows/s measured on
this machine) would otherwise cap every flow far below bytewax's speed. A chunk
is a tag byte and a payload:

* ``R`` + three little-endian int64: ``range(start, stop, step)`` — in-memory
  ranges travel as three numbers;
* ``D`` + a pickle of epoch microseconds — a list of UTC datetimes;
* ``T`` + a pickle of columns — tuples of one nesting shape with UTC datetimes
  among their leaves, one column per leaf (datetimes as epoch microseconds,
  ~5x cheaper than pickling them);
* ``N`` + a pickle of columns — Numaflow datums (keys, values, times as epoch
  microseconds, headers, ids, tags), ~4x cheaper than pickling the objects;
* ``P`` + a pickle (protocol 5) of a ``list`` — everything else. Exact ints,
  floats and strs pickle as compactly and as fast as Arrow here; objects the C
  pickler cannot carry to another process (classes defined in ``__main__``)
  go through cloudpickle.

>>> decode_items(encode_items([1, "a", (2, 3.5)]))
[1, 'a', (2, 3.5)]
>>> list(decode_items(encode_range(range(2, 8, 3))))
[2, 5]
"""

from __future__ import annotations

import pickle
import struct
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from itertools import repeat
from operator import attrgetter, itemgetter
from typing import Any

import cloudpickle

from flowspark.api.udf.times import UTCDateTime
from flowspark.api.udf.types import Datum
from flowspark.shared.times import EPOCH, ONE_US

__all__ = [
    "ROW_SCHEMA",
    "STDOUT_PORT",
    "MARKER_PORT",
    "LATE_COUNT_PORT",
    "HANDLED_COUNT_PORT",
    "READ_COUNT_PORT",
    "EVENT_TIME_PORT",
    "WRITTEN_COUNT_PORT",
    "KEY_SEPARATOR",
    "WHOLE_INPUT_MS",
    "BUCKET_SEPARATOR",
    "STATE_BUCKET_SEPARATOR",
    "encode_count",
    "decode_count",
    "encode_event_times",
    "decode_event_times",
    "encode_items",
    "encode_range",
    "decode_items",
    "encode_ordered",
    "decode_ordered",
]

# The schema of every flowspark row between Python and the JVM. ``ts`` is the
# micro-batch's system time; it drives Spark's watermark, hence every timer.
ROW_SCHEMA = "port int, key string, data binary, ts timestamp"
# Rows on this port carry text a user function printed inside a worker.
STDOUT_PORT = -1
# Rows on this port carry only a time (a clock tick, or the end of the input).
MARKER_PORT = -2
# Rows on this port count late items: no key, data = encode_count(step id, count).
LATE_COUNT_PORT = -3
# Rows on this port count items read: no key, data = encode_count(input step id, count).
# (Count rows carry no key so that a later level passes them through untouched.)
READ_COUNT_PORT = -4
# Rows on this port carry the event times one input part sent a flow's Numaflow keyed
# steps in a micro-batch: no key, data = encode_event_times(...) (engine/vertex_marks.py).
EVENT_TIME_PORT = -5
# Rows on this port count what a keyed step handled beyond its outputs (a cycle's
# datums run): no key, data = encode_count(step id, count).
HANDLED_COUNT_PORT = -6
# Rows on this port count items an output's sinks wrote on the executors (outputs that
# write where the data is, see runtime/executor_writes.py): no key,
# data = encode_count(output step id, count).
WRITTEN_COUNT_PORT = -7
# A keyed row's key column is f"{port}{KEY_SEPARATOR}{user key}".
KEY_SEPARATOR = "\x1f"
# ... or f"{port}{BUCKET_SEPARATOR}{n}" for all keys bound to one partition (rows of
# a whole-input batch, see runtime/task.KeyedBuffer).
BUCKET_SEPARATOR = "\x1e"
# ... or f"{port}{STATE_BUCKET_SEPARATOR}{b}" for the keys of state bucket ``b`` (a
# streamed batch: one row per step, bucket and upstream chunk, see
# runtime/partitioning.state_bucket and engine/stateful.LevelProcessor).
STATE_BUCKET_SEPARATOR = "\x1d"
# Rows of a bounded run whose whole input fits its first micro-batch carry this
# time instead of the batch's: the input ends within that batch, so keyed steps
# handle their values and close everything at once (no end-of-input batch).
WHOLE_INPUT_MS = 1

_RANGE = struct.Struct("<qqq")


def encode_count(step_id: str, count: int) -> bytes:
    """A count row's data: which step counted how many.

    >>> decode_count(encode_count("inp", 12))
    ('inp', 12)
    """
    return f"{step_id}{KEY_SEPARATOR}{count}".encode()


def decode_count(data: bytes) -> tuple[str, int]:
    """The ``(step id, count)`` of a count row's data."""
    step_id, count = data.decode().rsplit(KEY_SEPARATOR, 1)
    return step_id, int(count)


def encode_event_times(step_id: str, part: int, least: int, latest: int) -> bytes:
    """An event-time row's data: input ``step_id``'s ``part`` sent datums whose event
    times (ms) ranged from ``least`` to ``latest``.

    >>> decode_event_times(encode_event_times("inp", 7, -5, 1200))
    ('inp', 7, -5, 1200)
    """
    return f"{step_id}{KEY_SEPARATOR}{part} {least} {latest}".encode()


def decode_event_times(data: bytes) -> tuple[str, int, int, int]:
    """The ``(input step id, part, least ms, latest ms)`` of an event-time row's data."""
    step_id, figures = data.decode().rsplit(KEY_SEPARATOR, 1)
    part, least, latest = figures.split()
    return step_id, int(part), int(least), int(latest)


_ORDER = struct.Struct("<q")


_MICRO = 1e-6
_COLUMNS_MIN = 64  # below this, columns are not worth their checks
_TZINFO = attrgetter("tzinfo")


def _encode_columns(items: list[Any]) -> bytes | None:
    """Tuples of one nesting shape with UTC datetimes among their leaves, as columns.

    ``(key, ((start, end), count))`` has four leaves, so four columns. Pickling an
    aware datetime costs ~1.7 µs and loading it ~0.4 µs here; a column of epoch
    microseconds costs ~0.3 µs each way. ``None`` when the items are not such
    tuples (the caller pickles them as they are).
    """
    first = items[0]
    shape = _shape(first)
    if not any(type(leaf) is datetime for leaf in _leaves(first, shape)):
        return None  # no column could be datetimes: not worth building them
    columns = _leaf_columns(items, shape)
    if columns is None:
        return None
    utc = [False] * len(columns)
    for i, column in enumerate(columns):
        if type(column[0]) is datetime and _all_utc(column):
            utc[i] = True
            columns[i] = [(d - EPOCH) // ONE_US for d in column]
    if not any(utc):
        return None
    return b"T" + _pickle((shape, utc, columns))[1:]


def _shape(item: Any) -> Any:
    """A tuple's nesting: the list of its elements' shapes (``None``: not a tuple)."""
    return [_shape(x) for x in item] if type(item) is tuple else None


def _leaves(item: Any, shape: Any) -> Iterator[Any]:
    """The leaves of one item of ``shape``, in column order."""
    if shape is None:
        yield item
    else:
        for x, sub in zip(item, shape, strict=True):
            yield from _leaves(x, sub)


def _leaf_columns(items: list[Any], shape: Any) -> list[list[Any]] | None:
    """One list per leaf of ``shape`` across ``items``; ``None`` if any item differs."""
    if shape is None:
        return [items]
    if not shape or set(map(type, items)) != {tuple} or set(map(len, items)) != {len(shape)}:
        return None
    columns: list[list[Any]] = []
    for i, sub in enumerate(shape):
        leaves = _leaf_columns(list(map(itemgetter(i), items)), sub)
        if leaves is None:
            return None
        columns.extend(leaves)
    return columns


def _rebuild(shape: Any, columns: Iterator[list[Any]]) -> Any:
    """Zip leaf columns back into tuples of ``shape`` (an iterable, lazily)."""
    if shape is None:
        return next(columns)
    return zip(*[_rebuild(sub, columns) for sub in shape])


def _all_utc(values: Any) -> bool:
    """Whether every value is exactly a ``datetime`` in ``timezone.utc``."""
    if set(map(type, values)) != {datetime}:
        return False
    return set(map(id, map(_TZINFO, values))) == {id(UTC)}  # that very object, not an equal


def _pickle(obj: Any) -> bytes:
    try:
        data = pickle.dumps(obj, protocol=5)
    except Exception:
        return b"C" + cloudpickle.dumps(obj, protocol=5)
    if b"__main__" in data:
        return b"C" + cloudpickle.dumps(obj, protocol=5)
    return b"P" + data


def _decode_columns(payload: memoryview) -> list[Any]:
    shape, utc, columns = pickle.loads(payload)
    for i, is_utc in enumerate(utc):
        if is_utc:
            columns[i] = _datetimes(columns[i])
    return list(_rebuild(shape, iter(columns)))


# Seconds as a float keep the microsecond (error below 0.5 µs) while |seconds| < 2**32
# (years 1833 to 2106); further out, whole microseconds in integer arithmetic.
_FLOAT_EXACT_US = 2**32 * 1_000_000


def _datetimes(micros: list[int], cls: type[datetime] = datetime) -> list[datetime]:
    """UTC datetimes (of type ``cls``) of epoch microseconds.

    >>> _datetimes([1, 10_000_000_000_000_000 + 7])[1].isoformat()
    '2286-11-20T17:46:40.000007+00:00'
    """
    if micros and max(micros) < _FLOAT_EXACT_US and min(micros) > -_FLOAT_EXACT_US:
        return list(map(cls.fromtimestamp, map(_MICRO.__rmul__, micros), repeat(UTC)))
    epoch = cls.fromtimestamp(0, UTC)
    return [epoch + timedelta(microseconds=us) for us in micros]


def _datum_types() -> tuple[type, ...]:
    return (Datum, *Datum.__subclasses__())


def _micros(times: list[Any]) -> list[int]:
    """Epoch microseconds of aware datetimes (identical neighbours computed once)."""
    out: list[int] = []
    last: Any = None
    us = 0
    for t in times:
        if t is not last:
            us = datetime.__sub__(t, EPOCH) // ONE_US
            last = t
        out.append(us)
    return out


def _encode_datums(items: list[Any]) -> bytes | None:
    kinds = set(map(type, items))
    if not kinds.issubset(_datum_types()):
        return None
    cls = kinds.pop() if len(kinds) == 1 else None
    if cls is None:
        return None
    headers = [d._headers for d in items]
    tags = [d._tags for d in items]
    columns = (
        cls,
        [d._keys for d in items],
        [d._value for d in items],
        _micros([d._event_time for d in items]),
        _micros([d._watermark for d in items]),
        headers if any(headers) else None,
        [d._id for d in items],
        tags if any(tags) else None,
    )
    return b"N" + _pickle(columns)[1:]


def _decode_datums(payload: memoryview) -> list[Any]:
    cls, keys, values, event_us, watermark_us, headers, ids, tags = pickle.loads(payload)

    def times(column: list[int]) -> list[Any]:
        """One datetime per distinct time (a watermark column is mostly one value)."""
        distinct = list(set(column))
        if len(distinct) == len(column):
            return _datetimes(column, UTCDateTime)
        made = _datetimes(distinct, UTCDateTime)
        return list(map(dict(zip(distinct, made)).__getitem__, column))

    n = len(values)
    make = cls._make
    return list(
        map(
            make,
            keys,
            values,
            times(event_us),
            times(watermark_us),
            headers if headers is not None else [{} for _ in range(n)],
            ids,
            tags if tags is not None else [[] for _ in range(n)],
        )
    )


def encode_items(items: list[Any]) -> bytes:
    """Pack a list of items into one chunk.

    The C pickler is tried first (cloudpickle's per-object hook makes it several
    times slower on e.g. datetimes); anything it cannot carry to another
    process — objects of classes defined in ``__main__`` or pickled by value —
    goes through cloudpickle.
    """
    if len(items) >= _COLUMNS_MIN:
        first = type(items[0])
        if first is tuple:
            columns = _encode_columns(items)
            if columns is not None:
                return columns
        elif first is datetime and _all_utc(items):
            return b"D" + _pickle([(d - EPOCH) // ONE_US for d in items])[1:]
    if items and hasattr(items[0], "_event_time"):
        datums = _encode_datums(items)
        if datums is not None:
            return datums
    return b"P" + _pickle(items)[1:]


def encode_range(r: range) -> bytes:
    """Pack a ``range`` as three numbers."""
    return b"R" + _RANGE.pack(r.start, r.stop, r.step)


def decode_items(data: bytes) -> Sequence[Any]:
    """Unpack a chunk: a list, or a ``range`` for range chunks."""
    tag = data[:1]
    if tag == b"P":
        return pickle.loads(memoryview(data)[1:])
    if tag == b"R":
        return range(*_RANGE.unpack_from(data, 1))
    if tag == b"T":
        return _decode_columns(memoryview(data)[1:])
    if tag == b"N":
        return _decode_datums(memoryview(data)[1:])
    if tag == b"D":
        return _datetimes(pickle.loads(memoryview(data)[1:]))
    raise ValueError(f"not a flowspark chunk (tag {tag!r})")


def encode_ordered(order: int, chunk: bytes) -> bytes:
    """Prefix a keyed chunk with its position in the upstream (partition, chunk)."""
    return b"O" + _ORDER.pack(order) + chunk


def decode_ordered(data: bytes) -> tuple[int, bytes]:
    """Split an ordered chunk into its position and the chunk itself."""
    if data[:1] != b"O":
        raise ValueError(f"not an ordered flowspark chunk (tag {data[:1]!r})")
    return _ORDER.unpack_from(data, 1)[0], data[1 + _ORDER.size :]
