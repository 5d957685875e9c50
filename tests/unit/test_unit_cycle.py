"""Numaflow cycles without Spark: the rounds of :class:`CycleRunner`, the budget
and carry-over of :class:`CycleLogic`, and the pipeline's strongly connected parts
(the Spark runs: tests/spark/test_pipeline_http.py; kill -9:
tests/recovery/test_kill_restart_http.py)."""

from __future__ import annotations

import pickle
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flowspark.api.udf.types import Datum
from flowspark.runtime.errors import RemoteStepFailure
from flowspark.runtime.keyed import KeyedCall
from flowspark.runtime.numaflow.cycle import (
    CYCLE_KEYS,
    CycleLogic,
    CycleRunner,
    EnterCycle,
    LeaveCycle,
    PerItemStep,
)
from flowspark.runtime.numaflow.datums import TagRoute
from flowspark.runtime.windowing import EOF_MS
from flowspark.shared.components import strongly_connected
from tests.pipeline_yaml import pipeline

T = datetime(2024, 1, 1, tzinfo=UTC)


def _datum(value: bytes, tags: list[str] | None = None) -> Datum:
    return Datum(["k"], value, T, T, tags=tags)


def _cat(d: Datum) -> list[Datum]:
    return [_datum(d.value)]


class _Retry:
    """Numaflow's map-retry: a value goes on tagged "retry" until its third time."""

    def __init__(self) -> None:
        self.counts: dict[bytes, int] = {}

    def __call__(self, d: Datum) -> list[Datum]:
        self.counts[d.value] = self.counts.get(d.value, 0) + 1
        if self.counts[d.value] >= 3:
            del self.counts[d.value]
            return [_datum(d.value)]
        return [_datum(d.value, ["retry"])]


def test_a_cycle_to_the_previous_vertex_lets_each_datum_out_after_its_third_try():
    retry = _Retry()
    runner = CycleRunner(
        {"cat": PerItemStep("cat", _cat), "retry": PerItemStep("retry", retry)},
        [("cat", "retry", None), ("retry", "cat", TagRoute(["retry"]))],
        exits=frozenset({"retry"}),
    )
    out = runner([("cat", _datum(b"a")), ("cat", _datum(b"b"))])
    assert {vertex for vertex, _ in out} == {"retry"}  # cat has no edge out of the cycle
    # Every output of retry comes out; the edge to the sink keeps the untagged ones.
    assert sorted((d.value, tuple(d.tags)) for _, d in out) == [
        (b"a", ()),
        (b"a", ("retry",)),
        (b"a", ("retry",)),
        (b"b", ()),
        (b"b", ("retry",)),
        (b"b", ("retry",)),
    ]
    leaving = [d.value for _, d in out if TagRoute(["retry"], "not")(d)]
    assert sorted(leaving) == [b"a", b"b"] and retry.counts == {}


def test_an_output_goes_along_every_edge_whose_conditions_it_meets():
    # "split" sends each datum to both "left" (no conditions) and "right" (tag "x");
    # both leave the cycle, and "left" also goes back to "split" once, tagged.
    def split(d: Datum) -> list[Datum]:
        return [_datum(d.value, ["x"])]

    def left(d: Datum) -> list[Datum]:
        return [_datum(d.value + b"L", ["again"] if b"L" not in d.value else [])]

    runner = CycleRunner(
        {
            "split": PerItemStep("split", split),
            "left": PerItemStep("left", left),
            "right": PerItemStep("right", _cat),
        },
        [
            ("split", "left", None),
            ("split", "right", TagRoute(["x"])),
            ("left", "split", TagRoute(["again"])),
        ],
        exits=frozenset({"left", "right"}),
    )
    out = sorted((vertex, d.value) for vertex, d in runner([("split", _datum(b"v"))]))
    assert out == [("left", b"vL"), ("left", b"vLL"), ("right", b"v"), ("right", b"vL")]


def test_a_bounded_run_fails_on_a_datum_that_never_leaves_naming_the_vertex():
    runner = CycleRunner(
        {"cat": PerItemStep("cat", _cat)}, [("cat", "cat", None)], frozenset(), max_rounds=50
    )
    with pytest.raises(RemoteStepFailure) as info:
        runner([("cat", _datum(b"forever"))])
    message = str(info.value)
    assert message.startswith("step 'cat' failed on item ")
    assert "went round the cycle 50 times after the input ended" in message
    assert "forever" in message


