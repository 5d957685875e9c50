"""Stateful operators on `Dataflow`/`Stream`: return values, validation, plan levels."""

from __future__ import annotations

from datetime import timedelta

import pytest

from flowspark.api.dataflow import WindowStream
from flowspark.dataflow import Dataflow, Stream
from flowspark.plan.graph import build_plan
from flowspark.testing import TestingInput, TestingOutput
from flowspark.window import EventClockConfig, SessionWindow, SystemClockConfig, TumblingWindow
from tests.event_times import ALIGN

CLOCK = EventClockConfig(lambda v: v, timedelta(0))
WINDOW = TumblingWindow(length=timedelta(seconds=10), align_to=ALIGN)


def add(acc, v):
    return acc + v


def never(acc):
    return False


# Each stateful operator with valid arguments (after the step id).
STATEFUL = {
    "reduce": (add, never),
    "stateful_map": (lambda: 0, lambda s, v: (s, v)),
    "batch": (3, timedelta(seconds=1)),
    "reduce_window": (CLOCK, WINDOW, add),
    "fold_window": (CLOCK, WINDOW, list, add),
    "collect_window": (CLOCK, WINDOW),
}
WINDOW_KINDS = ["reduce_window", "fold_window", "collect_window"]


@pytest.fixture
def flow() -> Dataflow:
    return Dataflow()


@pytest.fixture
def stream(flow: Dataflow) -> Stream:
    return flow.input("inp", TestingInput([("a", 1)]))


@pytest.mark.parametrize("kind", sorted(STATEFUL))
def test_dataflow_stateful_methods_return_none_and_extend_the_chain(flow, kind):
    flow.input("inp", TestingInput([]))
    assert getattr(flow, kind)("st", *STATEFUL[kind]) is None
    step = flow.steps[-1]
    assert (step.kind, step.step_id) == (kind, "st")
    assert [p.step.step_id for p in step.upstreams] == ["inp"]


@pytest.mark.parametrize("kind", sorted(STATEFUL))
def test_stream_stateful_methods_return_a_stream_of_the_new_step(stream, kind):
    out = getattr(stream, kind)("st", *STATEFUL[kind])
    assert isinstance(out, Stream)
    assert out.step_id == "st"
    assert isinstance(out, WindowStream) == (kind in WINDOW_KINDS)


@pytest.mark.parametrize("kind", sorted(STATEFUL))
def test_stateful_step_ids_must_be_unique(stream, kind):
    stream.map("st", lambda x: x)
    with pytest.raises(ValueError, match="'st' is used twice"):
        getattr(stream, kind)("st", *STATEFUL[kind])


@pytest.mark.parametrize(
    "kind, position, role",
    [
        ("reduce", 0, "reducer"),
        ("reduce", 1, "is_complete"),
        ("stateful_map", 0, "builder"),
        ("stateful_map", 1, "mapper"),
        ("reduce_window", 2, "reducer"),
        ("fold_window", 2, "builder"),
        ("fold_window", 3, "folder"),
    ],
)
@pytest.mark.parametrize("bad", [None, 42, "add"])
def test_stateful_functions_must_be_callable(flow, stream, kind, position, role, bad):
    args = list(STATEFUL[kind])
    args[position] = bad
    before = len(flow.steps)
    with pytest.raises(TypeError, match=f"{kind}: {role} must be callable"):
        getattr(stream, kind)("st", *args)
    assert len(flow.steps) == before


def test_stateful_functions_are_stored_by_role(flow, stream):
    stream.fold_window("fw", CLOCK, WINDOW, list, add)
    step = flow.steps[-1]
    assert step.fns == {"builder": list, "folder": add}
    assert step.args == {"clock_config": CLOCK, "window_config": WINDOW, "with_window": False}


# -- batch -------------------------------------------------------------------------------


def test_batch_records_its_size_and_timeout(flow, stream):
    stream.batch("b", 5, timedelta(seconds=2))
    assert flow.steps[-1].args == {"max_size": 5, "timeout": timedelta(seconds=2)}


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", None])
def test_batch_max_size_must_be_a_positive_int(stream, bad):
    with pytest.raises((TypeError, ValueError), match="'b': max_size must be a positive int"):
        stream.batch("b", bad, timedelta(seconds=1))


@pytest.mark.parametrize("bad", [1, 1.5, None, timedelta(0), timedelta(seconds=-1)])
def test_batch_timeout_must_be_a_positive_timedelta(stream, bad):
    with pytest.raises((TypeError, ValueError), match="'b': timeout must be a positive timedelta"):
        stream.batch("b", 2, bad)


def test_batch_non_timedelta_timeout_is_a_type_error(stream):
    with pytest.raises(TypeError):
        stream.batch("b", 2, 10)


def test_dataflow_batch_validates_too(flow):
    flow.input("inp", TestingInput([]))
    with pytest.raises(ValueError, match="max_size"):
        flow.batch("b", 0, timedelta(seconds=1))


# -- window operators ------------------------------------------------------------------


