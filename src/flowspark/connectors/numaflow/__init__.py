"""Numaflow's built-in source and sinks, and the user-defined sink.

* :class:`GeneratorInput` (:mod:`.generator`): the ``generator`` source (a
  bytewax-style :class:`~flowspark.api.inputs.PartitionedInput` of flowspark
  datums, paced like Numaflow's Rust generator: up to ``rpu`` messages per
  ``duration`` tick).
* :class:`LogOutput` (:mod:`.log`): the ``log`` sink (one log record per message
  on stdout).
* :class:`BlackholeOutput` (:mod:`.log`): the ``blackhole`` sink (writes nothing).
* :class:`UdSinkOutput` (:mod:`.udsink`): a ``udsink`` run by a pynumaflow-API
  ``Sinker`` (or function), with Numaflow's ``retryStrategy``
  (:class:`RetryPolicy`), ``fallback`` and ``onSuccess`` sinks.
* :class:`SourcerInput` (:mod:`.udsource`): a ``udsource``, a pynumaflow-API
  ``Sourcer`` read per micro-batch and acked once Spark commits.
* The HTTP source: :mod:`flowspark.connectors.numaflow.http`.

Sinks accept flowspark datums, datum-like objects (``keys``, ``value``,
``event_time``, ``headers``, ``id``), ``(key, value)`` pairs and plain values
(keys ``[]``, event time now): see
:func:`~flowspark.runtime.numaflow.convert.sink_datum`.
"""

from flowspark.connectors.numaflow.generator import MAX_KEY_COUNT, GeneratorInput
from flowspark.connectors.numaflow.log import LOG_TARGET, BlackholeOutput, LogOutput, log_text
from flowspark.connectors.numaflow.udsink import RetryPolicy, SinkError, UdSinkOutput
from flowspark.connectors.numaflow.udsource import SourcerInput, UdSourceError

__all__ = [
    "GeneratorInput",
    "LogOutput",
    "BlackholeOutput",
    "UdSinkOutput",
    "SourcerInput",
    "UdSourceError",
    "RetryPolicy",
    "SinkError",
    "log_text",
    "LOG_TARGET",
    "MAX_KEY_COUNT",
]
