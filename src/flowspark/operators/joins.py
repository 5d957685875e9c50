"""bytewax 0.21's ``join``: the values of a key on several keyed streams, together.

Each side's values are labelled with the side's number (``map_value``), the
sides merged, and a ``stateful_batch`` step keeps per key what each side has
sent. ``insert_mode``: a side keeps its ``"last"`` value, its ``"first"``, or
all of them (``"product"``: one row per combination). ``emit_mode``:
``"complete"`` emits once every side has a value and forgets the key;
``"final"`` emits when the input ends; ``"running"`` emits on every value
(missing sides ``None``) and keeps the key.

>>> state = JoinState.for_side_count(3)
>>> state.add_val(0, 1); state.add_val(0, 2); state.add_val(2, 3)
>>> state.astuples()
[(1, None, 3), (2, None, 3)]
"""

from __future__ import annotations

import itertools
import typing
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from flowspark.operators.core import KeyedStream, merge, stateful_batch
from flowspark.operators.logic import StatefulBatchLogic
from flowspark.operators.scoping import operator
from flowspark.operators.shims import _Label
from flowspark.operators.stateless import map_value

__all__ = ["JoinEmitMode", "JoinInsertMode", "JoinState", "JoinBuilder", "join"]

JoinInsertMode = Literal["first", "last", "product"]
"""What a side keeps of its values: the first, the last, or all of them."""
JoinEmitMode = Literal["complete", "final", "running"]
"""When a join emits: once every side has a value, at the end of the input, or on
every value."""

_LONE_NONE = [None]


@dataclass
class JoinState:
    """The values each side of a key has sent (one list per side)."""

    seen: list[list[Any]]

    @classmethod
    def for_side_count(cls, side_count: int) -> JoinState:
        """Nothing seen yet, on ``side_count`` sides."""
        return cls([[] for _ in range(side_count)])

    def set_val(self, side: int, value: Any) -> None:
        """Keep ``value`` as the side's only value."""
        self.seen[side] = [value]

    def add_val(self, side: int, value: Any) -> None:
        """Add ``value`` to the side's values."""
        self.seen[side].append(value)

    def is_set(self, side: int) -> bool:
        """Whether the side has a value."""
        return len(self.seen[side]) > 0

    def all_set(self) -> bool:
        """Whether every side has a value."""
        return all(self.seen)

    def astuples(self) -> list[tuple[Any, ...]]:
        """Every combination of one value per side (``None`` for a side without any)."""
        return list(itertools.product(*(values or _LONE_NONE for values in self.seen)))


class _JoinLogic:
    """What the join logics (``join``'s and ``join_window``'s) share: the modes and
    the values each side has sent (``state``)."""

    def __init__(self, insert_mode: str, emit_mode: str, state: JoinState) -> None:
        self.insert_mode, self.emit_mode, self.state = insert_mode, emit_mode, state

    def _insert(self, side: int, value: Any) -> None:
        """Keep ``value`` for ``side`` as ``insert_mode`` says."""
        if self.insert_mode == "product":
            self.state.add_val(side, value)
        elif self.insert_mode == "last" or not self.state.is_set(side):
            self.state.set_val(side, value)

    def snapshot(self) -> JoinState:
        return self.state


L = TypeVar("L", bound=_JoinLogic)


class _JoinBuilder(Generic[L]):
    """A join's builder (``builder(resume_state)``): a ``_logic`` on the state resumed
    or on nothing seen yet."""

    _logic: type[L]

    def __init__(self, side_count: int, insert_mode: str, emit_mode: str) -> None:
        self.side_count, self.insert_mode, self.emit_mode = side_count, insert_mode, emit_mode

    def __call__(self, resume_state: JoinState | None) -> L:
        state = resume_state or JoinState.for_side_count(self.side_count)
        return self._logic(self.insert_mode, self.emit_mode, state)


class _Join(_JoinLogic, StatefulBatchLogic[tuple[int, Any], tuple[Any, ...], JoinState]):
    def on_batch(self, values: list[tuple[int, Any]]) -> tuple[Iterable[Any], bool]:
        rows: list[Any] = []
        for side, value in values:
            self._insert(side, value)
            if self.emit_mode == "complete" and self.state.all_set():
                rows.extend(self.state.astuples())
                self.state = JoinState.for_side_count(len(self.state.seen))
            elif self.emit_mode == "running":
                rows.extend(self.state.astuples())
        return rows, not any(self.state.seen)

    def on_eof(self) -> tuple[Iterable[Any], bool]:
        if self.emit_mode == "final":
            return self.state.astuples(), StatefulBatchLogic.DISCARD
        return (), StatefulBatchLogic.RETAIN


class JoinBuilder(_JoinBuilder[_Join]):
    """The per-key logic of ``join`` (``builder(resume_state)``)."""

    _logic = _Join


@operator
def _join_label_merge(step_id: str, *ups: KeyedStream[Any]) -> KeyedStream[tuple[int, Any]]:
    labelled = [map_value(f"label_{i}", up, _Label(i)) for i, up in enumerate(ups)]
    return merge("merge", *labelled)


@operator
def join(
    step_id: str,
    *sides: KeyedStream[Any],
    insert_mode: JoinInsertMode = "last",
    emit_mode: JoinEmitMode = "complete",
) -> KeyedStream[tuple[Any, ...]]:
    """Gather the values of each key on ``sides``: emits ``(key, (v1, v2, ...))`` in
    the order of the sides, as ``insert_mode`` and ``emit_mode`` say (see the module
    doc)."""
    if insert_mode not in typing.get_args(JoinInsertMode):
        raise ValueError(f"unknown join insert mode {insert_mode!r}")
    if emit_mode not in typing.get_args(JoinEmitMode):
        raise ValueError(f"unknown join emit mode {emit_mode!r}")
    merged = _join_label_merge("add_names", *sides)
    return stateful_batch("join", merged, JoinBuilder(len(sides), insert_mode, emit_mode))
