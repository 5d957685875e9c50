"""The pynumaflow 0.14 documentation pages' handlers, verbatim but for the import prefix,
for the tests that run them (map stream, reduce stream, accumulator)."""

from __future__ import annotations

from collections.abc import AsyncIterable
from datetime import datetime

from flowspark import accumulator, mapstreamer, reducestreamer
from flowspark.shared.asynciter import NonBlockingIterator


class FlatMapStream(mapstreamer.MapStreamer):
    """The mapstreamer page's class example."""

    async def handler(
        self, keys: list[str], datum: mapstreamer.Datum
    ) -> AsyncIterable[mapstreamer.Message]:
        val = datum.value
        _ = datum.event_time
        _ = datum.watermark
        strs = val.decode("utf-8").split(",")

        if len(strs) == 0:
            yield mapstreamer.Message.to_drop()
            return
        for s in strs:
            yield mapstreamer.Message(str.encode(s))


async def map_stream_handler(
    _: list[str], datum: mapstreamer.Datum
) -> AsyncIterable[mapstreamer.Message]:
    """The mapstreamer page's function example."""
    val = datum.value
    _ = datum.event_time
    _ = datum.watermark
    strs = val.decode("utf-8").split(",")

    if len(strs) == 0:
        yield mapstreamer.Message.to_drop()
        return
    for s in strs:
        yield mapstreamer.Message(str.encode(s))


class ReduceCounter(reducestreamer.ReduceStreamer):
    """The reducestreamer page's class example."""

    def __init__(self, counter: int) -> None:
        self.counter = counter

    async def handler(
        self,
        keys: list[str],
        datums: AsyncIterable[reducestreamer.Datum],
        output: NonBlockingIterator[reducestreamer.Message],
        md: reducestreamer.Metadata,
    ) -> None:
        async for _ in datums:
            self.counter += 1
            if self.counter > 20:
                msg = f"counter:{self.counter}"
                await output.put(reducestreamer.Message(str.encode(msg), keys=keys))
                self.counter = 0
        msg = f"counter:{self.counter}"
        await output.put(reducestreamer.Message(str.encode(msg), keys=keys))


async def reduce_handler(
    keys: list[str],
    datums: AsyncIterable[reducestreamer.Datum],
    output: NonBlockingIterator[reducestreamer.Message],
    md: reducestreamer.Metadata,
) -> None:
    """The reducestreamer page's function example."""
    counter = 0
    async for _ in datums:
        counter += 1
        if counter > 20:
            msg = f"counter:{counter}"
            await output.put(reducestreamer.Message(str.encode(msg), keys=keys))
            counter = 0
    msg = f"counter:{counter}"
    await output.put(reducestreamer.Message(str.encode(msg), keys=keys))


class StreamSorter(accumulator.Accumulator):
    """The accumulator page's example (its loop variable fixed: ``async for datum``): what
    the last watermark did not pass stays in ``sorted_buffer`` when the stream ends."""

    def __init__(self, counter: int) -> None:
        self.latest_wm = datetime.fromtimestamp(-1)
        self.sorted_buffer: list[accumulator.Datum] = []

    async def handler(
        self,
        datums: AsyncIterable[accumulator.Datum],
        output: NonBlockingIterator[accumulator.Message],
    ) -> None:
        async for datum in datums:
            # If watermark has moved forward
            if datum.watermark and datum.watermark > self.latest_wm:
                self.latest_wm = datum.watermark
                await self.flush_buffer(output)
            self.insert_sorted(datum)

    def insert_sorted(self, datum: accumulator.Datum) -> None:
        # Binary insert to keep sorted buffer in order
        left, right = 0, len(self.sorted_buffer)
        while left < right:
            mid = (left + right) // 2
            if self.sorted_buffer[mid].event_time > datum.event_time:
                right = mid
            else:
                left = mid + 1
        self.sorted_buffer.insert(left, datum)

    async def flush_buffer(self, output: NonBlockingIterator[accumulator.Message]) -> None:
        i = 0
        for datum in self.sorted_buffer:
            if datum.event_time > self.latest_wm:
                break
            await output.put(accumulator.Message.from_datum(datum))
            i += 1
        # Remove flushed items
        self.sorted_buffer = self.sorted_buffer[i:]
