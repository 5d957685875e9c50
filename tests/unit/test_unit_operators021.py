"""bytewax 0.21.1's operators API (`flowspark.operators`), built without Spark.

Signatures are checked against bytewax 0.21.1's (`pysrc/bytewax/operators/__init__.py`
at tag v0.21.1: parameter names, kinds and defaults, written out below); when
`bench/.venv-bytewax` holds bytewax 0.21.1, against the installed package too.
Step ids are scoped as bytewax scopes them, bytewax's build-time errors are raised
before Spark starts, and a 0.21 flow is planned as the same flow written with
flowspark's `Stream` methods.
"""

from __future__ import annotations

import inspect
import json
import pickle
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest

import flowspark.operators as op
from flowspark.api.dataflow import Stream as ApiStream
from flowspark.dataflow import Dataflow, Stream, f_repr, operator
from flowspark.inputs import AbortExecution
from flowspark.plan.graph import build_plan
from flowspark.runtime.logics import logic_for
from flowspark.testing import TestingInput, TestingOutput, TestingSink, TestingSource

P, V, K = "POSITIONAL_OR_KEYWORD", "VAR_POSITIONAL", "KEYWORD_ONLY"
_UP = [("step_id", P), ("up", P)]
# bytewax 0.21.1: name -> [(parameter, kind)] and the defaults that are values.
BYTEWAX_021 = {
    "branch": [*_UP, ("predicate", P)],
    "collect": [*_UP, ("timeout", P), ("max_size", P)],
    "count_final": [*_UP, ("key", P)],
    "enrich_cached": [*_UP, ("getter", P), ("mapper", P), ("ttl", P), ("_now_getter", P)],
    "filter": [*_UP, ("predicate", P)],
    "filter_map": [*_UP, ("mapper", P)],
    "filter_map_value": [*_UP, ("mapper", P)],
    "filter_value": [*_UP, ("predicate", P)],
    "flat_map": [*_UP, ("mapper", P)],
    "flat_map_batch": [*_UP, ("mapper", P)],
    "flat_map_value": [*_UP, ("mapper", P)],
    "flatten": _UP,
    "fold_final": [*_UP, ("builder", P), ("folder", P)],
    "input": [("step_id", P), ("flow", P), ("source", P)],
    "inspect": [*_UP, ("inspector", P)],
    "inspect_debug": [*_UP, ("inspector", P)],
    "join": [("step_id", P), ("sides", V), ("insert_mode", K), ("emit_mode", K)],
    "key_on": [*_UP, ("key", P)],
    "key_rm": _UP,
    "map": [*_UP, ("mapper", P)],
    "map_value": [*_UP, ("mapper", P)],
    "max_final": [*_UP, ("by", P)],
    "merge": [("step_id", P), ("ups", V)],
    "min_final": [*_UP, ("by", P)],
    "output": [*_UP, ("sink", P)],
    "raises": _UP,
    "redistribute": _UP,
    "reduce_final": [*_UP, ("reducer", P)],
    "stateful": [*_UP, ("builder", P)],
    "stateful_batch": [*_UP, ("builder", P)],
    "stateful_flat_map": [*_UP, ("mapper", P)],
    "stateful_map": [*_UP, ("mapper", P)],
}
# Parameters with a default in bytewax 0.21.1 (a value where it is one, else a function).
DEFAULTS = {
    ("enrich_cached", "ttl"): timedelta.max,
    ("enrich_cached", "_now_getter"): callable,
    ("inspect", "inspector"): callable,
    ("inspect_debug", "inspector"): callable,
    ("join", "insert_mode"): "last",
    ("join", "emit_mode"): "complete",
    ("max_final", "by"): callable,
    ("min_final", "by"): callable,
}
BYTEWAX_VENV = Path(__file__).resolve().parents[2] / "bench" / ".venv-bytewax" / "bin" / "python"


def _signature(name: str) -> list[tuple[str, str]]:
    params = inspect.signature(getattr(op, name)).parameters.values()
    return [(p.name, p.kind.name) for p in params]


@pytest.mark.parametrize("name", sorted(BYTEWAX_021))
def test_each_operator_has_bytewax_0_21_1s_parameters(name: str):
    assert _signature(name) == BYTEWAX_021[name]
    for p in inspect.signature(getattr(op, name)).parameters.values():
        expected = DEFAULTS.get((name, p.name), inspect.Parameter.empty)
        if expected is callable:
            assert callable(p.default), (name, p.name)
        else:
            assert p.default == expected, (name, p.name)


