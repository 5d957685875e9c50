"""Numaflow's ``generator`` source: :class:`GeneratorInput`, a bytewax-style
:class:`~flowspark.api.inputs.PartitionedInput` of flowspark datums, paced like
Numaflow's Rust generator (up to ``rpu`` messages per ``duration`` tick).

>>> part = GeneratorInput("gen", rpu=2, key_count=2, duration=3600).build_part("0", None)
>>> [(d.keys, d.headers) for d in part.next_batch()], part.next_batch(), part.snapshot()
([(['key-0'], {}), (['key-1'], {})], [], 2)
"""

from __future__ import annotations

import base64
import binascii
import json
import random
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from flowspark.api.inputs import PartitionedInput, StatefulSource
from flowspark.api.udf.times import UTCDateTime, utc_from_us
from flowspark.api.udf.types import Datum
from flowspark.connectors.numaflow._args import as_timedelta

__all__ = ["GeneratorInput", "MAX_KEY_COUNT"]

MAX_KEY_COUNT = 255
"""Numaflow caps the generator's ``keyCount`` at ``u8::MAX``."""

_NS_PER_S = 1_000_000_000


def _utc_from_ns(ns: int) -> UTCDateTime:
    return utc_from_us(ns // 1000)


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
        self.duration = as_timedelta(duration, "duration", timedelta(seconds=1))
        if self.duration <= timedelta(0):
            raise ValueError(f'generator "{vertex}": duration must be positive')
        self.jitter = as_timedelta(jitter, "jitter", timedelta(0))
        if self.jitter < timedelta(0):
            raise ValueError(f'generator "{vertex}": jitter must not be negative')
        if isinstance(value_blob, str):
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
