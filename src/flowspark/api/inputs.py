"""Inputs: where a flow's items come from.

Two families, both read through Spark's Python Data Source streaming API with
offsets kept in the checkpoint:

* bytewax 0.17's interfaces, so custom bytewax inputs port unchanged:
  :class:`PartitionedInput` / :class:`StatefulSource` (resumable from
  ``snapshot()``) and :class:`DynamicInput` / :class:`StatelessSource`. Their
  ``next_batch`` runs in Spark's source-planning process on the driver, and the
  items travel to executors inside the micro-batch's partitions.
* :class:`SeekableInput`: parts with integer offsets that any executor can read
  from any position (in-memory sequences, files). Only offsets travel; the
  executors read the data themselves, in parallel.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from flowspark.api._families import Polled

__all__ = [
    "Input",
    "PartitionedInput",
    "StatefulSource",
    "DynamicInput",
    "StatelessSource",
    "SeekableInput",
    "Split",
    "batch",
    "SourceWatermark",
]


@dataclass(frozen=True)
class SourceWatermark:
    """Numaflow's source watermark for a bytewax-family input whose items are datums
    (they have an ``event_time``).

    Each part's watermark is the least event time of each batch it reads, minus
    ``max_delay``, and never goes back; the flow's watermark is the least over
    every part of every input. A part that has read nothing for ``idle_threshold``
    is idle: every ``idle_step`` its watermark moves ``idle_increment`` forward
    (never past now); one that never had data takes now after
    ``init_source_delay``. When every input of a flow has one, the flow runs on
    that watermark: keyed Numaflow steps close windows and time out keys when
    it passes, for all keys at once, as a Numaflow vertex does.
    """

    max_delay: timedelta = timedelta(0)
    idle_threshold: timedelta | None = None
    idle_step: timedelta = timedelta(milliseconds=100)
    idle_increment: timedelta | None = None
    init_source_delay: timedelta | None = None


class Input(ABC):  # noqa: B024 - a marker base, as in bytewax
    """Base class of all inputs. Subclass one of the families below, not this."""

    # Set on a PartitionedInput/DynamicInput of datums to give the flow Numaflow's
    # event-time watermark (see SourceWatermark).
    watermark: SourceWatermark | None = None

    # A flowspark extension, optional: ``aborted(error)`` is called in the driver
    # after a run that one of this input's parts stopped by raising ``error``, an
    # ``AbortExecution`` (see flowspark.inputs), on the input object the flow was
    # built with.
    aborted: Callable[[BaseException], None] | None = None


class StatefulSource(Polled):
    """One partition of a :class:`PartitionedInput` (bytewax 0.17 interface)."""

    @abstractmethod
    def next_batch(self) -> list[Any]:
        """Return the next items (maybe empty); raise ``StopIteration`` at the end."""

    @abstractmethod
    def snapshot(self) -> Any:
        """Return a picklable state from which ``build_part`` can resume."""

    # A flowspark extension, optional: ``limit_to(snapshot)`` bounds the reads of
    # this partition to end exactly at ``snapshot`` (a position it reached before).
    # A micro-batch replayed after a crash then re-reads exactly the items the
    # first attempt read, however the source's batches are cut (a live source whose
    # batches depend on what has arrived by then). Without it a replay re-reads as
    # many non-empty batches as the first attempt did.
    limit_to: Callable[[Any], None] | None = None

    # Flowspark extensions for sources that acknowledge what they delivered (a
    # Numaflow user-defined source), optional: ``committed(snapshot)`` is called once
    # every item read up to the position ``snapshot`` is in a micro-batch Spark has
    # committed (more than once for one position is possible: be idempotent), and
    # ``pending()`` gives the items waiting at the source (the input's backlog;
    # ``None``: not known).
    committed: Callable[[Any], None] | None = None
    pending: Callable[[], int | None] | None = None


class PartitionedInput(Input):
    """An input of named partitions that resume from snapshots (bytewax 0.17)."""

    @abstractmethod
    def list_parts(self) -> list[str]:
        """Names of all partitions of this input."""

    @abstractmethod
    def build_part(self, for_part: str, resume_state: Any | None) -> StatefulSource:
        """Open one partition, resuming from ``resume_state`` (``None``: from the start)."""


class StatelessSource(Polled):
    """One worker's reader of a :class:`DynamicInput` (bytewax 0.17 interface)."""

    @abstractmethod
    def next_batch(self) -> list[Any]:
        """Return the next items (maybe empty); raise ``StopIteration`` at the end."""


