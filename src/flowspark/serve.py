"""pynumaflow's servers on flowspark: ``server.start()`` runs the UDF on Spark.

The server classes take pynumaflow 0.14's constructor arguments (the settings
after the handler by keyword) and validate handlers as it does (see
:mod:`flowspark.api.udf.servers` for what they share).
This module sits above the engine: the api layer only records a server.


pynumaflow's servers serve gRPC to a Numaflow pod. On flowspark the same
``MapStreamAsyncServer(handler).start()`` runs the handler as a one-step flow on
embedded Spark instead: it reads datums from standard input until EOF, one per
line, and prints each output datum as a JSON line. So a UDF file written for
Numaflow can be tried locally unchanged::

    printf 'a,b\\nc\\n' | python my_map_stream_udf.py

Input lines are JSON objects ``{"keys": [...], "value": "...", "event_time":
<epoch ms or ISO-8601>, "headers": {...}, "id": "..."}`` (all fields optional)
or plain text (the value; no keys; stamped with the time it is read). Reduce
streams use fixed windows of ``FLOWSPARK_UDF_WINDOW`` seconds (default 60), the
accumulator a timeout of ``FLOWSPARK_UDF_TIMEOUT`` seconds (default 10); both
take ``FLOWSPARK_UDF_WATERMARK_DELAY`` seconds (default 0).

An accumulator reads ``FLOWSPARK_UDF_BATCH`` lines per micro-batch (default 1, as
the accumulator page's ``readBatchSize: 1``): each datum then carries the watermark
of the lines before it, so a sorter releases what those passed as it goes, as it
would on Numaflow (the whole input in one batch would carry one watermark for all).
A batch map hands its handler batches of at most ``FLOWSPARK_UDF_BATCH`` datums
(default 500, Numaflow's ``readBatchSize``).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any, Unpack

from flowspark.api.udf import sink as _sink
from flowspark.api.udf import transform as _transform
from flowspark.api.udf.servers import (
    AsyncServerOptions,
    NumaflowServer,
    PerKeyOptions,
    ServerOptions,
    handler_factory,
    set_server_options,
    start_or_capture,
)
from flowspark.api.udf.sink import Datum as SinkDatum
from flowspark.api.udf.sink import run_sink_handler
from flowspark.api.udf.times import as_utc, utc_from_ms
from flowspark.api.udf.types import Datum
from flowspark.connectors.numaflow.udsource import SourcerInput
from flowspark.connectors.stdio import StdOutput
from flowspark.dataflow import Dataflow
from flowspark.runtime.numaflow.transform import TransformRunner
from flowspark.testing import TestingInput, run_main

__all__ = [
    "serve",
    "parse_datum_line",
    "datum_json",
    "MapStreamAsyncServer",
    "BatchMapAsyncServer",
    "ReduceStreamAsyncServer",
    "AccumulatorAsyncServer",
    "MapServer",
    "MapAsyncServer",
    "ReduceAsyncServer",
    "SinkServer",
    "SinkAsyncServer",
    "SourceTransformServer",
    "SourceTransformAsyncServer",
    "SourceTransformMultiProcServer",
    "SourceAsyncServer",
]

MAP_SOCK_PATH = "/var/run/numaflow/map.sock"
MAP_STREAM_SOCK_PATH = "/var/run/numaflow/mapstream.sock"
BATCH_MAP_SOCK_PATH = "/var/run/numaflow/batchmap.sock"
REDUCE_SOCK_PATH = "/var/run/numaflow/reduce.sock"
REDUCE_STREAM_SOCK_PATH = "/var/run/numaflow/reducestream.sock"
ACCUMULATOR_SOCK_PATH = "/var/run/numaflow/accumulator.sock"
MAP_SERVER_INFO_FILE_PATH = "/var/run/numaflow/mapper-server-info"
REDUCE_SERVER_INFO_FILE_PATH = "/var/run/numaflow/reducer-server-info"
REDUCE_STREAM_SERVER_INFO_FILE_PATH = "/var/run/numaflow/reducestreamer-server-info"
ACCUMULATOR_SERVER_INFO_FILE_PATH = "/var/run/numaflow/accumulator-server-info"
SOURCE_SOCK_PATH = "/var/run/numaflow/source.sock"
SOURCE_SERVER_INFO_FILE_PATH = "/var/run/numaflow/sourcer-server-info"


def parse_datum_line(line: str, number: int) -> Datum:
    """One stdin line as a datum (JSON object or plain text).

    >>> parse_datum_line('{"keys": ["k"], "value": "hi", "event_time": 0}', 1).keys
    ['k']
    >>> parse_datum_line("plain text", 2).value
    b'plain text'
    """
    text = line.rstrip("\n")
    fields: Any = None
    if text.startswith("{"):
        try:
            fields = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"stdin line {number}: invalid JSON datum: {exc}") from None
    if not isinstance(fields, dict):
        now = as_utc(datetime.now(UTC), "Datum.event_time")
        return Datum([], text.encode("utf-8"), now, now, id=str(number))
    when = fields.get("event_time")
    if when is None:
        event_time = as_utc(datetime.now(UTC), "Datum.event_time")
    elif isinstance(when, (int, float)):
        event_time = utc_from_ms(int(when))
    else:
        event_time = as_utc(datetime.fromisoformat(str(when)), "Datum.event_time")
    value = fields.get("value", "")
    return Datum(
        [str(k) for k in fields.get("keys", [])],
        value.encode("utf-8") if isinstance(value, str) else bytes(value),
        event_time,
        event_time,
        {str(k): str(v) for k, v in (fields.get("headers") or {}).items()},
        id=str(fields.get("id", number)),
    )


def datum_json(datum: Datum) -> str:
    """An output datum as one JSON line (the value decoded as UTF-8 where it can be)."""
    return json.dumps(
        {
            "keys": datum.keys,
            "value": datum.value.decode("utf-8", "backslashreplace"),
            "tags": datum.tags,
            "event_time": datum.event_time.isoformat(),
            "watermark": datum.watermark.isoformat(),
            "id": datum.id,
        }
    )


def _seconds(name: str, default: float) -> timedelta:
    raw = os.environ.get(name)
    try:
        return timedelta(seconds=float(raw)) if raw else timedelta(seconds=default)
    except ValueError:
        raise ValueError(f"{name} must be a number of seconds; got {raw!r}") from None


def _count(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if not raw:
        return default
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"{name} must be a whole number of lines >= 1; got {raw!r}")
    return int(raw)


def serve(server: Any, lines: Iterable[str] | None = None) -> None:
    """Run ``server``'s handler over datums from ``lines`` (stdin by default); print
    each output datum as a JSON line."""
    source = sys.stdin if lines is None else lines
    datums = [parse_datum_line(line, n) for n, line in enumerate(source, 1) if line.strip()]
    delay = _seconds("FLOWSPARK_UDF_WATERMARK_DELAY", 0)
    flow = Dataflow("udf")
    source_input, epoch = TestingInput(datums), None
    if server.kind == "accumulate":  # each line its own micro-batch, with its watermark
        per_batch = _count("FLOWSPARK_UDF_BATCH", 1)
        source_input, epoch = TestingInput(datums, batch_size=per_batch), timedelta(0)
    stream = flow.input("stdin", source_input)
    if server.kind in ("map_stream", "map"):
        stream = stream.map_stream("udf", server)
    elif server.kind == "batch_map":
        stream = stream.batch_map("udf", server, _count("FLOWSPARK_UDF_BATCH", 500))
    elif server.kind in ("reduce_stream", "reduce"):
        window = _seconds("FLOWSPARK_UDF_WINDOW", 60)
        stream = stream.reduce_stream("udf", server, window, watermark_delay=delay)
    elif server.kind == "accumulate":
        timeout = _seconds("FLOWSPARK_UDF_TIMEOUT", 10)
        stream = stream.accumulate("udf", server, timeout, watermark_delay=delay)
    else:
        raise ValueError(f"cannot serve a UDF of kind {server.kind!r}")
    stream.map("as_json", datum_json).output("stdout", StdOutput())
    run_main(flow, epoch_interval=epoch)


class _Serving(NumaflowServer):
    """``start()``: run the UDF with flowspark's engine (instead of serving gRPC)."""

    def start(self) -> None:
        """Run the handler over datums from stdin on embedded Spark (see the module doc)."""
        start_or_capture(self, lambda: serve(self))

    def _shared(self, handler: Any, options: AsyncServerOptions) -> None:
        """Set up an async server whose one handler serves every key."""
        self._set_async_options(options)
        self.make_handler = handler_factory(handler, self.kind)


