"""pynumaflow 0.14's ``pynumaflow.accumulator`` on flowspark (swap the import prefix).

>>> from datetime import datetime, timezone
>>> datum = Datum(
...     keys=["k"],
...     value=b"v",
...     event_time=datetime.fromtimestamp(1662998400, timezone.utc),
...     watermark=datetime.fromtimestamp(1662998460, timezone.utc),
...     id_="msg-1",
...     headers={"h": "1"},
... )
>>> message = Message.from_datum(datum)
>>> message.id, message.tags, message.event_time == datum.event_time
('msg-1', [], True)
>>> datum.watermark > datetime.fromtimestamp(-1)  # naive datetimes compare as UTC
True
"""

from flowspark.api.udf.handlers import Accumulator
from flowspark.api.udf.types import DROP, IntervalWindow, KeyedWindow
from flowspark.api.udf.types import AccumulatorDatum as Datum
from flowspark.api.udf.types import AccumulatorMessage as Message
from flowspark.serve import AccumulatorAsyncServer

__all__ = [
    "Message",
    "Datum",
    "IntervalWindow",
    "DROP",
    "AccumulatorAsyncServer",
    "KeyedWindow",
    "Accumulator",
]
