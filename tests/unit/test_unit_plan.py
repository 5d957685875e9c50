"""`build_plan`: validation, levels around exchanges, sink ports."""

from __future__ import annotations

import pytest

from flowspark.dataflow import Dataflow
from flowspark.plan.graph import SINK_PORT_BASE, build_plan
from flowspark.testing import TestingInput, TestingOutput


def ids(plan, indices):
    return [plan.step(i).step_id for i in indices]


def test_not_a_dataflow_is_a_type_error():
    with pytest.raises(TypeError, match="expected a flowspark Dataflow; got list"):
        build_plan([])


def test_no_input_is_a_value_error_that_says_what_to_add():
    with pytest.raises(ValueError, match=r"no input: add one with flow\.input"):
        build_plan(Dataflow())


def test_no_input_is_reported_even_with_an_output():
    flow = Dataflow()
    flow.output("out", TestingOutput([]))
    with pytest.raises(ValueError, match="no input"):
        build_plan(flow)


def test_no_output_is_a_value_error_that_says_what_to_add():
    flow = Dataflow()
    flow.input("inp", TestingInput([1]))
    flow.map(lambda x: x)
    with pytest.raises(ValueError, match=r"no output: add one with flow\.output"):
        build_plan(flow)


def test_input_that_never_reaches_an_output_is_named():
    flow = Dataflow()
    a = flow.input("a", TestingInput([1]))
    b = flow.input("b", TestingInput([2]))  # auto-merged into the chain, chain unused
    a.map(lambda x: x).output("out", TestingOutput([]))
    b.map(lambda x: x)
    with pytest.raises(ValueError, match="input 'b' never reaches an output"):
        build_plan(flow)


def test_input_reaching_an_output_only_through_one_branch_is_fine():
    flow = Dataflow()
    trues, falses = flow.input("inp", TestingInput([1])).branch(bool)
    falses.map(lambda x: x)  # dead end
    trues.output("out", TestingOutput([]))
    plan = build_plan(flow)
    assert ids(plan, plan.inputs) == ["inp"]


def test_steps_are_in_creation_order_with_index():
    flow = Dataflow()
    flow.input("inp", TestingInput([1]))
    flow.map(lambda x: x)
    flow.output("out", TestingOutput([]))
    plan = build_plan(flow)
    assert [s.step_id for s in plan.steps] == ["inp", "map", "out"]
    assert all(plan.index[s] == i for i, s in enumerate(plan.steps))
    assert plan.children == {0: [(1, 0)], 1: [(2, 0)], 2: []}


def test_branch_children_carry_their_slot():
    flow = Dataflow()
    trues, falses = flow.input("inp", TestingInput([1])).branch("br", bool)
    falses.output("f", TestingOutput([]))
    trues.output("t", TestingOutput([]))
    plan = build_plan(flow)
    assert plan.children[1] == [(2, 1), (3, 0)]


def test_without_exchange_everything_is_level_zero():
    flow = Dataflow()
    flow.input("inp", TestingInput([1]))
    flow.map(lambda x: x)
    flow.filter(bool)
    flow.output("out", TestingOutput([]))
    plan = build_plan(flow)
    assert plan.levels == [0, 0, 0, 0]
    assert plan.top_level == 0


def test_redistribute_puts_its_children_one_level_up():
    flow = Dataflow()
    flow.input("inp", TestingInput([1]))
    flow.map(lambda x: x)
    flow.redistribute()
    flow.map(lambda x: x)
    flow.output("out", TestingOutput([]))
    plan = build_plan(flow)
    assert plan.levels == [0, 0, 0, 1, 1]
    assert plan.top_level == 1


def test_two_redistributes_make_two_levels():
    flow = Dataflow()
    flow.input("inp", TestingInput([1]))
    flow.redistribute()
    flow.redistribute()
    flow.output("out", TestingOutput([]))
    assert build_plan(flow).levels == [0, 0, 1, 2]


def test_merge_takes_the_highest_level_of_its_upstreams():
    flow = Dataflow()
    s = flow.input("inp", TestingInput([1]))
    up = s.redistribute().map(lambda x: x)
    s.merge(up, step_id="m").output("out", TestingOutput([]))
    plan = build_plan(flow)
    by_id = dict(zip([st.step_id for st in plan.steps], plan.levels, strict=True))
    assert by_id == {"inp": 0, "redistribute": 0, "map": 1, "m": 1, "out": 1}


def test_each_output_gets_its_own_sink_port_in_order():
    flow = Dataflow()
    s = flow.input("inp", TestingInput([1]))
    s.output("first", TestingOutput([])).map(lambda x: x).output("second", TestingOutput([]))
    plan = build_plan(flow)
    assert ids(plan, plan.outputs) == ["first", "second"]
    assert plan.sink_ports == {1: SINK_PORT_BASE, 3: SINK_PORT_BASE + 1}


def test_sink_ports_cannot_collide_with_step_indices():
    flow = Dataflow()
    s = flow.input("inp", TestingInput([1]))
    for _ in range(20):
        s = s.map(lambda x: x)
    s.output("out", TestingOutput([]))
    plan = build_plan(flow)
    assert min(plan.sink_ports.values()) > len(plan.steps)