class MapStreamAsyncServer(_Serving):
    """pynumaflow's ``mapstreamer.MapStreamAsyncServer``: a MapStreamer instance or a function."""

    kind = "map_stream"
    default_paths = (MAP_STREAM_SOCK_PATH, MAP_SERVER_INFO_FILE_PATH)

    def __init__(self, map_stream_instance: Any, **options: Unpack[AsyncServerOptions]) -> None:
        self.map_stream_instance = map_stream_instance
        self._shared(map_stream_instance, options)


class BatchMapAsyncServer(_Serving):
    """pynumaflow's ``batchmapper.BatchMapAsyncServer``: a BatchMapper instance or an async
    function ``f(datums) -> BatchResponses``, called once per batch."""

    kind = "batch_map"
    default_paths = (BATCH_MAP_SOCK_PATH, MAP_SERVER_INFO_FILE_PATH)

    def __init__(self, batch_mapper_instance: Any, **options: Unpack[AsyncServerOptions]) -> None:
        self.batch_mapper_instance = batch_mapper_instance
        self._shared(batch_mapper_instance, options)


class ReduceStreamAsyncServer(_Serving):
    """pynumaflow's ``reducestreamer.ReduceStreamAsyncServer``: a ReduceStreamer subclass
    (a new instance per key and window) or a function."""

    kind = "reduce_stream"
    default_paths = (REDUCE_STREAM_SOCK_PATH, REDUCE_STREAM_SERVER_INFO_FILE_PATH)

    def __init__(self, reduce_stream_instance: Any, **options: Unpack[PerKeyOptions]) -> None:
        self.reduce_stream_handler = reduce_stream_instance
        self._per_key(reduce_stream_instance, options)


