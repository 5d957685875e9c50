"""bytewax 0.21's keyed operators, on flowspark's keyed kinds.

``stateful_map`` is the ``stateful_map`` kind (its builder makes no state, so
the mapper gets ``None`` for a new key and a ``None`` state forgets the key);
``stateful_flat_map`` is that kind and a ``flat_map``. ``stateful`` runs a
:class:`~flowspark.operators.StatefulLogic` on the ``stateful_batch`` kind, and
so do ``collect`` and the ``*_final`` folds, which emit once the input has
ended: ``fold_final``, ``reduce_final`` (its values pre-reduced per chunk
before the shuffle, as bytewax does per batch), ``count_final``, ``max_final``
and ``min_final``.

>>> from flowspark.api.dataflow import Dataflow
>>> from flowspark.operators.core import input
>>> from flowspark.testing import TestingSource
>>> flow = Dataflow("eg")
>>> words = input("words", flow, TestingSource(["a", "b", "a"]))
>>> counts = count_final("count", words, lambda w: w)
>>> [(step.kind, step.step_id) for step in flow.steps]  # doctest: +NORMALIZE_WHITESPACE
[('input', 'eg.words'), ('map', 'eg.count.init_count'),
 ('flat_map_batch', 'eg.count.sum.pre_reduce'), ('stateful_batch', 'eg.count.sum.fold_final')]
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from operator import add as _add  # C: count_final sums with it per item
from typing import Any

from flowspark.api.dataflow import Stream
from flowspark.operators._typevars import S, V, W, X
from flowspark.operators.core import KeyedStream, flat_map_batch
from flowspark.operators.logic import ItemLogicBuilder, StatefulBatchLogic
from flowspark.operators.scoping import operator
from flowspark.operators.shims import (
    _ExpandValues,
    _identity,
    _KeyOne,
    _PreReduce,
    _ReduceFolder,
    _StatefulFlatMapper,
    no_state,
    utc_now,
)
from flowspark.operators.stateless import flat_map, map

__all__ = [
    "collect",
    "count_final",
    "fold_final",
    "max_final",
    "min_final",
    "reduce_final",
    "stateful",
    "stateful_flat_map",
    "stateful_map",
    "CollectBuilder",
    "FoldFinalBuilder",
]


@operator
def stateful(step_id: str, up: KeyedStream[V], builder: Callable[[Any], Any]) -> KeyedStream[W]:
    """Run a :class:`~flowspark.operators.StatefulLogic` per key, one value at a time:
    ``builder(resume_state)`` makes it (``None`` for a new key)."""
    return up.stateful_batch(step_id, ItemLogicBuilder(builder))


@operator
def stateful_map(
    step_id: str,
    up: KeyedStream[V],
    mapper: Callable[[Any, V], tuple[Any, W]],
) -> KeyedStream[W]:
    """``mapper(state, value) -> (state, out)`` per key, emitting ``(key, out)``; the
    state is ``None`` for a new key, and a ``None`` state forgets the key."""
    return up.stateful_map(step_id, no_state, mapper)


@operator
def stateful_flat_map(
    step_id: str,
    up: KeyedStream[V],
    mapper: Callable[[Any, V], tuple[Any, Iterable[W]]],
) -> KeyedStream[W]:
    """As :func:`stateful_map`, but ``mapper`` returns ``(state, values)`` and each
    value is emitted as ``(key, value)``."""
    lists = stateful_map("stateful_map", up, _StatefulFlatMapper(step_id, mapper))
    return flat_map("flat_map", lists, _ExpandValues())


class _Collect(StatefulBatchLogic[Any, list[Any], Any]):
    """A key's list so far and when it times out (``timeout`` after its latest value)."""

    def __init__(self, builder: CollectBuilder, state: Any) -> None:
        self.builder = builder
        self.acc, self.timeout_at = state if state is not None else ([], None)

    def on_batch(self, values: list[Any]) -> tuple[Iterable[list[Any]], bool]:
        full: list[list[Any]] = []
        for value in values:
            self.acc.append(value)
            self.timeout_at = self.builder.now_getter() + self.builder.timeout
            if len(self.acc) >= self.builder.max_size:
                full.append(self.acc)
                self.acc, self.timeout_at = [], None
        return full, not self.acc

    def on_notify(self) -> tuple[Iterable[list[Any]], bool]:
        return ([self.acc] if self.acc else []), StatefulBatchLogic.DISCARD

    def on_eof(self) -> tuple[Iterable[list[Any]], bool]:
        return ([self.acc] if self.acc else []), StatefulBatchLogic.DISCARD

    def notify_at(self) -> datetime | None:
        return self.timeout_at

    def snapshot(self) -> Any:
        return (self.acc, self.timeout_at)


