"""bytewax 0.21's windowing operators (``bytewax.operators.windowing``) on flowspark.

Every window operator ends in :func:`window`: one step of the ``window`` kind,
which keeps per key a clock, the open windows by id, a logic per window and
(with ``ordered``) the values waiting for the watermark, in Spark's state store
(:class:`flowspark.runtime.window_run.WindowRun`). It returns :class:`WindowOut`:
``down`` has ``(key, (window_id, value))``, ``late`` the late values as ``(key,
(window_id, value))`` and ``meta`` ``(key, (window_id, WindowMetadata))`` once a
window closes. What differs from bytewax 0.21.1: docs/bytewax-021.md.

>>> from datetime import datetime, timedelta, timezone
>>> import flowspark.operators as op
>>> from flowspark.dataflow import Dataflow
>>> from flowspark.testing import TestingSource
>>> flow = Dataflow("eg")
>>> s = op.input("inp", flow, TestingSource([("a", 1)]))
>>> clock = EventClock(lambda v: v, wait_for_system_duration=timedelta(0))
>>> win = TumblingWindower(timedelta(seconds=10), datetime(2024, 1, 1, tzinfo=timezone.utc))
>>> out = count_window("count", s, clock, win, lambda x: x[0])
>>> [(step.kind, step.step_id) for step in flow.steps]  # doctest: +NORMALIZE_WHITESPACE
[('input', 'eg.inp'), ('map', 'eg.count.keyed'),
 ('window', 'eg.count.sum.window.stateful_batch')]
>>> out.down.stream_id, out.late.stream_id, out.meta.stream_id
('eg.count.down', 'eg.count.late', 'eg.count.meta')
"""

from __future__ import annotations

import functools
import typing
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from operator import add as _add
from typing import Any, Generic

from flowspark.api.dataflow import Stream
from flowspark.api.windowing import (
    LATE_SESSION_ID,
    UTC_MAX,
    UTC_MIN,
    ZERO_TD,
    Clock,
    ClockLogic,
    EventClock,
    SessionWindower,
    SlidingWindower,
    SystemClock,
    TumblingWindower,
    Windower,
    WindowerLogic,
    WindowMetadata,
)
from flowspark.operators._typevars import S, V, W, W_co, X
from flowspark.operators.core import KeyedStream
from flowspark.operators.joins import (
    JoinEmitMode,
    JoinInsertMode,
    JoinState,
    _join_label_merge,
    _JoinBuilder,
    _JoinLogic,
)
from flowspark.operators.scoping import operator
from flowspark.operators.shims import _identity, _ReduceFolder
from flowspark.operators.stateless import key_on

__all__ = [
    "LATE_SESSION_ID",
    "UTC_MAX",
    "UTC_MIN",
    "ZERO_TD",
    "Clock",
    "ClockLogic",
    "EventClock",
    "SessionWindower",
    "SlidingWindower",
    "SystemClock",
    "TumblingWindower",
    "WindowLogic",
    "WindowMetadata",
    "WindowOut",
    "Windower",
    "WindowerLogic",
    "collect_window",
    "count_window",
    "fold_window",
    "join_window",
    "max_window",
    "min_window",
    "reduce_window",
    "window",
]


class WindowLogic(ABC, Generic[V, W, S]):
    """The logic of one window of one key, for :func:`window`.

    ``on_value`` gets the window's values (in time order when ``ordered``),
    ``on_merge`` another window's logic merged into this one (sessions),
    ``on_close`` the window's end; each returns values to emit as ``(key,
    (window_id, value))``. ``snapshot()`` is what ``builder(resume_state)``
    rebuilds the logic from: flowspark keeps it between micro-batches.
    """

    @abstractmethod
    def on_value(self, value: V) -> Iterable[W]:
        """A value of this window."""

    @abstractmethod
    def on_merge(self, original: Any) -> Iterable[W]:
        """``original``'s window merges into this one (its logic is dropped after)."""

    @abstractmethod
    def on_close(self) -> Iterable[W]:
        """The window closed."""

    @abstractmethod
    def snapshot(self) -> S:
        """The window's state, picklable."""


@dataclass(frozen=True)
class WindowOut(Generic[V, W_co]):
    """The streams of a window operator, each keyed and sub-keyed by window id."""

    down: KeyedStream[tuple[int, W_co]]
    """What the window logics emitted: ``(key, (window_id, value))``."""
    late: KeyedStream[tuple[int, V]]
    """Values late for their windows: ``(key, (window_id, value))``."""
    meta: KeyedStream[tuple[int, WindowMetadata]]
    """Each closed window's ``(key, (window_id, WindowMetadata))`` (not for a window
    merged into another)."""


@operator(_core=True)
def _window_step(
    step_id: str,
    up: KeyedStream[V],
    clock: Clock,
    windower: Windower,
    builder: Callable[[Any], Any],
    ordered: bool,
) -> WindowOut[V, Any]:
    stream = up.window(step_id, clock, windower, builder, ordered)
    return WindowOut(stream, stream.late, stream.meta)


