"""What the input and output families share, in bytewax 0.17's and 0.21's forms: a
partition's optional hooks, and the two ways a 0.21 source or sink builds its
partitions (named ones that resume from snapshots; one per worker)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from datetime import datetime
from typing import Generic, TypeVar

P = TypeVar("P")
S = TypeVar("S")


class Closable(ABC):  # noqa: B024 - its hook is optional
    """A partition of an input or an output: :meth:`close` is an optional hook."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources (a sink's partition flushes first)."""


class Polled(Closable):  # noqa: B024 - its hooks are optional
    """A partition of an input, which the engine polls with ``next_batch``."""

    def next_awake(self) -> datetime | None:
        """When to call ``next_batch`` next; ``None``: at once (1 ms after an empty batch)."""
        return None


class NamedParts(ABC, Generic[P, S]):
    """A bytewax 0.21 source or sink of named partitions, each resumed from its
    snapshot (of type ``S``)."""

    @abstractmethod
    def list_parts(self) -> list[str]:
        """The names of the partitions."""

    @abstractmethod
    def build_part(self, step_id: str, for_part: str, resume_state: S | None) -> P:
        """Open partition ``for_part`` of step ``step_id`` at ``resume_state``
        (``None``: from the start)."""


class WorkerParts(ABC, Generic[P]):
    """A bytewax 0.21 source or sink without resume state: a partition per worker."""

    @abstractmethod
    def build(self, step_id: str, worker_index: int, worker_count: int) -> P:
        """The partition of step ``step_id`` for one worker (flowspark builds one:
        worker 0 of 1)."""
