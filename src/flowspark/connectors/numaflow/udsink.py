"""Numaflow's user-defined sink: :class:`UdSinkOutput`, a ``udsink`` run by a
pynumaflow-API ``Sinker`` (or function), with Numaflow's ``retryStrategy``
(:class:`RetryPolicy`), ``fallback`` and ``onSuccess`` sinks.

Items become sink datums as every Numaflow sink takes them
(:func:`~flowspark.runtime.numaflow.convert.sink_datum`).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from flowspark.api.outputs import DynamicOutput, Output, StatelessSink
from flowspark.api.udf.sink import Datum as SinkDatum
from flowspark.api.udf.sink import run_sink_handler, sink_handler
from flowspark.api.udf.times import as_utc
from flowspark.api.udf.types import Datum
from flowspark.connectors.numaflow._args import as_timedelta
from flowspark.runtime.numaflow.convert import any_bytes, sink_datum
from flowspark.shared.retry import RetryFields

__all__ = ["UdSinkOutput", "RetryPolicy", "SinkError"]

_LOGGER = logging.getLogger(__name__)

# The longest single backoff sleep (Numaflow's would saturate; this keeps sleep() valid).
_MAX_SLEEP_SECONDS = 24 * 3600.0


class SinkError(RuntimeError):
    """A Numaflow sink could not write a batch (Numaflow stops the vertex on it)."""


_ON_FAILURE = ("retry", "fallback", "drop")


@dataclass(frozen=True)
class RetryPolicy(RetryFields):
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

    def __post_init__(self) -> None:
        on_failure = self.on_failure or "retry"
        if on_failure not in _ON_FAILURE:
            raise ValueError(
                f"retryStrategy.onFailure must be one of {', '.join(_ON_FAILURE)}; "
                f"got {on_failure!r}"
            )
        interval = as_timedelta(self.interval, "interval", timedelta(milliseconds=1))
        cap = None if self.cap is None else as_timedelta(self.cap, "cap", timedelta(0))
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
            datum = sink_datum(item, now)
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
            any_bytes(message.value if message.value is not None else b""),
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