@pytest.mark.skipif(not BYTEWAX_VENV.exists(), reason="no bench/.venv-bytewax")
def test_signatures_match_the_installed_bytewax_0_21_1():
    script = (
        "import inspect, json, bytewax.operators as op, importlib.metadata as m\n"
        "names = [n for n in dir(op) if not n.startswith('_') and inspect.isfunction("
        "getattr(op, n)) and 'step_id' in inspect.signature(getattr(op, n)).parameters]\n"
        "print(json.dumps({'version': m.version('bytewax'), 'ops': {n: [[p.name, p.kind.name]"
        " for p in inspect.signature(getattr(op, n)).parameters.values()] for n in names}}))\n"
    )
    found = subprocess.run(
        [str(BYTEWAX_VENV), "-c", script], capture_output=True, text=True, timeout=120
    )
    assert found.returncode == 0, found.stderr[-2000:]
    real = json.loads(found.stdout)
    if real["version"] != "0.21.1":
        pytest.skip(f"bench/.venv-bytewax has bytewax {real['version']}")
    ours = {name: [list(p) for p in _signature(name)] for name in real["ops"] if hasattr(op, name)}
    assert ours == {name: real["ops"][name] for name in ours}
    assert set(real["ops"]) - set(ours) == set()  # no 0.21 operator is missing


def test_the_type_names_and_logic_classes_are_there():
    assert op.Stream is Stream is ApiStream
    assert op.KeyedStream[int] == Stream[tuple[str, int]]
    assert op.StatefulLogic.RETAIN is False and op.StatefulLogic.DISCARD is True
    assert op.StatefulBatchLogic.RETAIN is False and op.StatefulBatchLogic.DISCARD is True
    assert op.Dataflow is Dataflow


def test_default_inspectors_print_what_bytewax_prints(capsys):
    inspect_default = inspect.signature(op.inspect).parameters["inspector"].default
    debug_default = inspect.signature(op.inspect_debug).parameters["inspector"].default
    inspect_default("flow.out", "a")
    debug_default("flow.dbg", 3, 1, 0)
    assert capsys.readouterr().out == "flow.out: 'a'\nflow.dbg W0 @1: 3\n"


# -- step ids and scoping ------------------------------------------------------------------


def _ids(flow: Dataflow) -> list[str]:
    return [step.step_id for step in flow.steps]


def test_steps_are_named_under_the_flow_id():
    flow = Dataflow("map_eg")
    s = op.input("inp", flow, TestingSource(range(3)))
    s = op.map("add_one", s, lambda x: x + 10)
    op.inspect("out", s)
    assert _ids(flow) == ["map_eg.inp", "map_eg.add_one", "map_eg.out"]
    assert s.stream_id == "map_eg.add_one.down"


def test_nested_operators_name_their_steps_under_their_own_id():
    flow = Dataflow("f")
    words = op.input("inp", flow, TestingSource(["a"]))
    op.output("out", op.count_final("count", words, lambda w: w), TestingSink([]))
    assert _ids(flow) == [
        "f.inp",
        "f.count.init_count",
        "f.count.sum.pre_reduce",
        "f.count.sum.fold_final",
        "f.out",
    ]


def test_a_custom_operator_scopes_its_steps_and_its_stream():
    @operator
    def add_to(step_id: str, up: Stream[int], y: int) -> Stream[int]:
        return op.map("shim_map", up, lambda x: x + y)

    @operator
    def twice(step_id: str, up: Stream[int]) -> Stream[int]:
        return add_to("second", add_to("first", up, 1), 1)

    flow = Dataflow("f")
    s = twice("twice", op.input("inp", flow, TestingSource([1])))
    assert _ids(flow)[1:] == ["f.twice.first.shim_map", "f.twice.second.shim_map"]
    assert s.stream_id == "f.twice.down"
    assert s.flow() is flow


def test_a_custom_operator_may_take_the_flow_and_add_an_input():
    @operator
    def numbers(step_id: str, flow: Dataflow, n: int) -> Stream[int]:
        return op.input("src", flow, TestingSource(range(n)))

    flow = Dataflow("f")
    op.inspect("out", numbers("nums", flow, 3))
    assert _ids(flow) == ["f.nums.src", "f.out"]


def test_then_chains_an_operator():
    flow = Dataflow("f")
    s = op.input("inp", flow, TestingSource([1])).then(op.map, "double", lambda x: x * 2)
    assert _ids(flow) == ["f.inp", "f.double"]
    assert isinstance(s, Stream)