def _spin() -> CycleRunner:
    """A cycle with no exit: "cat" sends everything back to itself."""
    return CycleRunner({"cat": PerItemStep("cat", _cat)}, [("cat", "cat", None)], frozenset())


def _roundtrip(state):
    """The state as the engine keeps it between micro-batches: pickled."""
    return pickle.loads(pickle.dumps(state, protocol=5))


def test_a_cycle_with_no_exit_goes_on_batch_after_batch_from_its_state():
    logic = CycleLogic("cat.cycle", _spin(), rounds_per_batch=7)
    entering = [("cat", _datum(b"a")), ("cat", _datum(b"b"))]
    outcome = logic.on_values(KeyedCall("3", None, 1_000, entering))
    assert outcome.emitted == [] and outcome.handled == 2 * 7
    assert outcome.wake == 1_000  # woken in the next micro-batch, whatever its time
    for now in range(2_000, 50_000, 1_000):  # a clock tick each, no new input
        outcome = logic.on_timer(KeyedCall("3", _roundtrip(outcome.state), now))
        assert outcome.handled == 2 * 7 and outcome.wake == now
    assert sorted(d.value for d in outcome.state["cat"]) == [b"a", b"b"]


def test_a_micro_batchs_rounds_stop_once_the_budget_of_datums_is_run():
    logic = CycleLogic("cat.cycle", _spin(), rounds_per_batch=100, visits_per_batch=25)
    entering = [("cat", _datum(bytes([i]))) for i in range(10)]
    outcome = logic.on_values(KeyedCall("0", None, 5, entering))
    # Whole rounds: 10 + 10 + 10 = 30 datums run, the round that reaches 25 finishes.
    assert outcome.handled == 30 and len(outcome.state["cat"]) == 10


def test_new_datums_join_those_carried_over():
    logic = CycleLogic("cat.cycle", _spin(), rounds_per_batch=1)
    first = logic.on_values(KeyedCall("0", None, 5, [("cat", _datum(b"old"))]))
    second = logic.on_values(KeyedCall("0", _roundtrip(first.state), 6, [("cat", _datum(b"new"))]))
    assert [d.value for d in second.state["cat"]] == [b"old", b"new"]
    assert second.handled == 2


def test_once_the_input_ends_the_rounds_run_until_the_cycle_is_empty():
    retry = _Retry()
    runner = CycleRunner(
        {"retry": PerItemStep("retry", retry)},
        [("retry", "retry", TagRoute(["retry"]))],
        frozenset({"retry"}),
    )
    logic = CycleLogic("retry.cycle", runner, rounds_per_batch=1)
    placed = logic.on_values(KeyedCall("0", None, 5, [("retry", _datum(b"x"))]))
    assert placed.state is not None
    ended = logic.on_timer(KeyedCall("0", _roundtrip(placed.state), EOF_MS))
    assert ended.state is None and ended.wake is None
    assert [(d.value, d.tags) for _, (_, d) in ended.emitted] == [
        (b"x", ["retry"]),
        (b"x", []),
    ]


RETRIES = st.lists(st.integers(min_value=1, max_value=9), min_size=1, max_size=12)


@given(RETRIES, st.integers(min_value=1, max_value=5), st.integers(min_value=1, max_value=20))
def test_carrying_datums_over_changes_nothing_that_leaves(tries, rounds, visits):
    """Whatever the budget, the datums that leave, with their tags, are those of one
    run to completion: the carry-over only spreads the rounds over batches."""

    def countdown(d: Datum) -> list[Datum]:  # value "n": back round n more times
        n = int(d.value)
        return [_datum(str(n - 1).encode(), ["again"] if n > 1 else [])]

    def runner() -> CycleRunner:
        return CycleRunner(
            {"c": PerItemStep("c", countdown)},
            [("c", "c", TagRoute(["again"]))],
            frozenset({"c"}),
        )

    entering = [("c", _datum(str(n).encode())) for n in tries]
    whole = sorted((d.value, tuple(d.tags)) for _, d in runner()(entering))
    logic = CycleLogic("c.cycle", runner(), rounds_per_batch=rounds, visits_per_batch=visits)
    outcome = logic.on_values(KeyedCall("0", None, 1, entering))
    left = [pair for _, pair in outcome.emitted]
    now = 1
    while outcome.state is not None:
        now += 1
        outcome = logic.on_timer(KeyedCall("0", _roundtrip(outcome.state), now))
        left += [pair for _, pair in outcome.emitted]
    assert sorted((d.value, tuple(d.tags)) for _, d in left) == whole


