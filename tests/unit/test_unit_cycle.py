"""Numaflow cycles without Spark: the rounds of :class:`CycleRunner` and the
pipeline's strongly connected parts (the Spark runs: tests/spark/test_pipeline_http.py)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flowspark.api.udf.types import Datum
from flowspark.runtime.errors import RemoteStepFailure
from flowspark.runtime.numaflow.cycle import CycleRunner, PerItemStep
from flowspark.runtime.numaflow.datums import TagRoute
from flowspark.shared.components import strongly_connected

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


def test_a_datum_that_never_leaves_fails_the_step_naming_the_vertex():
    runner = CycleRunner(
        {"cat": PerItemStep("cat", _cat)}, [("cat", "cat", None)], frozenset(), max_rounds=50
    )
    with pytest.raises(RemoteStepFailure) as info:
        runner([("cat", _datum(b"forever"))])
    message = str(info.value)
    assert message.startswith("step 'cat' failed on item ")
    assert "went round the cycle 50 times within one micro-batch" in message


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
    from flowspark.runtime.stage import Node, StageContext

    def broken(d: Datum) -> list[Datum]:
        raise ValueError("no digits")

    runner = CycleRunner(
        {"parse": PerItemStep("parse", broken)}, [("parse", "parse", None)], frozenset()
    )
    node = Node(0, "parse.cycle", "flat_map_batch", runner, [], [], None)
    with pytest.raises(RemoteStepFailure) as info:
        node.apply([("parse", _datum(b"abc"))], StageContext())
    assert str(info.value).startswith("step 'parse' failed on item ")


ISLAND = """
apiVersion: numaflow.numaproj.io/v1alpha1
kind: Pipeline
metadata: {name: island}
spec:
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
"""


def test_a_cycle_nothing_leads_into_is_refused_when_the_pipeline_loads():
    from flowspark.pipeline.build import load
    from flowspark.pipeline.errors import PipelineSpecError

    with pytest.raises(PipelineSpecError, match='vertices "a", "b" are on a cycle no edge leads'):
        load(ISLAND)
    # With an edge in, the same vertices build: a cycle step and b's outputs leaving it.
    flow = load(ISLAND.replace("- {from: in, to: out}", "- {from: in, to: a}"))
    ids = {step.step_id for step in flow.steps}
    assert {"in->a.enter", "a+b.cycle", "b.out"} <= ids
