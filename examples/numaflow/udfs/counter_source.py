"""Numaflow's ``simple-source`` example image (``numaflow-rs/examples/simple-source``).

Each read sends as many messages as asked for, with payloads counting up from "0",
event time now and offsets ``"<ns>-<i>"``, then sends nothing more until all of them
are acked. A nacked offset is sent again (with the next count as its payload).
"""

import time
from datetime import UTC, datetime

from flowspark.shared.asynciter import NonBlockingIterator
from flowspark.sourcer import (
    AckRequest,
    Message,
    NackRequest,
    Offset,
    PartitionsResponse,
    PendingResponse,
    ReadRequest,
    SourceAsyncServer,
    Sourcer,
)


class CounterSource(Sourcer):
    def __init__(self) -> None:
        self.unacked: set[str] = set()
        self.nacked: set[str] = set()
        self.count = 0

    def _message(self, offset: str) -> Message:
        payload = str(self.count).encode()
        self.count += 1
        return Message(
            payload=payload,
            offset=Offset(offset.encode(), 0),
            event_time=datetime.now(UTC),
        )

    async def read_handler(self, datum: ReadRequest, output: NonBlockingIterator) -> None:
        if self.unacked:
            return
        if self.nacked:
            again, self.nacked = sorted(self.nacked), set()
            for offset in again:
                await output.put(self._message(offset))
            return
        now_ns = time.time_ns()
        for i in range(datum.num_records):
            offset = f"{now_ns}-{i}"
            await output.put(self._message(offset))
            self.unacked.add(offset)

    async def ack_handler(self, ack_request: AckRequest) -> None:
        for offset in ack_request.offsets:
            self.unacked.discard(offset.offset.decode())

    async def nack_handler(self, nack_request: NackRequest) -> None:
        for offset in nack_request.offsets:
            key = offset.offset.decode()
            self.unacked.discard(key)
            self.nacked.add(key)
            self.count -= 1

    async def pending_handler(self) -> PendingResponse:
        return PendingResponse(count=len(self.unacked))

    async def active_partitions_handler(self) -> PartitionsResponse:
        return PartitionsResponse(partitions=[0])


if __name__ == "__main__":
    SourceAsyncServer(CounterSource()).start()
