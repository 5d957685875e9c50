"""bytewax 0.21's logic classes for the ``stateful`` and ``stateful_batch`` operators.

Subclass :class:`StatefulLogic` (one value at a time) or
:class:`StatefulBatchLogic` (a key's values of a batch at once). flowspark keeps
a key's ``snapshot()`` between micro-batches and rebuilds its logic with the
operator's ``builder(snapshot)`` when the key has work, as bytewax does when it
resumes; so keep in the snapshot everything the logic needs.
:class:`ItemLogics` runs a :class:`StatefulLogic` as a batch logic.

>>> class Last(StatefulLogic):
...     def __init__(self, resume):
...         self.last = resume
...     def on_item(self, value):
...         old, self.last = self.last, value
...         return [(old, value)], value == "stop"
...     def snapshot(self):
...         return self.last
>>> logic = ItemLogicBuilder(Last)(None)
>>> logic.on_batch(["a", "b", "stop", "c"])
([(None, 'a'), ('a', 'b'), ('b', 'stop'), (None, 'c')], False)
>>> logic.snapshot()
'c'
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any, Generic, TypeVar

__all__ = ["StatefulLogic", "StatefulBatchLogic", "ItemLogics", "ItemLogicBuilder"]

V = TypeVar("V")
W = TypeVar("W")
S = TypeVar("S")

_EMPTY: tuple[Any, ...] = ()


class _KeyLogic(ABC, Generic[V, W, S]):
    """What both logic classes share: the constants, the optional hooks and
    ``snapshot``."""

    RETAIN: bool = False
    """Keep this logic (and its state) after the call."""
    DISCARD: bool = True
    """Forget this logic (and its state) after the call."""

    def on_notify(self) -> tuple[Iterable[W], bool]:
        """The time :meth:`notify_at` gave has passed (default: nothing, keep)."""
        return (_EMPTY, _KeyLogic.RETAIN)

    def on_eof(self) -> tuple[Iterable[W], bool]:
        """The input has ended (default: nothing, keep)."""
        return (_EMPTY, _KeyLogic.RETAIN)

    def notify_at(self) -> datetime | None:
        """When to call :meth:`on_notify` next (an aware datetime), or ``None``."""
        return None

    @abstractmethod
    def snapshot(self) -> S:
        """The key's state, picklable, from which the builder rebuilds this logic."""


class StatefulBatchLogic(_KeyLogic[V, W, S]):
    """The logic of one key for ``stateful_batch``.

    Per call: :meth:`on_batch` with the key's new values, :meth:`on_notify`
    once :meth:`notify_at` has passed, :meth:`on_eof` when the input has ended.
    Each returns ``(values to emit, discard)``: the values go downstream as
    ``(key, value)``; ``discard`` true (:attr:`DISCARD`) forgets the key.
    """

    @abstractmethod
    def on_batch(self, values: list[V]) -> tuple[Iterable[W], bool]:
        """The key's new values, in arrival order."""


class StatefulLogic(_KeyLogic[V, W, S]):
    """The logic of one key for ``stateful``: as :class:`StatefulBatchLogic`, but
    :meth:`on_item` gets one value at a time."""

    @abstractmethod
    def on_item(self, value: V) -> tuple[Iterable[W], bool]:
        """One new value of the key."""


class ItemLogics(StatefulBatchLogic[Any, Any, Any]):
    """A :class:`StatefulLogic` run one value at a time; when it asks to be discarded
    part-way through a batch, the next value gets a new one from ``builder(None)``."""

    def __init__(self, logic: Any, builder: Callable[[Any], Any]) -> None:
        self.logic, self.builder = logic, builder

    @property
    def __wrapped__(self) -> Callable[..., Any]:
        return self.builder

    def on_batch(self, values: list[Any]) -> tuple[Iterable[Any], bool]:
        out: list[Any] = []
        for value in values:
            if self.logic is None:
                self.logic = self.builder(None)
            emitted, discard = self.logic.on_item(value)
            out.extend(emitted)
            if discard:
                self.logic = None
        return out, self.logic is None

    def on_notify(self) -> tuple[Iterable[Any], bool]:
        result: tuple[Iterable[Any], bool] = self.logic.on_notify()
        return result

    def on_eof(self) -> tuple[Iterable[Any], bool]:
        result: tuple[Iterable[Any], bool] = self.logic.on_eof()
        return result

    def notify_at(self) -> datetime | None:
        at: datetime | None = self.logic.notify_at()
        return at

    def snapshot(self) -> Any:
        return self.logic.snapshot()


class ItemLogicBuilder:
    """The batch-logic builder of ``stateful``: ``builder(resume)`` wrapped in
    :class:`ItemLogics`."""

    def __init__(self, builder: Callable[[Any], Any]) -> None:
        self.builder = builder

    @property
    def __wrapped__(self) -> Callable[..., Any]:
        return self.builder

    def __call__(self, resume_state: Any) -> ItemLogics:
        return ItemLogics(self.builder(resume_state), self.builder)
