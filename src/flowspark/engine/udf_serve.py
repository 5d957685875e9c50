"""``server.start()`` on flowspark: run a Numaflow UDF over datums read from stdin.

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
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from flowspark.api.udf.times import as_utc, utc_from_ms
from flowspark.api.udf.types import Datum

__all__ = ["serve", "parse_datum_line", "datum_json"]


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


def serve(server: Any, lines: Iterable[str] | None = None) -> None:
    """Run ``server``'s handler over datums from ``lines`` (stdin by default); print
    each output datum as a JSON line."""
    from flowspark.connectors.stdio import StdOutput
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingInput, run_main

    source = sys.stdin if lines is None else lines
    datums = [parse_datum_line(line, n) for n, line in enumerate(source, 1) if line.strip()]
    delay = _seconds("FLOWSPARK_UDF_WATERMARK_DELAY", 0)
    flow = Dataflow("udf")
    stream = flow.input("stdin", TestingInput(datums))
    if server.kind in ("map_stream", "map"):
        stream = stream.map_stream("udf", server)
    elif server.kind in ("reduce_stream", "reduce"):
        window = _seconds("FLOWSPARK_UDF_WINDOW", 60)
        stream = stream.reduce_stream("udf", server, window, watermark_delay=delay)
    elif server.kind == "accumulate":
        timeout = _seconds("FLOWSPARK_UDF_TIMEOUT", 10)
        stream = stream.accumulate("udf", server, timeout, watermark_delay=delay)
    else:
        raise ValueError(f"cannot serve a UDF of kind {server.kind!r}")
    stream.map("as_json", datum_json).output("stdout", StdOutput())
    run_main(flow)
