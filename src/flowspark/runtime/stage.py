"""The fused stateless stage: one Python pass over a chunk runs every step of a level.

Operators work a list at a time (as bytewax does a batch at a time), using the
builtins ``map``/``filter`` so only the user's function runs per item. When a
user function raises, the position of the list iterator tells which item it was
given (``__length_hint__`` counts what is left), so the error names the item at
no per-item cost.

>>> from flowspark.dataflow import Dataflow
>>> from flowspark.plan.graph import build_plan
>>> from flowspark.testing import TestingInput, TestingOutput
>>> flow = Dataflow()
>>> _ = flow.input("inp", TestingInput([]))
>>> flow.map(lambda x: x + 1)
>>> flow.filter(lambda x: x % 2 == 0)
>>> flow.output("out", TestingOutput([]))
>>> program = StageProgram.for_level(build_plan(flow), 0)
>>> [(port, list(items)) for port, items in program.run(0, range(5), StageContext())]
[(1048576, [2, 4])]
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import chain
from operator import length_hint
from typing import Any, cast

from flowspark.api.steps import Step
from flowspark.api.window import SystemClockConfig
from flowspark.plan.graph import Plan, is_keyed
from flowspark.runtime.errors import step_failure
from flowspark.runtime.numaflow.datums import BUILT_STEPS, ChunkStep
from flowspark.runtime.parts import PartRoute

__all__ = ["StageContext", "StageProgram", "Node"]

Items = Sequence[Any]


@dataclass
class StageContext:
    """What the running task knows: ``epoch`` (micro-batch + 1), ``worker`` (partition)
    and Spark's ``attempt`` id of the task (``None`` outside Spark)."""

    epoch: int = 1
    worker: int = 0
    attempt: int | None = None


def _position(items: Items, it: Any) -> Any:
    """The item the iterator ``it`` over ``items`` handed out last."""
    remaining = it.__length_hint__()
    return items[len(items) - remaining - 1]


@dataclass
class Node:
    """One step of a level, ready to run on lists of items."""

    index: int
    step_id: str
    applies: str | None  # how ``fn`` meets a list of items (see api.steps.OperatorKind)
    fn: Callable[..., Any] | ChunkStep | None
    local_children: list[tuple[int, int]]  # (step, slot) in this level
    remote_children: list[tuple[int, int]]  # (step, slot) in a later level
    sink_port: int | None

    def apply(self, items: Items, ctx: StageContext) -> tuple[Items, ...]:
        """Run this step over ``items``; one result list per output slot."""
        fn = self.fn
        kind = self.applies
        if fn is None:  # input, merge, output, redistribute: items pass on
            return (items,)
        if kind == "chunk":  # a whole chunk at once (map_stream: handlers overlap)
            return (cast(ChunkStep, fn).run_chunk(items),)
        if kind == "flat_map_batch":  # the user's function takes the whole list
            batch = list(items)
            try:
                return (list(cast(Callable[..., Any], fn)(batch)),)
            except Exception as exc:
                raise step_failure(self.step_id, fn, batch, exc) from None
        it = iter(items)
        try:
            result = self._run(cast(Callable[..., Any], fn), kind, items, it, ctx)
        except Exception as exc:
            raise step_failure(self.step_id, fn, _position(items, it), exc) from None
        # A user function raising StopIteration ends map()/filter() early and
        # silently: the iterator is then not exhausted (or a map came up short).
        if length_hint(it) or (kind == "map" and len(result[0]) != len(items)):
            bad = _position(items, it) if length_hint(it) else items[len(result[0])]
            error = RuntimeError("the function raised StopIteration")
            raise step_failure(self.step_id, fn, bad, error)
        return result

    def _run(
        self, fn: Callable[..., Any], kind: str | None, items: Items, it: Any, ctx: StageContext
    ) -> tuple[Items, ...]:
        if kind == "map":
            # A function with a whole-list form (operators' key_on) runs once per list.
            whole = getattr(fn, "map_list", None)
            return (whole(it) if whole is not None else list(map(fn, it)),)
        if kind == "filter":
            return (list(filter(fn, it)),)
        if kind == "filter_map":
            return ([y for y in map(fn, it) if y is not None],)
        if kind == "flat_map":
            return (list(chain.from_iterable(map(fn, it))),)
        if kind == "inspect":
            deque(map(fn, it), maxlen=0)
            return (items,)
        if kind == "inspect_epoch":
            epoch = ctx.epoch
            deque(map(lambda x: fn(epoch, x), it), maxlen=0)
            return (items,)
        if kind == "inspect_worker":
            worker = ctx.worker
            deque(map(lambda x: fn(worker, x), it), maxlen=0)
            return (items,)
        if kind == "inspect_debug":
            step_id, epoch, worker = self.step_id, ctx.epoch, ctx.worker
            deque(map(lambda x: fn(step_id, x, epoch, worker), it), maxlen=0)
            return (items,)
        if kind == "branch":
            trues: list[Any] = []
            falses: list[Any] = []
            for x in it:
                (trues if fn(x) else falses).append(x)
            return (trues, falses)
        raise ValueError(f"step {self.step_id!r}: unknown way to apply a function: {kind!r}")


def _function(step: Step) -> Callable[..., Any] | ChunkStep | None:
    """The function a stateless step runs: the user's, or one the runtime builds from
    the step's arguments (Numaflow datum steps); ``None`` when items pass on."""
    op = step.operator
    if op.fn is not None:
        return step.fns[op.fn]
    build = BUILT_STEPS.get(step.kind)
    return build(step) if build is not None else None


