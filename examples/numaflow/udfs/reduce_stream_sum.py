"""Numaflow's ``reduce-stream-sum`` example image
(``numaflow-go/examples/reducestreamer/sum``).

For each key and window, a running sum of the values that are decimal integers
(others are skipped, with a message): whenever it reaches 100 it is emitted and
starts again from 0; when the window closes the rest is emitted (maybe ``"0"``).
"""

import re
from collections.abc import AsyncIterable

from flowspark.reducestreamer import (
    Datum,
    Message,
    Metadata,
    ReduceStreamAsyncServer,
    ReduceStreamer,
)
from flowspark.shared.asynciter import NonBlockingIterator

_ATOI = re.compile(rb"[+-]?[0-9]+")


class ReduceStreamSum(ReduceStreamer):
    """A new instance per key and window."""

    async def handler(
        self,
        keys: list[str],
        datums: AsyncIterable[Datum],
        output: NonBlockingIterator,
        md: Metadata,
    ):
        total = 0
        async for datum in datums:
            if not _ATOI.fullmatch(datum.value):
                print(f"unable to convert the value to int: {datum.value!r}")
                continue
            total += int(datum.value)
            if total >= 100:
                await output.put(Message(str(total).encode(), keys=keys))
                total = 0
        await output.put(Message(str(total).encode(), keys=keys))


if __name__ == "__main__":
    grpc_server = ReduceStreamAsyncServer(ReduceStreamSum)
    grpc_server.start()
