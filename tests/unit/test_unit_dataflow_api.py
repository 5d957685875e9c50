"""Building flows: `Dataflow` (bytewax 0.17 methods) and `Stream` validation."""

from __future__ import annotations

import pytest

from flowspark.dataflow import Dataflow, Stream
from flowspark.testing import TestingInput, TestingOutput

# Stateless kinds that take one user function.
FN_KINDS = ["map", "filter", "filter_map", "flat_map", "inspect", "inspect_epoch", "inspect_worker"]


def double(x):
    return x * 2


def is_even(x):
    return x % 2 == 0


@pytest.fixture
def flow() -> Dataflow:
    return Dataflow()


@pytest.fixture
def stream(flow: Dataflow) -> Stream:
    return flow.input("inp", TestingInput([1, 2, 3]))


def step_ids(flow: Dataflow) -> list[str]:
    return [s.step_id for s in flow.steps]


# -- Dataflow (bytewax 0.17 chain) -------------------------------------------------


def test_input_returns_a_stream_named_after_the_step(flow):
    s = flow.input("inp", TestingInput([1]))
    assert isinstance(s, Stream)
    assert s.step_id == "inp"
    assert s.flow is flow


def test_input_rejects_a_non_input(flow):
    with pytest.raises(TypeError, match="expected a flowspark Input"):
        flow.input("inp", [1, 2, 3])


def test_output_rejects_a_non_output(flow):
    flow.input("inp", TestingInput([1]))
    with pytest.raises(TypeError, match="expected a flowspark Output"):
        flow.output("out", [])


def test_stream_output_rejects_a_non_output(stream):
    with pytest.raises(TypeError, match="got list"):
        stream.output("out", [])


@pytest.mark.parametrize(
    ("method", "args"),
    [
        ("map", (double,)),
        ("filter", (is_even,)),
        ("filter_map", (double,)),
        ("flat_map", (lambda x: [x],)),
        ("inspect", (print,)),
        ("inspect_epoch", (lambda e, x: None,)),
        ("inspect_worker", (lambda w, x: None,)),
        ("redistribute", ()),
        ("output", ("out", TestingOutput([]))),
    ],
)
def test_dataflow_methods_return_none_and_extend_the_chain(flow, method, args):
    flow.input("inp", TestingInput([1]))
    before = len(flow.steps)
    assert getattr(flow, method)(*args) is None
    assert len(flow.steps) == before + 1
    assert flow.steps[-1].upstreams[0].step is flow.steps[-2]


def test_dataflow_steps_before_any_input_are_recorded_unconnected(flow):
    # bytewax 0.17 lets a flow be built in any order; such steps receive no items.
    flow.map(double)
    assert step_ids(flow) == ["map_double"]
    assert flow.steps[0].upstreams == ()


def test_second_input_is_merged_into_the_chain(flow):
    flow.input("a", TestingInput([1]))
    flow.input("b", TestingInput([2]))
    flow.map(double)
    merge = flow.steps[2]
    assert merge.kind == "merge"
    assert [p.step.step_id for p in merge.upstreams] == ["a", "b"]
    assert flow.steps[3].upstreams[0].step is merge


@pytest.mark.parametrize("method", FN_KINDS)
def test_dataflow_method_with_non_callable_is_a_type_error(flow, method):
    flow.input("inp", TestingInput([1]))
    with pytest.raises(TypeError, match="must be callable"):
        getattr(flow, method)("not a function")


# -- Stream ---------------------------------------------------------------------------


@pytest.mark.parametrize("method", [*FN_KINDS, "branch"])
def test_stream_method_with_non_callable_is_a_type_error(stream, method):
    with pytest.raises(TypeError, match=rf"{method}: \w+ must be callable; got int"):
        getattr(stream, method)(42)


@pytest.mark.parametrize("method", FN_KINDS)
def test_stream_method_accepts_fn_or_step_id_and_fn(stream, method):
    fn = lambda *a: None
    named = getattr(stream, method)("my_step", fn)
    unnamed = getattr(stream, method)(fn)
    assert named.step_id == "my_step"
    assert unnamed.step_id == method
    assert isinstance(named, Stream)
    assert isinstance(unnamed, Stream)