class CollectBuilder:
    """The logic of ``collect``: lists of up to ``max_size`` values, emitted when full,
    ``timeout`` after their latest value, or at the end of the input."""

    def __init__(
        self, timeout: timedelta, max_size: int, now_getter: Callable[[], datetime] = utc_now
    ) -> None:
        self.timeout, self.max_size, self.now_getter = timeout, max_size, now_getter

    def __call__(self, resume_state: Any) -> _Collect:
        return _Collect(self, resume_state)


@operator
def collect(
    step_id: str, up: KeyedStream[V], timeout: timedelta, max_size: int
) -> KeyedStream[list[V]]:
    """Gather each key's values into lists of up to ``max_size``: a list leaves when
    full, ``timeout`` after its latest value, or when the input ends."""
    return up.stateful_batch(step_id, CollectBuilder(timeout, max_size))


class _FoldFinal(StatefulBatchLogic[Any, Any, Any]):
    def __init__(self, folder: Callable[[Any, Any], Any], acc: Any) -> None:
        self.folder, self.acc = folder, acc

    @property
    def __wrapped__(self) -> Callable[..., Any]:
        return self.folder

    def on_batch(self, values: list[Any]) -> tuple[Iterable[Any], bool]:
        folder, acc = self.folder, self.acc
        for value in values:
            acc = folder(acc, value)
        self.acc = acc
        return (), StatefulBatchLogic.RETAIN

    def on_eof(self) -> tuple[Iterable[Any], bool]:
        return (self.acc,), StatefulBatchLogic.DISCARD

    def snapshot(self) -> Any:
        # Nothing mutates the accumulator once it is snapshotted: the engine stores
        # (pickles) it, or the next call rebuilds the logic from it.
        return self.acc


class FoldFinalBuilder:
    """The logic of ``fold_final``: ``folder(acc, value)`` from ``builder()``, emitted
    at the end of the input."""

    def __init__(self, builder: Callable[[], Any], folder: Callable[[Any, Any], Any]) -> None:
        self.builder, self.folder = builder, folder

    @property
    def __wrapped__(self) -> Callable[..., Any]:
        return self.folder

    def __call__(self, resume_state: Any) -> _FoldFinal:
        acc = resume_state if resume_state is not None else self.builder()
        return _FoldFinal(self.folder, acc)


@operator
def fold_final(
    step_id: str,
    up: KeyedStream[V],
    builder: Callable[[], S],
    folder: Callable[[S, V], S],
) -> KeyedStream[S]:
    """Fold each key's values into ``builder()`` with ``folder(acc, value)``; emit
    ``(key, acc)`` only once the input has ended."""
    return up.stateful_batch(step_id, FoldFinalBuilder(builder, folder))


@operator
def reduce_final(step_id: str, up: KeyedStream[V], reducer: Callable[[V, V], V]) -> KeyedStream[V]:
    """Combine each key's values with ``reducer(acc, value)`` (the first value starts
    it); emit ``(key, acc)`` only once the input has ended."""
    pre = flat_map_batch("pre_reduce", up, _PreReduce(step_id, reducer))
    return fold_final("fold_final", pre, no_state, _ReduceFolder(reducer))


@operator
def count_final(step_id: str, up: Stream[X], key: Callable[[X], str]) -> KeyedStream[int]:
    """Count the items per ``key(item)``; emit ``(key, count)`` once the input has ended."""
    ones = map("init_count", up, _KeyOne(step_id, key))
    return reduce_final("sum", ones, _add)


@operator
def max_final(
    step_id: str, up: KeyedStream[V], by: Callable[[V], Any] = _identity
) -> KeyedStream[V]:
    """The largest value per key (compared by ``by(value)``), once the input has ended."""
    return reduce_final("reduce_final", up, functools.partial(max, key=by))


@operator
def min_final(
    step_id: str, up: KeyedStream[V], by: Callable[[V], Any] = _identity
) -> KeyedStream[V]:
    """The smallest value per key (compared by ``by(value)``), once the input has ended."""
    return reduce_final("reduce_final", up, functools.partial(min, key=by))