def test_entering_datums_are_keyed_by_their_value_the_same_everywhere():
    enter = EnterCycle("cat")
    key, (vertex, datum) = enter(_datum(b"payload"))
    assert vertex == "cat" and datum.value == b"payload"
    assert key == enter(_datum(b"payload"))[0] and 0 <= int(key) < CYCLE_KEYS
    assert len({enter(_datum(bytes([i])))[0] for i in range(200)}) == CYCLE_KEYS
    assert LeaveCycle("cat")((key, ("cat", datum))) is datum
    assert LeaveCycle("other")((key, ("cat", datum))) is None


def test_a_vertex_that_raises_names_its_own_step_and_the_datum():
    def broken(d: Datum) -> list[Datum]:
        raise ValueError("no digits")

    runner = CycleRunner(
        {"cat": PerItemStep("cat", _cat), "parse": PerItemStep("parse", broken)},
        [("cat", "parse", None), ("parse", "cat", None)],
        frozenset(),
    )
    with pytest.raises(RemoteStepFailure) as info:
        runner([("cat", _datum(b"abc"))])
    assert str(info.value).startswith("step 'parse' failed on item ")
    assert "ValueError: no digits" in str(info.value) and "abc" in str(info.value)


NODES = ["a", "b", "c", "d", "e"]


@given(st.lists(st.tuples(st.sampled_from(NODES), st.sampled_from(NODES)), max_size=12))
def test_strongly_connected_groups_are_the_mutually_reachable_nodes(edges):
    groups = strongly_connected(NODES, edges)
    assert sorted(n for g in groups for n in g) == NODES  # each node once
    reach = {n: {n} for n in NODES}
    for _ in NODES:  # transitive closure, the slow way
        for a, b in edges:
            for n in NODES:
                if a in reach[n]:
                    reach[n] = reach[n] | reach[b] | {b}
    group_of = {n: i for i, g in enumerate(groups) for n in g}
    for u in NODES:
        for v in NODES:
            mutual = v in reach[u] and u in reach[v]
            assert (group_of[u] == group_of[v]) == mutual, (u, v, groups)


def test_the_cycle_steps_failure_is_its_vertexs_not_wrapped_in_the_steps():
    def broken(d: Datum) -> list[Datum]:
        raise ValueError("no digits")

    runner = CycleRunner(
        {"parse": PerItemStep("parse", broken)}, [("parse", "parse", None)], frozenset()
    )
    logic = CycleLogic("parse.cycle", runner)
    with pytest.raises(RemoteStepFailure) as info:
        logic.on_values(KeyedCall("0", None, 5, [("parse", _datum(b"abc"))]))
    assert str(info.value).startswith("step 'parse' failed on item ")


ISLAND = pipeline(
    "island",
    """
    vertices:
      - {name: in, source: {generator: {rpu: 3, duration: 1s}}}
      - {name: a, udf: {builtin: {name: cat}}}
      - {name: b, udf: {builtin: {name: cat}}}
      - {name: out, sink: {log: {}}}
    edges:
      - {from: in, to: out}
      - {from: a, to: b}
      - {from: b, to: a, conditions: {tags: {values: [x]}}}
      - {from: b, to: out}
    """,
)


def test_a_cycle_nothing_leads_into_is_refused_when_the_pipeline_loads():
    from flowspark.pipeline.build import load
    from flowspark.pipeline.errors import PipelineSpecError

    with pytest.raises(PipelineSpecError, match='vertices "a", "b" are on a cycle no edge leads'):
        load(ISLAND)
    # With an edge in, the same vertices build: a cycle step and b's outputs leaving it.
    flow = load(ISLAND.replace("- {from: in, to: out}", "- {from: in, to: a}"))
    ids = {step.step_id for step in flow.steps}
    assert {"in->a.enter", "a+b.cycle", "b.out"} <= ids
