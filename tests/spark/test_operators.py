"""Every stateless operator and the Stream API, end to end on local Spark."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

from flowspark.dataflow import Dataflow
from flowspark.testing import TestingInput, TestingOutput, run_main


def _run(build, items, **kwargs):
    flow = Dataflow()
    flow.input("inp", TestingInput(items, batch_size=kwargs.pop("batch_size", 1)))
    build(flow)
    out: list = []
    flow.output("out", TestingOutput(out))
    run_main(flow, **kwargs)
    return out


def test_map_filter_filter_map_flat_map_chain_keeps_order():
    def build(flow):
        flow.map(lambda x: x * 3)
        flow.filter(lambda x: x % 2 == 0)
        flow.filter_map(lambda x: None if x % 4 == 0 else x)
        flow.flat_map(lambda x: [x, -x])

    assert _run(build, range(10)) == [6, -6, 18, -18]


def test_large_input_is_processed_in_parallel_and_in_order():
    out = _run(lambda flow: flow.map(lambda x: x + 1), range(200_000), batch_size=1000)
    assert out == list(range(1, 200_001))


def test_non_primitive_items_round_trip():
    items = [("a", 1), {"k": [1, 2]}, None, 2.5, b"raw", frozenset({3})]
    assert _run(lambda flow: flow.map(lambda x: x), items) == items


def test_instances_of_classes_defined_in_tests_round_trip():
    class Point:
        def __init__(self, x):
            self.x = x

    out = _run(lambda flow: flow.map(lambda x: Point(x)), [1, 2])
    assert [p.x for p in out] == [1, 2]
    assert all(isinstance(p, Point) for p in out)


def test_generator_input_is_read():
    out = _run(lambda flow: flow.map(lambda x: x), (i * i for i in range(5)))
    assert out == [0, 1, 4, 9, 16]


def test_inspect_worker_reports_spark_partitions(capsys):
    def build(flow):
        flow.inspect_worker(lambda worker, item: print(f"w{worker} {item}"))

    out = _run(build, range(100), batch_size=10)
    assert out == list(range(100))
    pairs = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert sorted(int(item) for _, item in pairs) == list(range(100))
    assert {worker for worker, _ in pairs} == {"w0", "w1"}, "two partitions on local[2]"


def test_epochs_follow_batch_size_with_zero_epoch_interval(capsys):
    def build(flow):
        flow.inspect_epoch(lambda epoch, item: print(epoch, item))

    _run(build, range(6), batch_size=2, epoch_interval=timedelta(0))
    assert capsys.readouterr().out.splitlines() == ["1 0", "1 1", "2 2", "2 3", "3 4", "3 5"]


def test_all_items_share_one_epoch_by_default(capsys):
    def build(flow):
        flow.inspect_epoch(lambda epoch, item: print(epoch))

    _run(build, range(5))
    assert set(capsys.readouterr().out.split()) == {"1"}


def test_redistribute_keeps_every_item():
    def build(flow):
        flow.map(lambda x: x * 2)
        flow.redistribute()
        flow.map(lambda x: x + 1)

    out = _run(build, range(1000), batch_size=100)
    assert sorted(out) == [2 * x + 1 for x in range(1000)]


def test_output_passes_items_downstream():
    flow = Dataflow()
    flow.input("inp", TestingInput(range(3)))
    first, second = [], []
    flow.output("first", TestingOutput(first))
    flow.map(lambda x: x * 100)
    flow.output("second", TestingOutput(second))
    run_main(flow)
    assert first == [0, 1, 2]
    assert second == [0, 100, 200]


def test_stream_branch_merge_and_several_outputs():
    flow = Dataflow()
    nums = flow.input("nums", TestingInput(range(10)))
    evens, odds = nums.branch("parity", lambda x: x % 2 == 0)
    merged = evens.map("tens", lambda x: x * 10).merge(odds)
    all_out, odd_out = [], []
    merged.output("all", TestingOutput(all_out))
    odds.output("odds", TestingOutput(odd_out))
    run_main(flow)
    assert sorted(all_out) == sorted([0, 20, 40, 60, 80, 1, 3, 5, 7, 9])
    assert odd_out == [1, 3, 5, 7, 9]


def test_several_inputs_merge():
    flow = Dataflow()
    a = flow.input("a", TestingInput(["a1", "a2"]))
    b = flow.input("b", TestingInput(["b1"]))
    out = []
    a.merge(b).map(str.upper).output("out", TestingOutput(out))
    run_main(flow)
    assert sorted(out) == ["A1", "A2", "B1"]


def test_second_flow_input_joins_the_chain():
    flow = Dataflow()
    flow.input("a", TestingInput([1, 2]))
    flow.input("b", TestingInput([10]))
    flow.map(lambda x: x + 1)
    out = []
    flow.output("out", TestingOutput(out))
    run_main(flow)
    assert sorted(out) == [2, 3, 11]


def test_empty_input_runs_and_outputs_nothing():
    assert _run(lambda flow: flow.map(lambda x: x), []) == []


def test_run_main_is_reusable_without_leaking_threads():
    def settled_threads() -> set[threading.Thread]:
        # A thread that is just finishing (a closed py4j connection's reader) is gone
        # a moment later; a leaked one stays.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            alive = set(threading.enumerate())
            time.sleep(0.2)
            if set(threading.enumerate()) == alive:
                return alive
        return set(threading.enumerate())

    _run(lambda flow: flow.map(lambda x: x), range(3))
    counts, before = [], settled_threads()
    for _ in range(4):
        assert _run(lambda flow: flow.map(lambda x: x + 1), range(3)) == [1, 2, 3]
        counts.append(len(settled_threads()))
    # A thread started once and kept (a pool, a lazily started server) is not a leak;
    # threads that pile up run after run are.
    added = sorted(t.name for t in settled_threads() - before)
    assert counts[-1] <= counts[1], (counts, added)
