"""What the adapters of bytewax 0.21's sources and sinks share
(:mod:`flowspark.api.sources`, :mod:`flowspark.api.sinks`): a partition behind the
engine's part, a source or sink bound to its step's id, and the conversion of what a
flow is given into what the engine runs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class PartAdapter:
    """A bytewax 0.21 partition (``part``) as the engine's part; ``close`` closes it."""

    def __init__(self, part: Any) -> None:
        self.part = part

    def close(self) -> None:
        self.part.close()


class StatefulPartAdapter(PartAdapter):
    """As :class:`PartAdapter`, for a partition that resumes from its snapshots."""

    def snapshot(self) -> Any:
        return self.part.snapshot()


class FamilyAdapter:
    """A bytewax 0.21 source or sink (``family``) bound to its step's id, which its
    ``build_part`` and ``build`` take."""

    def __init__(self, family: Any, step_id: str) -> None:
        self.family, self.step_id = family, step_id


class PartitionedAdapter(FamilyAdapter):
    """As :class:`FamilyAdapter`, for a source or sink of named partitions."""

    def list_parts(self) -> list[str]:
        return list(self.family.list_parts())


def as_engine_kind(family: Any, engine: type[T], what: str, families: str) -> T:
    """``family`` when it is also the ``engine``'s kind (a flowspark input or output
    under a bytewax 0.21 name); else a ``TypeError`` naming the ``families`` that
    ``what`` (e.g. ``"input 'inp'"``) must subclass."""
    if isinstance(family, engine):
        return family
    raise TypeError(f"{what}: {type(family).__name__} must subclass {families}")


def engine_form(
    given: Any, engine: type[T], family: type, convert: Callable[[Any], T], expected: str
) -> T:
    """``given`` as the engine runs it: as it is when an ``engine`` object, through
    ``convert`` when a bytewax 0.21 ``family`` one; else a ``TypeError`` saying what
    was ``expected`` and what came."""
    if isinstance(given, engine):
        return given
    if isinstance(given, family):
        return convert(given)
    raise TypeError(f"{expected}; got {type(given).__name__}")
