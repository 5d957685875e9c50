"""bytewax 0.21's stateless operators, each one step of flowspark's stateless kinds.

``map``, ``filter``, ``filter_map``, ``flat_map`` and their ``*_value`` forms,
``flatten``, ``inspect``, ``key_on``, ``key_rm``, ``raises`` and
``enrich_cached``. A ``*_value`` operator splits each ``(key, value)`` item
(bytewax's ``TypeError`` for anything else) and keeps the key.

>>> from flowspark.api.dataflow import Dataflow
>>> from flowspark.operators.core import input
>>> from flowspark.testing import TestingSource
>>> flow = Dataflow("eg")
>>> s = input("inp", flow, TestingSource(["a b"]))
>>> s = key_on("key", flat_map("split", s, str.split), lambda w: w)
>>> s = map_value("upper", s, str.upper)
>>> [(step.kind, step.step_id) for step in flow.steps]
[('input', 'eg.inp'), ('flat_map', 'eg.split'), ('map', 'eg.key'), ('map', 'eg.upper')]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import Any

from flowspark.api.dataflow import Stream
from flowspark.api.outputs import DynamicOutput, StatelessSink
from flowspark.operators._typevars import DK, DV, V, W, X, Y
from flowspark.operators.core import KeyedStream, flat_map_batch
from flowspark.operators.scoping import operator
from flowspark.operators.shims import (
    TTLCache,
    _BoolPredicate,
    _EnrichCached,
    _FilterMapValue,
    _FilterValue,
    _FlatMapValue,
    _Flatten,
    _KeyOn,
    _KeyRm,
    _MapValue,
    _StepInspector,
    default_inspector,
    utc_now,
)

__all__ = [
    "enrich_cached",
    "filter",
    "filter_map",
    "filter_map_value",
    "filter_value",
    "flat_map",
    "flat_map_value",
    "flatten",
    "inspect",
    "key_on",
    "key_rm",
    "map",
    "map_value",
    "raises",
]


@operator
def map(step_id: str, up: Stream[X], mapper: Callable[[X], Y]) -> Stream[Y]:  # noqa: A001
    """Transform each item one-to-one."""
    return up.map(step_id, mapper)


@operator
def map_value(step_id: str, up: KeyedStream[V], mapper: Callable[[V], W]) -> KeyedStream[W]:
    """Transform each value of a keyed stream one-to-one; the key stays."""
    return up.map(step_id, _MapValue(step_id, mapper))


@operator
def filter(step_id: str, up: Stream[X], predicate: Callable[[X], bool]) -> Stream[X]:  # noqa: A001
    """Keep the items for which ``predicate`` returns ``True`` (it must return a ``bool``)."""
    return up.filter(step_id, _BoolPredicate(step_id, predicate))


@operator
def filter_value(
    step_id: str, up: KeyedStream[V], predicate: Callable[[V], bool]
) -> KeyedStream[V]:
    """Keep the ``(key, value)`` items for which ``predicate(value)`` is ``True``."""
    return up.filter(step_id, _FilterValue(step_id, predicate))


@operator
def filter_map(step_id: str, up: Stream[X], mapper: Callable[[X], Y | None]) -> Stream[Y]:
    """Map each item, dropping those the mapper turns into ``None``."""
    return up.filter_map(step_id, mapper)


@operator
def filter_map_value(
    step_id: str, up: KeyedStream[V], mapper: Callable[[V], W | None]
) -> KeyedStream[W]:
    """Map each value, dropping the items whose value the mapper turns into ``None``."""
    return up.filter_map(step_id, _FilterMapValue(step_id, mapper))


@operator
def flat_map(step_id: str, up: Stream[X], mapper: Callable[[X], Iterable[Y]]) -> Stream[Y]:
    """Emit each element of ``mapper(item)``."""
    return up.flat_map(step_id, mapper)


@operator
def flat_map_value(
    step_id: str, up: KeyedStream[V], mapper: Callable[[V], Iterable[W]]
) -> KeyedStream[W]:
    """Emit ``(key, w)`` for each ``w`` of ``mapper(value)``."""
    return up.flat_map(step_id, _FlatMapValue(step_id, mapper))


@operator
def flatten(step_id: str, up: Stream[Iterable[X]]) -> Stream[X]:
    """Emit the elements of each item (every item must be an iterable)."""
    return up.flat_map(step_id, _Flatten(step_id))


@operator
def inspect(
    step_id: str,
    up: Stream[X],
    inspector: Callable[[str, X], None] = default_inspector,
) -> Stream[X]:
    """Call ``inspector(step_id, item)`` on each item (by default print
    ``{step_id}: {item!r}``); items pass on unchanged. A flow may end here."""
    return up.inspect(step_id, _StepInspector(step_id, inspector))


@operator
def key_on(step_id: str, up: Stream[X], key: Callable[[X], str]) -> KeyedStream[X]:
    """Make each item ``(key(item), item)``; the key must be a ``str``."""
    return up.map(step_id, _KeyOn(step_id, key))


@operator
def key_rm(step_id: str, up: KeyedStream[X]) -> Stream[X]:
    """Drop the keys: ``(key, value)`` → ``value``."""
    return up.map(step_id, _KeyRm(step_id))


class _RaisingSink(StatelessSink):
    def __init__(self, step_id: str) -> None:
        self.step_id = step_id

    def write_batch(self, items: list[Any]) -> None:
        for item in items:
            raise RuntimeError(f"`raises` step {self.step_id!r} got an item: {item!r}")


class _RaisingOutput(DynamicOutput):
    """An output that fails the run with ``RuntimeError`` on its first item."""

    def __init__(self, step_id: str) -> None:
        self.step_id = step_id

    def build(self, worker_index: int, worker_count: int) -> StatelessSink:
        return _RaisingSink(self.step_id)


@operator
def raises(step_id: str, up: Stream[Any]) -> None:
    """Stop the run with a ``RuntimeError`` on any item (for streams that must stay
    empty, e.g. errors)."""
    up.output(step_id, _RaisingOutput(step_id))


@operator
def enrich_cached(
    step_id: str,
    up: Stream[X],
    getter: Callable[[DK], DV],
    mapper: Callable[[TTLCache, X], Y],
    ttl: timedelta = timedelta.max,
    _now_getter: Callable[[], datetime] = utc_now,
) -> Stream[Y]:
    """``mapper(cache, item)`` for each item, where ``cache.get(k)`` is ``getter(k)``
    cached for ``ttl``. The cache lives in each Spark Python worker as long as the
    worker keeps the step (at least one chunk of items), not for the whole run."""
    return flat_map_batch("flat_map_batch", up, _EnrichCached(getter, mapper, ttl, _now_getter))
