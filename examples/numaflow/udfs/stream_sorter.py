"""Numaflow's ``stream-sorter`` example image (``numaflow-go/examples/accumulator/streamsorter``,
``numaflow-rs/examples/stream-sorter``).

Per key, datums are kept sorted by event time; whenever a datum arrives with a
watermark later than any seen before, every kept datum with event time at or
before that watermark is emitted in event-time order (value, keys, event time,
watermark, headers and id as they came). What is still kept when the key's
accumulator times out is not emitted, as in the Go and Rust images.
"""

from bisect import bisect_right
from collections.abc import AsyncIterable
from datetime import UTC, datetime

from flowspark.accumulator import Accumulator, AccumulatorAsyncServer, Datum, Message
from flowspark.shared.asynciter import NonBlockingIterator


class StreamSorter(Accumulator):
    """A new instance per key (the Go streamSorterCreator)."""

    def __init__(self):
        self.latest_wm = datetime.fromtimestamp(-0.001, UTC)  # time.UnixMilli(-1)
        self.sorted_buffer: list[Datum] = []

    async def handler(self, datums: AsyncIterable[Datum], output: NonBlockingIterator):
        async for datum in datums:
            if datum.watermark > self.latest_wm:
                self.latest_wm = datum.watermark
                await self.flush_buffer(output)
            self.insert_sorted(datum)

    def insert_sorted(self, datum: Datum):
        """After every kept datum with the same or an earlier event time."""
        index = bisect_right(self.sorted_buffer, datum.event_time, key=lambda d: d.event_time)
        self.sorted_buffer.insert(index, datum)

    async def flush_buffer(self, output: NonBlockingIterator):
        i = 0
        for datum in self.sorted_buffer:
            if datum.event_time > self.latest_wm:
                break
            await output.put(Message.from_datum(datum))
            i += 1
        self.sorted_buffer = self.sorted_buffer[i:]


if __name__ == "__main__":
    grpc_server = AccumulatorAsyncServer(StreamSorter)
    grpc_server.start()