def test_branch_returns_branch_out_with_named_streams():
    flow = Dataflow("f")
    out = op.branch("even", op.input("inp", flow, TestingSource([1])), lambda x: x % 2 == 0)
    assert isinstance(out, op.BranchOut)
    assert (out.trues.stream_id, out.falses.stream_id) == ("f.even.trues", "f.even.falses")


def test_a_stream_of_the_stream_api_can_feed_an_operator():
    flow = Dataflow("f")
    s = flow.input("inp", TestingInput([1]))
    op.inspect("out", op.map("m", s, str))
    assert _ids(flow) == ["inp", "f.m", "f.out"]


def test_f_repr_names_module_function_and_line():
    def my_f(x):
        return x

    line = my_f.__code__.co_firstlineno
    assert f_repr(my_f) == f"<function '{__name__}.{my_f.__qualname__}' line {line}>"


# -- bytewax's errors, before Spark starts ---------------------------------------------------


def test_a_duplicate_step_id_is_bytewaxs_value_error():
    flow = Dataflow("f")
    s = op.input("inp", flow, TestingSource([1]))
    op.map("m", s, str)
    with pytest.raises(ValueError, match=r"^step 'f\.m' already exists; do you have two steps"):
        op.filter("m", s, bool)


def test_a_duplicate_id_of_an_operator_made_of_steps_is_refused_too():
    flow = Dataflow("f")
    s = op.input("inp", flow, TestingSource(["a"]))
    op.count_final("count", s, str)
    with pytest.raises(ValueError, match="step 'f.count' already exists"):
        op.map("count", s, str)


def test_step_ids_must_be_str_without_a_period():
    flow = Dataflow("f")
    s = op.input("inp", flow, TestingSource([1]))
    with pytest.raises(TypeError, match="'step_id' must be a `str`"):
        op.map(1, s, str)
    with pytest.raises(ValueError, match=r"'step_id' can't contain any periods '\.'"):
        op.map("a.b", s, str)


def test_a_flow_id_with_a_period_is_refused():
    with pytest.raises(ValueError, match=r"flow ID can't contain a period `\.`"):
        op.input("inp", Dataflow("a.b"), TestingSource([1]))


def test_an_upstream_that_is_not_a_stream_is_a_type_error():
    flow = Dataflow("f")
    out = op.branch("b", op.input("inp", flow, TestingSource([1])), bool)
    with pytest.raises(TypeError, match="'up' argument must be a `Stream`; got a <class"):
        op.map("m", out, str)
    with pytest.raises(TypeError, match="'ups' \\*args all must be a `Stream`"):
        op.merge("m", out.trues, [out.falses])


def test_an_incorrect_call_names_the_operator():
    flow = Dataflow("f")
    s = op.input("inp", flow, TestingSource([1]))
    with pytest.raises(TypeError, match="operator 'map' called incorrectly") as info:
        op.map("m", s)
    assert "mapper" in str(info.value.__cause__)


def test_streams_of_two_flows_do_not_mix():
    a = op.input("inp", Dataflow("a"), TestingSource([1]))
    b = op.input("inp", Dataflow("b"), TestingSource([1]))
    with pytest.raises(AssertionError, match="inconsistent stream scoping"):
        op.merge("m", a, b)


def test_join_refuses_unknown_modes():
    flow = Dataflow("f")
    s = op.input("inp", flow, TestingSource([("k", 1)]))
    with pytest.raises(ValueError, match="unknown join insert mode 'middle'"):
        op.join("j", s, s, insert_mode="middle")
    with pytest.raises(ValueError, match="unknown join emit mode 'never'"):
        op.join("j2", s, s, emit_mode="never")


def test_sources_and_sinks_of_other_kinds_are_type_errors():
    flow = Dataflow("f")
    with pytest.raises(TypeError, match="input 'f.inp': expected a bytewax 0.21 source"):
        op.input("inp", flow, [1, 2])
    s = op.input("inp2", flow, TestingSource([1]))
    with pytest.raises(TypeError, match="output 'f.out': expected a bytewax 0.21 sink"):
        op.output("out", s, [])


def test_testing_source_abort_ends_the_batch_then_aborts_once():
    # bytewax's pytests/test_testing.py::test_testing_source_abort: the items before
    # the ABORT first, then AbortExecution; a part resumed from the snapshot taken
    # before it goes past it (it triggers once).
    source = TestingSource([0, 1, 2, TestingSource.ABORT(), 3, 4], batch_size=2)
    part = source.build_part("test", "iterable", None)
    assert part.next_batch() == [0, 1]
    resume_state = part.snapshot()
    assert part.next_batch() == [2]
    assert part.snapshot() == 3  # the ABORT's own index: a resume meets it again
    with pytest.raises(AbortExecution):
        part.next_batch()
    part = source.build_part("test", "iterable", resume_state)
    assert part.next_batch() == [2, 3]
    assert part.next_batch() == [4]
    with pytest.raises(StopIteration):
        part.next_batch()