class DynamicInput(Input):
    """An input with no resume state: at-most-once across restarts (bytewax 0.17)."""

    @abstractmethod
    def build(self, worker_index: int, worker_count: int) -> StatelessSource:
        """Build the reader for one worker (flowspark builds one: index 0 of 1)."""


class Split(ABC):
    """A picklable piece of work an executor reads: items in source batches."""

    @abstractmethod
    def read(self) -> Iterator[Sequence[Any]]:
        """Yield the items of this split in batches (lists, or any sequence), in order."""


class SeekableInput(Input):
    """Parts with integer offsets that executors can read from any position.

    The source-planning process asks for offsets only; the data is read by the
    executors from :class:`Split` objects. ``batch_size`` is the number of items
    one bytewax ``next_batch`` call would return: with ``epoch_interval=0`` each
    micro-batch advances every part by one such batch.
    """

    batch_size: int = 1000
    # A live input (a broker's stream) keeps growing: a run that goes on until its
    # inputs end asks ``end_offset`` again before each micro-batch (every
    # ``poll_interval`` while nothing is new) and never ends; ``--bounded`` stops
    # at the end offsets of its first look. A finite input (False) ends there always.
    live: bool = False
    poll_interval: timedelta = timedelta(milliseconds=50)

    @abstractmethod
    def list_parts(self) -> list[str]:
        """Names of all partitions of this input."""

    def start_offset(self, part: str) -> int:
        """Where a fresh run starts reading ``part`` (recorded in the checkpoint before
        the first read when not 0, so a replayed first batch starts there too)."""
        return 0

    @abstractmethod
    def end_offset(self, part: str) -> int:
        """The offset just past the data available now in ``part``."""

    def offset_after(self, part: str, start: int, end: int, batches: int) -> int:
        """The offset after ``batches`` source batches from ``start`` (at most ``end``)."""
        return min(end, start + batches * self.batch_size)

    def offset_after_items(self, part: str, start: int, end: int, items: int) -> tuple[int, int]:
        """The offset after at most ``items`` items from ``start`` (at most ``end``),
        and how many items lie before it: what a micro-batch reads under
        ``--max-batch-items``. By default offsets count items; an input whose
        offsets count something else and that overrides only :meth:`offset_after`
        is cut at whole source batches."""
        if type(self).offset_after is SeekableInput.offset_after:
            after = min(end, start + items)
            return after, after - start
        batches = max(1, -(-items // max(1, self.batch_size)))
        return self.offset_after(part, start, end, batches), batches * self.batch_size

    def batch_limit(self, part: str, start: int, end: int) -> int:
        """The furthest offset one micro-batch reads when epochs are not per-batch."""
        return end

    def for_run(self, scratch_dir: str | None) -> SeekableInput:
        """This input as one run ships it to Spark. ``scratch_dir``: a directory of
        the run on a disk its executors share with the driver (a local master), for
        data the input would rather write once than send with every micro-batch;
        ``None`` when they share none. The default ships the input as it is."""
        return self

    @abstractmethod
    def splits(self, part: str, start: int, end: int, pieces: int) -> list[Split]:
        """Cut ``[start, end)`` of ``part`` into at most ``pieces`` ordered splits."""


def batch(ib: Any, batch_size: int) -> Iterator[list[Any]]:
    """Group an iterable into lists of ``batch_size`` items (bytewax's helper).

    >>> list(batch(range(5), 2))
    [[0, 1], [2, 3], [4]]
    """
    chunk: list[Any] = []
    for item in ib:
        chunk.append(item)
        if len(chunk) >= batch_size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
