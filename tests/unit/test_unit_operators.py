"""The table of operator kinds (``api.steps.OPERATORS``): its columns, and the places that
read them instead of deciding by a kind's name."""

from __future__ import annotations

from datetime import timedelta

import pytest

from flowspark.api.dataflow import WindowStream
from flowspark.api.steps import OPERATORS, operator
from flowspark.api.window import EventClockConfig, SystemClockConfig, TumblingWindow
from flowspark.dataflow import Dataflow
from flowspark.plan.graph import build_plan
from flowspark.runtime.keyed import KeyedCall
from flowspark.runtime.stage import StageProgram
from flowspark.runtime.stateful import WindowLogic
from flowspark.runtime.windowing import EOF_MS, build_clock, build_windower
from flowspark.testing import TestingInput, TestingOutput
from flowspark.visualize import flow_graph

WINDOW = TumblingWindow(length=timedelta(seconds=10))
EVENT = EventClockConfig(lambda v: v, wait_for_system_duration=timedelta(0))


async def _reduce_handler(keys, datums, output, md):  # pragma: no cover - never run
    async for _ in datums:
        pass


def test_the_window_kinds_and_how_they_aggregate():
    columns = {
        name: (op.windowed, op.late_port, op.aggregates)
        for name, op in OPERATORS.items()
        if op.windowed or op.late_port or op.aggregates
    }
    assert columns == {
        "reduce_window": (True, True, "reduce"),
        "fold_window": (True, True, "fold"),
        "collect_window": (True, True, "collect"),
        "reduce_stream": (True, True, "handler"),
        "window": (True, True, "logic"),
    }
    for op in OPERATORS.values():
        assert (op.aggregates is not None) == op.windowed, op.name
        assert not op.windowed or op.family == "keyed", op.name
    assert (operator("accumulate").windowed, operator("accumulate").late_port) == (False, False)


def _window_steps() -> dict[str, object]:
    """One stream of each keyed kind, by kind."""
    flow = Dataflow("kinds")
    s = flow.input("inp", TestingInput([("a", 1)]))
    d = s.to_datums("d")
    return {
        "reduce": s.reduce("reduce", max, bool),
        "stateful_map": s.stateful_map("stateful_map", lambda: 0, lambda st, v: (st, v)),
        "batch": s.batch("batch", 2, timedelta(seconds=1)),
        "reduce_window": s.reduce_window("reduce_window", EVENT, WINDOW, max),
        "fold_window": s.fold_window("fold_window", EVENT, WINDOW, list, lambda a, v: a),
        "collect_window": s.collect_window("collect_window", EVENT, WINDOW),
        "reduce_stream": d.reduce_stream("reduce_stream", _reduce_handler, WINDOW),
    }


def test_a_late_port_is_what_the_api_gives_a_late_stream():
    for kind, stream in _window_steps().items():
        assert isinstance(stream, WindowStream) == operator(kind).late_port, kind


def test_visualize_draws_each_late_port_as_late():
    flow = Dataflow("late")
    s = flow.input("inp", TestingInput([("a", 1)]))
    s.reduce_window("rw", EVENT, WINDOW, max).late.output("rw_late", TestingOutput([]))
    rs = s.to_datums("d").reduce_stream("rs", _reduce_handler, WINDOW)
    rs.late.output("rs_late", TestingOutput([]))
    graph = flow_graph(flow)
    styles = {(graph.step_of(e.source), graph.step_of(e.target)): e.style for e in graph.edges}
    assert styles[("rw", "rw_late")] == styles[("rs", "rs_late")] == "late"


@pytest.mark.parametrize(
    "kind, fns, expected",
    [
        ("reduce_window", {"reducer": lambda a, b: a + b}, 6),
        ("fold_window", {"builder": lambda: 10, "folder": lambda a, v: a + v}, 16),
        ("collect_window", {}, [1, 2, 3]),
    ],
)
def test_a_window_logic_aggregates_as_its_kind_says(kind, fns, expected):
    clock = build_clock(SystemClockConfig())
    logic = WindowLogic("w", kind, clock, build_windower(WINDOW), fns)
    assert logic.agg.how == operator(kind).aggregates
    outcome = logic.on_values(KeyedCall("k", None, EOF_MS, [1, 2, 3]))  # and the end
    assert outcome.emitted == [("k", expected)]


def test_only_a_reducing_window_on_the_system_clock_pre_combines():
    flow = Dataflow("combine")
    s = flow.input("inp", TestingInput([("a", 1)]))
    s.reduce_window("sys", SystemClockConfig(), WINDOW, max).output("o1", TestingOutput([]))
    s.reduce_window("event", EVENT, WINDOW, max).output("o2", TestingOutput([]))
    s.fold_window("fold", SystemClockConfig(), WINDOW, list, lambda a, v: a).output(
        "o3", TestingOutput([])
    )
    plan = build_plan(flow)
    program = StageProgram.for_level(plan, 0)
    combiners = {step_id: fn is not None for step_id, fn in program.keyed.values()}
    assert combiners == {"sys": True, "event": False, "fold": False}
