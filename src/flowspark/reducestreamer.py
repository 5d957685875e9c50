"""pynumaflow 0.14's ``pynumaflow.reducestreamer`` on flowspark (swap the import prefix).

Like pynumaflow, there is no ``Messages`` here: results go to ``output.put``.

>>> from datetime import datetime, timezone
>>> window = ReduceWindow(
...     datetime.fromtimestamp(60, timezone.utc), datetime.fromtimestamp(120, timezone.utc)
... )
>>> md = Metadata(window.window)
>>> datum = Datum(["k"], b"1", datetime(1970, 1, 1, 0, 1, 5), datetime(1970, 1, 1, 0, 1, 0))
>>> md.interval_window.start <= datum.event_time < md.interval_window.end
True
>>> Message(b"counter:1", keys=datum.keys).keys
['k']
"""

from flowspark.api.udf.handlers import ReduceStreamer
from flowspark.api.udf.types import DROP, IntervalWindow, Metadata, ReduceWindow
from flowspark.api.udf.types import ReduceStreamDatum as Datum
from flowspark.api.udf.types import StreamMessage as Message
from flowspark.serve import ReduceStreamAsyncServer

__all__ = [
    "Message",
    "Datum",
    "IntervalWindow",
    "Metadata",
    "DROP",
    "ReduceStreamAsyncServer",
    "ReduceStreamer",
    "ReduceWindow",
]
