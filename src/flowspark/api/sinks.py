"""bytewax 0.21's output families (``bytewax.outputs``), run as the 0.17 families.

:class:`FixedPartitionedSink` / :class:`StatefulSinkPartition` (exactly once:
each part resumes from its snapshot; items are ``(key, value)`` and the value
is written) and :class:`DynamicSink` / :class:`StatelessSinkPartition` (at
least once). Their ``build_part`` and ``build`` take the output step's id.
:func:`as_output` wraps one in a thin adapter of the 0.17 family the engine
writes through (:mod:`flowspark.api.outputs`).

>>> class ToList(DynamicSink):
...     def __init__(self, ls):
...         self.ls = ls
...     def build(self, step_id, worker_index, worker_count):
...         return Part(self.ls, step_id)
>>> class Part(StatelessSinkPartition):
...     def __init__(self, ls, step_id):
...         self.ls, self.step_id = ls, step_id
...     def write_batch(self, items):
...         self.ls.extend(f"{self.step_id}:{x}" for x in items)
>>> out = []
>>> as_output(ToList(out), "flow.out").build(0, 1).write_batch([1, 2])
>>> out
['flow.out:1', 'flow.out:2']
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar, Generic, TypeVar
from zlib import adler32

from flowspark.api import _adapters as adapters
from flowspark.api._families import Closable, NamedParts, WorkerParts
from flowspark.api.outputs import (
    DynamicOutput,
    Output,
    PartitionedOutput,
    StatefulSink,
    StatelessSink,
    WritesOn,
)

__all__ = [
    "DynamicSink",
    "FixedPartitionedSink",
    "Sink",
    "StatefulSinkPartition",
    "StatelessSinkPartition",
    "as_output",
]

X = TypeVar("X")
S = TypeVar("S")


class Sink(ABC, Generic[X]):  # noqa: B024 - a marker base, as in bytewax
    """Base class of bytewax 0.21 sinks. Subclass one of the families below."""

    def as_flowspark_output(self, step_id: str) -> Output:
        """The output the engine writes for this sink at step ``step_id``."""
        return adapters.as_engine_kind(  # a flowspark output under a 0.21 name (StdOutSink)
            self, Output, f"output {step_id!r}", "FixedPartitionedSink or DynamicSink"
        )


class StatefulSinkPartition(Closable, Generic[X, S]):
    """One partition of a :class:`FixedPartitionedSink`."""

    @abstractmethod
    def write_batch(self, values: list[X]) -> None:
        """Write the values (of ``(key, value)`` items routed to this partition)."""

    @abstractmethod
    def snapshot(self) -> S:
        """A picklable state from which ``build_part`` resumes after the last write."""


class FixedPartitionedSink(
    Sink[tuple[str, X]], NamedParts[StatefulSinkPartition[X, S], S], Generic[X, S]
):
    """A sink of named partitions; ``(key, value)`` items go to the partition
    ``part_fn(key)`` picks (modulo the number of partitions).

    ``writes_on`` (a flowspark extension, as :class:`~flowspark.outputs.PartitionedOutput`'s):
    ``"driver"`` (the default) or ``"executors"``, where its partitions are written.
    """

    writes_on: WritesOn = "driver"

    def part_fn(self, item_key: str) -> int:
        """The partition of a key (default: ``zlib.adler32``, stable across processes)."""
        return adler32(item_key.encode())

    def as_flowspark_output(self, step_id: str) -> Output:
        return _FixedPartitionedOutput(self, step_id)


class StatelessSinkPartition(Closable, Generic[X]):
    """The writer of a :class:`DynamicSink`."""

    @abstractmethod
    def write_batch(self, items: list[X]) -> None:
        """Write the items."""


class DynamicSink(Sink[X], WorkerParts[StatelessSinkPartition[X]]):
    """A sink without resume state (at least once across restarts).

    ``writes_on`` (a flowspark extension, as :class:`~flowspark.outputs.DynamicOutput`'s):
    ``"driver"`` (the default) or ``"executors"``, where its partitions are built.
    """

    writes_on: ClassVar[WritesOn] = "driver"

    def as_flowspark_output(self, step_id: str) -> Output:
        return _DynamicOutput(self, step_id)


# -- adapters onto the 0.17 families --------------------------------------------------


class _StatefulPart(adapters.StatefulPartAdapter, StatefulSink):
    def write_batch(self, values: list[Any]) -> None:
        self.part.write_batch(values)


class _FixedPartitionedOutput(adapters.PartitionedAdapter, PartitionedOutput):
    """A :class:`FixedPartitionedSink` as the engine's :class:`PartitionedOutput`."""

    def part_fn(self, item_key: str) -> int:
        return self.family.part_fn(item_key)

    @property
    def writes_on(self) -> WritesOn:  # type: ignore[override]
        return self.family.writes_on

    part_adapter = _StatefulPart


class _StatelessPart(adapters.PartAdapter, StatelessSink):
    def __init__(self, part: StatelessSinkPartition[Any]) -> None:
        super().__init__(part)
        begin = getattr(part, "begin_batch", None)  # flowspark's optional hook
        if begin is not None:
            self.begin_batch = begin

    def write_batch(self, items: list[Any]) -> None:
        self.part.write_batch(items)


class _DynamicOutput(adapters.WorkerAdapter, DynamicOutput):
    """A :class:`DynamicSink` as the engine's :class:`DynamicOutput`."""

    part_adapter = _StatelessPart

    @property
    def writes_on(self) -> WritesOn:  # type: ignore[override]
        return self.family.writes_on


def as_output(sink: Any, step_id: str) -> Output:
    """What the engine writes for ``sink`` at step ``step_id``: a flowspark output as it
    is, a bytewax 0.21 sink through its adapter; anything else is a ``TypeError``."""
    examples = "a bytewax 0.21 sink (e.g. TestingSink, StdOutSink, a FixedPartitionedSink)"
    return adapters.engine_form(sink, step_id, Output, Sink, examples)
