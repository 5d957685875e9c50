"""bytewax 0.21.1's sources and sinks (`flowspark.inputs`, `flowspark.outputs`,
`flowspark.testing`, the connectors' 0.21 names) and their adapters onto the 0.17
families the engine reads, in plain Python (no Spark)."""

from __future__ import annotations

import asyncio
import queue
import time
from datetime import UTC, datetime, timedelta
from zlib import adler32

import pytest

import flowspark.inputs as inputs
import flowspark.outputs as outputs
from flowspark.api.inputs import DynamicInput, PartitionedInput
from flowspark.api.outputs import DynamicOutput, PartitionedOutput
from flowspark.api.sinks import as_output
from flowspark.api.sources import as_input
from flowspark.connectors.files import CSVSource, DirSink, DirSource, FileSink, FileSource
from flowspark.connectors.memory import TestingInput
from flowspark.connectors.stdio import StdOutput, StdOutSink
from flowspark.testing import TestingSink, TestingSource


class Numbers(inputs.FixedPartitionedSource):
    def __init__(self, parts: dict[str, int]) -> None:
        self.parts = parts
        self.closed: list[str] = []

    def list_parts(self):
        return list(self.parts)

    def build_part(self, step_id, for_part, resume_state):
        return NumbersPart(self, step_id, for_part, resume_state or 0)


class NumbersPart(inputs.StatefulSourcePartition):
    def __init__(self, source, step_id, part, at):
        self.source, self.step_id, self.part, self.at = source, step_id, part, at

    def next_batch(self):
        if self.at >= self.source.parts[self.part]:
            raise StopIteration()
        self.at += 1
        return (x for x in [f"{self.step_id}/{self.part}/{self.at}"])  # any iterable

    def next_awake(self):
        return datetime(2024, 1, 1, tzinfo=UTC)

    def snapshot(self):
        return self.at

    def close(self):
        self.source.closed.append(self.part)


def test_a_fixed_partitioned_source_runs_as_a_partitioned_input():
    source = Numbers({"a": 2, "b": 1})
    adapted = as_input(source, "flow.inp")
    assert isinstance(adapted, PartitionedInput) and adapted.list_parts() == ["a", "b"]
    part = adapted.build_part("a", 1)
    assert part.next_batch() == ["flow.inp/a/2"]
    assert part.snapshot() == 2 and part.next_awake() == datetime(2024, 1, 1, tzinfo=UTC)
    with pytest.raises(StopIteration):
        part.next_batch()
    part.close()
    assert source.closed == ["a"]


class Countdown(inputs.DynamicSource):
    def build(self, step_id, worker_index, worker_count):
        return CountdownPart(step_id, worker_index, worker_count)


class CountdownPart(inputs.StatelessSourcePartition):
    def __init__(self, step_id, worker_index, worker_count):
        self.items = [(step_id, worker_index, worker_count)]

    def next_batch(self):
        if not self.items:
            raise StopIteration()
        return iter([self.items.pop()])


def test_a_dynamic_source_runs_as_a_dynamic_input_of_one_worker():
    adapted = as_input(Countdown(), "flow.inp")
    assert isinstance(adapted, DynamicInput)
    part = adapted.build(0, 1)
    assert part.next_batch() == [("flow.inp", 0, 1)] and part.next_awake() is None
    with pytest.raises(StopIteration):
        part.next_batch()


class Poll(inputs.SimplePollingSource):
    def __init__(self, replies, **kwargs):
        super().__init__(timedelta(seconds=10), **kwargs)
        self.replies = list(replies)
        self.resumed = None

    def next_item(self):
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply

    def snapshot(self):
        return len(self.replies)

    def resume(self, resume_state):
        self.resumed = resume_state


def test_simple_polling_source_polls_every_interval_and_retries_sooner():
    retry = inputs.SimplePollingSource.Retry(timedelta(seconds=1))
    source = Poll(["a", None, retry, "b"])
    part = as_input(source, "flow.poll").build_part("singleton", 7)
    assert source.resumed == 7 and source.list_parts() == ["singleton"]
    start = part.next_awake()
    assert start is not None and abs(start - datetime.now(UTC)) < timedelta(seconds=5)
    got = [part.next_batch() for _ in range(4)]
    assert got == [["a"], [], [], ["b"]]
    assert part.next_awake() - start == timedelta(seconds=31)
    assert part.snapshot() == 0


def test_simple_polling_source_aligns_its_first_poll():
    align = datetime(2024, 1, 1, tzinfo=UTC)
    part = Poll([], align_to=align).build_part("flow.poll", "singleton", None)
    first = part.next_awake()
    assert (first - align) % timedelta(seconds=10) == timedelta(0)
    assert timedelta(0) <= first - datetime.now(UTC) <= timedelta(seconds=10)


class Lines(outputs.FixedPartitionedSink):
    def __init__(self):
        self.written: dict[str, list] = {"x": [], "y": []}

    def list_parts(self):
        return ["x", "y"]

    def build_part(self, step_id, for_part, resume_state):
        return LinesPart(self.written[for_part], step_id, resume_state)


