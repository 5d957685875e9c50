"""How items travel between Python and Spark: packed chunks.

A Spark row carries a whole chunk of items (``port, key, data``), not one item:
Spark's per-row cost for Python sources and stages (~1.4 M rows/s measured on
this machine) would otherwise cap every flow far below bytewax's speed. A chunk
is a tag byte and a payload:

* ``R`` + three little-endian int64: ``range(start, stop, step)`` — in-memory
  ranges travel as three numbers;
* ``P`` + a cloudpickle (protocol 5) of a ``list`` — everything else. Exact
  ints, floats and strs pickle as compactly and as fast as Arrow here, and
  cloudpickle also carries instances of classes defined in ``__main__``.

>>> decode_items(encode_items([1, "a", (2, 3.5)]))
[1, 'a', (2, 3.5)]
>>> list(decode_items(encode_range(range(2, 8, 3))))
[2, 5]
"""

from __future__ import annotations

import pickle
import struct
from collections.abc import Sequence
from typing import Any

import cloudpickle

__all__ = [
    "ROW_SCHEMA",
    "STDOUT_PORT",
    "MARKER_PORT",
    "LATE_COUNT_PORT",
    "KEY_SEPARATOR",
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
# Rows on this port count late items: key = step id, data = the count (decimal).
LATE_COUNT_PORT = -3
# A keyed row's key column is f"{port}{KEY_SEPARATOR}{user key}".
KEY_SEPARATOR = "\x1f"

_RANGE = struct.Struct("<qqq")
_ORDER = struct.Struct("<q")


def encode_items(items: list[Any]) -> bytes:
    """Pack a list of items into one chunk.

    The C pickler is tried first (cloudpickle's per-object hook makes it several
    times slower on e.g. datetimes); anything it cannot carry to another
    process — objects of classes defined in ``__main__`` or pickled by value —
    goes through cloudpickle.
    """
    try:
        data = pickle.dumps(items, protocol=5)
    except Exception:
        return b"P" + cloudpickle.dumps(items, protocol=5)
    if b"__main__" in data:
        return b"P" + cloudpickle.dumps(items, protocol=5)
    return b"P" + data


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
    raise ValueError(f"not a flowspark chunk (tag {tag!r})")


def encode_ordered(order: int, chunk: bytes) -> bytes:
    """Prefix a keyed chunk with its position in the upstream (partition, chunk)."""
    return b"O" + _ORDER.pack(order) + chunk


def decode_ordered(data: bytes) -> tuple[int, bytes]:
    """Split an ordered chunk into its position and the chunk itself."""
    if data[:1] != b"O":
        raise ValueError(f"not an ordered flowspark chunk (tag {data[:1]!r})")
    return _ORDER.unpack_from(data, 1)[0], data[1 + _ORDER.size :]
