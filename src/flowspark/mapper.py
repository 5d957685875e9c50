"""pynumaflow 0.14's ``pynumaflow.mapper`` on flowspark (swap the import prefix).

User/system metadata are not supported.

>>> from datetime import datetime, timezone
>>> now = datetime.fromtimestamp(1662998400, timezone.utc)
>>> datum = Datum(keys=["k"], value=b"hello", event_time=now, watermark=now)
>>> out = Messages(Message(datum.value.upper(), keys=datum.keys))
>>> len(out), out[0].value
(1, b'HELLO')
"""

from flowspark.api.udf.handlers import Mapper
from flowspark.api.udf.types import DROP, Messages
from flowspark.api.udf.types import MapStreamDatum as Datum
from flowspark.api.udf.types import StreamMessage as Message
from flowspark.serve import MapAsyncServer, MapServer

__all__ = ["Message", "Messages", "Datum", "DROP", "Mapper", "MapServer", "MapAsyncServer"]
