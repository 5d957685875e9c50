"""The logic of each keyed step: :func:`logic_for` builds it from the step's kind.

bytewax's kinds live in :mod:`flowspark.runtime.stateful`, Numaflow's in
:mod:`flowspark.runtime.numaflow.keyed`; both follow :mod:`flowspark.runtime.keyed`.
A new keyed kind adds its builder to ``BUILDERS``.

>>> from flowspark.dataflow import Dataflow
>>> from flowspark.testing import TestingInput
>>> flow = Dataflow()
>>> _ = flow.input("inp", TestingInput([])).reduce("sum", lambda a, b: a + b, lambda a: False)
>>> type(logic_for(flow.steps[-1])).__name__
'ReduceLogic'
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from flowspark.runtime.keyed import KeyedLogic
from flowspark.runtime.numaflow.cycle import CycleLogic
from flowspark.runtime.numaflow.keyed import (
    HOST_ENV,
    REBUILD_ENV,
    AccumulateLogic,
    ReduceStreamLogic,
    RunOptions,
)
from flowspark.runtime.parts import PartWriteLogic
from flowspark.runtime.stateful import (
    BatchLogic,
    ReduceLogic,
    StatefulBatchRun,
    StatefulMapLogic,
    WindowLogic,
)
from flowspark.runtime.window_run import WindowRun
from flowspark.runtime.windowing import NUMAFLOW, NumaflowWindower, build_clock, build_windower
from flowspark.shared.times import duration_ms

__all__ = ["BUILDERS", "logic_for"]


def _reduce(step: Any) -> KeyedLogic:
    return ReduceLogic(step.step_id, step.fns["reducer"], step.fns["is_complete"])


def _stateful_map(step: Any) -> KeyedLogic:
    return StatefulMapLogic(step.step_id, step.fns["builder"], step.fns["mapper"])


def _batch(step: Any) -> KeyedLogic:
    timeout_ms = duration_ms(step.args["timeout"])
    return BatchLogic(step.step_id, step.args["max_size"], timeout_ms)


def _stateful_batch(step: Any) -> KeyedLogic:
    return StatefulBatchRun(step.step_id, step.fns["builder"])


def _window(step: Any) -> KeyedLogic:
    args = step.args
    return WindowLogic(
        step.step_id,
        step.kind,
        build_clock(args["clock_config"]),
        build_windower(args["window_config"]),
        step.fns,
        with_window=args.get("with_window", False),
    )


def _window021(step: Any) -> KeyedLogic:
    args = step.args
    return WindowRun(
        step.step_id, args["clock"], args["windower"], step.fns["builder"], args["ordered"]
    )


def _run_options(vertex_clock: bool) -> RunOptions:
    """A Numaflow keyed step's run options: the vertex clock as the flow says, the
    handler host and forced rebuilds as the environment says."""
    return RunOptions(
        vertex_clock=vertex_clock,
        use_host=os.environ.get(HOST_ENV, "1") not in ("", "0"),
        force_rebuild=os.environ.get(REBUILD_ENV, "") not in ("", "0"),
    )


def _accumulate(step: Any, vertex_clock: bool) -> KeyedLogic:
    args = step.args
    return AccumulateLogic(
        step.step_id,
        args["factory"],
        args["timeout"],
        args["watermark_delay"],
        _run_options(vertex_clock),
    )


def _reduce_stream(step: Any, vertex_clock: bool) -> KeyedLogic:
    args = step.args
    windower = build_windower(args["window_config"], NUMAFLOW)
    assert isinstance(windower, NumaflowWindower)  # reduce_stream's: fixed or sliding
    return ReduceStreamLogic(
        step.step_id,
        args["factory"],
        windower,
        args["allowed_lateness"],
        args["watermark_delay"],
        _run_options(vertex_clock),
    )


# Keyed operator kind -> the builder of its logic from a step.
BUILDERS: dict[str, Callable[[Any], KeyedLogic]] = {
    "reduce": _reduce,
    "stateful_map": _stateful_map,
    "batch": _batch,
    "stateful_batch": _stateful_batch,
    "reduce_window": _window,
    "fold_window": _window,
    "collect_window": _window,
    "window": _window021,
    "accumulate": lambda step: _accumulate(step, False),
    "reduce_stream": lambda step: _reduce_stream(step, False),
    "cycle": lambda step: CycleLogic(step.step_id, step.args["runner"]),
    # An output whose parts Spark's tasks write (plan.graph.is_keyed): keyed by part.
    "output": lambda step: PartWriteLogic(step.step_id, step.args["output"]),
}
# Kinds whose logic takes the flow's clock choice.
_CLOCKED: dict[str, Callable[[Any, bool], KeyedLogic]] = {
    "accumulate": _accumulate,
    "reduce_stream": _reduce_stream,
}


def logic_for(step: Any, vertex_clock: bool = False) -> KeyedLogic:
    """Build the logic of a keyed step (a :class:`~flowspark.api.steps.Step`).

    ``vertex_clock``: the flow runs on Numaflow's source watermark (its rows'
    time), which Numaflow's keyed kinds then use for every key at once.
    """
    kind = step.kind
    build = BUILDERS.get(kind)
    if build is None:
        raise ValueError(f"step {step.step_id!r}: unknown keyed operator kind {kind!r}")
    if kind in _CLOCKED:
        return _CLOCKED[kind](step, vertex_clock)
    return build(step)
