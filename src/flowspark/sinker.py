"""pynumaflow 0.14's ``pynumaflow.sinker`` on flowspark (swap the import prefix).

The data types and the ``Sinker`` ABC come from :mod:`flowspark.api.udf.sink`;
the servers' ``start()`` (try a UDF file locally over stdin, see
:mod:`flowspark.serve`) from :mod:`flowspark.serve`. Inside a pipeline run,
``start()`` only records the server (the vertex then runs its ``.handler``).
"""

from flowspark.api.udf.sink import Datum, Message, Response, Responses, Sinker
from flowspark.serve import SinkAsyncServer, SinkServer

__all__ = [
    "Message",
    "Response",
    "Responses",
    "Datum",
    "Sinker",
    "SinkAsyncServer",
    "SinkServer",
]
