"""bytewax 0.21.1's operators end to end on local Spark: the outputs its docs and
tests (pytests/operators/ at tag v0.21.1) expect.

Where bytewax's expected order comes from every item being its own batch (one
line per item, interleaved across steps), a run that reads its whole input in
one micro-batch emits the same items grouped per step and per key, so those
compare sorted; runs with ``epoch_interval=timedelta(0)`` (one micro-batch per
item) keep bytewax's order. The page docs/bytewax-021.md is run here too.
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import flowspark.operators as op
from flowspark.dataflow import Dataflow
from flowspark.inputs import (
    AbortExecution,
    DynamicSource,
    FixedPartitionedSource,
    SimplePollingSource,
    StatefulSourcePartition,
    StatelessSourcePartition,
)
from flowspark.operators import StatefulLogic
from flowspark.outputs import (
    DynamicSink,
    FixedPartitionedSink,
    StatefulSinkPartition,
    StatelessSinkPartition,
)
from flowspark.recovery import RecoveryConfig
from flowspark.runtime.errors import StepError
from flowspark.testing import TestingSink, TestingSource, cluster_main, run_main
from tests.docs_blocks import ROOT, blocks_for

ZERO_TD = timedelta(seconds=0)


def _printed(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return capsys.readouterr().out.splitlines()


# -- stateless operators, as their docs print them ---------------------------------------------


def test_stateless_operators_print_what_their_docs_show(capsys):
    flow = Dataflow("eg")
    nums = op.input("nums", flow, TestingSource(range(4)))
    op.inspect("map", op.map("add_ten", nums, lambda x: x + 10))
    op.inspect("filter", op.filter("odd", nums, lambda x: x % 2 != 0))
    text = op.input("text", flow, TestingSource(["hello world"]))
    op.inspect("flat_map", op.flat_map("split", text, str.split))
    lists = op.input("lists", flow, TestingSource([[1, 2], [3, 4, 5]]))
    op.inspect("flatten", op.flatten("flat", lists))
    records = op.input("records", flow, TestingSource([{"key": "a", "val": 1}, {"bad": "obj"}]))
    valid = op.filter_map("valid", records, lambda d: (d["key"], d) if "key" in d else None)
    op.inspect("filter_map", valid)
    run_main(flow)
    assert sorted(_printed(capsys)) == sorted(
        [f"eg.map: {x}" for x in (10, 11, 12, 13)]
        + ["eg.filter: 1", "eg.filter: 3", "eg.flat_map: 'hello'", "eg.flat_map: 'world'"]
        + [f"eg.flatten: {x}" for x in (1, 2, 3, 4, 5)]
        + ["eg.filter_map: ('a', {'key': 'a', 'val': 1})"]
    )


def test_cluster_main_of_one_process_runs_the_flow_as_its_docs_show(capsys):
    # bytewax's docstring example: no other address, process 0, output to stdout.
    from flowspark.connectors.stdio import StdOutSink

    flow = Dataflow("my_df")
    s = op.input("inp", flow, TestingSource(range(3)))
    op.output("out", s, StdOutSink())
    cluster_main(flow, [], 0, worker_count_per_proc=2)
    assert sorted(capsys.readouterr().out.split()) == ["0", "1", "2"]


def test_the_demo_sources_metrics_come_paced_and_end_at_their_count(tmp_path):
    # bytewax.connectors.demo's RandomMetricSource: two metrics merged, as its docs say.
    from flowspark.connectors.demo import RandomMetricSource
    from flowspark.recovery import RecoveryConfig

    flow = Dataflow("demo")
    cpu = op.input("cpu", flow, RandomMetricSource("cpu", timedelta(milliseconds=20), count=5))
    mem = op.input("mem", flow, RandomMetricSource("mem", timedelta(0), 3, lambda: 0.5))
    out: list[Any] = []
    op.output("out", op.merge("both", cpu, mem), TestingSink(out))
    run_main(flow, recovery_config=RecoveryConfig(str(tmp_path)))
    assert sorted(name for name, _ in out) == ["cpu"] * 5 + ["mem"] * 3
    assert all(v in range(10) for name, v in out if name == "cpu")
    assert [v for name, v in out if name == "mem"] == [0.5] * 3
    out.clear()
    run_main(flow, recovery_config=RecoveryConfig(str(tmp_path)))  # resumed at its counts
    assert out == []


def test_branch_merge_and_inspect_keep_bytewaxs_order_one_item_per_batch(capsys):
    flow = Dataflow("branch_eg")
    nums = op.input("nums", flow, TestingSource([1, 2, 3, 4, 5]))
    b_out = op.branch("even_odd", nums, lambda x: x % 2 == 0)
    op.inspect("evens", b_out.trues)
    op.inspect("odds", b_out.falses)
    out: list[Any] = []
    op.output("out", op.merge("merged", b_out.falses, b_out.trues), TestingSink(out))
    run_main(flow, epoch_interval=ZERO_TD)
    assert _printed(capsys) == [
        "branch_eg.odds: 1",
        "branch_eg.evens: 2",
        "branch_eg.odds: 3",
        "branch_eg.evens: 4",
        "branch_eg.odds: 5",
    ]
    assert out == [1, 2, 3, 4, 5]


def test_inspect_debug_prints_step_worker_and_epoch(capsys):
    flow = Dataflow("inspect_debug_eg")
    op.inspect_debug("help", op.input("inp", flow, TestingSource(range(3))))
    run_main(flow)
    lines = _printed(capsys)
    assert sorted(line.rsplit(": ", 1)[1] for line in lines) == ["0", "1", "2"]
    assert all(re.fullmatch(r"inspect_debug_eg\.help W[01] @1: \d", line) for line in lines)


def test_keyed_stream_helpers_as_their_docs_show():
    flow = Dataflow("eg")
    src = [{"key": "a", "val": 1}, {"key": "b", "val": 2}]
    keyed = op.key_on("key", op.input("inp", flow, TestingSource(src)), lambda x: x["key"])
    pairs = op.input("pairs", flow, TestingSource([("key1", "hello world"), ("key2", "hi")]))
    ints = op.input("ints", flow, TestingSource([("key1", 1), ("key2", "2"), ("key3", 2)]))
    outs: dict[str, list[Any]] = {name: [] for name in ["keyed", "unkeyed", "fmv", "fmv2", "fv"]}
    op.output("o1", keyed, TestingSink(outs["keyed"]))
    op.output("o2", op.key_rm("no_key", keyed), TestingSink(outs["unkeyed"]))
    op.output("o3", op.flat_map_value("split", pairs, str.split), TestingSink(outs["fmv"]))
    even = op.filter_map_value(
        "to_even_str", ints, lambda v: str(v) if isinstance(v, int) and v % 2 == 0 else None
    )
    op.output("o4", even, TestingSink(outs["fmv2"]))
    only_ints = op.filter_value("ints_only", ints, lambda v: isinstance(v, int))
    op.output("o5", op.map_value("double", only_ints, lambda v: v * 2), TestingSink(outs["fv"]))
    run_main(flow)
    assert outs["keyed"] == [("a", src[0]), ("b", src[1])]
    assert outs["unkeyed"] == src
    assert outs["fmv"] == [("key1", "hello"), ("key1", "world"), ("key2", "hi")]
    assert outs["fmv2"] == [("key3", "2")]
    assert outs["fv"] == [("key1", 2), ("key3", 4)]


def test_flat_map_batch_gets_lists_and_enrich_cached_reads_through_its_cache():
    flow = Dataflow("eg")
    nums = op.input("nums", flow, TestingSource([[1, 2], [3]]))
    out: list[Any] = []
    op.output(
        "out",
        op.flat_map_batch("x10", nums, lambda batch: [x * 10 for x in batch]),
        TestingSink(out),
    )
    codes = op.input("codes", flow, TestingSource(["a", "b", "a", "c", "a", "a"]))
    service = {"a": 10, "b": 20, "c": 30}
    enriched = op.enrich_cached(
        "enrich", codes, service.get, lambda cache, k: {"key": k, "value": cache.get(k)}
    )
    rows: list[Any] = []
    op.output("rows", enriched, TestingSink(rows))
    run_main(flow)
    assert out == [[1, 2] * 10, [3] * 10]
    assert rows == [{"key": k, "value": service[k]} for k in "abacaa"]


# -- keyed operators -------------------------------------------------------------------------


def test_stateful_map_and_stateful_flat_map_as_bytewaxs_tests():
    def running_mean(last_3, new):
        last_3 = (last_3 or []) + [new]
        if len(last_3) > 3:
            last_3 = last_3[:-3]
        return last_3, sum(last_3) / len(last_3)

    def filter_smaller(last, new):
        return new, [new] if last is None or new > last else []

    def count(running, _item):
        running = (running or 0) + 1
        return running, running

    flow = Dataflow("test_df")
    s = op.key_on("key", op.input("inp", flow, TestingSource([2, 5, 8, 1, 3])), lambda _x: "ALL")
    means, smaller, counts = [], [], []
    op.output("o1", op.stateful_map("running_mean", s, running_mean), TestingSink(means))
    op.output("o2", op.stateful_flat_map("filter_smaller", s, filter_smaller), TestingSink(smaller))
    letters = op.input("letters", flow, TestingSource(["a", "a", "a", "b", "a"]))
    keyed = op.key_on("self_as_key", letters, lambda x: x)
    op.output("o3", op.stateful_map("running_count", keyed, count), TestingSink(counts))
    run_main(flow)
    assert means == [("ALL", m) for m in (2.0, 3.5, 5.0, 2.0, 2.5)]
    assert smaller == [("ALL", 2), ("ALL", 5), ("ALL", 8), ("ALL", 3)]
    assert sorted(counts) == [("a", 1), ("a", 2), ("a", 3), ("a", 4), ("b", 1)]


def test_stateful_map_forgets_a_key_whose_state_is_none():
    flow = Dataflow("f")
    s = op.key_on("key", op.input("inp", flow, TestingSource([1, 2, 3, 4, 5])), lambda _: "k")
    out: list[Any] = []
    seen = op.stateful_map("seen", s, lambda st, v: (None if v == 3 else (st or 0) + 1, st))
    op.output("out", seen, TestingSink(out))
    run_main(flow)
    assert out == [("k", None), ("k", 1), ("k", 2), ("k", None), ("k", 1)]


def test_collect_lists_of_max_size_then_the_rest_at_the_end():
    flow = Dataflow("collect_eg")
    src = [{"key": k, "val": v} for v, k in enumerate("abababab", 1)]
    keyed = op.key_on("key", op.input("nums", flow, TestingSource(src)), lambda x: x["key"])
    numbers = op.key_on("all", op.input("ten", flow, TestingSource(range(10))), lambda _: "ALL")
    pairs, tens = [], []
    op.output(
        "o1", op.collect("collect", keyed, timedelta(seconds=1), max_size=2), TestingSink(pairs)
    )
    op.output("o2", op.collect("ten_3", numbers, timedelta(seconds=10), 3), TestingSink(tens))
    run_main(flow)
    assert sorted(pairs, key=lambda kv: (kv[0], kv[1][0]["val"])) == [
        ("a", [src[0], src[2]]),
        ("a", [src[4], src[6]]),
        ("b", [src[1], src[3]]),
        ("b", [src[5], src[7]]),
    ]
    assert tens == [("ALL", [0, 1, 2]), ("ALL", [3, 4, 5]), ("ALL", [6, 7, 8]), ("ALL", [9])]


def test_final_operators_emit_once_the_input_ended():
    flow = Dataflow("eg")
    words = op.input("words", flow, TestingSource(["apple", "banana", "apple", "banana", "banana"]))
    pairs = op.input(
        "pairs", flow, TestingSource([("key1", 1), ("key1", 3), ("key2", 2), ("key2", 19)])
    )
    outs: dict[str, list[Any]] = {name: [] for name in ["count", "fold", "reduce", "max", "min"]}
    op.output("o1", op.count_final("count", words, key=lambda x: x), TestingSink(outs["count"]))
    folded = op.fold_final("fold", pairs, lambda: 0, lambda acc, v: acc + v)
    op.output("o2", folded, TestingSink(outs["fold"]))
    op.output("o3", op.reduce_final("sum", pairs, lambda a, b: a + b), TestingSink(outs["reduce"]))
    op.output("o4", op.max_final("max", pairs), TestingSink(outs["max"]))
    op.output("o5", op.min_final("min", pairs, by=lambda v: -v), TestingSink(outs["min"]))
    run_main(flow)
    assert sorted(outs["count"]) == [("apple", 2), ("banana", 3)]
    assert sorted(outs["fold"]) == sorted(outs["reduce"]) == [("key1", 4), ("key2", 21)]
    assert sorted(outs["max"]) == [("key1", 3), ("key2", 19)]
    assert sorted(outs["min"]) == [("key1", 3), ("key2", 19)]  # by=-v: the largest


def test_final_operators_over_many_micro_batches_emit_once_at_the_end():
    flow = Dataflow("eg")
    words = op.input("words", flow, TestingSource(list("abcabca"), batch_size=2))
    counts: list[Any] = []
    op.output("out", op.count_final("count", words, lambda w: w), TestingSink(counts))
    run_main(flow, epoch_interval=ZERO_TD)
    assert sorted(counts) == [("a", 3), ("b", 2), ("c", 2)]


def _join(insert_mode: str, emit_mode: str, lefts: list[int], rights: list[int]) -> list[Any]:
    flow = Dataflow("test_df")
    keyed_l = op.key_on("key_l", op.input("inp_l", flow, TestingSource(lefts)), lambda _: "ALL")
    keyed_r = op.key_on("key_r", op.input("inp_r", flow, TestingSource(rights)), lambda _: "ALL")
    out: list[Any] = []
    joined = op.join("join", keyed_l, keyed_r, insert_mode=insert_mode, emit_mode=emit_mode)
    op.output("out", op.key_rm("unkey", joined), TestingSink(out))
    run_main(flow)
    return out


@pytest.mark.parametrize(
    ("insert", "emit", "lefts", "rights", "expected"),
    [
        ("last", "complete", [1], [2], [(1, 2)]),
        ("first", "final", [1], [2, 3], [(1, 2)]),
        ("last", "final", [1], [2, 3], [(1, 3)]),
        ("product", "final", [1, 2], [3, 4], [(1, 3), (1, 4), (2, 3), (2, 4)]),
    ],
)
def test_join_as_bytewaxs_tests(insert, emit, lefts, rights, expected):
    assert _join(insert, emit, lefts, rights) == expected


def test_join_running_emits_on_every_value():
    # bytewax's test gets (1, None) first: its left side arrives before its right one.
    # Here both sides reach the key in one micro-batch; each value still emits a row.
    out = _join("last", "running", [1], [2, 3])
    assert (
        len(out) == 3 and out[-1] == (1, 3) and set(out) <= {(1, None), (None, 2), (1, 2), (1, 3)}
    )


class KeepLast(StatefulLogic):
    """bytewax's test logic: emits ``(previous, value)``; ``"DISCARD"`` forgets the key;
    at the end of the input emits ``(last, "EOF")``."""

    def __init__(self, resume_state: Any) -> None:
        self._state = resume_state

    def on_item(self, value: Any) -> tuple[list[Any], bool]:
        old, self._state = self._state, value
        return [(old, value)], value == "DISCARD"

    def on_eof(self) -> tuple[list[Any], bool]:
        return [(self._state, "EOF")], StatefulLogic.DISCARD

    def snapshot(self) -> Any:
        return self._state


def test_stateful_keeps_a_logic_per_key_in_bytewaxs_order():
    inp = [("a", "a1"), ("b", "b1"), ("a", "DISCARD"), ("b", "b2"), ("a", "a3")]
    flow = Dataflow("test_df")
    out: list[Any] = []
    op.output(
        "out",
        op.stateful("stateful", op.input("inp", flow, TestingSource(inp)), KeepLast),
        TestingSink(out),
    )
    run_main(flow, epoch_interval=ZERO_TD)
    assert out[:5] == [
        ("a", (None, "a1")),
        ("b", (None, "b1")),
        ("a", ("a1", "DISCARD")),
        ("b", ("b1", "b2")),
        ("a", (None, "a3")),
    ]
    assert sorted(out[5:]) == [("a", ("a3", "EOF")), ("b", ("b2", "EOF"))]


class Transitions(StatefulLogic):
    """Each call emits ``(old state, new state)``; an item asks to be notified at once."""

    def __init__(self, resume_state: Any) -> None:
        self._state, self._at = resume_state or ("NEW", None)

    def on_item(self, value: Any) -> tuple[list[Any], bool]:
        self._at = datetime.now(UTC)
        old, self._state = self._state, "ITEM"
        return [(old, "ITEM")], StatefulLogic.RETAIN

    def on_notify(self) -> tuple[list[Any], bool]:
        self._at = None
        old, self._state = self._state, "NOTIFY"
        return [(old, "NOTIFY")], StatefulLogic.RETAIN

    def on_eof(self) -> tuple[list[Any], bool]:
        old, self._state = self._state, "EOF"
        return [(old, "EOF")], StatefulLogic.RETAIN

    def notify_at(self) -> datetime | None:
        return self._at

    def snapshot(self) -> Any:
        return (self._state, self._at)


def test_stateful_notifies_between_micro_batches_and_calls_on_eof_at_the_end():
    flow = Dataflow("test_df")
    s = op.key_on("key", op.input("inp", flow, TestingSource([1, 2])), lambda _x: "ALL")
    out: list[Any] = []
    op.output("out", op.stateful("stateful", s, Transitions), TestingSink(out))
    run_main(flow, epoch_interval=ZERO_TD)
    assert [v for _k, v in out] == [  # what bytewax 0.21.1 emits for this flow
        ("NEW", "ITEM"),
        ("ITEM", "NOTIFY"),
        ("NOTIFY", "ITEM"),
        ("ITEM", "NOTIFY"),
        ("NOTIFY", "EOF"),
    ]


# -- errors --------------------------------------------------------------------------------


def test_a_keyed_operator_given_items_that_are_not_pairs_is_a_type_error_naming_it():
    flow = Dataflow("test_df")
    s = op.input("inp", flow, TestingSource([1, 2]))
    op.output("out", op.stateful_map("running", s, lambda st, v: (st, v)), TestingSink([]))
    with pytest.raises(TypeError, match="step 'test_df.running'.*2-tuple") as info:
        run_main(flow)
    assert isinstance(info.value, StepError)


def test_a_value_operator_given_items_that_are_not_pairs_names_its_step():
    flow = Dataflow("test_df")
    s = op.input("inp", flow, TestingSource([1]))
    op.output("out", op.map_value("double", s, lambda v: v * 2), TestingSink([]))
    with pytest.raises(
        TypeError, match="step 'test_df.double' requires `\\(key, value\\)` 2-tuple"
    ):
        run_main(flow)


def test_a_user_error_keeps_its_type_and_names_the_step():
    flow = Dataflow("test_df")
    s = op.input("inp", flow, TestingSource([1, 0]))
    op.output("out", op.map("invert", s, lambda x: 1 / x), TestingSink([]))
    with pytest.raises(ZeroDivisionError, match="step 'test_df.invert'"):
        run_main(flow)


def test_a_non_bool_predicate_and_a_bad_stateful_map_result_are_type_errors():
    flow = Dataflow("test_df")
    s = op.input("inp", flow, TestingSource([1]))
    op.output("out", op.filter("keep", s, lambda x: x), TestingSink([]))
    with pytest.raises(TypeError, match="must be a `bool`; got a <class 'int'>"):
        run_main(flow)
    flow = Dataflow("test_df")
    s = op.key_on("key", op.input("inp", flow, TestingSource([1])), lambda _x: "ALL")
    op.output("out", op.stateful_map("bad_mapper", s, lambda st, v: v), TestingSink([]))
    with pytest.raises(TypeError, match="must be a 2-tuple"):
        run_main(flow)


def test_raises_stops_the_run_on_an_item():
    flow = Dataflow("test_df")
    op.raises("crash", op.input("inp", flow, TestingSource(["boom"])))
    with pytest.raises(RuntimeError, match="`raises` step 'test_df.crash' got an item: 'boom'"):
        run_main(flow)


# -- sources and sinks -------------------------------------------------------------------------


def test_testing_source_eof_ends_the_input_and_pause_waits():
    flow = Dataflow("f")
    out: list[Any] = []
    src = [1, TestingSource.PAUSE(timedelta(seconds=1)), 2, TestingSource.EOF(), 3]
    op.output("out", op.input("inp", flow, TestingSource(src)), TestingSink(out))
    started = time.monotonic()
    run_main(flow)
    assert out == [1, 2]
    assert time.monotonic() - started >= 1.0


# TestingSource.ABORT and AbortExecution: bytewax's pytests/test_recovery.py and
# test_testing.py expectations. The run stops at the ABORT, run_main returns, and
# the next run goes past it.

ZERO = timedelta(0)


def _abort_flow(out: list[Any], batch_size: int = 1) -> tuple[Dataflow, list[Any]]:
    inp = [0, 1, 2, TestingSource.ABORT(), 3, 4]
    flow = Dataflow("test_df")
    s = op.input("inp", flow, TestingSource(inp, batch_size=batch_size))
    op.output("out", s, TestingSink(out))
    return flow, inp


@pytest.mark.parametrize("batch_size", [1, 2])
def test_an_abort_stops_the_run_and_the_rerun_resumes_past_it(tmp_path, batch_size):
    out: list[Any] = []
    flow, inp = _abort_flow(out, batch_size)
    config = RecoveryConfig(str(tmp_path / "recovery"))
    run_main(flow, epoch_interval=ZERO, recovery_config=config)
    assert out == [0, 1, 2]
    assert inp[3]._triggered
    out.clear()
    run_main(flow, epoch_interval=ZERO, recovery_config=config)
    assert out == [3, 4]


def test_an_abort_without_a_recovery_directory_runs_again_from_the_start():
    out: list[Any] = []
    flow, _ = _abort_flow(out)
    run_main(flow)
    assert out == [0, 1, 2]
    out.clear()
    run_main(flow)  # the ABORT triggered once: this run reads every item
    assert out == [0, 1, 2, 3, 4]


def test_an_abort_is_no_end_of_input_so_final_steps_emit_nothing():
    # bytewax's test_stateful.py puts an ABORT last for this: no on_eof, no flush.
    out: list[Any] = []
    flow = Dataflow("test_df")
    s = op.input("inp", flow, TestingSource([1, 2, TestingSource.ABORT()]))
    s = op.key_on("key", s, lambda _x: "ALL")
    totals = op.fold_final("sum", s, lambda: 0, lambda acc, x: acc + x)
    seen = op.map("seen", s, lambda kv: kv)
    op.output("out", op.merge("both", totals, seen), TestingSink(out))
    run_main(flow, epoch_interval=ZERO)
    assert sorted(out) == [("ALL", 1), ("ALL", 2)]  # the items; no fold_final total


class AbortingSource(DynamicSource):
    """A user's own source that aborts the run after its third batch."""

    def build(self, step_id, worker_index, worker_count):
        return AbortingPart()


