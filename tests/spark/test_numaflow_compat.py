"""Handlers written against pynumaflow 0.14 itself (imports unchanged) run in
flowspark's operators: the SDK's own classes, Message types and ABCs."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import AsyncIterable
from datetime import UTC, datetime, timedelta

import pytest

pynumaflow = pytest.importorskip("pynumaflow", reason="pynumaflow is a test extra")

from pynumaflow import accumulator  # noqa: E402
from pynumaflow.mapstreamer import MapStreamer  # noqa: E402
from pynumaflow.mapstreamer import Message as MapMessage  # noqa: E402
from pynumaflow.reducestreamer import Message as ReduceMessage  # noqa: E402
from pynumaflow.reducestreamer import Metadata, ReduceStreamer  # noqa: E402
from pynumaflow.shared.asynciter import NonBlockingIterator  # noqa: E402

from bench.udfs.spec_handlers import stream_sorter  # noqa: E402
from flowspark.accumulator import Datum as FlowDatum  # noqa: E402
from flowspark.dataflow import Dataflow  # noqa: E402
from flowspark.testing import TestingInput, TestingOutput, run_main  # noqa: E402

T0 = datetime(2024, 1, 1, tzinfo=UTC)


StreamSorter = stream_sorter(accumulator)


class ReduceCounter(ReduceStreamer):
    def __init__(self, counter):
        self.counter = counter

    async def handler(self, keys, datums, output: NonBlockingIterator, md: Metadata):
        async for _ in datums:
            self.counter += 1
            if self.counter > 20:
                await output.put(ReduceMessage(f"counter:{self.counter}".encode(), keys=keys))
                self.counter = 0
        await output.put(ReduceMessage(f"counter:{self.counter}".encode(), keys=keys))


class FlatMapStream(MapStreamer):
    async def handler(self, keys: list[str], datum) -> AsyncIterable[MapMessage]:
        for s in datum.value.decode("utf-8").split(","):
            yield MapMessage(str.encode(s))


def flow_datum(key: str, seconds: float, i: int) -> FlowDatum:
    at = T0 + timedelta(seconds=seconds)
    return FlowDatum([key], f"{seconds}".encode(), at, T0, id_=str(i))


def test_pynumaflow_accumulator_subclass_sorts_per_key():
    # Out of order by up to 2 s; watermark delay 3 s.
    items = [flow_datum(f"k{i % 2}", i + (2 if i % 3 == 0 else 0), i) for i in range(40)]
    flow = Dataflow()
    flow.input("inp", TestingInput(items, batch_size=10))
    out: list = []
    flow.accumulate(
        "sort", StreamSorter, timedelta(seconds=30), watermark_delay=timedelta(seconds=3)
    )
    flow.output("out", TestingOutput(out))
    run_main(flow, epoch_interval=timedelta(0))
    assert sorted(d.id for d in out) == sorted(str(i) for i in range(40))
    by_key = defaultdict(list)
    for d in out:
        by_key[d.keys[0]].append(d.event_time)
    assert all(times == sorted(times) for times in by_key.values())


def test_pynumaflow_reduce_streamer_subclass_with_init_args():
    items = [flow_datum("k", s, s) for s in range(50)]
    flow = Dataflow()
    flow.input("inp", TestingInput(items, batch_size=20))
    out: list = []
    flow.reduce_stream("count", ReduceCounter, timedelta(minutes=1), init_args=(0,))
    flow.output("out", TestingOutput(out))
    run_main(flow, epoch_interval=timedelta(0))
    assert [d.value for d in out] == [b"counter:21", b"counter:21", b"counter:8"]


def test_pynumaflow_map_streamer_instance():
    flow = Dataflow()
    flow.input("inp", TestingInput(["a,b", "c"]))
    flow.to_datums(event_time=lambda _: T0)
    flow.map_stream("split", FlatMapStream())
    out: list = []
    flow.output("out", TestingOutput(out))
    run_main(flow)
    assert [d.value for d in out] == [b"a", b"b", b"c"]