@dataclass(eq=False, repr=False)  # equal only to itself, shown as any object
class StageProgram:
    """All steps of one level, wired, with a run order per entry step."""

    nodes: dict[int, Node]
    orders: dict[int, list[int]]
    # Stateful steps of later levels: port -> (step id, combiner or None).
    keyed: dict[int, tuple[str, Callable[[Any, Any], Any] | None]]
    # How many partitions the keyed exchange after this level has (Spark's
    # shuffle partitions): where a key's rows go, see runtime/partitioning.py.
    key_partitions: int = 1
    # Keyed ports whose keys travel and keep state in buckets (every keyed kind
    # but the Numaflow ones, whose write-ahead log is kept per key).
    bucketed: frozenset[int] = frozenset()
    # The input step whose items this program reads (level 0), counted per task.
    reads: str | None = None
    # The flow runs on the vertex watermark of its datums' event times: report
    # the event times of what leaves for Numaflow keyed steps (engine/vertex_marks).
    event_times: bool = field(default=False, init=False)
    # Sink ports of outputs written on the executors -> their ExecutorOutput: the
    # task writes what leaves for them (runtime/executor_writes.py).
    executor_sinks: dict[int, Any] = field(default_factory=dict, init=False)
    # Keyed ports of outputs whose parts Spark's tasks write: their items are keyed
    # by part name before the exchange (runtime/parts.py).
    part_routes: dict[int, PartRoute] = field(default_factory=dict)

    @classmethod
    def for_level(
        cls,
        plan: Plan,
        level: int,
        entries: Sequence[int] | None = None,
        key_partitions: int = 1,
    ) -> StageProgram:
        """Build the program of ``level``; ``entries`` are the steps rows deliver to."""
        members = [i for i, lv in enumerate(plan.levels) if lv == level]
        nodes: dict[int, Node] = {}
        for i in members:
            step = plan.step(i)
            op = step.operator
            local: list[tuple[int, int]] = []
            remote: list[tuple[int, int]] = []
            for child, slot in plan.children[i]:
                crosses = op.family == "exchange" or plan.levels[child] != level
                (remote if crosses else local).append((child, slot))
            stateless = op.family == "stateless"
            # An output whose parts are written here (a keyed step) sends no items on.
            parts_here = step.kind == "output" and is_keyed(step)
            nodes[i] = Node(
                index=i,
                step_id=step.step_id,
                applies=op.applies if stateless else None,
                fn=_function(step) if stateless else None,
                local_children=local,
                remote_children=remote,
                sink_port=None if parts_here else plan.sink_ports.get(i),
            )
        if entries is None:
            entries = [i for i in members if plan.step(i).kind == "input"] or members
        orders = {e: _reachable_in_order(nodes, e) for e in entries}
        keyed = {
            child: (plan.step(child).step_id, _combiner(plan.step(child)))
            for node in nodes.values()
            for child, _ in node.remote_children
            if is_keyed(plan.step(child))
        }
        routes = {
            port: PartRoute(plan.step(port).step_id, plan.step(port).args["output"])
            for port in keyed
            if plan.step(port).kind == "output"
        }
        bucketed = frozenset(
            p for p in keyed if p not in routes and not plan.step(p).operator.state_per_key
        )
        reads = plan.step(entries[0]).step_id if level == 0 and len(entries) == 1 else None
        return cls(nodes, orders, keyed, key_partitions, bucketed, reads, routes)

    def run(self, entry: int, items: Items, ctx: StageContext) -> list[tuple[int, Items]]:
        """Push ``items`` into step ``entry``; return ``(port, items)`` leaving this level.

        A port is a sink port (``SINK_PORT_BASE + n``) or the plan index of a step
        in a later level.
        """
        return self.run_from(entry, None, ctx, items)

    def run_from(
        self,
        entry: int,
        outputs: tuple[Items, ...] | None,
        ctx: StageContext,
        items: Items = (),
    ) -> list[tuple[int, Items]]:
        """Like :meth:`run`, but ``outputs`` (per slot) replace the entry step's own
        results: a stateful step's emitted and late items enter the level this way."""
        pending: dict[int, list[Items]] = {entry: [items]}
        leaving: list[tuple[int, Items]] = []
        nodes = self.nodes
        for i in self.orders[entry]:
            chunks = pending.pop(i, None)
            if i == entry and outputs is not None:
                results = outputs
                xs: Items = outputs[0]
            else:
                if not chunks:
                    continue
                xs = chunks[0] if len(chunks) == 1 else list(chain.from_iterable(chunks))
                if not xs:
                    continue
                results = nodes[i].apply(xs, ctx)
            node = nodes[i]
            if node.sink_port is not None and xs:
                leaving.append((node.sink_port, xs))
            for child, slot in node.local_children:
                if results[slot]:
                    pending.setdefault(child, []).append(results[slot])
            for child, slot in node.remote_children:
                if results[slot]:
                    leaving.append((child, results[slot]))
        return leaving


def _combiner(step: Any) -> Callable[[Any, Any], Any] | None:
    """A reducer that may pre-combine a key's values before the shuffle, if any.

    Only where the result cannot differ: a window step that aggregates by a reducer
    (``reduce_window``) on the system clock gives every item of a micro-batch the
    same time, hence the same windows and no lateness, and bytewax's reducer
    contract allows any order.
    """
    op = step.operator
    if op.aggregates == "reduce" and isinstance(step.args["clock_config"], SystemClockConfig):
        return step.fns["reducer"]
    return None


def _reachable_in_order(nodes: dict[int, Node], entry: int) -> list[int]:
    """Steps reachable from ``entry`` inside the level, in plan (topological) order."""
    seen = {entry}
    stack = [entry]
    while stack:
        i = stack.pop()
        for child, _ in nodes[i].local_children:
            if child not in seen:
                seen.add(child)
                stack.append(child)
    return sorted(seen)
