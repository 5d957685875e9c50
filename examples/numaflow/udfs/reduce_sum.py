"""Numaflow's ``reduce-sum`` example image (``numaflow-go/examples/reducer/sum``).

For each key and window, the sum of the values that are decimal integers
(others are skipped, with a message), emitted as one message with the window's
keys when the window closes.
"""

import re
from collections.abc import AsyncIterable

from flowspark.reducer import Datum, Message, Messages, Metadata, ReduceAsyncServer, Reducer

_ATOI = re.compile(rb"[+-]?[0-9]+")


class ReduceSum(Reducer):
    """A new instance per key and window (as the Go SumReducerCreator does)."""

    def __init__(self):
        self.sum = 0

    async def handler(
        self, keys: list[str], datums: AsyncIterable[Datum], md: Metadata
    ) -> Messages:
        async for datum in datums:
            if not _ATOI.fullmatch(datum.value):
                print(f"unable to convert the value to int: {datum.value!r}")
                continue
            self.sum += int(datum.value)
        return Messages(Message(str(self.sum).encode(), keys=keys))


if __name__ == "__main__":
    grpc_server = ReduceAsyncServer(ReduceSum)
    grpc_server.start()