class AbortingPart(StatelessSourcePartition):
    def __init__(self):
        self.n = 0

    def next_batch(self):
        self.n += 1
        if self.n > 3:
            raise AbortExecution()
        return [self.n]


def test_a_sources_own_abort_execution_ends_the_run_after_what_it_read():
    out: list[Any] = []
    flow = Dataflow("test_df")
    op.output("out", op.input("inp", flow, AbortingSource()), TestingSink(out))
    run_main(flow)
    assert out == [1, 2, 3]


class Parts(FixedPartitionedSource):
    def list_parts(self):
        return ["x", "y"]

    def build_part(self, step_id, for_part, resume_state):
        return PartReader(f"{step_id}:{for_part}", resume_state or 0)


class PartReader(StatefulSourcePartition):
    def __init__(self, name, at):
        self.name, self.at = name, at

    def next_batch(self):
        if self.at >= 3:
            raise StopIteration()
        self.at += 1
        return iter([f"{self.name}{self.at}"])

    def snapshot(self):
        return self.at


class Once(DynamicSource):
    def build(self, step_id, worker_index, worker_count):
        return OnceReader([f"{step_id}/{worker_index}/{worker_count}"])


class OnceReader(StatelessSourcePartition):
    def __init__(self, items):
        self.items = items

    def next_batch(self):
        if not self.items:
            raise StopIteration()
        items, self.items = self.items, []
        return items


