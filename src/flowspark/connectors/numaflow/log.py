"""Numaflow's ``log`` and ``blackhole`` sinks.

* :class:`LogOutput`: the ``log`` sink (one log record per message on stdout).
* :class:`BlackholeOutput`: the ``blackhole`` sink (writes nothing).

Both accept what every Numaflow sink accepts (see
:func:`~flowspark.runtime.numaflow.convert.sink_datum`): flowspark datums,
datum-like objects (``keys``, ``value``, ``event_time``, ``headers``, ``id``),
``(key, value)`` pairs and plain values (keys ``[]``, event time now).

>>> from datetime import datetime, timezone
>>> from flowspark.api.udf.types import Datum
>>> t = datetime(2022, 9, 12, 16, 0, tzinfo=timezone.utc)
>>> log_text(Datum(["a", "b"], b"hi", t, t, {"h": "1"}, id="v-1-0"))
'Payload - hi Keys - a,b EventTime - 1662998400000 Headers - h: 1,  ID - v-1-0'
"""

from __future__ import annotations

import json
import os
import sys
from datetime import UTC, datetime
from typing import Any

from flowspark.api.outputs import DynamicOutput, StatelessSink
from flowspark.runtime.numaflow.convert import sink_datum
from flowspark.shared.times import naive_as_utc_to_ms

__all__ = ["LogOutput", "BlackholeOutput", "log_text", "LOG_TARGET"]

LOG_TARGET = "numaflow_core::sinker::sink::log"
"""The tracing target of Numaflow's log sink records."""


def log_text(item: Any) -> str:
    """The text of Numaflow's log-sink record for one item (``core/sinker/sink/log.rs``)."""
    datum = sink_datum(item)
    headers = "".join(f"{k}: {v}, " for k, v in datum._headers.items())
    return (
        f"Payload - {datum.value.decode('utf-8', 'replace')} "
        f"Keys - {','.join(datum.keys)} "
        f"EventTime - {naive_as_utc_to_ms(datum.event_time)} "
        f"Headers - {headers} "
        f"ID - {datum.id}"
    )


def _log_timestamp() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class _LogSink(StatelessSink):
    def __init__(self, human: bool) -> None:
        self.human = human

    def write_batch(self, items: list[Any]) -> None:
        if not items:
            return
        lines = []
        for item in items:
            text = log_text(item)
            stamp = _log_timestamp()
            if self.human:
                lines.append(f"{stamp}  INFO {LOG_TARGET}: {text}")
            else:
                record = {
                    "timestamp": stamp,
                    "level": "INFO",
                    "message": text,
                    "target": LOG_TARGET,
                }
                lines.append(json.dumps(record, ensure_ascii=False, separators=(",", ":")))
        out = sys.stdout
        out.write("\n".join(lines) + "\n")
        out.flush()


class LogOutput(DynamicOutput):
    """Numaflow's ``log`` sink: one record per item on stdout, flushed per batch.

    The record's text is ``Payload - {value} Keys - {k1,k2} EventTime - {epoch ms}
    Headers - {k: v, }… ID - {id}``. It is printed as Numaflow's JSON log line
    ``{"timestamp":…,"level":"INFO","message":<text>,"target":"numaflow_core::sinker::sink::log"}``,
    or, when ``human`` is true (default: environment ``NUMAFLOW_DEBUG=true`` when
    the sink is built), in tracing's human format ``<timestamp>  INFO <target>: <text>``.
    """

    def __init__(self, vertex: str, human: bool | None = None) -> None:
        self.vertex = vertex
        self.human = human

    def build(self, worker_index: int, worker_count: int) -> StatelessSink:
        human = self.human
        if human is None:
            human = os.environ.get("NUMAFLOW_DEBUG", "").lower() == "true"
        return _LogSink(human)

    def __repr__(self) -> str:
        return f"LogOutput({self.vertex!r})"


# --------------------------------------------------------------------------- blackhole


class _BlackholeSink(StatelessSink):
    def write_batch(self, items: list[Any]) -> None:
        pass


class BlackholeOutput(DynamicOutput):
    """Numaflow's ``blackhole`` sink: acknowledges every item and writes nothing."""

    def __init__(self, vertex: str = "blackhole") -> None:
        self.vertex = vertex

    def build(self, worker_index: int, worker_count: int) -> StatelessSink:
        return _BlackholeSink()

    def __repr__(self) -> str:
        return f"BlackholeOutput({self.vertex!r})"