@operator
def window(
    step_id: str,
    up: KeyedStream[V],
    clock: Clock,
    windower: Windower,
    builder: Callable[[Any], WindowLogic[V, W, Any]],
    ordered: bool = True,
) -> WindowOut[V, W]:
    """Run a :class:`WindowLogic` per key and window: ``builder(resume_state)`` makes
    it (``None`` for a window that opens). ``ordered``: values reach the logics in
    time order once the watermark passes them, else as they come."""
    return _window_step("stateful_batch", up, clock, windower, builder, ordered)


class _FoldWindow(WindowLogic[Any, Any, Any]):
    def __init__(self, folder: Callable, merger: Callable, state: Any) -> None:
        self.folder, self.merger, self.state = folder, merger, state

    @property
    def __wrapped__(self) -> Callable[..., Any]:
        return self.folder

    def on_value(self, value: Any) -> Iterable[Any]:
        self.state = self.folder(self.state, value)
        return ()

    def on_merge(self, original: Any) -> Iterable[Any]:
        self.state = self.merger(self.state, original.state)
        return ()

    def on_close(self) -> Iterable[Any]:
        return (self.state,)

    def snapshot(self) -> Any:
        # The engine pickles it at once (or the next call rebuilds from it): no copy.
        return self.state


class FoldWindowBuilder:
    """The window logic of :func:`fold_window`: ``folder(acc, value)`` from
    ``builder()``, ``merger(acc, acc)`` when windows merge, emitted at close."""

    def __init__(self, builder: Callable[[], Any], folder: Callable, merger: Callable) -> None:
        self.builder, self.folder, self.merger = builder, folder, merger

    @property
    def fold_fns(self) -> tuple[Callable[[], Any], Callable]:
        """``(builder, folder)``: the engine may fold values straight into accumulators
        (a logic's snapshot is its accumulator, and ``builder(None)`` starts one)."""
        return (self.builder, self.folder)

    @property
    def __wrapped__(self) -> Callable[..., Any]:
        return self.builder

    def __call__(self, resume_state: Any) -> _FoldWindow:
        state = resume_state if resume_state is not None else self.builder()
        return _FoldWindow(self.folder, self.merger, state)


@operator
def fold_window(
    step_id: str,
    up: KeyedStream[V],
    clock: Clock,
    windower: Windower,
    builder: Callable[[], S],
    folder: Callable[[S, V], S],
    merger: Callable[[S, S], S],
    ordered: bool = True,
) -> WindowOut[V, S]:
    """Fold each window's values into ``builder()`` with ``folder(acc, value)``
    (``merger(acc, acc)`` when sessions merge); emit the accumulator when the
    window closes."""
    logic = FoldWindowBuilder(builder, folder, merger)
    return window("window", up, clock, windower, logic, ordered)


def _list_folder(acc: list[Any], value: Any) -> list[Any]:
    acc.append(value)
    return acc


def _set_folder(acc: set[Any], value: Any) -> set[Any]:
    acc.add(value)
    return acc


def _dict_merger(a: dict[Any, Any], b: dict[Any, Any]) -> dict[Any, Any]:
    a.update(b)
    return a


@dataclass(frozen=True)
class _DictFolder:
    step_id: str

    def __call__(self, acc: dict[Any, Any], pair: Any) -> dict[Any, Any]:
        try:
            k, v = pair
        except TypeError as ex:
            raise TypeError(
                f"step {self.step_id!r} collecting into a `dict` requires `(key, value)` "
                f"2-tuple as the values in the stream; got a {type(pair)!r} instead"
            ) from ex
        acc[k] = v
        return acc


def _collect_callbacks(step_id: str, into: Any) -> tuple[Callable, Callable, Callable]:
    if isinstance(into, type) and issubclass(into, list):
        return (list, _list_folder, list.__add__)
    if isinstance(into, type) and issubclass(into, set):
        return (set, _set_folder, set.union)
    if isinstance(into, type) and issubclass(into, dict):
        return (dict, _DictFolder(step_id), _dict_merger)
    raise TypeError(
        f"`collect_window` doesn't support `{into!r}`; only `list`, `set`, and `dict`; "
        "use `fold` operator directly"
    )


@operator
def collect_window(
    step_id: str,
    up: KeyedStream[V],
    clock: Clock,
    windower: Windower,
    into: Any = list,
    ordered: bool = True,
) -> WindowOut[V, Any]:
    """Gather each window's values into a ``list`` (time order when ``ordered``), a
    ``set``, or a ``dict`` (values ``(k, v)``), emitted when the window closes."""
    builder, folder, merger = _collect_callbacks(step_id, into)
    return fold_window("fold_window", up, clock, windower, builder, folder, merger, ordered)


def _zero() -> int:
    return 0