class LinesPart(outputs.StatefulSinkPartition):
    def __init__(self, ls, step_id, resume_state):
        self.ls, self.step_id, self.n = ls, step_id, resume_state or 0

    def write_batch(self, values):
        self.ls.extend((self.step_id, v) for v in values)
        self.n += len(values)

    def snapshot(self):
        return self.n


def test_a_fixed_partitioned_sink_runs_as_a_partitioned_output():
    sink = Lines()
    adapted = as_output(sink, "flow.out")
    assert isinstance(adapted, PartitionedOutput) and adapted.list_parts() == ["x", "y"]
    assert adapted.part_fn("key") == adler32(b"key") == sink.part_fn("key")
    part = adapted.build_part("y", 3)
    part.write_batch(["v"])
    assert part.snapshot() == 4 and sink.written["y"] == [("flow.out", "v")]


def test_testing_sink_is_a_dynamic_sink_appending_to_the_list():
    out: list = []
    adapted = as_output(TestingSink(out), "flow.out")
    assert isinstance(adapted, DynamicOutput)
    adapted.build(0, 1).write_batch([1, 2])
    TestingSink(out).build("flow.out", 0, 1).write_batch([3])
    assert out == [1, 2, 3]


def test_testing_source_without_sentinels_runs_as_testing_input():
    adapted = as_input(TestingSource((x for x in range(3)), batch_size=2), "flow.inp")
    assert isinstance(adapted, TestingInput)
    assert adapted.batch_size == 2 and list(adapted.items) == [0, 1, 2]
    assert isinstance(as_input(TestingSource(range(5)), "flow.inp"), TestingInput)


def test_testing_source_with_eof_or_pause_runs_as_a_polled_partition():
    adapted = as_input(TestingSource([1, TestingSource.EOF(), 2]), "flow.inp")
    assert isinstance(adapted, PartitionedInput) and adapted.list_parts() == ["iterable"]
    part = adapted.build_part("iterable", None)
    assert part.next_batch() == [1]
    assert part.next_batch() == [] and part.snapshot() == 2
    with pytest.raises(StopIteration):
        part.next_batch()


def test_testing_source_pause_sets_the_next_awake_and_counts_as_an_item():
    source = TestingSource([1, TestingSource.PAUSE(timedelta(seconds=30)), 2], batch_size=5)
    part = source.build_part("flow.inp", "iterable", None)
    assert part.next_batch() == [1]
    assert part.next_awake() > datetime.now(UTC) + timedelta(seconds=20)
    assert part.snapshot() == 2
    assert part.next_batch() == [2] and part.next_awake() is None
    with pytest.raises(StopIteration):
        part.next_batch()
    assert source.build_part("flow.inp", "iterable", 2).next_batch() == [2]


def test_testing_source_refuses_a_bad_batch_size():
    with pytest.raises(ValueError, match="batch_size must be a positive int"):
        TestingSource([1], batch_size=0)


def test_the_faces_export_both_families():
    for name in ["PartitionedInput", "FixedPartitionedSource", "SimplePollingSource", "batch"]:
        assert name in inputs.__all__
    for name in ["batch_async", "batch_getter", "batch_getter_ex", "AbortExecution"]:
        assert name in inputs.__all__
    for name in ["PartitionedOutput", "FixedPartitionedSink", "DynamicSink", "Sink"]:
        assert name in outputs.__all__
    assert issubclass(inputs.AbortExecution, RuntimeError)


def test_batch_helpers():
    assert list(inputs.batch(range(5), 2)) == [[0, 1], [2, 3], [4]]
    q: queue.Queue[int] = queue.Queue()
    for x in range(3):
        q.put(x)
    assert next(inputs.batch_getter_ex(q.get_nowait, 5)) == [0, 1, 2]
    items = iter([1, 2, None, 3])
    assert list(inputs.batch_getter(lambda: next(items), 5)) == [[1, 2], [3]]


def test_batch_async_stops_a_list_at_the_timeout_and_keeps_the_pending_item():
    async def slow():
        yield 1
        await asyncio.sleep(0.3)
        yield 2

    batches = inputs.batch_async(slow(), timedelta(seconds=0.1), 10)
    assert next(batches) == [1]
    assert next(batches) == []  # 2 is still on its way
    time.sleep(0.3)
    assert list(batches) == [[2]]


def test_connectors_have_their_0_21_names(tmp_path):
    path = tmp_path / "a.txt"
    path.write_text("x\n")
    (tmp_path / "b.csv").write_text("h\n1\n")
    for source in [FileSource(path), DirSource(tmp_path), CSVSource(tmp_path / "b.csv")]:
        assert isinstance(source, inputs.Source) and as_input(source, "f.inp") is source
    for sink in [FileSink(tmp_path / "o.txt"), DirSink(tmp_path / "d", 2), StdOutSink()]:
        assert isinstance(sink, outputs.Sink) and as_output(sink, "f.out") is sink
    assert isinstance(StdOutSink(), StdOutput)