@pytest.mark.parametrize("kind", WINDOW_KINDS)
@pytest.mark.parametrize(
    ("position", "config", "bad"),
    [(0, "clock_config", bad) for bad in (None, timedelta(seconds=1), WINDOW, lambda v: v)]
    + [(1, "window_config", bad) for bad in (None, timedelta(seconds=1), CLOCK, "tumbling")],
)
def test_window_ops_reject_a_bad_config_naming_the_step(stream, kind, position, config, bad):
    args = list(STATEFUL[kind])
    args[position] = bad
    with pytest.raises(TypeError, match=f"{kind} 'win': {config} must be"):
        getattr(stream, kind)("win", *args)


@pytest.mark.parametrize("kind", WINDOW_KINDS)
def test_dataflow_window_ops_reject_bad_configs_too(flow, kind):
    flow.input("inp", TestingInput([]))
    args = list(STATEFUL[kind])
    args[1] = timedelta(seconds=10)
    with pytest.raises(TypeError, match=f"{kind} 'win': window_config"):
        getattr(flow, kind)("win", *args)


@pytest.mark.parametrize("clock", [CLOCK, SystemClockConfig()])
@pytest.mark.parametrize("window", [WINDOW, SessionWindow(gap=timedelta(seconds=1))])
def test_window_ops_accept_every_clock_and_window(stream, clock, window):
    assert isinstance(stream.collect_window("win", clock, window), WindowStream)


@pytest.mark.parametrize("kind", WINDOW_KINDS)
@pytest.mark.parametrize("with_window, stored", [(False, False), (True, True), (1, True)])
def test_with_window_is_recorded_as_a_bool(flow, stream, kind, with_window, stored):
    getattr(stream, kind)("win", *STATEFUL[kind], with_window=with_window)
    assert flow.steps[-1].args["with_window"] is stored


@pytest.mark.parametrize("kind", WINDOW_KINDS)
def test_dataflow_window_ops_pass_with_window_on(flow, kind):
    flow.input("inp", TestingInput([]))
    getattr(flow, kind)("win", *STATEFUL[kind], with_window=True)
    assert flow.steps[-1].args["with_window"] is True


def test_window_stream_late_is_slot_1_of_the_window_step(flow, stream):
    windowed = stream.collect_window("win", CLOCK, WINDOW)
    late = windowed.late
    assert type(late) is Stream
    assert late.step_id == "win"
    assert late._port.step is windowed._port.step
    assert (windowed._port.slot, late._port.slot) == (0, 1)
    late.map("late_map", lambda kv: kv)
    (port,) = flow.steps[-1].upstreams
    assert port.step.step_id == "win" and port.slot == 1


def test_window_results_and_late_items_can_both_reach_outputs(flow, stream):
    windowed = stream.reduce_window("win", CLOCK, WINDOW, add)
    windowed.output("out", TestingOutput([]))
    windowed.late.output("late_out", TestingOutput([]))
    plan = build_plan(flow)
    win = plan.index[flow.steps[1]]
    assert sorted(plan.children[win]) == [(win + 1, 0), (win + 2, 1)]


# -- plan levels -------------------------------------------------------------------------


def levels(flow: Dataflow) -> dict[str, int]:
    plan = build_plan(flow)
    return {plan.step(i).step_id: lv for i, lv in enumerate(plan.levels)}


@pytest.mark.parametrize("kind", sorted(STATEFUL))
def test_a_stateful_step_is_one_level_above_its_upstream(flow, kind):
    flow.input("inp", TestingInput([]))
    flow.map(lambda x: x)
    getattr(flow, kind)("st", *STATEFUL[kind])
    flow.map(lambda x: x)
    flow.output("out", TestingOutput([]))
    assert levels(flow) == {"inp": 0, "map": 0, "st": 1, "map_2": 1, "out": 1}
    plan = build_plan(flow)
    assert plan.stateful
    assert [plan.step(i).step_id for i in plan.entries(1)] == ["st"]


def test_chained_stateful_steps_climb_one_level_each(flow):
    flow.input("inp", TestingInput([]))
    flow.reduce("r", add, never)
    flow.stateful_map("sm", lambda: 0, lambda s, v: (s, v))
    flow.collect_window("cw", CLOCK, WINDOW)
    flow.output("out", TestingOutput([]))
    assert levels(flow) == {"inp": 0, "r": 1, "sm": 2, "cw": 3, "out": 3}
    assert build_plan(flow).top_level == 3


def test_stateful_after_redistribute_is_one_level_up_not_two(flow):
    flow.input("inp", TestingInput([]))
    flow.redistribute()
    flow.batch("b", 2, timedelta(seconds=1))
    flow.output("out", TestingOutput([]))
    assert levels(flow) == {"inp": 0, "redistribute": 0, "b": 1, "out": 1}


def test_late_stream_steps_stay_on_the_window_level(flow, stream):
    windowed = stream.collect_window("win", CLOCK, WINDOW)
    windowed.late.map("late_map", lambda kv: kv).output("late_out", TestingOutput([]))
    windowed.output("out", TestingOutput([]))
    assert levels(flow) == {"inp": 0, "win": 1, "late_map": 1, "late_out": 1, "out": 1}


def test_a_flow_without_stateful_steps_is_not_stateful(flow):
    flow.input("inp", TestingInput([]))
    flow.map(lambda x: x)
    flow.output("out", TestingOutput([]))
    assert not build_plan(flow).stateful
