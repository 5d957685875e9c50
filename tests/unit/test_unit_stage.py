"""`StageProgram`: the fused stateless pass of one level, and its error reports."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowspark.dataflow import Dataflow
from flowspark.plan.graph import SINK_PORT_BASE, build_plan
from flowspark.runtime.errors import RemoteStepFailure, find_step_error
from flowspark.runtime.stage import StageContext, StageProgram
from flowspark.testing import TestingInput, TestingOutput

OUT = SINK_PORT_BASE
OUT2 = SINK_PORT_BASE + 1


def new_flow():
    flow = Dataflow()
    return flow, flow.input("inp", TestingInput([]))


def run(flow, items, ctx=None, level=0, entry=0):
    """Run ``items`` through ``level`` of ``flow``: ``[(port, list)]`` leaving it."""
    program = StageProgram.for_level(build_plan(flow), level)
    leaving = program.run(entry, items, ctx or StageContext())
    return [(port, list(xs)) for port, xs in leaving]


def failure(flow, items, ctx=None):
    """Run and return the decoded `StepError` of the failure it must raise."""
    with pytest.raises(RemoteStepFailure) as info:
        run(flow, items, ctx)
    error = find_step_error(str(info.value))
    assert error is not None
    return error


# -- each stateless kind ---------------------------------------------------------------


def test_map():
    flow, s = new_flow()
    s.map(lambda x: x * 10).output("out", TestingOutput([]))
    assert run(flow, [1, 2, 3]) == [(OUT, [10, 20, 30])]


def test_filter():
    flow, s = new_flow()
    s.filter(lambda x: x > 1).output("out", TestingOutput([]))
    assert run(flow, [3, 1, 2, 0]) == [(OUT, [3, 2])]


def test_filter_map_drops_only_none():
    flow, s = new_flow()
    s.filter_map(lambda x: None if x == 2 else x - 1).output("out", TestingOutput([]))
    assert run(flow, [1, 2, 3]) == [(OUT, [0, 2])]  # 0 and other falsy results stay


def test_flat_map():
    flow, s = new_flow()
    s.flat_map(lambda x: [x] * x).output("out", TestingOutput([]))
    assert run(flow, [0, 1, 2, 3]) == [(OUT, [1, 2, 2, 3, 3, 3])]


def test_flat_map_accepts_any_iterable():
    flow, s = new_flow()
    s.flat_map(str.split).output("out", TestingOutput([]))
    assert run(flow, ["a b", "", "c"]) == [(OUT, ["a", "b", "c"])]


def test_inspect_sees_each_item_and_passes_it_on():
    seen = []
    flow, s = new_flow()
    s.inspect(seen.append).output("out", TestingOutput([]))
    assert run(flow, ["a", "b"]) == [(OUT, ["a", "b"])]
    assert seen == ["a", "b"]


@pytest.mark.parametrize(
    ("kind", "ctx", "first"),
    [("inspect_epoch", StageContext(epoch=7), 7), ("inspect_worker", StageContext(worker=3), 3)],
    ids=["the epoch", "the worker"],
)
def test_inspect_epoch_and_worker_are_called_with_that_then_the_item(kind, ctx, first):
    seen = []
    flow, s = new_flow()
    getattr(s, kind)(lambda at, x: seen.append((at, x))).output("out", TestingOutput([]))
    assert run(flow, ["a", "b"], ctx) == [(OUT, ["a", "b"])]
    assert seen == [(first, "a"), (first, "b")]


def test_branch_splits_trues_and_falses():
    flow, s = new_flow()
    trues, falses = s.branch(lambda x: x % 2 == 0)
    trues.output("evens", TestingOutput([]))
    falses.output("odds", TestingOutput([]))
    assert sorted(run(flow, range(6))) == [(OUT, [0, 2, 4]), (OUT2, [1, 3, 5])]


def test_branch_then_merge_keeps_every_item():
    flow, s = new_flow()
    evens, odds = s.branch(lambda x: x % 2 == 0)
    evens.map(lambda x: x * 10).merge(odds).output("out", TestingOutput([]))
    [(port, items)] = run(flow, range(6))
    assert port == OUT
    assert sorted(items) == [0, 1, 3, 5, 20, 40]


def test_merge_of_two_paths_from_one_stream():
    flow, s = new_flow()
    s.map(lambda x: ("a", x)).merge(s.map(lambda x: ("b", x))).output("out", TestingOutput([]))
    [(port, items)] = run(flow, [1, 2])
    assert sorted(items) == [("a", 1), ("a", 2), ("b", 1), ("b", 2)]


def test_output_sends_items_to_its_sink_and_downstream():
    flow, s = new_flow()
    s.output("raw", TestingOutput([])).map(lambda x: x + 1).output("inc", TestingOutput([]))
    assert run(flow, [1, 2]) == [(OUT, [1, 2]), (OUT2, [2, 3])]


def test_output_sees_the_items_after_earlier_steps():
    flow, s = new_flow()
    s.filter(lambda x: x != 2).output("out", TestingOutput([]))
    assert run(flow, [1, 2, 3]) == [(OUT, [1, 3])]


def test_range_items_are_accepted():
    flow, s = new_flow()
    s.map(lambda x: -x).output("out", TestingOutput([]))
    assert run(flow, range(3)) == [(OUT, [0, -1, -2])]


def test_nothing_leaves_for_an_empty_chunk():
    flow, s = new_flow()
    s.map(lambda x: 1 / 0).output("out", TestingOutput([]))
    assert run(flow, []) == []


def test_nothing_leaves_when_everything_is_filtered_out():
    flow, s = new_flow()
    s.filter(lambda x: False).output("out", TestingOutput([]))
    assert run(flow, [1, 2]) == []


def test_redistribute_hands_items_to_the_next_level():
    flow, s = new_flow()
    s.map(lambda x: x + 1).redistribute().map(lambda x: x * 2).output("out", TestingOutput([]))
    plan = build_plan(flow)
    after = 3  # plan index of the map after the exchange
    assert plan.levels[after] == 1
    assert run(flow, [1, 2]) == [(after, [2, 3])]
    assert run(flow, [2, 3], level=1, entry=after) == [(OUT, [4, 6])]


def test_stateless_stage_rejects_unknown_kinds():
    flow, s = new_flow()
    s.output("out", TestingOutput([]))
    plan = build_plan(flow)
    object.__setattr__(plan.steps[0], "kind", "no_such_operator")
    with pytest.raises(ValueError, match="unknown operator kind .no_such_operator."):
        StageProgram.for_level(plan, 0)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(min_value=-(10**6), max_value=10**6), max_size=60))
def test_fused_stage_equals_plain_python(xs):
    flow, s = new_flow()
    (
        s.map(lambda x: x * 3 + 1)
        .filter(lambda x: x % 2 == 0)
        .flat_map(lambda x: [x, -x] if x % 4 else [x])
        .filter_map(lambda x: None if x % 3 == 0 else x // 2)
        .output("out", TestingOutput([]))
    )
    expected = []
    for x in xs:
        y = x * 3 + 1
        if y % 2 != 0:
            continue
        for z in [y, -y] if y % 4 else [y]:
            if z % 3 != 0:
                expected.append(z // 2)
    assert run(flow, xs) == ([(OUT, expected)] if expected else [])


# -- errors name the step, the function and the item -----------------------------------


class Boom(Exception):
    pass


def failing_on(bad):
    """A user function that raises on ``bad`` and returns its argument otherwise."""

    def explode(x):
        if x == bad:
            raise Boom(f"cannot handle {x}")
        return x

    return explode


ITEMS = [f"item-{i}" for i in range(10)]
POSITIONS = [0, 1, 5, 9]


@pytest.mark.parametrize("k", POSITIONS)
@pytest.mark.parametrize("kind", ["map", "filter", "filter_map", "inspect", "branch"])
def test_error_names_step_function_and_item(kind, k):
    flow, s = new_flow()
    fn = failing_on(ITEMS[k])
    result = getattr(s, kind)("boom", fn)
    (result[0] if kind == "branch" else result).output("out", TestingOutput([]))
    error = failure(flow, ITEMS)
    assert error.step_id == "boom"
    assert error.function == fn.__qualname__
    assert "explode" in error.function
    assert error.item == repr(ITEMS[k])
    assert "step 'boom'" in str(error)
    assert repr(ITEMS[k]) in str(error)
    assert "Boom: cannot handle" in str(error)


@pytest.mark.parametrize("k", POSITIONS)
def test_flat_map_error_names_the_item(k):
    def explode(x):
        if x == ITEMS[k]:
            raise Boom("no")
        return [x, x]

    flow, s = new_flow()
    s.flat_map("fm", explode).output("out", TestingOutput([]))
    error = failure(flow, ITEMS)
    assert (error.step_id, error.item) == ("fm", repr(ITEMS[k]))


@pytest.mark.parametrize("k", POSITIONS)
def test_flat_map_error_inside_a_lazy_iterable_names_the_item(k):
    def explode(x):
        yield x
        if x == ITEMS[k]:
            raise Boom("late")
        yield x

    flow, s = new_flow()
    s.flat_map("fm", explode).output("out", TestingOutput([]))
    assert failure(flow, ITEMS).item == repr(ITEMS[k])


def test_flat_map_returning_a_non_iterable_names_the_item():
    flow, s = new_flow()
    s.flat_map("fm", lambda x: None if x == "item-3" else [x]).output("out", TestingOutput([]))
    error = failure(flow, ITEMS)
    assert error.item == repr("item-3")
    assert "TypeError" in str(error)


@pytest.mark.parametrize("kind", ["inspect_epoch", "inspect_worker"])
def test_two_argument_inspector_error_names_the_item(kind):
    def explode(n, x):
        if x == "item-4":
            raise Boom("no")

    flow, s = new_flow()
    getattr(s, kind)("insp", explode).output("out", TestingOutput([]))
    error = failure(flow, ITEMS, StageContext(epoch=2, worker=1))
    assert (error.step_id, error.item) == ("insp", repr("item-4"))
    assert "explode" in error.function


def test_error_position_is_relative_to_the_failing_steps_input():
    # A filter before the failing map shortens the list the map sees.
    flow, s = new_flow()
    s.filter(lambda x: x % 3 == 0).map("boom", failing_on(6)).output("out", TestingOutput([]))
    assert failure(flow, list(range(10))).item == "6"


def test_error_in_a_later_step_after_earlier_steps_ran():
    flow, s = new_flow()
    s.map(lambda x: x * 2).map("boom", failing_on(8)).output("out", TestingOutput([]))
    error = failure(flow, range(10))
    assert (error.step_id, error.item) == ("boom", "8")


def test_error_on_a_range_chunk_names_the_item():
    flow, s = new_flow()
    s.map("boom", failing_on(57)).output("out", TestingOutput([]))
    assert failure(flow, range(100)).item == "57"


def test_error_keeps_the_original_exception_as_cause():
    flow, s = new_flow()
    s.map("boom", failing_on("item-2")).output("out", TestingOutput([]))
    cause = failure(flow, ITEMS).__cause__
    assert isinstance(cause, Boom)
    assert str(cause) == "cannot handle item-2"
    assert any("explode" in note for note in cause.__notes__)


def test_error_truncates_a_huge_item_repr():
    huge = "x" * 100_000

    def explode(x):
        if len(x) > 10:
            raise Boom("too long")
        return x

    flow, s = new_flow()
    s.map("boom", explode).output("out", TestingOutput([]))
    with pytest.raises(RemoteStepFailure) as info:
        run(flow, ["small", huge])
    assert len(str(info.value)) < 20_000  # the item is not carried in full
    error = find_step_error(str(info.value))
    assert len(error.item) <= 200
    assert error.item.startswith("'xxxx")
    assert error.item.endswith("...")


def test_error_with_an_unrepresentable_item_still_reports():
    class NoRepr:
        def __repr__(self):
            raise RuntimeError("repr is broken")

    item = NoRepr()
    flow, s = new_flow()
    s.map("boom", lambda x: 1 / 0).output("out", TestingOutput([]))
    error = failure(flow, [item])
    assert error.item.startswith("<unrepresentable NoRepr")
    assert "ZeroDivisionError" in str(error)


@pytest.mark.parametrize("kind", ["map", "filter", "flat_map", "inspect"])
def test_stop_iteration_in_a_user_function_is_a_step_failure(kind):
    def fn(x):
        if x == 2:
            raise StopIteration
        return [x] if kind == "flat_map" else x

    flow, s = new_flow()
    getattr(s, kind)("boom", fn).output("out", TestingOutput([]))
    error = failure(flow, [0, 1, 2, 3, 4])
    assert (error.step_id, error.item) == ("boom", "2")


# -- key_on's whole-list form ------------------------------------------------------------


def _keyed_on(key):
    import flowspark.operators as op
    from flowspark.testing import TestingSink, TestingSource

    flow = Dataflow("key_on")
    keyed = op.key_on("key", op.input("inp", flow, TestingSource([])), key)
    op.output("out", keyed, TestingSink([]))
    return flow


def test_key_on_pairs_each_item_with_its_key_a_list_at_once():
    flow = _keyed_on(lambda x: x[:1])
    assert run(flow, ["ab", "cd", "e"]) == [(OUT, [("a", "ab"), ("c", "cd"), ("e", "e")])]


@pytest.mark.parametrize("k", POSITIONS)
def test_key_on_names_the_item_whose_key_raised(k):
    fn = failing_on(ITEMS[k])
    error = failure(_keyed_on(fn), ITEMS)
    assert error.step_id == "key_on.key" and error.item == repr(ITEMS[k])
    assert "Boom: cannot handle" in str(error)


@pytest.mark.parametrize("k", POSITIONS)
def test_key_on_names_the_item_whose_key_is_not_a_str(k):
    error = failure(_keyed_on(lambda x: 7 if x == ITEMS[k] else x), ITEMS)
    assert error.step_id == "key_on.key" and error.item == repr(ITEMS[k])
    assert "must be a `str`; got a <class 'int'> instead" in str(error)


def test_key_on_takes_a_str_subclass_as_a_key():
    class Name(str):
        pass

    flow = _keyed_on(lambda x: Name(x))
    assert run(flow, ["a"]) == [(OUT, [("a", "a")])]
