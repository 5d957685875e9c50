"""Numaflow's HTTP source: an HTTP(S) server that journals every event durably, and
the flowspark input that reads the journal.

flowspark parses HTTP itself so one fsync can cover many requests, each answered once durable.

* :mod:`.server`: :class:`HttpServer`, Numaflow's endpoints, auth, ids, dedup
  and the group commit (what a 200 means);
* :mod:`.journal`: the on-disk journal, the only thing the server and the input
  share (its format and guarantees);
* :mod:`.wire`: HTTP/1.1 request parsing and replies (no Numaflow knowledge);
* :mod:`.fsync`: the fsync helper process (or thread);
* :mod:`.input`: :class:`HttpInput`, read by Spark's Python workers.
"""

from flowspark.connectors.numaflow.http.input import HttpInput
from flowspark.connectors.numaflow.http.journal import JournalRecord, read_journal
from flowspark.connectors.numaflow.http.server import (
    DEFAULT_HOST,
    DEFAULT_PORT,
    HOST_ENV,
    PORT_ENV,
    HttpRoute,
    HttpServer,
    resolve_address,
)

__all__ = [
    "HttpRoute",
    "HttpServer",
    "HttpInput",
    "JournalRecord",
    "read_journal",
    "resolve_address",
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "HOST_ENV",
    "PORT_ENV",
]
