"""Numaflow UDFs on flowspark: join two out-of-order sources, sort them per key with
the accumulator page's StreamSorter, then count per key and minute with a reduce
stream that reports early.

Run it with ``python -m flowspark.run examples/numaflow_join_sort.py --bounded``.
The handlers are pynumaflow code with only the import prefix changed.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterable
from datetime import UTC, datetime, timedelta

from flowspark.accumulator import Accumulator, Datum, Message
from flowspark.connectors.stdio import StdOutput
from flowspark.dataflow import Dataflow
from flowspark.reducestreamer import Message as ReduceMessage
from flowspark.reducestreamer import Metadata
from flowspark.shared.asynciter import NonBlockingIterator
from flowspark.testing import TestingInput

T0 = datetime(2024, 1, 1, tzinfo=UTC)


class StreamSorter(Accumulator):
    """The accumulator page's sorter: flush what the watermark has passed, in order."""

    def __init__(self):
        self.latest_wm = datetime.fromtimestamp(-1)
        self.sorted_buffer: list[Datum] = []

    async def handler(self, datums: AsyncIterable[Datum], output: NonBlockingIterator):
        async for datum in datums:
            if datum.watermark and datum.watermark > self.latest_wm:
                self.latest_wm = datum.watermark
                await self.flush_buffer(output)
            self.insert_sorted(datum)
        await self.flush_buffer(output, flush_all=True)  # the stream ended: flush the rest

    def insert_sorted(self, datum: Datum):
        left, right = 0, len(self.sorted_buffer)
        while left < right:
            mid = (left + right) // 2
            if self.sorted_buffer[mid].event_time > datum.event_time:
                right = mid
            else:
                left = mid + 1
        self.sorted_buffer.insert(left, datum)

    async def flush_buffer(self, output: NonBlockingIterator, flush_all: bool = False):
        i = 0
        for datum in self.sorted_buffer:
            if not flush_all and datum.event_time > self.latest_wm:
                break
            await output.put(Message.from_datum(datum))
            i += 1
        self.sorted_buffer = self.sorted_buffer[i:]


async def count_per_minute(keys: list[str], datums, output, md: Metadata):
    """Count a key's clicks per minute; say so early every 10 clicks."""
    count = 0
    async for _ in datums:
        count += 1
        if count % 10 == 0:
            await output.put(ReduceMessage(f"{count} so far".encode(), keys=keys))
    start = md.interval_window.start
    await output.put(ReduceMessage(f"{count} in the minute from {start:%H:%M}".encode(), keys=keys))


def clicks(source: str, seed: int) -> list[tuple[str, datetime, str]]:
    """(user, event time, click id): ordered in time, each up to 2 s late."""
    rng = random.Random(seed)
    return [
        (f"user{rng.randrange(3)}", T0 + timedelta(seconds=i + rng.uniform(-2, 0)), f"{source}-{i}")
        for i in range(0, 150, 2)
    ]


flow = Dataflow()
one = flow.input("http-one", TestingInput(clicks("one", 1), batch_size=25))
two = flow.input("http-two", TestingInput(clicks("two", 2), batch_size=25))
datums = one.merge(two).to_datums(
    keys=lambda c: [c[0]], value=lambda c: c[2], event_time=lambda c: c[1], id=lambda c: c[2]
)
ordered = datums.accumulate(
    "sort", StreamSorter, timeout=timedelta(minutes=5), watermark_delay=timedelta(seconds=3)
)
ordered.map(
    "show_sorted", lambda d: f"{d.keys[0]} {d.event_time.isoformat(timespec='milliseconds')} {d.id}"
).output("sorted", StdOutput())
counts = ordered.reduce_stream("per_minute", count_per_minute, timedelta(minutes=1))
counts.map("show_count", lambda d: f"{d.keys[0]}: {d.value.decode()}").output("counts", StdOutput())