def test_stream_method_rejects_fn_then_step_id(stream):
    with pytest.raises(TypeError, match=r"takes \(fn\) or \(step_id, fn\)"):
        stream.map(double, "id")


def test_stream_method_rejects_no_arguments(stream):
    with pytest.raises(TypeError, match="got 0 arguments"):
        stream.map()


def test_stream_methods_return_new_streams(stream):
    mapped = stream.map(double)
    assert mapped is not stream
    assert mapped.step_id != stream.step_id
    assert mapped.flow is stream.flow


def test_branch_returns_trues_and_falses_streams_of_one_step(stream):
    trues, falses = stream.branch("split", is_even)
    assert trues.step_id == falses.step_id == "split"
    assert (trues._port.slot, falses._port.slot) == (0, 1)


def test_merge_of_a_stream_from_another_flow_is_a_value_error(stream):
    other = Dataflow().input("other", TestingInput([1]))
    with pytest.raises(ValueError, match="different Dataflows"):
        stream.merge(other)


def test_merge_of_a_non_stream_is_a_type_error(stream):
    with pytest.raises(TypeError, match="expected Stream objects; got list"):
        stream.merge([1, 2])


def test_merge_takes_a_step_id_keyword(flow, stream):
    a = stream.map(double)
    merged = stream.merge(a, step_id="both")
    assert merged.step_id == "both"
    assert [p.step for p in flow.steps[-1].upstreams] == [flow.steps[0], flow.steps[1]]


def test_output_stream_passes_items_on(stream):
    out = stream.output("out", TestingOutput([]))
    assert isinstance(out, Stream)
    assert out.step_id == "out"
    downstream = out.map(double)
    assert downstream.flow.steps[-1].upstreams[0].step.step_id == "out"


# -- step ids ---------------------------------------------------------------------------


def test_duplicate_explicit_step_id_is_a_value_error(stream):
    stream.map("m", double)
    with pytest.raises(ValueError, match="'m' is used twice"):
        stream.map("m", double)


def test_duplicate_step_id_across_kinds_is_a_value_error(flow, stream):
    with pytest.raises(ValueError, match="used twice"):
        stream.output("inp", TestingOutput([]))


def test_failed_duplicate_does_not_add_a_step(flow, stream):
    stream.map("m", double)
    with pytest.raises(ValueError):
        stream.filter("m", is_even)
    assert step_ids(flow) == ["inp", "m"]


@pytest.mark.parametrize("bad", ["", 3])
def test_step_id_must_be_a_non_empty_str(flow, bad):
    with pytest.raises(TypeError, match="step_id must be a non-empty str"):
        flow.input(bad, TestingInput([1]))


def test_auto_ids_use_the_function_name(stream):
    assert stream.map(double).step_id == "map_double"
    assert stream.filter(is_even).step_id == "filter_is_even"


def test_auto_ids_for_lambdas_use_the_kind(stream):
    assert stream.map(lambda x: x).step_id == "map"
    assert stream.map(lambda x: x).step_id == "map_2"
    assert stream.map(lambda x: x).step_id == "map_3"


def test_auto_ids_are_unique_and_avoid_explicit_ids(flow, stream):
    stream.map("map_double", double)
    stream.map("map_double_2", double)
    assert stream.map(double).step_id == "map_double_3"
    ids = step_ids(flow)
    assert len(ids) == len(set(ids))


def test_auto_ids_for_callables_without_a_name_use_the_kind(stream):
    class Doubler:
        def __call__(self, x):
            return 2 * x

    assert stream.map(Doubler()).step_id == "map"


def test_auto_ids_for_merge_and_redistribute(stream):
    assert stream.redistribute().step_id == "redistribute"
    assert stream.merge(stream.map(double)).step_id == "merge"


def test_many_auto_ids_are_all_unique(flow, stream):
    s = stream
    for _ in range(50):
        s = s.map(lambda x: x).filter(is_even)
    ids = step_ids(flow)
    assert len(ids) == len(set(ids)) == 101