def test_the_driver_marks_the_abort_that_stopped_a_run_by_its_index():
    # The run reads a copy of the items in another process: the driver's copy hears
    # which ABORT fired through the error (AbortExecution with the item's index).
    first, second = TestingSource.ABORT(), TestingSource.ABORT()
    source = TestingSource([0, first, 1, second])
    copy = pickle.loads(pickle.dumps(source))
    part = copy.build_part("test", "iterable", None)
    assert part.next_batch() == [0]
    with pytest.raises(AbortExecution) as caught:
        part.next_batch()
    assert not first._triggered
    source.aborted(pickle.loads(pickle.dumps(caught.value)))
    assert first._triggered and not second._triggered
    source.aborted(AbortExecution("a user's own, without an index"))
    assert not second._triggered


def test_a_flow_that_ends_at_inspect_steps_plans():
    flow = Dataflow("f")
    s = op.input("inp", flow, TestingSource([1]))
    op.inspect("out", op.map("m", s, str))
    assert [step.kind for step in build_plan(flow).steps] == ["input", "map", "inspect"]


def test_a_flow_without_output_or_inspect_is_still_refused():
    flow = Dataflow("f")
    op.map("m", op.input("inp", flow, TestingSource([1])), str)
    with pytest.raises(ValueError, match="no output"):
        build_plan(flow)


# -- the same plan as the flow written with flowspark's Stream methods ----------------------


def _shape(flow: Dataflow) -> list[tuple[str, int, tuple[tuple[int, int], ...]]]:
    plan = build_plan(flow)
    return [
        (step.kind, level, tuple((plan.index[u.step], u.slot) for u in step.upstreams))
        for step, level in zip(plan.steps, plan.levels)
    ]


def test_a_0_21_flow_plans_as_the_same_flow_of_stream_methods():
    flow21 = Dataflow("f")
    s = op.input("inp", flow21, TestingSource(["a b", "c"]))
    words = op.flat_map("split", s, str.split)
    keyed = op.key_on("key", op.filter("long", words, lambda w: len(w) > 0), lambda w: w)
    counts = op.stateful_map("count", keyed, lambda n, _w: ((n or 0) + 1, (n or 0) + 1))
    out = op.branch("b", op.redistribute("spread", counts), lambda kv: kv[1] > 1)
    op.output("out", op.merge("both", out.trues, out.falses), TestingSink([]))

    flow17 = Dataflow()
    t = flow17.input("inp", TestingInput(["a b", "c"]))
    t = t.flat_map(str.split).filter(lambda w: len(w) > 0).map(lambda w: (w, w))
    t = t.stateful_map("count", lambda: 0, lambda n, _w: (n + 1, n + 1)).redistribute()
    trues, falses = t.branch(lambda kv: kv[1] > 1)
    trues.merge(falses).output("out", TestingOutput([]))

    assert _shape(flow21) == _shape(flow17)
    keyed21 = [s for s in flow21.steps if s.kind == "stateful_map"]
    keyed17 = [s for s in flow17.steps if s.kind == "stateful_map"]
    assert type(logic_for(keyed21[0])) is type(logic_for(keyed17[0]))


def test_stateful_operators_use_one_kind_for_logic_objects():
    flow = Dataflow("f")
    keyed = op.key_on("key", op.input("inp", flow, TestingSource([1])), str)
    op.inspect("c", op.collect("collect", keyed, timedelta(seconds=1), 2))
    op.inspect("r", op.reduce_final("reduce", keyed, max))
    op.inspect("j", op.join("join", keyed, keyed))
    kinds = {step.step_id: step.kind for step in flow.steps}
    assert kinds["f.collect"] == kinds["f.reduce.fold_final"] == "stateful_batch"
    assert kinds["f.join.join"] == "stateful_batch"
    assert kinds["f.reduce.pre_reduce"] == "flat_map_batch"


def test_visualize_names_the_users_functions_not_the_wrappers():
    from flowspark.visualize.graph import flow_graph

    def double(v):
        return v * 2

    flow = Dataflow("f")
    keyed = op.key_on("key", op.input("inp", flow, TestingSource([1])), str)
    op.inspect("out", op.map_value("double", keyed, double))
    details = {node.step_id: node.detail for node in flow_graph(flow).nodes}
    assert details["f.double"] == "double"
