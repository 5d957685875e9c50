"""pynumaflow 0.14's ``pynumaflow.reducer`` on flowspark (swap the import prefix).

>>> from datetime import datetime, timezone
>>> start, end = datetime.fromtimestamp(0, timezone.utc), datetime.fromtimestamp(60, timezone.utc)
>>> md = Metadata(IntervalWindow(start, end))
>>> datums = [Datum(["k"], b"x", md.interval_window.start, md.interval_window.start)] * 3
>>> Messages(Message(str(len(datums)).encode(), keys=["k"]))[0].value
b'3'
"""

from flowspark.api.udf.handlers import Reducer
from flowspark.api.udf.types import DROP, IntervalWindow, Messages, Metadata
from flowspark.api.udf.types import MapStreamDatum as Datum
from flowspark.api.udf.types import StreamMessage as Message
from flowspark.serve import ReduceAsyncServer

__all__ = [
    "Message",
    "Messages",
    "Datum",
    "IntervalWindow",
    "Metadata",
    "DROP",
    "Reducer",
    "ReduceAsyncServer",
]
