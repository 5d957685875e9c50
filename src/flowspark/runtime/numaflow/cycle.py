"""Numaflow cycles: map vertices whose edges lead back to themselves or to an earlier
vertex (Numaflow's ``10-cycle-to-self`` and ``10-cycle-to-prev`` examples).

A Spark query is a DAG, so the vertices of one cycle (a strongly connected part
of the pipeline, map vertices only: Numaflow refuses a reduce at or after a
cycle) run as one step. :class:`CycleRunner` takes the datums that enter the
cycle, each with the vertex it enters at, and runs them round the cycle within
the task: each round runs every vertex over the datums sent to it, and each
output goes on along every edge whose conditions it meets, back into the cycle
(the next round) or out of it. A datum leaves within the micro-batch it came in.
Outputs of vertices with edges out of the cycle come out as ``(vertex, datum)``;
the pipeline routes them from there as from any vertex.

Numaflow runs each round through its buffers, so a datum that keeps coming back
takes time; here the rounds run back to back, and a datum still on the cycle
after :data:`MAX_ROUNDS` rounds fails the step (a cycle that never lets go
would otherwise hold the micro-batch for ever).

>>> from flowspark.runtime.numaflow.datums import TagRoute
>>> from flowspark.api.udf.types import Datum
>>> def retry(items):  # tags a datum "retry" the first two times it comes
...     out = []
...     for d in items:
...         seen = d.value.count(b"!")
...         tags = ["retry"] if seen < 2 else []
...         out.append(Datum(d.keys, d.value + b"!", d.event_time, d.watermark, tags=tags))
...     return out
>>> cycle = CycleRunner(
...     {"retry": PerItemStep("retry", lambda d: retry([d]))},
...     [("retry", "retry", TagRoute(["retry"]))],
...     exits=frozenset({"retry"}),
... )
>>> from datetime import datetime, timezone
>>> t = datetime(2024, 1, 1, tzinfo=timezone.utc)
>>> [(v, d.value, d.tags) for v, d in cycle([("retry", Datum([], b"a", t, t))])]
[('retry', b'a!', ['retry']), ('retry', b'a!!', ['retry']), ('retry', b'a!!!', [])]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from flowspark.runtime.errors import step_failure

__all__ = ["CycleRunner", "EnterCycle", "LeaveCycle", "PerItemStep", "MAX_ROUNDS"]

# Rounds a datum may go round a cycle within one micro-batch.
MAX_ROUNDS = 1_000


class _Member(Protocol):
    """A vertex of the cycle: a list of datums in, its outputs out."""

    def run_chunk(self, items: Sequence[Any]) -> list[Any]: ...


class _Route(Protocol):
    def __call__(self, datum: Any) -> bool: ...


class PerItemStep:
    """A vertex whose function maps one datum to its outputs (a builtin)."""

    def __init__(self, step_id: str, fn: Callable[[Any], Iterable[Any]]) -> None:
        self.step_id, self.fn = step_id, fn

    def run_chunk(self, items: Sequence[Any]) -> list[Any]:
        out: list[Any] = []
        for item in items:
            try:
                out.extend(self.fn(item))
            except Exception as exc:
                raise step_failure(self.step_id, self.fn, item, exc) from None
        return out


class CycleRunner:
    """The vertices of one cycle, run round it until every datum has left.

    ``members``: each vertex's step; ``edges``: ``(from, to, route)`` between
    them (``route`` ``None``: no conditions); ``exits``: the vertices with edges
    out of the cycle, whose outputs the step hands on as ``(vertex, datum)``.
    """

    def __init__(
        self,
        members: dict[str, _Member],
        edges: Sequence[tuple[str, str, _Route | None]],
        exits: frozenset[str],
        max_rounds: int = MAX_ROUNDS,
    ) -> None:
        self.members = members
        self.edges_from: dict[str, list[tuple[str, _Route | None]]] = {m: [] for m in members}
        for source, target, route in edges:
            self.edges_from[source].append((target, route))
        self.exits = exits
        self.max_rounds = max_rounds

    def __call__(self, items: Sequence[tuple[str, Any]]) -> list[tuple[str, Any]]:
        pending: dict[str, list[Any]] = {}
        for vertex, datum in items:
            pending.setdefault(vertex, []).append(datum)
        out: list[tuple[str, Any]] = []
        rounds = 0
        while pending:
            rounds += 1
            if rounds > self.max_rounds:
                vertex, datums = next(iter(pending.items()))
                error = RuntimeError(
                    f"a datum went round the cycle {self.max_rounds} times within one "
                    "micro-batch; flowspark runs a cycle's rounds back to back, so a datum "
                    f"must leave it within {self.max_rounds} rounds"
                )
                raise step_failure(vertex, "cycle", datums[0], error)
            pending = self._round(pending, out)
        return out

    def _round(
        self, pending: dict[str, list[Any]], out: list[tuple[str, Any]]
    ) -> dict[str, list[Any]]:
        """Run each vertex over its datums; what goes round again, by vertex."""
        following: dict[str, list[Any]] = {}
        for vertex, datums in pending.items():
            produced = self.members[vertex].run_chunk(datums)
            if vertex in self.exits:
                out.extend((vertex, datum) for datum in produced)
            for target, route in self.edges_from[vertex]:
                passed = produced if route is None else [d for d in produced if route(d)]
                if passed:
                    following.setdefault(target, []).extend(passed)
        return following


class EnterCycle:
    """``datum -> (vertex, datum)``: a datum entering the cycle at ``vertex``."""

    def __init__(self, vertex: str) -> None:
        self.vertex = vertex

    def __call__(self, datum: Any) -> tuple[str, Any]:
        return self.vertex, datum


class LeaveCycle:
    """``(vertex, datum) -> datum`` for the outputs of ``vertex``, else ``None``."""

    def __init__(self, vertex: str) -> None:
        self.vertex = vertex

    def __call__(self, pair: tuple[str, Any]) -> Any:
        return pair[1] if pair[0] == self.vertex else None
