"""Outputs: where a flow's items go (bytewax 0.17 interfaces).

Sinks run in the driver process, once per micro-batch, after Spark computed the
batch, unless the output says ``writes_on = "executors"``: its sinks then run in
Spark's tasks, beside the data (flowspark's JetStream output does).
:class:`PartitionedOutput` sinks are exactly-once across restarts:
flowspark stores each part's ``snapshot()`` after every micro-batch (in the recovery
directory, or as the part's state in Spark's checkpoint when the parts are written on
the executors), and when Spark replays a batch it rebuilds the parts from the
snapshot taken before that batch (``FileOutput`` truncates back to it).
:class:`DynamicOutput` sinks are at-least-once, as in bytewax.
"""

from __future__ import annotations

import zlib
from abc import ABC, abstractmethod
from typing import Any, ClassVar, Literal

from flowspark.api._families import Closable

__all__ = [
    "Output",
    "PartitionedOutput",
    "StatefulSink",
    "DynamicOutput",
    "StatelessSink",
    "WritesOn",
    "writes_on_executors",
    "parts_on_executors",
]

# Where an output's sinks run: the driver's process, or Spark's tasks.
WritesOn = Literal["driver", "executors"]


class Output(ABC):  # noqa: B024 - a marker base, as in bytewax
    """Base class of all outputs. Subclass one of the families below, not this."""


class StatefulSink(Closable):
    """One partition of a :class:`PartitionedOutput`."""

    @abstractmethod
    def write_batch(self, values: list[Any]) -> None:
        """Write values (already routed to this part)."""

    @abstractmethod
    def snapshot(self) -> Any:
        """Return a picklable state from which ``build_part`` can resume."""


class PartitionedOutput(Output):
    """An output of named parts; items are ``(key, value)`` and ``value`` is written.

    ``writes_on`` (a flowspark extension) says where its parts are written:

    * ``"driver"`` (the default): every part in the process that runs the flow, its
      snapshots kept in the recovery directory;
    * ``"executors"``: each part in the Spark task that owns it. Items go to their
      part's task through a keyed exchange on the part's name (stable across
      micro-batches and restarts); the part is built there from its last snapshot,
      writes the batch's values in arrival order and is snapshotted, and the
      snapshot is the part's state in Spark's checkpoint, committed with the batch.
      A retried task or a replayed batch rebuilds the part from the snapshot before
      it, so nothing is written twice. Every process that runs a task must reach
      the part's storage (a shared filesystem on a cluster).
    """

    writes_on: WritesOn = "driver"

    @abstractmethod
    def list_parts(self) -> list[str]:
        """Names of all parts of this output."""

    def part_fn(self, item_key: str) -> int:
        """Which part (index into ``list_parts()``, modulo its length) a key goes to."""
        return zlib.adler32(item_key.encode())

    @abstractmethod
    def build_part(self, for_part: str, resume_state: Any | None) -> StatefulSink:
        """Open one part, resuming from ``resume_state`` (``None``: fresh)."""


class StatelessSink(Closable):
    """A writer built by a :class:`DynamicOutput`.

    A flowspark extension, optional: a sink with ``begin_batch(batch_id, run_token)``
    has it called before each micro-batch's writes, with the micro-batch id and a
    token that stays the same for the life of the recovery directory. A sink that
    names its writes by them (a broker's message id) names a replayed batch's
    writes as the first attempt did, so the broker can drop them as duplicates. A sink
    built on the executors gets the token followed by ``.`` and its partition.
    """

    @abstractmethod
    def write_batch(self, items: list[Any]) -> None:
        """Write items."""


class DynamicOutput(Output):
    """An output with no resume state (at-least-once).

    ``writes_on`` (a flowspark extension) says where its sinks run:

    * ``"driver"`` (the default): one sink, index 0 of 1, in the process that runs the
      flow; it may use that process's memory, terminal and files;
    * ``"executors"``: a sink per Spark task of every micro-batch that computes items
      for the output, built with the task's partition as ``worker_index`` and the
      run's parallelism as ``worker_count``, writing them where they are computed, so
      the write path grows with the cluster's workers; the tasks write side by side
      (no order among them). Text it prints reaches the driver's stdout.
    """

    writes_on: ClassVar[WritesOn] = "driver"

    @abstractmethod
    def build(self, worker_index: int, worker_count: int) -> StatelessSink:
        """Build a writer (see ``writes_on`` for how many, and where)."""


def writes_on_executors(output: Output) -> bool:
    """Whether ``output``'s sinks run in Spark's tasks: a :class:`DynamicOutput` or
    :class:`PartitionedOutput` that says ``writes_on = "executors"``.

    >>> from flowspark.connectors.files import FileOutput
    >>> from flowspark.connectors.jetstream import JetStreamOutput
    >>> from flowspark.testing import TestingOutput
    >>> writes_on_executors(JetStreamOutput("nats://x:4222", "s")), writes_on_executors(
    ...     TestingOutput([])
    ... ), writes_on_executors(FileOutput("out.txt", writes_on="executors"))
    (True, False, True)
    """
    return (
        isinstance(output, (DynamicOutput, PartitionedOutput)) and output.writes_on == "executors"
    )


def parts_on_executors(output: Output) -> bool:
    """Whether ``output`` is a :class:`PartitionedOutput` whose parts Spark's tasks
    write (the plan gives it a keyed exchange on the part's name).

    >>> from flowspark.connectors.files import FileOutput
    >>> parts_on_executors(FileOutput("out.txt")), parts_on_executors(
    ...     FileOutput("out.txt", writes_on="executors")
    ... )
    (False, True)
    """
    return isinstance(output, PartitionedOutput) and output.writes_on == "executors"
