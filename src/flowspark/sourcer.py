"""pynumaflow 0.14's ``pynumaflow.sourcer`` on flowspark (swap the import prefix).

The data types and the ``Sourcer`` ABC come from :mod:`flowspark.api.udf.source`;
``SourceAsyncServer`` (a flowspark input too, whose ``start()`` reads the source
and prints its datums) from :mod:`flowspark.serve`. In a pipeline, a
``source.udsource`` vertex reads the ``Sourcer`` its UDF file starts. How reads,
acks and pending map onto Spark's micro-batches:
:mod:`flowspark.connectors.numaflow.udsource`.
"""

# Every name the API module exports, and the server.
from flowspark.api.udf.source import *  # noqa: F403
from flowspark.api.udf.source import __all__ as _source_names
from flowspark.serve import SourceAsyncServer

__all__ = [*_source_names, "SourceAsyncServer"]