class Ticks(SimplePollingSource):
    def __init__(self):
        super().__init__(timedelta(milliseconds=100))
        self.n = 0

    def next_item(self):
        self.n += 1
        if self.n == 2:
            raise SimplePollingSource.Retry(timedelta(milliseconds=10))
        if self.n > 4:
            raise StopIteration()
        return self.n


class Files(FixedPartitionedSink):
    def __init__(self):
        self.written: list[Any] = []

    def list_parts(self):
        return ["p0", "p1"]

    def build_part(self, step_id, for_part, resume_state):
        return FilePart(self.written, f"{step_id}:{for_part}")


class FilePart(StatefulSinkPartition):
    def __init__(self, written, name):
        self.written, self.name = written, name

    def write_batch(self, values):
        self.written.extend((self.name, v) for v in values)

    def snapshot(self):
        return len(self.written)


class Lines(DynamicSink):
    def __init__(self):
        self.written: list[Any] = []

    def build(self, step_id, worker_index, worker_count):
        return LinesPart(self.written, step_id)


class LinesPart(StatelessSinkPartition):
    def __init__(self, written, step_id):
        self.written, self.step_id = written, step_id

    def write_batch(self, items):
        self.written.extend((self.step_id, x) for x in items)


def test_custom_sources_and_sinks_of_each_0_21_family():
    flow = Dataflow("f")
    parts = op.input("parts", flow, Parts())
    once = op.input("once", flow, Once())
    ticks = op.input("ticks", flow, Ticks())
    files, lines = Files(), Lines()
    keyed = op.key_on("by_part", parts, lambda s: s.split(":")[1][0])
    op.output("files", keyed, files)
    op.output("lines", op.merge("both", once, ticks), lines)
    run_main(flow)
    names = {
        p: sorted(v for part, v in files.written if part == p) for p in ("f.files:p0", "f.files:p1")
    }
    assert sorted(names["f.files:p0"] + names["f.files:p1"]) == sorted(
        [f"f.parts:{p}{i}" for p in "xy" for i in (1, 2, 3)]
    )
    assert all(len({v.split(":")[1][0] for v in vs}) <= 1 for vs in names.values())
    assert sorted(str(x) for step, x in lines.written if step == "f.lines") == sorted(
        ["f.once/0/1", "1", "3", "4"]
    )


