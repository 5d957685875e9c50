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

from dataclasses import dataclass
from typing import Any

from flowspark.plan.graph import Plan
from flowspark.runtime import pickling
from flowspark.runtime.stage import StageProgram

__all__ = ["CompiledFlow", "CompiledInput", "CompiledLevel", "compile_flow"]


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

    @property
    def stateful(self) -> bool:
        """Whether any step keeps keyed state (the query then needs a clock)."""
        return self.plan.stateful


def compile_flow(plan: Plan, key_partitions: int) -> CompiledFlow:
    """Build and pickle every level's program and keyed logics of ``plan``."""
    from flowspark.runtime.logics import logic_for

    event_time = bool(plan.inputs) and all(
        _has_source_watermark(plan.step(i).args["input"]) for i in plan.inputs
    )
    inputs = [
        CompiledInput(
            entry=i,
            step_id=plan.step(i).step_id,
            input=plan.step(i).args["input"],
            program=pickling.dumps(StageProgram.for_level(plan, 0, [i], key_partitions)),
        )
        for i in plan.inputs
    ]
    levels = []
    for level in range(1, plan.top_level + 1):
        entries = plan.entries(level)
        program = pickling.dumps(StageProgram.for_level(plan, level, entries, key_partitions))
        keyed = [i for i in entries if plan.step(i).operator.family == "keyed"]
        if keyed:
            logics = {i: logic_for(plan.step(i), vertex_clock=event_time) for i in keyed}
            uses_wal = any(logic.uses_wal for logic in logics.values())
            hosts = tuple(
                logic.run_id for logic in logics.values() if getattr(logic, "use_host", False)
            )
            compiled = CompiledLevel(
                level, frozenset(entries), program, pickling.dumps(logics), uses_wal, hosts
            )
        else:
            compiled = CompiledLevel(level, frozenset(entries), program)
        levels.append(compiled)
    return CompiledFlow(plan, inputs, levels, key_partitions, event_time)


def _has_source_watermark(inp: Any) -> bool:
    from flowspark.api.inputs import DynamicInput, PartitionedInput

    return isinstance(inp, (PartitionedInput, DynamicInput)) and inp.watermark is not None
