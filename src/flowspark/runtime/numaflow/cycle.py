"""Numaflow cycles: map vertices whose edges lead back to themselves or to an earlier
vertex (Numaflow's ``10-cycle-to-self`` and ``10-cycle-to-prev`` examples).

A Spark query is a DAG, so the vertices of one cycle (a strongly connected part
of the pipeline, map vertices only: Numaflow refuses a reduce at or after a
cycle) run as one keyed step, :class:`CycleLogic`. The datums that enter the
cycle come keyed by one of :data:`CYCLE_KEYS` buckets, each with the vertex it
enters at. :class:`CycleRunner` runs them round the cycle within the task: each
round runs every vertex over the datums sent to it, and each output goes on
along every edge whose conditions it meets, back into the cycle (the next round)
or out of it. Outputs of vertices with edges out of the cycle come out as
``(vertex, datum)``; the pipeline routes them from there as from any vertex.

Numaflow runs each round through its buffers, so a datum may go round for as
long as the pipeline runs. Here the rounds run back to back, up to a budget per
micro-batch (:data:`ROUNDS_PER_BATCH` rounds, :data:`VISITS_PER_BATCH` datums run);
what is still on the cycle then waits in the step's keyed state, checkpointed
with the batch, and goes on in the next micro-batch (a clock tick when no input
comes). A cycle with no exit thus runs for ever, at that pace, and survives a
restart. Once a bounded input has ended, the rounds run until the cycle is empty:
a datum still on it after :data:`MAX_ROUNDS` rounds then fails the step, since
the run could never end.

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

import zlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from flowspark.runtime.errors import step_failure
from flowspark.runtime.keyed import KeyedCall, KeyedLogic, Outcome
from flowspark.runtime.windowing import EOF_MS

__all__ = [
    "CYCLE_KEYS",
    "CycleLogic",
    "CycleRunner",
    "EnterCycle",
    "LeaveCycle",
    "MAX_ROUNDS",
    "PerItemStep",
    "ROUNDS_PER_BATCH",
    "VISITS_PER_BATCH",
]

# A micro-batch's rounds stop after this many rounds, or once this many datums
# have been run (counted per key, a round at a time); the rest waits for the next.
ROUNDS_PER_BATCH = 100
VISITS_PER_BATCH = 50_000
# Rounds a datum may still go round once the input has ended.
MAX_ROUNDS = 1_000
# The entering datums are spread over this many keys (each key's datums run
# together, so the vertices get whole lists of them).
CYCLE_KEYS = 16

Pending = dict[str, list[Any]]


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
    """The vertices of one cycle, run round it.

    ``members``: each vertex's step; ``edges``: ``(from, to, route)`` between
    them (``route`` ``None``: no conditions); ``exits``: the vertices with edges
    out of the cycle, whose outputs the step hands on as ``(vertex, datum)``.
    Called with ``(vertex, datum)`` pairs, it runs them until every datum has left
    (failing after ``max_rounds`` rounds); :meth:`rounds` runs a budget of rounds.
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
        out: list[tuple[str, Any]] = []
        self.drain(by_vertex(items), out)
        return out

    def drain(self, pending: Pending, out: list[tuple[str, Any]]) -> int:
        """Run ``pending`` round until nothing is left on the cycle, its outputs onto
        ``out``; the datums run. A datum still on it after ``max_rounds`` rounds
        fails the step: the rounds would never end."""
        pending, visits = self.rounds(pending, out, self.max_rounds, None)
        if pending:
            vertex, datums = next(iter(pending.items()))
            error = RuntimeError(
                f"a datum went round the cycle {self.max_rounds} times after the input "
                "ended; a bounded run ends once every datum has left its cycles, so a "
                f"datum must leave within {self.max_rounds} rounds (a live input has no "
                "such limit)"
            )
            raise step_failure(vertex, "cycle", datums[0], error)
        return visits

    def rounds(
        self, pending: Pending, out: list[tuple[str, Any]], max_rounds: int, max_visits: int | None
    ) -> tuple[Pending, int]:
        """At most ``max_rounds`` rounds of ``pending``, stopping early once
        ``max_visits`` datums have been run (``None``: no such limit); outputs go
        onto ``out``. Returns what is still on the cycle and the datums run."""
        visits = 0
        for _ in range(max_rounds):
            if not pending or (max_visits is not None and visits >= max_visits):
                break
            visits += sum(map(len, pending.values()))
            pending = self._round(pending, out)
        return pending, visits

    def _round(self, pending: Pending, out: list[tuple[str, Any]]) -> Pending:
        """Run each vertex over its datums; what goes round again, by vertex."""
        following: Pending = {}
        for vertex, datums in pending.items():
            produced = self.members[vertex].run_chunk(datums)
            if vertex in self.exits:
                out.extend((vertex, datum) for datum in produced)
            for target, route in self.edges_from[vertex]:
                passed = produced if route is None else [d for d in produced if route(d)]
                if passed:
                    following.setdefault(target, []).extend(passed)
        return following


