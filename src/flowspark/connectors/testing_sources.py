"""bytewax 0.21's ``TestingSource`` and ``TestingSink`` (``flowspark.testing``).

``TestingSource(ib, batch_size=1)`` emits the items of an iterable from one
partition. Without sentinels it runs as :class:`~flowspark.connectors.memory.TestingInput`
(executors read the items; a bounded run fits one micro-batch). With
``TestingSource.EOF()`` (the input ends there) or
``TestingSource.PAUSE(for_duration)`` (no items for that long) it runs as
bytewax does, as a polled partition whose snapshot is the index of the next
item. (bytewax's next run from a recovery directory goes on after an EOF;
flowspark's does not: a partition that ended stays ended, and a keyed flow
whose inputs ended is done.) ``TestingSource.ABORT()`` stops the run there
(``AbortExecution``): the items before it are delivered and committed, no input
ends, and ``run_main`` returns; the ``ABORT`` is then marked triggered, so the
next run in this process goes past it (a rerun on the same recovery directory
resumes after the last committed batch).

>>> source = TestingSource([1, 2, TestingSource.EOF(), 3], batch_size=2)
>>> part = source.build_part("flow.inp", "iterable", None)
>>> part.next_batch(), part.snapshot()
([1, 2], 2)
>>> part.next_batch()
[]
>>> part.next_batch()
Traceback (most recent call last):
...
StopIteration
>>> resumed = source.build_part("flow.inp", "iterable", part.snapshot())
>>> resumed.next_batch()
[3]
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from flowspark.api.inputs import Input
from flowspark.api.sinks import DynamicSink, StatelessSinkPartition
from flowspark.api.sources import (
    AbortExecution,
    FixedPartitionedSource,
    StatefulSourcePartition,
)
from flowspark.connectors.memory import TestingInput

__all__ = ["TestingSource", "TestingSink"]


class _IterPartition(StatefulSourcePartition[Any, int]):
    """The items from index ``resume_state`` on; a sentinel counts as an item, so a
    resumed run goes on after it."""

    def __init__(self, items: Sequence[Any], batch_size: int, resume_state: int | None) -> None:
        self._index = resume_state or 0
        self._batch_size = batch_size
        self._it = itertools.islice(items, self._index, None)
        self._awake: datetime | None = None
        self._ended = False
        self._abort_at: int | None = None  # an ABORT ended the last batch: raise next

    def next_batch(self) -> list[Any]:
        if self._ended:
            raise StopIteration()
        if self._abort_at is not None:
            raise _AbortAt(self._abort_at)
        self._awake = None
        batch: list[Any] = []
        for item in self._it:
            if isinstance(item, TestingSource.EOF):
                self._index += 1
                self._ended = True
                break
            if isinstance(item, TestingSource.PAUSE):
                self._index += 1
                self._awake = datetime.now(UTC) + item.for_duration
                break
            if isinstance(item, TestingSource.ABORT):
                if item._triggered:  # a run before this one stopped here: go past it
                    self._index += 1
                    continue
                item._triggered = True  # (this process's copy; the driver's: aborted())
                if not batch:
                    raise _AbortAt(self._index)
                self._abort_at = self._index + len(batch)  # the items before it first
                break
            batch.append(item)
            if len(batch) >= self._batch_size:
                break
        if not batch and not self._ended and self._awake is None:
            raise StopIteration()
        self._index += len(batch)
        return batch

    def next_awake(self) -> datetime | None:
        return self._awake

    def snapshot(self) -> int:
        return self._index


class _AbortAt(AbortExecution):
    """The ``AbortExecution`` of the ``ABORT`` at ``index`` of a TestingSource's items."""

    def __init__(self, index: int) -> None:
        super().__init__(f"TestingSource.ABORT (item {index})")
        self.index = index

    def __reduce__(self) -> tuple[Any, ...]:
        return (_AbortAt, (self.index,))


class TestingSource(FixedPartitionedSource[Any, int]):
    """Emit the items of an iterable from one partition (``"iterable"``), ``batch_size``
    per batch; see the module doc for the sentinels."""

    __test__ = False  # not a pytest test class

    @dataclass
    class EOF:
        """End the input here."""

    @dataclass
    class ABORT:
        """Stop the run here, once (see the module doc)."""

        _triggered: bool = False

    @dataclass
    class PAUSE:
        """Emit nothing for ``for_duration``."""

        for_duration: timedelta

    def __init__(self, ib: Iterable[Any], batch_size: int = 1) -> None:
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive int; got {batch_size!r}")
        self._items: Sequence[Any] = ib if isinstance(ib, list | tuple | range) else list(ib)
        self._batch_size = batch_size

    def list_parts(self) -> list[str]:
        return ["iterable"]

    def aborted(self, error: BaseException) -> None:
        """A run stopped at an ``ABORT`` of this source: mark it triggered, so the next
        run goes past it, as bytewax's does."""
        index = getattr(error, "index", None)
        if isinstance(index, int) and 0 <= index < len(self._items):
            item = self._items[index]
            if isinstance(item, TestingSource.ABORT):
                item._triggered = True

    def build_part(
        self, step_id: str, for_part: str, resume_state: int | None
    ) -> StatefulSourcePartition[Any, int]:
        return _IterPartition(self._items, self._batch_size, resume_state)

    def as_flowspark_input(self, step_id: str) -> Input:
        if isinstance(self._items, range):
            return TestingInput(self._items, self._batch_size)
        sentinels = (TestingSource.EOF, TestingSource.PAUSE, TestingSource.ABORT)
        if not any(isinstance(item, sentinels) for item in self._items):
            return TestingInput(self._items, self._batch_size)
        return super().as_flowspark_input(step_id)


class _ListPartition(StatelessSinkPartition[Any]):
    def __init__(self, ls: list[Any]) -> None:
        self._ls = ls

    def write_batch(self, items: list[Any]) -> None:
        self._ls += items


class TestingSink(DynamicSink[Any]):
    """Append every item to the list ``ls`` (sinks run in the driver process); the
    list is not cleared between runs."""

    __test__ = False  # not a pytest test class

    def __init__(self, ls: list[Any]) -> None:
        self._ls = ls

    def build(self, step_id: str, worker_index: int, worker_count: int) -> _ListPartition:
        return _ListPartition(self._ls)
