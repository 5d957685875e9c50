"""Numaflow's built-in source and sinks, and the user-defined sink.

* :class:`GeneratorInput`: the ``generator`` source (a bytewax-style
  :class:`~flowspark.api.inputs.PartitionedInput` of flowspark datums, paced like
  Numaflow's Rust generator: up to ``rpu`` messages per ``duration`` tick).
* :class:`LogOutput`: the ``log`` sink (one log record per message on stdout).
* :class:`BlackholeOutput`: the ``blackhole`` sink (writes nothing).
* :class:`UdSinkOutput`: a ``udsink`` run by a pynumaflow-API ``Sinker`` (or
  function), with Numaflow's ``retryStrategy`` (:class:`RetryPolicy`),
  ``fallback`` and ``onSuccess`` sinks.

Sinks accept flowspark datums, datum-like objects (``keys``, ``value``,
``event_time``, ``headers``, ``id``), ``(key, value)`` pairs and plain values
(keys ``[]``, event time now).

>>> from datetime import datetime, timezone
>>> from flowspark.api.udf.types import Datum
>>> t = datetime(2022, 9, 12, 16, 0, tzinfo=timezone.utc)
>>> log_text(Datum(["a", "b"], b"hi", t, t, {"h": "1"}, id="v-1-0"))
'Payload - hi Keys - a,b EventTime - 1662998400000 Headers - h: 1,  ID - v-1-0'
"""

from __future__ import annotations

import json
import logging
import os
import random
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from flowspark.api.inputs import PartitionedInput, StatefulSource
from flowspark.api.outputs import DynamicOutput, Output, StatelessSink
from flowspark.api.udf.sink import Datum as SinkDatum
from flowspark.api.udf.sink import run_sink_handler, sink_handler
from flowspark.api.udf.times import UTCDateTime, as_utc, to_ms, utc_from_ms
from flowspark.api.udf.types import Datum

__all__ = [
    "GeneratorInput",
    "LogOutput",
    "BlackholeOutput",
    "UdSinkOutput",
    "RetryPolicy",
    "SinkError",
    "log_text",
]

_LOGGER = logging.getLogger(__name__)

MAX_KEY_COUNT = 255
"""Numaflow caps the generator's ``keyCount`` at ``u8::MAX``."""

LOG_TARGET = "numaflow_core::sinker::sink::log"
"""The tracing target of Numaflow's log sink records."""

_EPOCH = utc_from_ms(0)
_NS_PER_S = 1_000_000_000
# The longest single backoff sleep (Numaflow's would saturate; this keeps sleep() valid).
_MAX_SLEEP_SECONDS = 24 * 3600.0


class SinkError(RuntimeError):
    """A Numaflow sink could not write a batch (Numaflow stops the vertex on it)."""


def _as_timedelta(value: Any, name: str, default: timedelta) -> timedelta:
    """A duration argument: a timedelta, a number of seconds, or ``None`` (the default)."""
    if value is None:
        return default
    if isinstance(value, timedelta):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return timedelta(seconds=value)
    raise TypeError(f"{name} must be a timedelta or a number of seconds; got {value!r:.80}")


