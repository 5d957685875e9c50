"""The pynumaflow 0.14 documentation pages' handlers with the import prefix changed, for
the tests that run them (map stream, reduce stream, accumulator). The map stream class
example calls the function example (their code is the same); the accumulator page's is
built by ``bench/udfs/spec_handlers.py``, which the benchmark runs."""

from __future__ import annotations

from collections.abc import AsyncIterable

from bench.udfs.spec_handlers import stream_sorter
from flowspark import accumulator, mapstreamer, reducestreamer
from flowspark.shared.asynciter import NonBlockingIterator


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


class FlatMapStream(mapstreamer.MapStreamer):
    """The mapstreamer page's class example, whose handler is the function example's."""

    async def handler(
        self, keys: list[str], datum: mapstreamer.Datum
    ) -> AsyncIterable[mapstreamer.Message]:
        async for message in map_stream_handler(keys, datum):
            yield message


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


class StreamSorter(stream_sorter(accumulator)):
    """The accumulator page's first example (its loop variable fixed: ``async for datum``;
    ``counter`` unused, as on the page): what the last watermark did not pass stays in
    ``sorted_buffer`` when the stream ends. The page's second version (the example's)
    flushes it then, with ``flush_all``; the first has no such call, so here it does
    nothing."""

    def __init__(self, counter: int) -> None:
        super().__init__()

    async def flush_buffer(self, output: NonBlockingIterator, flush_all: bool = False) -> None:
        if not flush_all:
            await super().flush_buffer(output)
