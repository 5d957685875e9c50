"""Compile a validated plan once into what runs in Spark's Python workers.

A :class:`CompiledFlow` holds, per input, the level-0 program that runs in the
read tasks, and per later level (one per exchange) the fused program, the keyed
steps' logics and whether they keep a write-ahead log. Everything is pickled
here, before Spark runs anything: the engine only maps these levels onto Spark
(a streaming query or one batch job, see ``flowspark.engine``).

>>> from flowspark.dataflow import Dataflow
>>> from flowspark.plan.graph import build_plan
>>> from flowspark.testing import TestingInput, TestingOutput
>>> flow = Dataflow()
>>> s = flow.input("inp", TestingInput([("a", 1)]))
>>> _ = s.reduce("sum", lambda a, b: a + b, lambda acc: False).output("out", TestingOutput([]))
>>> compiled = compile_flow(build_plan(flow), key_partitions=2)
>>> [i.step_id for i in compiled.inputs], [(lv.level, lv.keyed) for lv in compiled.levels]
(['inp'], [(1, True)])
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass, replace
from typing import Any

from flowspark.api.inputs import DynamicInput, PartitionedInput
from flowspark.api.outputs import DynamicOutput, writes_on_executors
from flowspark.plan.graph import Plan, is_keyed
from flowspark.runtime import pickling
from flowspark.runtime.executor_writes import ExecutorOutput, with_token
from flowspark.runtime.logics import logic_for
from flowspark.runtime.stage import StageProgram

__all__ = [
    "CompiledFlow",
    "CompiledInput",
    "CompiledLevel",
    "compile_flow",
    "executor_outputs",
    "with_run_tokens",
]


@dataclass(frozen=True)
class CompiledInput:
    """One input: its plan index (``entry``), step id, config and level-0 program."""

    entry: int
    step_id: str
    input: Any
    program: bytes


@dataclass(frozen=True)
class CompiledLevel:
    """One level after an exchange: the steps rows enter it at (``entries``), its
    fused program, and when it starts with keyed steps their pickled logics (by
    plan index) and whether any keeps a write-ahead log; ``host_runs`` are the run
    ids of its steps whose handlers live in resident hosts (stopped as the run ends)."""

    level: int
    entries: frozenset[int]
    program: bytes
    logics: bytes | None = None
    uses_wal: bool = False
    host_runs: tuple[str, ...] = ()

    @property
    def keyed(self) -> bool:
        """Whether the level starts with keyed steps (a transformWithState)."""
        return self.logics is not None


@dataclass(frozen=True)
class CompiledFlow:
    """A plan compiled for ``key_partitions`` partitions after each keyed exchange."""

    plan: Plan
    inputs: list[CompiledInput]
    levels: list[CompiledLevel]
    key_partitions: int
    # Every input has a Numaflow source watermark (api/inputs.SourceWatermark): the
    # flow runs on it, and keyed Numaflow steps use it as their vertex watermark.
    event_time: bool = False
    # Else the flow runs on the vertex watermark of its datums' event times, which
    # the driver keeps (engine/vertex_marks.py); see :func:`flow_clock`.
    vertex_marks: bool = False

    @property
    def stateful(self) -> bool:
        """Whether any step keeps keyed state (the query then needs a clock)."""
        return self.plan.stateful


def compile_flow(plan: Plan, key_partitions: int) -> CompiledFlow:
    """Build and pickle every level's program and keyed logics of ``plan``."""
    clock = flow_clock(plan)
    event_time, vertex_marks = clock == "source", clock == "marks"
    written_here = executor_outputs(plan, key_partitions)
    inputs = []
    for i in plan.inputs:
        reading = StageProgram.for_level(plan, 0, [i], key_partitions)
        reading.event_times = vertex_marks
        reading.executor_sinks = written_here
        step = plan.step(i)
        inputs.append(CompiledInput(i, step.step_id, step.args["input"], pickling.dumps(reading)))
    levels = []
    for level in range(1, plan.top_level + 1):
        entries = plan.entries(level)
        stage = StageProgram.for_level(plan, level, entries, key_partitions)
        stage.executor_sinks = written_here
        program = pickling.dumps(stage)
        keyed = [i for i in entries if is_keyed(plan.step(i))]
        if keyed:
            vertex = clock != "key"
            logics = {i: logic_for(plan.step(i), vertex_clock=vertex) for i in keyed}
            for i, logic in logics.items():
                logic.use_slots(plan.live_slots(i))
            uses_wal = any(logic.uses_wal for logic in logics.values())
            # Numaflow's keyed logics may run their handlers in hosts named by run_id.
            hosted: list[Any] = [lg for lg in logics.values() if getattr(lg, "use_host", False)]
            hosts = tuple(logic.run_id for logic in hosted)
            compiled = CompiledLevel(
                level, frozenset(entries), program, pickling.dumps(logics), uses_wal, hosts
            )
        else:
            compiled = CompiledLevel(level, frozenset(entries), program)
        levels.append(compiled)
    return CompiledFlow(plan, inputs, levels, key_partitions, event_time, vertex_marks)


