"""pynumaflow 0.14's ``pynumaflow.sourcetransformer`` on flowspark (swap the import prefix).

In a pipeline, a source's ``transformer`` runs the handler of the server its UDF
file starts. Run on its own, ``server.start()`` transforms datums from stdin
(JSON or plain lines, as for the other servers, see :mod:`flowspark.serve`)
and prints each output datum as a JSON line; no Spark is needed.

>>> from datetime import datetime, timezone
>>> def handler(keys, datum):
...     return Messages(Message(datum.value, datetime(2022, 1, 1, tzinfo=timezone.utc), keys))
>>> SourceTransformServer(handler).start_lines(['{"keys": ["k"], "value": "v", "id": "1"}'])
{"keys": ["k"], "value": "v", "tags": [], "event_time": "2022-01-01T00:00:00+00:00", ...}
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

from flowspark.api.udf import transform as _api
from flowspark.api.udf.servers import start_or_capture
from flowspark.api.udf.transform import DROP, Datum, Message, Messages, SourceTransformer
from flowspark.runtime.transform import TransformRunner
from flowspark.serve import datum_json, parse_datum_line

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


class _Serving:
    """``start()``: transform stdin's datums locally (instead of serving gRPC)."""

    def start(self) -> None:
        """Run the handler over datums from stdin; print each output as a JSON line."""
        start_or_capture(self, lambda: self.start_lines(sys.stdin))

    def start_lines(self, lines: Iterable[str]) -> None:
        """Like :meth:`start`, over ``lines`` instead of stdin."""
        run = TransformRunner(self)
        for number, line in enumerate(lines, 1):
            if line.strip():
                for out in run(parse_datum_line(line, number)):
                    print(datum_json(out))
        sys.stdout.flush()


class SourceTransformServer(_Serving, _api.SourceTransformServer):
    """pynumaflow's ``SourceTransformServer``: a SourceTransformer instance or a function."""


class SourceTransformAsyncServer(_Serving, _api.SourceTransformAsyncServer):
    """pynumaflow's ``SourceTransformAsyncServer``: a SourceTransformer or an async function."""


class SourceTransformMultiProcServer(_Serving, _api.SourceTransformMultiProcServer):
    """pynumaflow's ``SourceTransformMultiProcServer``: as SourceTransformServer."""