class AccumulatorAsyncServer(_Serving):
    """pynumaflow's ``accumulator.AccumulatorAsyncServer``: an Accumulator subclass
    (a new instance per key opening) or a function ``f(datums, output)``."""

    kind = "accumulate"
    default_paths = (ACCUMULATOR_SOCK_PATH, ACCUMULATOR_SERVER_INFO_FILE_PATH)

    def __init__(self, accumulator_instance: Any, **options: Unpack[PerKeyOptions]) -> None:
        self.accumulator_handler = accumulator_instance
        self._per_key(accumulator_instance, options)


class MapServer(_Serving):
    """pynumaflow's synchronous ``mapper.MapServer``: a Mapper instance or a function."""

    kind = "map"
    default_paths = (MAP_SOCK_PATH, MAP_SERVER_INFO_FILE_PATH)

    def __init__(self, mapper_instance: Any, **options: Unpack[ServerOptions]) -> None:
        self.mapper_instance = mapper_instance
        self._set_options(options)
        self.make_handler = handler_factory(mapper_instance, self.kind)


class MapAsyncServer(MapServer):
    """pynumaflow's ``mapper.MapAsyncServer``: a Mapper instance or an async function."""

    def __init__(self, mapper_instance: Any, **options: Unpack[AsyncServerOptions]) -> None:
        self.mapper_instance = mapper_instance
        self._shared(mapper_instance, options)


class ReduceAsyncServer(_Serving):
    """pynumaflow's ``reducer.ReduceAsyncServer``: a Reducer subclass or a function."""

    kind = "reduce"
    default_paths = (REDUCE_SOCK_PATH, REDUCE_SERVER_INFO_FILE_PATH)

    def __init__(self, reducer_instance: Any, **options: Unpack[PerKeyOptions]) -> None:
        self.reducer_handler = reducer_instance
        self._per_key(reducer_instance, options)


# -- pynumaflow's sinker servers -----------------------------------------------------


def _status(response: Any) -> str:
    if response.success:
        return "success"
    if response.fallback:
        return "fallback"
    if response.on_success:
        return "on_success"
    return "failure"


def response_json(response: Any) -> str:
    """One sink response as a JSON line."""
    message = getattr(response, "on_success_msg", None)
    return json.dumps(
        {
            "id": response.id,
            "status": _status(response),
            "err": response.err,
            "on_success": None
            if message is None
            else {
                "keys": message.keys,
                "value": message.value.decode("utf-8", "backslashreplace"),
            },
        }
    )


def serve_sink(server: Any, lines: Iterable[str] | None = None) -> None:
    """Run ``server``'s handler once over the datums of ``lines`` (stdin by default);
    print each response as a JSON line."""
    source = sys.stdin if lines is None else lines
    datums = []
    for number, line in enumerate(source, 1):
        if not line.strip():
            continue
        d = parse_datum_line(line, number)
        datums.append(SinkDatum(d.keys, d.id, d.value, d.event_time, d.watermark, d.headers))
    for response in run_sink_handler(server.handler, datums):
        print(response_json(response))
    sys.stdout.flush()