def executor_outputs(plan: Plan, workers: int) -> dict[int, ExecutorOutput]:
    """The dynamic outputs of ``plan`` written on the executors, by sink port (no run
    token yet: :func:`with_run_tokens` gives them theirs). Partitioned ones are keyed
    steps instead (runtime/parts.py)."""
    return {
        plan.sink_ports[o]: ExecutorOutput(plan.step(o).step_id, output, workers)
        for o in plan.outputs
        if isinstance(output := plan.step(o).args["output"], DynamicOutput)
        and writes_on_executors(output)
    }


def with_run_tokens(compiled: CompiledFlow, tokens: dict[int, str]) -> CompiledFlow:
    """``compiled`` whose outputs written on the executors name their writes by the
    recovery directory's run ``tokens`` (by sink port)."""
    if not tokens:
        return compiled

    def named(program: bytes) -> bytes:
        stage: StageProgram = pickle.loads(program)
        stage.executor_sinks = {
            port: with_token(target, tokens[port]) for port, target in stage.executor_sinks.items()
        }
        return pickling.dumps(stage)

    inputs = [replace(i, program=named(i.program)) for i in compiled.inputs]
    levels = [replace(lv, program=named(lv.program)) for lv in compiled.levels]
    return replace(compiled, inputs=inputs, levels=levels)


def flow_clock(plan: Plan) -> str:
    """Which clock the flow's keyed Numaflow steps share.

    - ``"source"``: the flow has keyed Numaflow steps and every input has a Numaflow
      source watermark; rows carry it.
    - ``"marks"``: the vertex watermark of the datums' event times (set in the flow,
      e.g. by ``to_datums``), kept by the driver: the default for a flow whose
      keyed steps are all Numaflow ones.
    - ``"key"``: a clock per key (its latest event time; idle keys close after
      their timeout of system time): when a step asks for it (``clock="key"``) or
      the flow also has bytewax keyed steps (they run on system time).
    - ``"none"``: no keyed Numaflow step; rows carry the system time (bytewax keyed
      steps and Numaflow cycles run on it).

    A step that asks for a clock the flow cannot give it is an error.
    """
    numaflow, others = [], False
    for step in plan.steps:
        if step.operator.family != "keyed" or step.operator.any_clock:
            continue
        if step.operator.state_per_key:
            numaflow.append(step)
        else:
            others = True
    source = bool(plan.inputs) and all(
        _has_source_watermark(plan.step(i).args["input"]) for i in plan.inputs
    )
    if not numaflow:
        return "none"
    asked = {step.step_id: step.args.get("clock") for step in numaflow}
    per_key = [s for s, c in asked.items() if c == "key"]
    vertex = [s for s, c in asked.items() if c == "vertex"]
    if source:
        if per_key:
            raise ValueError(
                f"step {per_key[0]!r} asks for a clock per key, but every input of the "
                "flow carries a Numaflow source watermark, which all keyed Numaflow "
                "steps share; drop clock='key' or the inputs' watermark"
            )
        return "source"
    if vertex and (per_key or others):
        why = (
            f"step {per_key[0]!r} asks for a clock per key"
            if per_key
            else ("the flow has bytewax keyed steps, which run on system time")
        )
        raise ValueError(
            f"step {vertex[0]!r} asks for the vertex watermark, but {why}; one flow "
            "has one clock: give every keyed Numaflow step the same clock"
        )
    return "key" if per_key or others else "marks"


def _has_source_watermark(inp: Any) -> bool:
    return isinstance(inp, (PartitionedInput, DynamicInput)) and inp.watermark is not None
