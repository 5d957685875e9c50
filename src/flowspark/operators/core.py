"""bytewax 0.21's core operators, each one step of a flowspark kind.

``input``/``output`` (a 0.21 source or sink is adapted onto the input/output
family the engine runs), ``branch``, ``merge``, ``redistribute``,
``flat_map_batch``, ``inspect_debug`` and ``stateful_batch``: the operators
bytewax 0.21 builds all others from.

>>> from flowspark.api.dataflow import Dataflow
>>> from flowspark.testing import TestingSource
>>> flow = Dataflow("core_eg")
>>> nums = input("nums", flow, TestingSource([1, 2, 3]))
>>> out = branch("even", nums, lambda x: x % 2 == 0)
>>> both = merge("both", out.trues, out.falses)
>>> [(step.kind, step.step_id) for step in flow.steps]
[('input', 'core_eg.nums'), ('branch', 'core_eg.even'), ('merge', 'core_eg.both')]
>>> out.trues.stream_id, both.stream_id
('core_eg.even.trues', 'core_eg.both.down')
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Generic

from flowspark.api.dataflow import Dataflow, Stream
from flowspark.api.sinks import as_output
from flowspark.api.sources import as_input
from flowspark.operators._typevars import V, W, X, Y
from flowspark.operators.scoping import flow_of, operator
from flowspark.operators.shims import _BoolPredicate, default_debug_inspector

__all__ = [
    "BranchOut",
    "KeyedStream",
    "branch",
    "flat_map_batch",
    "input",
    "inspect_debug",
    "merge",
    "output",
    "redistribute",
    "stateful_batch",
]


KeyedStream = Stream[tuple[str, V]]
"""A stream of ``(key, value)`` 2-tuples (``KeyedStream[int]``: int values)."""


@dataclass(frozen=True)
class BranchOut(Generic[X, Y]):
    """The two streams of :func:`branch`: items for which the predicate was true, and
    the others."""

    trues: Stream[X]
    falses: Stream[Y]


@operator(_core=True)
def branch(step_id: str, up: Stream[X], predicate: Callable[[X], bool]) -> BranchOut[X, X]:
    """Split a stream in two by ``predicate(item)`` (which must return a ``bool``)."""
    trues, falses = up.branch(step_id, _BoolPredicate(step_id, predicate))
    return BranchOut(trues, falses)


@operator(_core=True)
def flat_map_batch(
    step_id: str, up: Stream[X], mapper: Callable[[list[X]], Iterable[Y]]
) -> Stream[Y]:
    """Emit each element of ``mapper(items)``, called with a list of items at once
    (how many is the engine's choice: a chunk of a micro-batch)."""
    return up.flat_map_batch(step_id, mapper)


@operator(_core=True)
def input(step_id: str, flow: Dataflow, source: Any) -> Stream[Any]:  # noqa: A001 - bytewax's name
    """Add an input: the items of ``source`` (a bytewax 0.21 source, e.g.
    ``TestingSource``, ``FixedPartitionedSource``, or a flowspark input)."""
    return flow_of(flow).source(step_id, as_input(source, step_id))


@operator(_core=True)
def inspect_debug(
    step_id: str,
    up: Stream[X],
    inspector: Callable[[str, X, int, int], None] = default_debug_inspector,
) -> Stream[X]:
    """Call ``inspector(step_id, item, epoch, worker)`` on each item (by default print
    ``{step_id} W{worker} @{epoch}: {item!r}``); items pass on unchanged. The epoch is
    the micro-batch number from 1, the worker the Spark partition."""
    return up.inspect_debug(step_id, inspector)


@operator(_core=True)
def merge(step_id: str, *ups: Stream[Any]) -> Stream[Any]:
    """Combine streams into one."""
    first, *others = ups
    return first.merge(*others, step_id=step_id)


@operator(_core=True)
def output(step_id: str, up: Stream[X], sink: Any) -> None:
    """Write items to ``sink`` (a bytewax 0.21 sink, e.g. ``TestingSink``,
    ``StdOutSink``, or a flowspark output). Returns ``None``, as bytewax 0.21."""
    up.output(step_id, as_output(sink, step_id))


@operator(_core=True)
def redistribute(step_id: str, up: Stream[X]) -> Stream[X]:
    """Spread items over all Spark partitions for the steps that follow."""
    return up.redistribute(step_id)


@operator(_core=True)
def stateful_batch(
    step_id: str, up: KeyedStream[V], builder: Callable[[Any], Any]
) -> KeyedStream[W]:
    """Run a :class:`~flowspark.operators.StatefulBatchLogic` per key:
    ``builder(resume_state)`` makes it (``None`` for a new key); emits ``(key,
    value)`` for each value its methods return."""
    return up.stateful_batch(step_id, builder)