class _SinkServing:
    """``start()``: run the sink handler locally over stdin (instead of serving gRPC).

    It reads datums (JSON or plain lines, as for the other servers), calls the
    handler once with all of them and prints each response as a JSON line
    ``{"id", "status": "success" | "failure" | "fallback" | "on_success", "err",
    "on_success": {"keys", "value"} | null}``.

    >>> from flowspark.sinker import Response, Responses
    >>> def handler(datums):
    ...     return Responses(*(Response.as_success(d.id) for d in datums))
    >>> SinkServer(handler).start_lines(["hello", '{"id": "x", "value": "v"}'])
    {"id": "1", "status": "success", "err": null, "on_success": null}
    {"id": "x", "status": "success", "err": null, "on_success": null}
    """

    def start(self) -> None:
        """Run the handler over datums from stdin (see the module doc)."""
        start_or_capture(self, lambda: serve_sink(self))

    def start_lines(self, lines: Iterable[str]) -> None:
        """Like :meth:`start`, over ``lines`` instead of stdin."""
        serve_sink(self, lines)


class SinkServer(_SinkServing, _sink.SinkServer):
    """pynumaflow's ``sinker.SinkServer``: a Sinker instance or a function."""


class SinkAsyncServer(_SinkServing, _sink.SinkAsyncServer):
    """pynumaflow's ``sinker.SinkAsyncServer``: a Sinker instance or an async function."""


class _TransformServing:
    """``start()``: transform stdin's datums locally (instead of serving gRPC); each
    output datum is printed as a JSON line.

    >>> from datetime import datetime, timezone
    >>> from flowspark.sourcetransformer import Message, Messages
    >>> def handler(keys, datum):
    ...     return Messages(Message(datum.value, datetime(2022, 1, 1, tzinfo=timezone.utc), keys))
    >>> SourceTransformServer(handler).start_lines(['{"keys": ["k"], "value": "v", "id": "1"}'])
    {"keys": ["k"], "value": "v", "tags": [], "event_time": "2022-01-01T00:00:00+00:00", ...}
    """

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


class SourceTransformServer(_TransformServing, _transform.SourceTransformServer):
    """pynumaflow's ``SourceTransformServer``: a SourceTransformer instance or a function."""


class SourceTransformAsyncServer(_TransformServing, _transform.SourceTransformAsyncServer):
    """pynumaflow's ``SourceTransformAsyncServer``: a SourceTransformer or an async function."""


class SourceTransformMultiProcServer(_TransformServing, _transform.SourceTransformMultiProcServer):
    """pynumaflow's ``SourceTransformMultiProcServer``: as SourceTransformServer."""


# -- pynumaflow's sourcer server ----------------------------------------------------


def serve_source(server: SourceAsyncServer) -> None:
    """Read ``server``'s source on embedded Spark until Ctrl-C; print each datum as a
    JSON line (acked once its micro-batch is committed)."""
    flow = Dataflow("udsource")
    stream = flow.input("source", server)
    stream.map("as_json", datum_json).output("stdout", StdOutput())
    run_main(flow)


class SourceAsyncServer(SourcerInput):
    """pynumaflow's ``sourcer.SourceAsyncServer``: a ``Sourcer`` instance.

    It is a flowspark input too: ``flow.input("in", SourceAsyncServer(sourcer))``
    (Numaflow's default ``readBatchSize`` 500 and ``readTimeout`` 1 s; use
    :class:`~flowspark.connectors.numaflow.SourcerInput` to choose them). ``start()``
    reads the source until Ctrl-C and prints each datum as a JSON line; in a
    pipeline it only records the server (the ``udsource`` vertex then reads its
    ``sourcer_instance``).
    """

    kind = "source"

    def __init__(self, sourcer_instance: Any, **options: Unpack[AsyncServerOptions]) -> None:
        paths = (SOURCE_SOCK_PATH, SOURCE_SERVER_INFO_FILE_PATH)
        set_server_options(self, options, paths, AsyncServerOptions.__optional_keys__)
        self.shutdown_callback = options.get("shutdown_callback")
        super().__init__(sourcer_instance)
        self.sourcer_instance = sourcer_instance

    def start(self) -> None:
        """Read the source on embedded Spark and print its datums (see the class doc)."""
        start_or_capture(self, lambda: serve_source(self))
