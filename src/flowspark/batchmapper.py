"""pynumaflow 0.14's ``pynumaflow.batchmapper`` on flowspark (swap the import prefix).

A handler gets one batch of datums (at most the vertex's ``readBatchSize``) and must
answer every request id once; in a flow: ``stream.batch_map(step_id, handler)``.

>>> import asyncio
>>> from datetime import datetime, timezone
>>> now = datetime.fromtimestamp(1662998400, timezone.utc)
>>> async def handler(datums):
...     responses = BatchResponses()
...     async for datum in datums:
...         parts = datum.value.split(b",")
...         responses.append(BatchResponse.with_msgs(datum.id, [Message(p) for p in parts]))
...     return responses
>>> async def one_batch():
...     yield Datum("1", [], b"a,b", now, now)
>>> [(r.id, [m.value for m in r.items()]) for r in asyncio.run(handler(one_batch()))]
[('1', [b'a', b'b'])]
>>> Message.to_drop().tags == [DROP]
True
"""

from flowspark.api.udf.batch import BatchMapDatum as Datum
from flowspark.api.udf.batch import BatchResponse, BatchResponses
from flowspark.api.udf.handlers import BatchMapper
from flowspark.api.udf.types import DROP
from flowspark.api.udf.types import StreamMessage as Message
from flowspark.serve import BatchMapAsyncServer

__all__ = [
    "Message",
    "Datum",
    "DROP",
    "BatchMapAsyncServer",
    "BatchMapper",
    "BatchResponses",
    "BatchResponse",
]
