"""bytewax 0.21's input families (``bytewax.inputs``), run as the 0.17 families.

bytewax 0.21 renamed the input interfaces and gave ``build_part`` and ``build``
the input step's id: :class:`FixedPartitionedSource` /
:class:`StatefulSourcePartition` (resumable from ``snapshot()``),
:class:`DynamicSource` / :class:`StatelessSourcePartition`, and
:class:`SimplePollingSource` (``next_item`` every ``interval``). The engine
reads the 0.17 families (:mod:`flowspark.api.inputs`): :func:`as_input` wraps a
0.21 source in a thin adapter of that family, which passes the step id on and
turns each ``next_batch()`` iterable into a list. ``StopIteration`` ends a
partition, as in 0.17.

>>> class Count(FixedPartitionedSource):
...     def list_parts(self):
...         return ["one"]
...     def build_part(self, step_id, for_part, resume_state):
...         return Part(step_id, resume_state or 0)
>>> class Part(StatefulSourcePartition):
...     def __init__(self, step_id, n):
...         self.step_id, self.n = step_id, n
...     def next_batch(self):
...         if self.n >= 2:
...             raise StopIteration()
...         self.n += 1
...         return iter([f"{self.step_id}:{self.n}"])
...     def snapshot(self):
...         return self.n
>>> part = as_input(Count(), "flow.inp").build_part("one", None)
>>> part.next_batch(), part.snapshot()
(['flow.inp:1'], 1)
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Generic, TypeVar

from flowspark.api._adapters import (
    PartAdapter,
    PartitionedAdapter,
    StatefulPartAdapter,
    WorkerAdapter,
    as_engine_kind,
    engine_form,
)
from flowspark.api._families import NamedParts, Polled, WorkerParts
from flowspark.api.inputs import (
    DynamicInput,
    Input,
    PartitionedInput,
    StatefulSource,
    StatelessSource,
)

__all__ = [
    "AbortExecution",
    "DynamicSource",
    "FixedPartitionedSource",
    "SimplePollingSource",
    "Source",
    "StatefulSourcePartition",
    "StatelessSourcePartition",
    "as_input",
]

X = TypeVar("X")
S = TypeVar("S")


class AbortExecution(RuntimeError):
    """Raise it from ``next_batch`` to stop the run there, as bytewax 0.21 does (for
    tests): what was read before is delivered and committed, no input is said to
    have ended (no ``on_eof``, no window closes), and ``run_main`` returns. A rerun
    on the same recovery directory resumes after the last committed batch."""


class Source(ABC, Generic[X]):  # noqa: B024 - a marker base, as in bytewax
    """Base class of bytewax 0.21 sources. Subclass one of the families below."""

    def as_flowspark_input(self, step_id: str) -> Input:
        """The input the engine reads for this source at step ``step_id``."""
        return as_engine_kind(  # a flowspark input under a 0.21 name (FileSource)
            self,
            Input,
            f"input {step_id!r}",
            "FixedPartitionedSource, DynamicSource or SimplePollingSource",
        )


class StatefulSourcePartition(Polled, Generic[X, S]):
    """One partition of a :class:`FixedPartitionedSource`."""

    @abstractmethod
    def next_batch(self) -> Iterable[X]:
        """The next items (maybe none; never block); raise ``StopIteration`` at the end."""

    @abstractmethod
    def snapshot(self) -> S:
        """A picklable state from which ``build_part`` resumes after the last item read."""


class FixedPartitionedSource(Source[X], NamedParts[StatefulSourcePartition[X, S], S]):
    """A source of named partitions, each resumed from its snapshot (exactly once)."""

    def as_flowspark_input(self, step_id: str) -> Input:
        return _FixedPartitionedInput(self, step_id)


class StatelessSourcePartition(Polled, Generic[X]):
    """The reader of a :class:`DynamicSource`."""

    @abstractmethod
    def next_batch(self) -> Iterable[X]:
        """The next items (maybe none; never block); raise ``StopIteration`` at the end."""


class DynamicSource(Source[X], WorkerParts[StatelessSourcePartition[X]]):
    """A source without resume state (at most once across restarts)."""

    def as_flowspark_input(self, step_id: str) -> Input:
        return _DynamicInput(self, step_id)


class _PollingPartition(StatefulSourcePartition[Any, Any]):
    def __init__(
        self,
        now: datetime,
        interval: timedelta,
        align_to: datetime | None,
        getter: Callable[[], Any],
        snapshot: Callable[[], Any],
    ) -> None:
        self._interval, self._getter, self._snapshot = interval, getter, snapshot
        if align_to is None:
            self._awake = now
        else:
            behind = (now - align_to) % interval
            self._awake = now + (interval - behind if behind else timedelta(0))

    def next_batch(self) -> list[Any]:
        try:
            item = self._getter()
        except SimplePollingSource.Retry as retry:
            self._awake += retry.timeout
            return []
        self._awake += self._interval
        return [] if item is None else [item]

    def next_awake(self) -> datetime | None:
        return self._awake

    def snapshot(self) -> Any:
        return self._snapshot()


class SimplePollingSource(FixedPartitionedSource[X, Any]):
    """Call :meth:`next_item` every ``interval`` (aligned to ``align_to`` if given),
    from one partition; a ``None`` item is skipped. Raise :class:`Retry` to try
    again sooner; override :meth:`snapshot` and :meth:`resume` to resume.
    """

    @dataclass
    class Retry(Exception):  # noqa: N818 - bytewax's name
        """Raise in :meth:`SimplePollingSource.next_item` to be called again after
        ``timeout`` instead of ``interval``."""

        timeout: timedelta

    def __init__(self, interval: timedelta, align_to: datetime | None = None) -> None:
        self._interval = interval
        self._align_to = align_to

    def list_parts(self) -> list[str]:
        return ["singleton"]

    def build_part(
        self, step_id: str, for_part: str, resume_state: Any | None
    ) -> StatefulSourcePartition[X, Any]:
        if resume_state is not None:
            self.resume(resume_state)
        return _PollingPartition(
            datetime.now(UTC), self._interval, self._align_to, self.next_item, self.snapshot
        )

    @abstractmethod
    def next_item(self) -> X:
        """The next item (``None``: nothing this time)."""

    def snapshot(self) -> Any:
        """The state to resume from after the last item (default ``None``)."""
        return None

    def resume(self, resume_state: Any) -> None:  # noqa: B027 - optional hook
        """Go back to ``resume_state`` (called before :meth:`next_item` on a resume)."""


# -- adapters onto the 0.17 families --------------------------------------------------


class _StatefulPart(StatefulPartAdapter, StatefulSource):
    def __init__(self, part: StatefulSourcePartition[Any, Any]) -> None:
        super().__init__(part)
        self.limit_to = getattr(part, "limit_to", None)  # flowspark's optional hook

    def next_batch(self) -> list[Any]:
        return list(self.part.next_batch())

    def next_awake(self) -> datetime | None:
        return self.part.next_awake()


def _tell_aborted(source: Any, error: BaseException) -> None:
    """Hand the engine's ``aborted(error)`` on to a source that has the hook."""
    hook = getattr(source, "aborted", None)
    if hook is not None:
        hook(error)


class _FixedPartitionedInput(PartitionedAdapter, PartitionedInput):
    """A :class:`FixedPartitionedSource` as the engine's :class:`PartitionedInput`."""

    def aborted(self, error: BaseException) -> None:  # Input's optional hook
        _tell_aborted(self.family, error)

    part_adapter = _StatefulPart


class _StatelessPart(PartAdapter, StatelessSource):
    def next_batch(self) -> list[Any]:
        return list(self.part.next_batch())

    def next_awake(self) -> datetime | None:
        return self.part.next_awake()


class _DynamicInput(WorkerAdapter, DynamicInput):
    """A :class:`DynamicSource` as the engine's :class:`DynamicInput`."""

    part_adapter = _StatelessPart

    def aborted(self, error: BaseException) -> None:  # Input's optional hook
        _tell_aborted(self.family, error)


def as_input(source: Any, step_id: str) -> Input:
    """What the engine reads for ``source`` at step ``step_id``: a flowspark input as it
    is, a bytewax 0.21 source through its adapter; anything else is a ``TypeError``."""
    examples = "a bytewax 0.21 source (e.g. TestingSource, FileSource, a FixedPartitionedSource)"
    return engine_form(source, step_id, Input, Source, examples)
