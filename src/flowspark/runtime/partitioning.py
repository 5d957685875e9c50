"""Spark's hash partitioning of a string key column, computed in Python.

A keyed exchange sends a row to partition ``pmod(murmur3(key, seed=42), n)``
(Spark's ``HashPartitioning``; its Murmur3 variant mixes the trailing bytes one
at a time). Knowing it lets a task gather the keys bound for one partition into
a single row whose key Spark places on that same partition (see
:func:`key_for_partition`), so each key is handled where it would have been on
its own, in the same order.

>>> spark_string_hash("a")
1485273170
>>> spark_partition("a", 2), spark_partition("b", 2)
(0, 1)
"""

from __future__ import annotations

import zlib
from functools import lru_cache

__all__ = ["spark_string_hash", "spark_partition", "key_for_partition", "state_bucket"]

# Keyed steps without a write-ahead log keep their keys' state in this many
# buckets per step: Spark's per-grouping-key costs are paid per bucket, not per
# key. Never change it: a checkpoint's state is laid out by it.
STATE_BUCKETS = 32

_MASK = 0xFFFFFFFF
_SEED = 42


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _MASK


def _mix(h1: int, k1: int) -> int:
    k1 = (k1 * 0xCC9E2D51) & _MASK
    k1 = (_rotl(k1, 15) * 0x1B873593) & _MASK
    h1 = _rotl(h1 ^ k1, 13)
    return (h1 * 5 + 0xE6546B64) & _MASK


def spark_string_hash(text: str, seed: int = _SEED) -> int:
    """Spark's ``hash(text)`` (Murmur3 x86 32-bit over UTF-8, signed like a Java int)."""
    data = text.encode("utf-8", "surrogatepass")
    n = len(data)
    aligned = n - n % 4
    h1 = seed & _MASK
    for i in range(0, aligned, 4):
        h1 = _mix(h1, int.from_bytes(data[i : i + 4], "little"))
    for b in data[aligned:]:  # one signed byte at a time, as Spark does
        h1 = _mix(h1, (b - 256 if b >= 128 else b) & _MASK)
    h1 ^= n
    h1 ^= h1 >> 16
    h1 = (h1 * 0x85EBCA6B) & _MASK
    h1 ^= h1 >> 13
    h1 = (h1 * 0xC2B2AE35) & _MASK
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 >= 1 << 31 else h1


def spark_partition(key: str, partitions: int) -> int:
    """The partition a Spark hash exchange over ``partitions`` sends ``key`` to."""
    return spark_string_hash(key) % partitions


@lru_cache(maxsize=1024)
def key_for_partition(prefix: str, partition: int, partitions: int) -> str:
    """The first ``f"{prefix}{i}"`` that Spark sends to ``partition``."""
    i = 0
    while spark_partition(f"{prefix}{i}", partitions) != partition:
        i += 1
    return f"{prefix}{i}"


def state_bucket(key: str) -> int:
    """The state bucket of a user key: stable across processes, runs and restarts.

    >>> state_bucket("a"), state_bucket("b")
    (3, 25)
    """
    return zlib.crc32(key.encode("utf-8", "surrogatepass")) % STATE_BUCKETS