def test_the_wordcount_example_prints_bytewaxs_counts(run_example):
    printed = sorted(run_example("bytewax021_wordcount.py"))
    assert printed == sorted(
        [
            "(\"'tis\", 1)",
            "('a', 1)", "('against', 1)", "('and', 2)", "('arms', 1)", "('arrows', 1)",
            "('be', 2)", "('by', 1)", "('end', 1)", "('fortune', 1)", "('in', 1)",
            "('is', 1)", "('mind', 1)", "('nobler', 1)", "('not', 1)", "('of', 2)",
            "('opposing', 1)", "('or', 2)", "('outrageous', 1)", "('question', 1)",
            "('sea', 1)", "('slings', 1)", "('suffer', 1)", "('take', 1)", "('that', 1)",
            "('the', 3)", "('them', 1)", "('to', 4)", "('troubles', 1)", "('whether', 1)",
        ]
    )  # fmt: skip


def test_the_bytewax_021_page_example(request, capsys):
    # Runs the python block of docs/bytewax-021.md.
    [block] = blocks_for(request)
    namespace: dict[str, Any] = {"__name__": "docs_example"}
    exec(compile(block.text, str(Path(ROOT / block.path)), "exec"), namespace)
    assert sorted(_printed(capsys)) == ["page_eg.out: ('a', 2)", "page_eg.out: ('b', 1)"]
