"""The validated logical plan of a flow.

Everything that can be wrong with a flow is found here, before Spark starts:
no input, no output, an input whose items never reach an output. A step called
for its effect (an inspector, ``effect`` in the kinds table) ends a flow as an
output does, as bytewax 0.21 allows (``op.inspect`` and nothing else).

The plan also cuts the flow into *levels*. Level 0 holds the steps reachable
from the inputs without crossing an exchange; they run inside the source
readers. An exchange (``redistribute``) or a keyed step moves items across
Spark partitions, so the steps after it run one level up, in a stage after the
shuffle. Within a level all steps fuse into one Python pass. What each operator
kind is (its family) comes from the table in :mod:`flowspark.api.steps`. An output
whose parts are written on the executors is keyed too: its items cross a keyed
exchange on their part's name, and each part's snapshot is its key's state.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from flowspark.api.dataflow import Dataflow
from flowspark.api.outputs import parts_on_executors
from flowspark.api.steps import Step

__all__ = [
    "Plan",
    "build_plan",
    "is_keyed",
    "SINK_PORT_BASE",
]

# Rows whose port is SINK_PORT_BASE + i carry items for the plan's i-th output.
SINK_PORT_BASE = 1 << 20


def is_keyed(step: Step) -> bool:
    """Whether ``step`` gets its items by key and keeps state per key: a keyed
    operator, or an output whose parts Spark's tasks write (keyed by part)."""
    if step.kind == "output":
        return parts_on_executors(step.args["output"])
    return step.operator.family == "keyed"


@dataclass
class Plan:
    """Steps in topological order, with their wiring and levels."""

    steps: list[Step]
    index: dict[Step, int]
    children: dict[int, list[tuple[int, int]]]  # step -> [(child step, output slot)]
    levels: list[int]
    inputs: list[int]
    outputs: list[int]
    sink_ports: dict[int, int] = field(default_factory=dict)  # output step -> sink port
    reaches_end: list[bool] = field(default_factory=list)  # step -> leads to an output

    @property
    def stateful(self) -> bool:
        """Whether any step keeps keyed state (the query then needs a clock)."""
        return any(is_keyed(s) for s in self.steps)

    def entries(self, level: int) -> list[int]:
        """Steps of ``level`` that receive items from a lower level."""
        return [
            i
            for i, lv in enumerate(self.levels)
            if lv == level
            and any(self.levels[self.index[u.step]] < level for u in self.steps[i].upstreams)
        ]

    @property
    def top_level(self) -> int:
        """The highest level: how many exchanges the deepest path crosses."""
        return max(self.levels)

    def step(self, i: int) -> Step:
        """The step at plan index ``i``."""
        return self.steps[i]

    def live_slots(self, i: int) -> frozenset[int]:
        """The output slots of step ``i`` that lead to an output (or an inspector)."""
        return frozenset(slot for child, slot in self.children[i] if self.reaches_end[child])


def build_plan(flow: Dataflow) -> Plan:
    """Validate ``flow`` and return its :class:`Plan` (raises ``ValueError``/``TypeError``)."""
    if not isinstance(flow, Dataflow):
        raise TypeError(f"expected a flowspark Dataflow; got {type(flow).__name__}")
    steps = list(flow.steps)  # creation order is a topological order
    for step in steps:
        try:
            step.operator  # noqa: B018 - an unknown kind raises here
        except ValueError as exc:
            raise ValueError(f"step {step.step_id!r}: {exc}") from None
    inputs = [i for i, s in enumerate(steps) if s.kind == "input"]
    outputs = [i for i, s in enumerate(steps) if s.kind == "output"]
    # A flow ends at its outputs, or at steps called for their effect (inspectors).
    ends = [s.kind == "output" or s.operator.effect for s in steps]
    if not inputs:
        raise ValueError(
            "Dataflow has no input: add one with flow.input(step_id, input) before running it"
        )
    if not any(ends):
        raise ValueError(
            "Dataflow has no output: add one with flow.output(step_id, output) "
            "(e.g. StdOutput() or TestingOutput(list)), or an inspect step, before running it"
        )
    index = {s: i for i, s in enumerate(steps)}
    children: dict[int, list[tuple[int, int]]] = {i: [] for i in range(len(steps))}
    for i, step in enumerate(steps):
        for port in step.upstreams:
            children[index[port.step]].append((i, port.slot))

    levels = [0] * len(steps)
    for i, step in enumerate(steps):
        for port in step.upstreams:
            up = index[port.step]
            crosses = steps[up].operator.family == "exchange" or is_keyed(step)
            bump = 1 if crosses else 0
            levels[i] = max(levels[i], levels[up] + bump)

    reaches_output = [False] * len(steps)
    for i in reversed(range(len(steps))):
        reaches_output[i] = ends[i] or any(reaches_output[c] for c, _ in children[i])
    for i in inputs:
        if not reaches_output[i]:
            raise ValueError(
                f"input {steps[i].step_id!r} never reaches an output (or an inspect step): "
                "connect its stream to an output step"
            )
    sink_ports = {o: SINK_PORT_BASE + n for n, o in enumerate(outputs)}
    return Plan(steps, index, children, levels, inputs, outputs, sink_ports, reaches_output)
