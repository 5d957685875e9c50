"""pynumaflow 0.14's ``pynumaflow.mapstreamer`` on flowspark (swap the import prefix).

>>> from datetime import datetime, timezone
>>> now = datetime.fromtimestamp(1662998400, timezone.utc)
>>> datum = Datum(keys=["k"], value=b"a,b", event_time=now, watermark=now)
>>> Messages(*(Message(part, keys=datum.keys) for part in datum.value.split(b",")))
[Message(value=b'a', keys=['k'], tags=[]), Message(value=b'b', keys=['k'], tags=[])]
>>> Message.to_drop().tags == [DROP]
True
"""

from flowspark.api.udf.handlers import MapStreamer
from flowspark.api.udf.types import DROP, Messages
from flowspark.api.udf.types import MapStreamDatum as Datum
from flowspark.api.udf.types import StreamMessage as Message
from flowspark.serve import MapStreamAsyncServer

__all__ = ["Message", "Messages", "Datum", "DROP", "MapStreamAsyncServer", "MapStreamer"]