def _count_one(n: int, _value: Any) -> int:
    return n + 1


@operator
def count_window(
    step_id: str,
    up: Stream[X],
    clock: Clock,
    windower: Windower,
    key: Callable[[X], str],
) -> WindowOut[X, int]:
    """Count the items per ``key(item)`` and window; emit ``(key, (window_id, count))``
    when a window closes."""
    keyed = key_on("keyed", up, key)
    return fold_window("sum", keyed, clock, windower, _zero, _count_one, _add, ordered=False)


def _no_value() -> Any:
    return None


@operator
def reduce_window(
    step_id: str,
    up: KeyedStream[V],
    clock: Clock,
    windower: Windower,
    reducer: Callable[[V, V], V],
) -> WindowOut[V, V]:
    """Combine each window's values with ``reducer(acc, value)`` (the first value
    starts it); emit the result when the window closes."""
    return fold_window(
        "fold_window",
        up,
        clock,
        windower,
        _no_value,
        _ReduceFolder(reducer),
        reducer,
        ordered=False,
    )


@operator
def max_window(
    step_id: str,
    up: KeyedStream[V],
    clock: Clock,
    windower: Windower,
    by: Callable[[V], Any] = _identity,
) -> WindowOut[V, V]:
    """The largest value (compared by ``by(value)``) per key and window."""
    return reduce_window("reduce_window", up, clock, windower, functools.partial(max, key=by))


@operator
def min_window(
    step_id: str,
    up: KeyedStream[V],
    clock: Clock,
    windower: Windower,
    by: Callable[[V], Any] = _identity,
) -> WindowOut[V, V]:
    """The smallest value (compared by ``by(value)``) per key and window."""
    return reduce_window("reduce_window", up, clock, windower, functools.partial(min, key=by))


class _JoinWindow(_JoinLogic, WindowLogic[tuple[int, Any], tuple[Any, ...], JoinState]):
    def _check_emit(self) -> list[tuple[Any, ...]]:
        if self.emit_mode == "complete" and self.state.all_set():
            rows = self.state.astuples()
            self.state = JoinState.for_side_count(len(self.state.seen))
            return rows
        if self.emit_mode == "running":
            return self.state.astuples()
        return []

    def on_value(self, value: tuple[int, Any]) -> Iterable[tuple[Any, ...]]:
        side, joined = value
        self._insert(side, joined)
        return self._check_emit()

    def on_merge(self, original: Any) -> Iterable[tuple[Any, ...]]:
        mine, theirs = self.state.seen, original.state.seen
        # As bytewax 0.21.1 does it (whatever its comments say): with "first" the
        # merged window's values win where it has any, with "last" this window's.
        if self.insert_mode == "first":
            merged = [t or m for m, t in zip(mine, theirs, strict=True)]
        elif self.insert_mode == "last":
            merged = [m or t for m, t in zip(mine, theirs, strict=True)]
        else:
            merged = [m + t for m, t in zip(mine, theirs, strict=True)]
        self.state = JoinState(merged)
        return self._check_emit()

    def on_close(self) -> Iterable[tuple[Any, ...]]:
        return self.state.astuples() if self.emit_mode == "final" else ()


class JoinWindowBuilder(_JoinBuilder[_JoinWindow]):
    """The window logic of :func:`join_window`."""

    _logic = _JoinWindow


@dataclass(frozen=True)
class _SideTime:
    """An event clock's ``ts_getter`` on a join's ``(side, value)``."""

    ts_getter: Callable[[Any], Any]

    @property
    def __wrapped__(self) -> Callable[..., Any]:
        return self.ts_getter

    def __call__(self, side_value: tuple[int, Any]) -> Any:
        return self.ts_getter(side_value[1])


@operator
def join_window(
    step_id: str,
    clock: Clock,
    windower: Windower,
    *sides: KeyedStream[Any],
    insert_mode: JoinInsertMode = "last",
    emit_mode: JoinEmitMode = "final",
    ordered: bool = True,
) -> WindowOut[Any, tuple[Any, ...]]:
    """Gather the values of each key and window on ``sides``: ``(key, (window_id,
    (v1, v2, ...)))``, as ``insert_mode`` and ``emit_mode`` say (``"final"``: when
    the window closes)."""
    if insert_mode not in typing.get_args(JoinInsertMode):
        raise ValueError(f"unknown join insert mode {insert_mode!r}")
    if emit_mode not in typing.get_args(JoinEmitMode):
        raise ValueError(f"unknown join emit mode {emit_mode!r}")
    merged = _join_label_merge("add_names", *sides)
    if isinstance(clock, EventClock):
        clock = EventClock(
            _SideTime(clock.ts_getter),
            clock.wait_for_system_duration,
            clock.now_getter,
            clock.to_system_utc,
        )
    builder = JoinWindowBuilder(len(sides), insert_mode, emit_mode)
    return window("window", merged, clock, windower, builder, ordered=ordered)
