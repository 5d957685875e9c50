"""pynumaflow 0.14's ``pynumaflow.sourcetransformer`` on flowspark (swap the import prefix).

The data types and the ``SourceTransformer`` ABC come from
:mod:`flowspark.api.udf.transform`; the servers' ``start()`` (try a UDF file
locally over stdin, see :mod:`flowspark.serve`) from :mod:`flowspark.serve`. In
a pipeline, a source's ``transformer`` runs the handler of the server its UDF
file starts.
"""

from flowspark.api.udf.transform import DROP, Datum, Message, Messages, SourceTransformer
from flowspark.serve import (
    SourceTransformAsyncServer,
    SourceTransformMultiProcServer,
    SourceTransformServer,
)

__all__ = [
    "Message",
    "Messages",
    "Datum",
    "DROP",
    "SourceTransformServer",
    "SourceTransformer",
    "SourceTransformMultiProcServer",
    "SourceTransformAsyncServer",
]