def by_vertex(items: Iterable[tuple[str, Any]]) -> Pending:
    """``(vertex, datum)`` pairs gathered by vertex, in order."""
    pending: Pending = {}
    for vertex, datum in items:
        pending.setdefault(vertex, []).append(datum)
    return pending


class CycleLogic(KeyedLogic):
    """One cycle as a keyed step: each key's datums go round the cycle, a budget of
    rounds per micro-batch; what is left on it is the key's state, woken in the
    next batch. Values are ``(vertex, datum)``; outputs ``(key, (vertex, datum))``.
    :attr:`Outcome.handled` counts the datums the cycle's vertices ran.

    >>> from flowspark.api.udf.types import Datum
    >>> from datetime import datetime, timezone
    >>> t = datetime(2024, 1, 1, tzinfo=timezone.utc)
    >>> spin = CycleRunner({"a": PerItemStep("a", lambda d: [d])}, [("a", "a", None)], frozenset())
    >>> logic = CycleLogic("a.cycle", spin, rounds_per_batch=3)
    >>> first = logic.on_values(KeyedCall("0", None, 1_000, [("a", Datum([], b"x", t, t))]))
    >>> first.handled, first.wake, [d.value for d in first.state["a"]]
    (3, 1000, [b'x'])
    >>> logic.on_timer(KeyedCall("0", first.state, 2_000)).handled
    3
    """

    uses_timers = True

    def __init__(
        self,
        step_id: str,
        runner: CycleRunner,
        rounds_per_batch: int = ROUNDS_PER_BATCH,
        visits_per_batch: int = VISITS_PER_BATCH,
    ) -> None:
        self.step_id, self.runner = step_id, runner
        self.rounds_per_batch, self.visits_per_batch = rounds_per_batch, visits_per_batch

    def on_values(self, call: KeyedCall) -> Outcome:
        pending: Pending = call.state or {}
        for vertex, datum in call.values:
            pending.setdefault(vertex, []).append(datum)
        return self._go(call.key, pending, call.now)

    def on_timer(self, call: KeyedCall) -> Outcome:
        return self._go(call.key, call.state or {}, call.now)

    def _go(self, key: str, pending: Pending, now: int) -> Outcome:
        out: list[tuple[str, Any]] = []
        if now >= EOF_MS:  # the input ended: the run ends once the cycle is empty
            visits = self.runner.drain(pending, out)
            pending = {}
        else:
            pending, visits = self.runner.rounds(
                pending, out, self.rounds_per_batch, self.visits_per_batch
            )
        emitted = [(key, pair) for pair in out]
        # What is left wakes the key in the next batch (or at the end of the input).
        return Outcome(pending or None, emitted, wake=now if pending else None, handled=visits)


class EnterCycle:
    """``datum -> (key, (vertex, datum))``: a datum entering the cycle at ``vertex``,
    keyed by a bucket of its value (stable across processes and restarts)."""

    def __init__(self, vertex: str) -> None:
        self.vertex = vertex

    def __call__(self, datum: Any) -> tuple[str, tuple[str, Any]]:
        return str(zlib.crc32(datum.value) % CYCLE_KEYS), (self.vertex, datum)


class LeaveCycle:
    """``(key, (vertex, datum)) -> datum`` for the outputs of ``vertex``, else ``None``."""

    def __init__(self, vertex: str) -> None:
        self.vertex = vertex

    def __call__(self, pair: tuple[str, tuple[str, Any]]) -> Any:
        vertex, datum = pair[1]
        return datum if vertex == self.vertex else None