def _utc_from_ns(ns: int) -> UTCDateTime:
    return _EPOCH + timedelta(microseconds=ns // 1000)


# ------------------------------------------------------------------------------ generator


class GeneratorInput(PartitionedInput):
    """Numaflow's ``generator`` source: one part per replica (named ``str(replica)``).

    Per ``duration`` tick it emits up to ``rpu`` messages, in batches of
    ``min(rpu, read_batch_size)``; a tick missed because nobody asked is skipped,
    not made up in a burst. ``key_count`` is capped at 255 and at ``rpu``, and
    ``rpu`` is floored to a multiple of it; keys ``key-0 … key-{n-1}`` go round
    robin, one per message (none when ``key_count`` is 0). Event time is now minus
    a random whole number of seconds below ``jitter``. The payload is
    ``value_blob`` verbatim (bytes; a ``str`` is base64-decoded) or the JSON
    ``{"id":"<now_ns>-<replica>","value":<value or event-time ns>}`` with
    ``"padding"``: ``msg_size - 8`` random byte values when ``msg_size > 8``.

    Items are flowspark :class:`~flowspark.api.udf.types.Datum` s with headers
    ``{}``, watermark = event time and id = the offset ``"<now_ns>-<replica>"``.
    ``snapshot()`` is the number of messages emitted so far (a resumed part goes
    on with the round robin). ``limit`` (a flowspark extension, for tests and
    benchmarks) ends the part after that many messages in all.
    """

    def __init__(
        self,
        vertex: str,
        rpu: int = 5,
        duration: timedelta = timedelta(seconds=1),
        msg_size: int = 8,
        key_count: int = 0,
        value: int | None = None,
        jitter: timedelta = timedelta(0),
        value_blob: bytes | None = None,
        read_batch_size: int = 500,
        replica: int = 0,
        limit: int | None = None,
    ) -> None:
        rpu = 5 if rpu is None else rpu
        msg_size = 8 if msg_size is None else msg_size
        key_count = 0 if key_count is None else key_count
        read_batch_size = 500 if read_batch_size is None else read_batch_size
        for name, number, least in (
            ("rpu", rpu, 1),
            ("msg_size", msg_size, 0),
            ("key_count", key_count, 0),
            ("read_batch_size", read_batch_size, 1),
            ("replica", replica, 0),
        ):
            if not isinstance(number, int) or isinstance(number, bool) or number < least:
                raise ValueError(
                    f'generator "{vertex}": {name} must be an int >= {least}; got {number!r}'
                )
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            raise TypeError(f'generator "{vertex}": value must be an int; got {value!r:.80}')
        if limit is not None and (not isinstance(limit, int) or limit < 0):
            raise ValueError(f'generator "{vertex}": limit must be an int >= 0; got {limit!r}')
        self.duration = _as_timedelta(duration, "duration", timedelta(seconds=1))
        if self.duration <= timedelta(0):
            raise ValueError(f'generator "{vertex}": duration must be positive')
        self.jitter = _as_timedelta(jitter, "jitter", timedelta(0))
        if self.jitter < timedelta(0):
            raise ValueError(f'generator "{vertex}": jitter must not be negative')
        if isinstance(value_blob, str):
            import base64
            import binascii

            try:
                value_blob = base64.b64decode(value_blob, validate=True)
            except (binascii.Error, ValueError) as exc:
                raise ValueError(
                    f'generator "{vertex}": valueBlob is not valid base64: {exc}'
                ) from None
        elif value_blob is not None:
            value_blob = bytes(value_blob)
        self.vertex = vertex
        self.requested_rpu = rpu
        self.key_count = min(key_count, MAX_KEY_COUNT, rpu)
        self.rpu = rpu - rpu % self.key_count if self.key_count else rpu
        self.batch_size = min(self.rpu, read_batch_size)
        self.msg_size = msg_size
        self.value = value
        self.value_blob = value_blob or None
        self.read_batch_size = read_batch_size
        self.replica = replica
        self.limit = limit

    def list_parts(self) -> list[str]:
        return [str(self.replica)]

    def build_part(self, for_part: str, resume_state: Any | None) -> StatefulSource:
        return _GeneratorPart(self, int(resume_state or 0))

    def __repr__(self) -> str:
        return (
            f"GeneratorInput({self.vertex!r}, rpu={self.rpu}, duration={self.duration}, "
            f"key_count={self.key_count}, replica={self.replica}, limit={self.limit})"
        )


class _GeneratorPart(StatefulSource):
    """One replica of a generator. ``clock`` (nanoseconds since the epoch) can be
    replaced to drive it in tests."""

    def __init__(
        self,
        config: GeneratorInput,
        emitted: int,
        clock: Callable[[], int] = time.time_ns,
    ) -> None:
        self.config = config
        self.emitted = emitted
        self.clock = clock
        self._period_ns = max(1, config.duration // timedelta(microseconds=1) * 1000)
        self._jitter_secs = max(int(config.jitter.total_seconds()), 1)
        self._start_ns: int | None = None
        self._next_tick_ns = 0
        self._used = 0
        self._last_ns = 0
        self._rng = random.Random()

    def _limit_reached(self) -> bool:
        limit = self.config.limit
        return limit is not None and self.emitted >= limit

    def next_batch(self) -> list[Datum]:
        if self._limit_reached():
            raise StopIteration
        cfg = self.config
        now = self.clock()
        if self._start_ns is None:  # the first tick fires at once
            self._start_ns = now
            self._next_tick_ns = now + self._period_ns
            self._used = 0
        elif now >= self._next_tick_ns:  # a new tick; missed ones are skipped
            ticks = (now - self._start_ns) // self._period_ns + 1
            self._next_tick_ns = self._start_ns + ticks * self._period_ns
            self._used = 0
        if self._used >= cfg.rpu:
            return []
        count = min(cfg.rpu - self._used, cfg.batch_size)
        if cfg.limit is not None:
            count = min(count, cfg.limit - self.emitted)
        self._used += count
        return [self._message() for _ in range(count)]

    def next_awake(self) -> datetime | None:
        if self._start_ns is None or self._limit_reached() or self._used < self.config.rpu:
            return None
        return _utc_from_ns(self._next_tick_ns)

    def snapshot(self) -> int:
        return self.emitted

    def _message(self) -> Datum:
        cfg = self.config
        now = max(self.clock(), self._last_ns + 1)  # unique offsets even on a coarse clock
        self._last_ns = now
        offset = f"{now}-{cfg.replica}"
        event_ns = now - self._rng.randrange(self._jitter_secs) * _NS_PER_S
        event_time = _utc_from_ns(event_ns)
        if cfg.value_blob is not None:
            payload = cfg.value_blob
        else:
            data: dict[str, Any] = {
                "id": offset,
                "value": cfg.value if cfg.value is not None else event_ns,
            }
            if cfg.msg_size > 8:
                data["padding"] = list(self._rng.randbytes(cfg.msg_size - 8))
            payload = json.dumps(data, separators=(",", ":")).encode()
        keys = [f"key-{self.emitted % cfg.key_count}"] if cfg.key_count else []
        self.emitted += 1
        return Datum._make(keys, payload, event_time, event_time, {}, offset, [])


# ------------------------------------------------------------------------------- items


def _as_bytes(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    return str(value).encode("utf-8")


def _is_datum_like(item: Any) -> bool:
    return hasattr(item, "value") and hasattr(item, "keys") and not isinstance(item, dict)


def as_datum(item: Any, now: UTCDateTime | None = None) -> Datum:
    """A sink's item as a flowspark datum: datums as they are; datum-like objects
    field by field; ``(key, value)`` pairs with keys ``[key]``; any other value with
    keys ``[]`` (bytes as they are, ``str`` as UTF-8, others as ``str(value)``).
    Missing times are ``now``; a missing id is ``""``.
    """
    if isinstance(item, Datum):
        return item
    if now is None:
        now = as_utc(datetime.now(UTC), "now")
    if isinstance(item, tuple) and len(item) == 2 and not _is_datum_like(item):
        key, value = item
        if _is_datum_like(value):
            return as_datum(value, now)
        keys = [] if key is None else [str(key)]
        return Datum._make(keys, _as_bytes(value), now, now, {}, "", [])
    if not _is_datum_like(item):
        return Datum._make([], _as_bytes(item), now, now, {}, "", [])
    raw_time = getattr(item, "event_time", None)
    event_time = now if raw_time is None else as_utc(raw_time, "Datum.event_time")
    raw_wm = getattr(item, "watermark", None)
    watermark = event_time if raw_wm is None else as_utc(raw_wm, "Datum.watermark")
    headers = getattr(item, "headers", None) or {}
    return Datum._make(
        [str(k) for k in (item.keys or [])],
        _as_bytes(item.value if item.value is not None else b""),
        event_time,
        watermark,
        {str(k): str(v) for k, v in dict(headers).items()},
        str(getattr(item, "id", "") or ""),
        list(getattr(item, "tags", None) or []),
    )


# --------------------------------------------------------------------------------- log


def log_text(item: Any) -> str:
    """The text of Numaflow's log-sink record for one item (``core/sinker/sink/log.rs``)."""
    datum = as_datum(item)
    headers = "".join(f"{k}: {v}, " for k, v in datum._headers.items())
    return (
        f"Payload - {datum.value.decode('utf-8', 'replace')} "
        f"Keys - {','.join(datum.keys)} "
        f"EventTime - {to_ms(datum.event_time)} "
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


# ------------------------------------------------------------------------------ udsink

_ON_FAILURE = ("retry", "fallback", "drop")


@dataclass(frozen=True)
class RetryPolicy:
    """A sink's ``retryStrategy``: how failed responses are retried.

    After a batch, the datums answered *failure* are sent again after
    ``interval × factor^(n-1)`` (the n-th retry; times a random factor in
    ``[1 - jitter, 1 + jitter]``, at most ``cap``), at most ``steps`` times
    (``None``: without end, Numaflow's default). Still failing then:
    ``on_failure`` ``retry`` is an error, ``fallback`` writes them to the fallback
    sink, ``drop`` drops them. ``None`` fields take Numaflow's defaults.

    >>> [round(d, 3) for d in RetryPolicy(interval=0.1, steps=4, factor=2, cap=0.3).delays()]
    [0.1, 0.2, 0.3, 0.3]
    """

    on_failure: str = "retry"
    interval: timedelta = timedelta(milliseconds=1)
    steps: int | None = None
    factor: float = 1.0
    cap: timedelta | None = None
    jitter: float = 0.0

    def __post_init__(self) -> None:
        on_failure = self.on_failure or "retry"
        if on_failure not in _ON_FAILURE:
            raise ValueError(
                f"retryStrategy.onFailure must be one of {', '.join(_ON_FAILURE)}; "
                f"got {on_failure!r}"
            )
        interval = _as_timedelta(self.interval, "interval", timedelta(milliseconds=1))
        cap = None if self.cap is None else _as_timedelta(self.cap, "cap", timedelta(0))
        factor = 1.0 if self.factor is None else float(self.factor)
        jitter = 0.0 if self.jitter is None else float(self.jitter)
        if self.steps is not None and (not isinstance(self.steps, int) or self.steps == 0):
            raise ValueError("steps in backoff strategy cannot be 0")
        if self.steps is not None and self.steps < 0:
            raise ValueError(f"steps in backoff strategy must be positive; got {self.steps}")
        if factor < 1:
            raise ValueError("factor in backoff strategy cannot be less than 1")
        if cap is not None and cap < max(interval, timedelta(milliseconds=1)):
            raise ValueError("cap in backoff strategy cannot be less than interval")
        if not 0 <= jitter < 1:
            raise ValueError("jitter in backoff strategy should be between 0 and 1")
        object.__setattr__(self, "on_failure", on_failure)
        object.__setattr__(self, "interval", interval)
        object.__setattr__(self, "cap", cap)
        object.__setattr__(self, "factor", factor)
        object.__setattr__(self, "jitter", jitter)

    def delays(self) -> Iterator[float]:
        """The sleeps (seconds) before each retry, ``steps`` of them."""
        base = self.interval.total_seconds()
        cap = None if self.cap is None else self.cap.total_seconds()
        attempt = 0
        while self.steps is None or attempt < self.steps:
            attempt += 1
            delay = base
            if self.jitter:
                delay *= random.uniform(1 - self.jitter, 1 + self.jitter)
            if cap is not None:
                delay = min(delay, cap)
            yield min(delay, _MAX_SLEEP_SECONDS)
            base = min(base * self.factor, _MAX_SLEEP_SECONDS)


_DEFAULT_RETRY = RetryPolicy()

_NO_FALLBACK_SINK = (
    "Response contains fallback messages but no fallback sink is configured. "
    "Please update the spec to configure fallback sink "
    "https://numaflow.numaproj.io/user-guide/sinks/fallback/"
)
_NO_ON_SUCCESS_SINK = (
    "Response contains OnSuccess messages but no OnSuccess sink is configured. "
    "Please update the spec to configure on-success sink "
    "https://numaflow.numaproj.io/user-guide/sinks/on-success/"
)
_FALLBACK_IN_ROLE = {
    "fallback": (
        "Response in fallback sink contains fallback messages. "
        "Specifying fallback status in fallback sink is not allowed."
    ),
    "on_success": (
        "OnSuccess response contains fallback messages. "
        "Specifying fallback status in OnSuccess response is not allowed."
    ),
}
_FAILED_IN_ROLE = {
    "primary": "Failed to write messages after retries",
    "fallback": "Failed to write messages to fallback sink after retries",
    "on_success": "Failed to write messages to on_success sink after retries",
}


class _UdSinkWriter(StatelessSink):
    """Writes batches through a sink handler; routes fallback/onSuccess answers."""

    def __init__(
        self,
        output: UdSinkOutput,
        role: str,
        fallback: StatelessSink | None,
        on_success: StatelessSink | None,
    ) -> None:
        self.handler = output.handler
        self.vertex = output.vertex
        self.retry = output.retry or _DEFAULT_RETRY
        self.role = role
        self.fallback = fallback
        self.on_success = on_success
        self.sleep: Callable[[float], None] = time.sleep
        self._batches = 0

    def _where(self) -> str:
        role = "" if self.role == "primary" else f" ({self.role.replace('_', '-')} sink)"
        return f'udsink "{self.vertex}"{role}'

    def write_batch(self, items: list[Any]) -> None:
        if not items:
            return
        self._batches += 1
        now = as_utc(datetime.now(UTC), "now")
        records: list[Datum] = []
        for index, item in enumerate(items):
            datum = as_datum(item, now)
            if not datum.id:  # ids match responses to datums: make one up
                datum = Datum._make(
                    datum._keys,
                    datum._value,
                    datum._event_time,
                    datum._watermark,
                    datum._headers,
                    f"{self.vertex}-{self._batches}-{index}",
                    datum._tags,
                )
            records.append(datum)
        fallback_items, on_success_items = self._write_with_retry(records)
        if fallback_items:
            if self.role in _FALLBACK_IN_ROLE:
                raise SinkError(f"{self._where()}: {_FALLBACK_IN_ROLE[self.role]}")
            if self.fallback is None:
                raise SinkError(f"{self._where()}: {_NO_FALLBACK_SINK}")
            self.fallback.write_batch(fallback_items)
        if on_success_items and self.role == "primary":
            if self.on_success is None:
                raise SinkError(f"{self._where()}: {_NO_ON_SUCCESS_SINK}")
            self.on_success.write_batch(on_success_items)

    def _write_with_retry(self, records: list[Datum]) -> tuple[list[Datum], list[Datum]]:
        """Call the handler until no datum fails (or retries run out); return the
        datums for the fallback sink and the messages for the onSuccess sink."""
        pending = records
        fallback: list[Datum] = []
        on_success: list[Datum] = []
        delays = self.retry.delays()
        attempt = 0
        errors: dict[str, int] = {}
        while True:
            sink_datums = [
                SinkDatum(d._keys, d._id, d._value, d._event_time, d._watermark, d.headers)
                for d in pending
            ]
            responses: dict[str, Any] = {}
            for response in run_sink_handler(self.handler, sink_datums):
                responses[str(response.id)] = response
            failed: list[Datum] = []
            errors = {}
            for datum in pending:
                response = responses.get(datum.id)
                if response is None:
                    raise SinkError(
                        f"{self._where()}: the sink handler returned no response for "
                        f"message id {datum.id!r}"
                    )
                if response.success:
                    continue
                if response.fallback:
                    fallback.append(datum)
                elif response.on_success:
                    on_success.append(self._on_success_datum(datum, response.on_success_msg))
                else:
                    failed.append(datum)
                    err = str(response.err)
                    errors[err] = errors.get(err, 0) + 1
            pending = failed
            if not pending:
                break
            delay = next(delays, None)
            if delay is None:
                if self.retry.on_failure == "fallback":
                    fallback.extend(pending)
                    pending = []
                elif self.retry.on_failure == "drop":
                    _LOGGER.warning(
                        "%s: retries exhausted, dropping %d messages (errors: %s)",
                        self._where(),
                        len(pending),
                        errors,
                    )
                    pending = []
                break
            attempt += 1
            if attempt & (attempt - 1) == 0:  # attempts 1, 2, 4, 8, …
                _LOGGER.warning(
                    "%s: retry %d of %d failed messages (errors: %s)",
                    self._where(),
                    attempt,
                    len(pending),
                    errors,
                )
            self.sleep(delay)
        if pending:
            raise SinkError(
                f"{self._where()}: {_FAILED_IN_ROLE[self.role]} "
                f"({len(pending)} messages after {attempt} retries; errors: {errors})"
            )
        return fallback, on_success

    @staticmethod
    def _on_success_datum(datum: Datum, message: Any) -> Datum:
        """What goes to the onSuccess sink: the message's value and keys on the
        datum's times, headers and id, or the datum itself when there is no message."""
        if message is None:
            return datum
        return Datum._make(
            [str(k) for k in (message.keys or [])],
            _as_bytes(message.value if message.value is not None else b""),
            datum._event_time,
            datum._watermark,
            datum._headers,
            datum._id,
            [],
        )

    def close(self) -> None:
        for child in (self.fallback, self.on_success):
            if child is not None:
                child.close()


def _check_child(output: Any, what: str, vertex: str) -> None:
    if output is None:
        return
    if not isinstance(output, DynamicOutput):
        raise TypeError(
            f'udsink "{vertex}": the {what} sink must be a DynamicOutput (log, blackhole, '
            f"udsink …); got {output!r:.80}"
        )
    if isinstance(output, UdSinkOutput) and (
        output.fallback is not None or output.on_success is not None
    ):
        raise ValueError(
            f'udsink "{vertex}": a {what} sink cannot have a fallback or onSuccess sink of its own'
        )


class UdSinkOutput(DynamicOutput):
    """A Numaflow ``udsink``: each batch goes to ``handler`` as pynumaflow sink datums.

    ``handler`` is a pynumaflow-API ``Sinker`` instance, a function
    ``handler(datums: Iterator[Datum]) -> Responses``, an async one taking an
    ``AsyncIterable[Datum]``, or a sink server (its ``.handler`` is used). Datums
    carry each item's keys, id (``sink_msg_id``; items without one get
    ``"<vertex>-<batch>-<index>"``), value, event time, watermark and headers.
    Responses are matched by id (a missing one is a :class:`SinkError`):

    * success: done;
    * failure: retried per ``retry`` (:class:`RetryPolicy`, default: forever every
      1 ms); then an error, the fallback sink, or dropped;
    * fallback: written to ``fallback`` (an error when there is none; a fallback
      sink answering *fallback* is an error too);
    * onSuccess: its message (value and keys on the datum's times, headers and
      id), or the datum itself, written to ``on_success`` (an error when there is none).
    """

    def __init__(
        self,
        handler: Any,
        vertex: str,
        fallback: Output | None = None,
        on_success: Output | None = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        sink_handler(handler)  # validate now: TypeError for a class or a non-callable
        if retry is not None and not isinstance(retry, RetryPolicy):
            raise TypeError(f'udsink "{vertex}": retry must be a RetryPolicy; got {retry!r:.80}')
        _check_child(fallback, "fallback", vertex)
        _check_child(on_success, "onSuccess", vertex)
        if retry is not None and retry.on_failure == "fallback" and fallback is None:
            raise ValueError(
                f'udsink "{vertex}": given OnFailure strategy is fallback but fallback sink '
                "is not provided"
            )
        self.handler = handler
        self.vertex = vertex
        self.fallback = fallback
        self.on_success = on_success
        self.retry = retry

    def build(self, worker_index: int, worker_count: int) -> StatelessSink:
        return self._build("primary", worker_index, worker_count)

    def _build(self, role: str, worker_index: int, worker_count: int) -> _UdSinkWriter:
        def child(output: Output | None, child_role: str) -> StatelessSink | None:
            if output is None:
                return None
            if isinstance(output, UdSinkOutput):
                return output._build(child_role, worker_index, worker_count)
            assert isinstance(output, DynamicOutput)
            return output.build(worker_index, worker_count)

        return _UdSinkWriter(
            self, role, child(self.fallback, "fallback"), child(self.on_success, "on_success")
        )

    def __repr__(self) -> str:
        return f"UdSinkOutput({self.handler!r}, {self.vertex!r})"
