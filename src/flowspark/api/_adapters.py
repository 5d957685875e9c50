"""What the adapters of bytewax 0.21's sources and sinks share
(:mod:`flowspark.api.sources`, :mod:`flowspark.api.sinks`): a partition behind the
engine's part, a source or sink bound to its step's id, and the conversion of what a
flow is given into what the engine runs."""

from __future__ import annotations

from typing import Any, ClassVar, TypeVar, cast

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
    ``build_part`` and ``build`` take; ``part_adapter`` wraps the partitions they build."""

    part_adapter: ClassVar[type[PartAdapter]]

    def __init__(self, family: Any, step_id: str) -> None:
        self.family, self.step_id = family, step_id


class PartitionedAdapter(FamilyAdapter):
    """As :class:`FamilyAdapter`, for a source or sink of named partitions."""

    def list_parts(self) -> list[str]:
        return list(self.family.list_parts())

    def build_part(self, for_part: str, resume_state: Any | None) -> Any:
        return self.part_adapter(self.family.build_part(self.step_id, for_part, resume_state))


class WorkerAdapter(FamilyAdapter):
    """As :class:`FamilyAdapter`, for a source or sink with a partition per worker."""

    def build(self, worker_index: int, worker_count: int) -> Any:
        return self.part_adapter(self.family.build(self.step_id, worker_index, worker_count))


def as_engine_kind(family: Any, engine: type[T], what: str, families: str) -> T:
    """``family`` when it is also the ``engine``'s kind (a flowspark input or output
    under a bytewax 0.21 name); else a ``TypeError`` naming the ``families`` that
    ``what`` (e.g. ``"input 'inp'"``) must subclass."""
    if isinstance(family, engine):
        return family
    raise TypeError(f"{what}: {type(family).__name__} must subclass {families}")


def engine_form(given: Any, step_id: str, engine: type[T], family: type, examples: str) -> T:
    """``given`` as the engine runs it at step ``step_id``: as it is when an ``engine``
    object (``Input``, ``Output``), through its ``as_flowspark_input`` or
    ``as_flowspark_output`` when a bytewax 0.21 ``family`` one; else a ``TypeError``
    naming the ``examples`` expected and what came."""
    if isinstance(given, engine):
        return given
    what = engine.__name__.lower()
    if isinstance(given, family):
        return cast(T, getattr(given, f"as_flowspark_{what}")(step_id))
    raise TypeError(
        f"{what} {step_id!r}: expected {examples} or a flowspark {engine.__name__}; "
        f"got {type(given).__name__}"
    )
