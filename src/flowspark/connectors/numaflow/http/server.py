"""Numaflow's HTTP source server: :class:`HttpServer` takes events over HTTP(S) and
journals each one durably (:mod:`.journal`) before it answers.

The server runs in the process that starts the flow; the input
(:class:`~flowspark.connectors.numaflow.http.input.HttpInput`) is read by Spark's
Python workers. They share nothing but the journal files, so the input is
picklable and never holds the server.

Endpoints (as Numaflow's ``numaflow-http``)
-------------------------------------------

* ``POST /vertices/{vertex}``: the body is the payload. Unknown vertex: 404.
* ``GET /health``: 200 once the server is ready (journals opened, id index
  rebuilt), 503 before. A flow's server (``healthy_when_running``, as the
  pipeline loader makes it) answers 200 only once the flow has also finished its
  first micro-batch, so a client that waits for health does not wait for Spark's
  start; events posted before that are accepted and journaled all the same.

Bearer auth (``Authorization: Bearer <token>``, else ``401 Unauthorized`` as text)
guards a vertex whose route has a token. ``/health`` needs a token only when EVERY
route has one (any route's token is accepted): a server with one open route has
an open health check. Request headers:

* ``x-numaflow-id``: the event id; default a time-ordered UUIDv7. Not ASCII: 400.
* ``x-numaflow-event-time``: epoch milliseconds; default the arrival time. Not
  ASCII, not an integer, or out of range (outside what a Python datetime holds,
  years 1 to 9999): 400 with Numaflow's JSON error texts. Removed from the headers.
* ``x-numaflow-keys``: comma-split, trimmed, empty parts dropped: the keys
  (default none). It stays in the headers.
* every other header with an ASCII value is forwarded, name lower-cased, as a
  message header, plus ``X-Numaflow-Id: <id>``; ``Authorization`` is removed.

Replies: 200 ``{"message":"Data received successfully","id":...}``; 409
``{"error":"Duplicate request ID","id":...}``; 429 ``{"details":"Channel Full:
429","error":"Pipeline has stalled, buffer is full"}`` when ``max_in_flight``
requests already wait for durability; 500 ``{"error":"Request processing
failed","id":...}`` when the journal write failed or the server stopped first; 413
for a body over 2 MiB (axum's default limit). JSON bodies are serialised as
Numaflow's serde_json does (no spaces; ``json!`` objects with sorted keys).

What 200 means
--------------

**200 means durable**: the event is in ``journal_dir/<vertex>.journal`` and that
write was ``os.fsync``'ed before the reply was sent. Writes are group-committed:
the requests accepted during one turn of the event loop are written together (one
``write`` per journal), one ``fsync`` per journal covers them all, and only then
are they all answered; requests arriving meanwhile form the next group, written as
soon as that fsync ends. So throughput is not bounded by one fsync per event. The
fsyncs run in a small helper process (``python -S``, fed through a pipe; it exits
with the server) so that neither the event loop nor a second thread of this
process waits on the disk or contends for the GIL (measured with 32 clients:
about 1.6 times the events per second and 1.5 times the events per CPU-second of
fsyncing in a thread); without it (no interpreter to run, or it died) a thread
fsyncs (:mod:`.fsync`).
Any other reply, or none (a crash, a dropped connection), means the event may or
may not be journaled: retry with the same ``x-numaflow-id``.

Dedup (a flowspark extension)
-----------------------------

Numaflow answers 409 for an id that is *in flight*. flowspark answers 409 for an
id in flight OR journaled within the dedup window (``dedup_window`` seconds,
default ``$FLOWSPARK_HTTP_DEDUP_WINDOW`` or 120; the index is rebuilt from the
journals at start, and counts them as just journaled), so a client that retries
within the window after a crash or a lost reply gets exactly-once ingestion: 200
or 409 both mean "journaled exactly once". Past the window, once the flow has
committed an event, its id is forgotten and its bytes are dropped from the
journal (:mod:`.retention`): memory (about 100 bytes per id) and disk stay bounded
by the window, however long the run lasts. Numaflow's own ISB dedups for 60 s.

The journal
-----------

``journal_dir/<vertex>.journal``, with its ``.synced`` length next to it: the
format, and what readers may rely on, are in :mod:`.journal`.

Address
-------

:func:`resolve_address`: explicit values win, then the environment variables
``FLOWSPARK_HTTP_HOST`` and ``FLOWSPARK_HTTP_PORT``, then ``127.0.0.1:8443``. TLS
(HTTPS) when a certificate and key are given; plain HTTP otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import random
import re
import ssl
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flowspark.connectors.numaflow.http import retention
from flowspark.connectors.numaflow.http.fsync import ProcessSyncer, ThreadSyncer
from flowspark.connectors.numaflow.http.journal import Journal, check_vertex, encode_record
from flowspark.connectors.numaflow.http.wire import DateCache, HttpConnection, Request

__all__ = [
    "HttpRoute",
    "HttpServer",
    "resolve_address",
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "HOST_ENV",
    "PORT_ENV",
]

log = logging.getLogger(__name__)

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8443
HOST_ENV = "FLOWSPARK_HTTP_HOST"
PORT_ENV = "FLOWSPARK_HTTP_PORT"
# Seconds between looks at what each journal may drop (see .retention).
TRIM_EVERY = 5.0

# Event times a Python datetime can hold (0001-01-01 .. 9999-12-31T23:59:59.999 UTC).
_MIN_EVENT_MS = -62_135_596_800_000
_MAX_EVENT_MS = 253_402_300_799_999
_I64 = 1 << 63
_INTEGER = re.compile(r"[+-]?[0-9]+")


def resolve_address(host: str | None, port: int | None) -> tuple[str, int]:
    """The address to listen on: ``host``/``port`` when given, else the environment
    (``FLOWSPARK_HTTP_HOST``, ``FLOWSPARK_HTTP_PORT``), else ``127.0.0.1:8443``.

    >>> resolve_address("0.0.0.0", 9000)
    ('0.0.0.0', 9000)
    """
    if host is None:
        host = os.environ.get(HOST_ENV) or DEFAULT_HOST
    if port is None:
        raw = os.environ.get(PORT_ENV, "").strip()
        if raw:
            try:
                port = int(raw)
            except ValueError:
                raise ValueError(f"{PORT_ENV} must be a port number; got {raw!r}") from None
        else:
            port = DEFAULT_PORT
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ValueError(f"the HTTP port must be an int in 0..65535; got {port!r}")
    return host, port


@dataclass(frozen=True)
class HttpRoute:
    """``POST /vertices/{vertex}``; with ``token``, requests need ``Bearer <token>``."""

    vertex: str
    token: str | None = None


_JSON = b"application/json"
_TEXT = b"text/plain; charset=utf-8"
_OK_PREFIX = b'{"message":"Data received successfully","id":'


def _json(obj: dict[str, Any]) -> bytes:
    """serde_json's ``json!`` rendering: compact, keys sorted."""
    return json.dumps(obj, separators=(",", ":"), sort_keys=True).encode()


class _Uuid7:
    """Time-ordered UUIDv7 strings: 48-bit ms time, a 12-bit counter within a ms
    (monotonic), 62 random bits."""

    def __init__(self) -> None:
        self._rng = random.Random()
        self._last_ms = 0
        self._seq = 0
        self._lock = threading.Lock()

    def __call__(self) -> str:
        with self._lock:
            ms = time.time_ns() // 1_000_000
            if ms > self._last_ms:
                self._last_ms = ms
                self._seq = self._rng.getrandbits(10)
            else:
                self._seq += 1
                if self._seq > 0xFFF:
                    self._last_ms += 1
                    self._seq = 0
            ms = self._last_ms
            seq = self._seq
            low = self._rng.getrandbits(62)
        h = "%032x" % ((ms << 80) | (0x7 << 76) | (seq << 64) | (0b10 << 62) | low)
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


_uuid7 = _Uuid7()


@dataclass(slots=True)
class _Pending:
    """A request waiting for its journal write."""

    journal: Journal
    record: bytes
    conn: _Connection
    id: str


class _Connection(HttpConnection):
    """A connection of the HTTP source: its requests go to the server."""

    def __init__(self, server: HttpServer) -> None:
        super().__init__(server._handle, server._date, half_close=not server.certfile)
        self.server = server
        self.event_id = ""  # of the request waiting for its journal write

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self.server._conns.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        self.server._conns.discard(self)

    def reply_ok(self, event_id: str) -> None:
        """The 200 of a journaled event (the hot path)."""
        request = self.request
        if request is None or request.http10 or not request.keep_alive or self.paused:
            self.reply(200, _OK_PREFIX + json.dumps(event_id).encode() + b"}", _JSON)
            return
        self.request = None
        self.busy = False
        if self.closed or self.transport is None or self.transport.is_closing():
            return
        if '"' in event_id or "\\" in event_id or "\t" in event_id:
            body = _OK_PREFIX + json.dumps(event_id).encode() + b"}"
        else:  # nothing to escape (ids are ASCII without control characters but tab)
            body = b'%s"%s"}' % (_OK_PREFIX, event_id.encode())
        self.transport.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
            b"date: %s\r\n\r\n%s" % (len(body), self.date(), body)
        )
        if self.buf or self.eof:
            self._process()


class HttpServer:
    """Numaflow's HTTP source server for ``routes``, journaling to ``journal_dir``.

    ``start()`` returns once it listens and is ready; its asyncio loop runs in a
    daemon thread (and its fsyncs in a helper process: see the module docstring);
    ``stop()`` stops it (pending requests are completed, or answered 500 when
    their fsync does not end in time). A context manager. ``port=0`` picks a free
    port (see :attr:`port`). HTTPS when ``certfile`` and ``keyfile`` are given. At
    most ``max_in_flight`` requests wait for durability; more are answered 429.
    """

    def __init__(
        self,
        routes: Sequence[HttpRoute],
        journal_dir: str | Path,
        host: str = DEFAULT_HOST,
        port: int = DEFAULT_PORT,
        certfile: str | None = None,
        keyfile: str | None = None,
        max_in_flight: int = 30000,
        healthy_when_running: bool = False,
        dedup_window: float | None = None,
    ) -> None:
        routes = list(routes)
        if not routes:
            raise ValueError("an HTTP source server needs at least one route")
        self.routes: dict[str, HttpRoute] = {}
        for route in routes:
            if check_vertex(route.vertex) in self.routes:
                raise ValueError(f"duplicate HTTP source vertex {route.vertex!r}")
            self.routes[route.vertex] = route
        if (certfile is None) != (keyfile is None):
            raise ValueError("TLS needs both certfile and keyfile")
        if isinstance(max_in_flight, bool) or not isinstance(max_in_flight, int):
            raise ValueError(f"max_in_flight must be an int >= 0; got {max_in_flight!r}")
        if max_in_flight < 0:
            raise ValueError(f"max_in_flight must be an int >= 0; got {max_in_flight!r}")
        self.journal_dir = Path(journal_dir)
        self.host = host
        self.port = port
        self.certfile = certfile
        self.keyfile = keyfile
        self.max_in_flight = max_in_flight
        self.dedup_window = retention.dedup_window(dedup_window)
        # Dropping what is delivered and past the window is looked at this often.
        self._trim_every = min(TRIM_EVERY, self.dedup_window / 2)
        self._trimming = False
        tokens = [r.token for r in routes]
        # /health needs a token only when every route has one (any of them will do).
        self._health_tokens = (
            {f"Bearer {t}" for t in tokens if t is not None}
            if all(t is not None for t in tokens)
            else None
        )
        self._auth = {
            r.vertex: (f"Bearer {r.token}" if r.token is not None else None) for r in routes
        }
        self._journals: dict[str, Journal] = {}
        self._conns: set[_Connection] = set()
        self._pending = 0  # requests accepted and not answered yet
        self._batch: list[_Pending] = []  # accepted, not written yet
        self._syncing: list[_Pending] | None = None  # written, being fsync'ed
        self._sync_sizes: dict[Journal, int] = {}
        self._flush_scheduled = False
        self._syncer: ProcessSyncer | ThreadSyncer | None = None
        self._date = DateCache()
        self._ready = False
        self._stopping = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.AbstractServer | None = None
        self._done: asyncio.Future[None] | None = None
        self._drained: asyncio.Event | None = None
        self._listening = threading.Event()
        self._ready_event = threading.Event()
        self._error: BaseException | None = None
        # Tests may set an Event here: readiness then waits for it (to see 503s).
        self._ready_gate: threading.Event | None = None
        # False: fsync in a thread of this process rather than in the helper process.
        self._fsync_helper = bool(sys.executable)
        # A flow's server: /health waits for the flow's first finished micro-batch.
        self._running = not healthy_when_running

    # -- public API

    @property
    def scheme(self) -> str:
        """``https`` when TLS is on, else ``http``."""
        return "https" if self.certfile else "http"

    @property
    def url(self) -> str:
        """``http(s)://host:port`` (the bound port once started)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"

    @property
    def ready(self) -> bool:
        """True once the journals are open and their ids indexed (until stopped)."""
        return self._ready and not self._stopping

    def on_batch(self, progress: Any) -> None:
        """A :class:`~flowspark.engine.observe.RunListener`: the flow that reads the
        journals has finished a micro-batch, so a server made with
        ``healthy_when_running`` now answers ``/health`` with 200."""
        self._running = True

    def start(self, wait_ready: bool = True) -> HttpServer:
        """Listen, then index the journals; return once ready (or once listening when
        ``wait_ready`` is false: see :meth:`wait_ready`). Raises what start-up raised."""
        if self._thread is not None:
            raise RuntimeError("this HttpServer was already started")
        self.journal_dir.mkdir(parents=True, exist_ok=True)
        ssl_context = None
        if self.certfile:
            ssl_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ssl_context.load_cert_chain(self.certfile, self.keyfile)
        journals: dict[str, Journal] = {}
        try:
            for vertex in self.routes:
                journal = Journal(self.journal_dir, vertex)
                journals[vertex] = journal
                journal.open()
        except BaseException:
            for journal in journals.values():
                journal.close()
            raise
        self._journals = journals
        self._thread = threading.Thread(
            target=self._run, args=(ssl_context,), name="flowspark-http-source", daemon=True
        )
        self._thread.start()
        self._listening.wait()
        if self._error is not None:
            self._thread.join()
            self._close_journals()
            raise self._error
        if wait_ready:
            self.wait_ready()
        return self

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Wait until ready; False on timeout. Raises what start-up raised."""
        ok = self._ready_event.wait(timeout)
        if self._error is not None:
            raise self._error
        return ok

    def stop(self, timeout: float = 10.0) -> None:
        """Stop listening, finish pending requests (those whose write does not end
        within ``timeout`` seconds are answered 500), close every connection."""
        loop, thread = self._loop, self._thread
        if loop is not None and thread is not None and thread.is_alive():
            with contextlib.suppress(RuntimeError):  # the loop may have ended meanwhile
                future = asyncio.run_coroutine_threadsafe(self._shutdown(timeout), loop)
                with contextlib.suppress(Exception):
                    future.result(timeout + 5)
            thread.join(timeout + 5)
        self._close_journals()

    def __enter__(self) -> HttpServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"HttpServer({sorted(self.routes)}, {str(self.journal_dir)!r}, url={self.url!r})"

    # -- the loop thread

    def _run(self, ssl_context: ssl.SSLContext | None) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._main(ssl_context))
        except BaseException as exc:  # start-up failed: start() / wait_ready() raise it
            if self._error is None:
                self._error = exc
            log.error("HTTP source server failed: %r", exc)
        finally:
            self._ready = False
            self._listening.set()
            self._ready_event.set()
            if self._syncer is not None:
                self._syncer.close()
            self._close_journals()
            with contextlib.suppress(Exception):
                loop.run_until_complete(loop.shutdown_default_executor())
            loop.close()

    async def _main(self, ssl_context: ssl.SSLContext | None) -> None:
        loop = asyncio.get_running_loop()
        self._done = loop.create_future()
        self._drained = asyncio.Event()
        self._server = await loop.create_server(
            lambda: _Connection(self),
            self.host,
            self.port,
            ssl=ssl_context,
            backlog=1024,
            reuse_address=True,
        )
        self.port = self._server.sockets[0].getsockname()[1]
        self._listening.set()
        try:
            self._syncer = await loop.run_in_executor(None, self._rebuild)
        except BaseException as exc:
            self._error = exc
            self._server.close()
            raise
        self._syncer.attach(loop)
        self._ready = True
        self._ready_event.set()
        log.info("HTTP source listening on %s for %s", self.url, sorted(self.routes))
        loop.call_later(self._trim_every, self._trim)
        await self._done

    def _rebuild(self) -> ProcessSyncer | ThreadSyncer:
        journals = list(self._journals.values())
        for index, journal in enumerate(journals):
            journal.index = index
            journal.rebuild()
        if self._ready_gate is not None:
            self._ready_gate.wait()
        if self._fsync_helper:
            try:
                return ProcessSyncer(self, journals)
            except Exception as exc:  # e.g. no interpreter to run it
                log.warning("HTTP source: no fsync helper process (%s); using a thread", exc)
        return ThreadSyncer(self, journals)

    # -- retention (loop thread, the file work in a thread of the default executor)

    def _trim(self) -> None:
        """Forget the ids, and drop the bytes, of the events every reader committed
        that are older than the dedup window (see :mod:`.retention`)."""
        if self._stopping or self._loop is None:
            return
        self._loop.call_later(self._trim_every, self._trim)
        if self._trimming:
            return
        synced_before = time.monotonic() - self.dedup_window
        drops = []
        for journal in self._journals.values():
            committed = retention.read_committed(journal.committed_path)
            new_start = journal.forget_through(committed, synced_before)
            if new_start is not None:
                drops.append((journal, new_start))
        if drops:
            self._trimming = True
            done = self._loop.run_in_executor(None, self._drop, drops)
            done.add_done_callback(self._dropped)

    def _drop(self, drops: list[tuple[Journal, int]]) -> None:
        for journal, new_start in drops:
            if journal.fd < 0:
                return  # stopped meanwhile
            journal.punched = retention.drop_prefix(
                journal.start_path, journal.fd, journal.punched, new_start
            )
            journal.start = new_start

    def _dropped(self, done: asyncio.Future[None]) -> None:
        self._trimming = False
        if not done.cancelled() and (exc := done.exception()) is not None:
            log.error("HTTP source: dropping delivered events from a journal failed: %s", exc)

    def _close_journals(self) -> None:
        for journal in self._journals.values():
            journal.close()

    async def _shutdown(self, timeout: float) -> None:
        self._stopping = True
        if self._server is not None:
            self._server.close()
        for conn in list(self._conns):  # idle keep-alive connections
            if not conn.busy and conn.transport is not None:
                conn.closed = True
                conn.transport.close()
        assert self._drained is not None
        if self._pending:
            self._drained.clear()
            try:
                await asyncio.wait_for(self._drained.wait(), timeout)
            except TimeoutError:
                log.error("HTTP source: journal writes did not finish in %.1f s", timeout)
        for conn in list(self._conns):  # still waiting: never written in time
            if conn.busy and conn.request is not None and conn.event_id:
                conn.reply(
                    500,
                    _json({"error": "Request processing failed", "id": conn.event_id}),
                    _JSON,
                    close=True,
                )
        for conn in list(self._conns):
            if conn.transport is not None:
                conn.transport.close()
        await asyncio.sleep(0)  # let the transports flush and close
        assert self._done is not None
        if not self._done.done():
            self._done.set_result(None)

    # -- requests (loop thread)

    def _handle(self, conn: _Connection, request: Request) -> None:
        method, path = request.method, request.path
        if path == "/health":
            if method not in ("GET", "HEAD"):
                conn.reply(405)
            elif self._health_tokens is not None and (
                self._first(request.headers, "authorization") not in self._health_tokens
            ):
                conn.reply(401, b"Unauthorized", _TEXT)
            else:
                healthy = self._ready and self._running and not self._stopping
                conn.reply(200 if healthy else 503)
            return
        vertex = path[10:] if path.startswith("/vertices/") else None
        if vertex is None or vertex not in self.routes:
            conn.reply(404)
            return
        if method != "POST":
            conn.reply(405)
            return
        expected = self._auth[vertex]
        if expected is not None and self._first(request.headers, "authorization") != expected:
            conn.reply(401, b"Unauthorized", _TEXT)
            return
        if self._stopping:
            conn.reply(503, _json({"error": "Server is shutting down"}), _JSON, close=True)
            return
        if not self._ready:
            conn.reply(503, _json({"error": "Server is not ready"}), _JSON)
            return
        self._ingest(conn, request, self._journals[vertex])

    @staticmethod
    def _first(headers: list[tuple[str, str]], name: str) -> str | None:
        for key, value in headers:
            if key == name:
                return value
        return None

    def _ingest(self, conn: _Connection, request: Request, journal: Journal) -> None:
        headers = request.headers
        forwarded: dict[str, str] = {"X-Numaflow-Id": ""}
        forwarded.update(headers)  # a later duplicate wins, at the first one's place
        event_time = forwarded.pop("x-numaflow-event-time", None)
        removed = (event_time is not None) + (forwarded.pop("authorization", None) is not None)
        event_id = forwarded.get("x-numaflow-id")
        if len(forwarded) + removed != len(headers) + 1 or not request.ascii:
            # duplicate names (the id and event time are the first ones) or non-ASCII
            # values (not forwarded): the slow way
            event_id = event_time = None
            forwarded = {"X-Numaflow-Id": ""}
            for name, value in headers:
                if name == "x-numaflow-id":
                    if event_id is None:
                        event_id = value
                elif name == "x-numaflow-event-time":
                    if event_time is None:
                        event_time = value
                    continue
                elif name == "authorization":
                    continue
                if value.isascii():
                    forwarded[name] = value
        if event_id is None:
            event_id = _uuid7()
        elif not event_id.isascii():
            conn.reply(
                400,
                _json(
                    {
                        "error": "Value of 'x-numaflow-id' header contains "
                        "non-printable ASCII characters"
                    }
                ),
                _JSON,
            )
            return
        forwarded["X-Numaflow-Id"] = event_id
        if event_time is None:
            event_ms = time.time_ns() // 1_000_000
        else:
            parsed = self._event_ms(event_time)
            if isinstance(parsed, bytes):  # the 400's body
                conn.reply(400, parsed, _JSON)
                return
            event_ms = parsed
        keys_value = forwarded.get("x-numaflow-keys")
        keys = []
        if keys_value:
            for key in keys_value.split(","):
                key = key.strip()
                if key:
                    keys.append(key)
        if event_id in journal.inflight or event_id in journal.ids:
            conn.reply(409, _json({"error": "Duplicate request ID", "id": event_id}), _JSON)
            return
        if self._pending >= self.max_in_flight:
            conn.reply(
                429,
                _json(
                    {
                        "error": "Pipeline has stalled, buffer is full",
                        "details": "Channel Full: 429",
                    }
                ),
                _JSON,
            )
            return
        if journal.broken:
            conn.reply(
                500, _json({"error": "Failed to process request", "details": journal.broken}), _JSON
            )
            return
        record = encode_record(event_id, event_ms, keys, forwarded, request.body)
        journal.inflight.add(event_id)
        conn.busy = True
        conn.event_id = event_id
        self._pending += 1
        self._batch.append(_Pending(journal, record, conn, event_id))
        if not self._flush_scheduled and self._syncing is None:
            self._flush_scheduled = True
            assert self._loop is not None
            self._loop.call_soon(self._flush)

    @staticmethod
    def _event_ms(text: str) -> int | bytes:
        """The event time of ``x-numaflow-event-time``, or the JSON body of its 400."""
        what = "Event time specified in header 'x-numaflow-event-time'"
        if not text.isascii():
            return _json({"error": f"{what} is not an ASCII string"})
        details = f"Specified value is {text}"
        # (more than 19 significant digits never fit an i64; int() refuses huge texts)
        if (
            not _INTEGER.fullmatch(text)
            or len(text.lstrip("+-").lstrip("0")) > 19
            or not -_I64 <= int(text) < _I64
        ):
            return _json({"error": f"{what} is not a valid integer", "details": details})
        value = int(text)
        if not _MIN_EVENT_MS <= value <= _MAX_EVENT_MS:
            return _json({"error": f"{what} is out of range", "details": details})
        return value

    # -- group commit (loop thread)
    #
    # Requests accepted during one loop iteration form a batch; at the end of the
    # iteration the batch is written (one write per journal) and one fsync per
    # journal is asked of the syncer. While that fsync runs, new requests gather;
    # when it ends, its batch is answered and the next batch goes at once.

    def _flush(self) -> None:
        self._flush_scheduled = False
        if self._syncing is not None or not self._batch or self._syncer is None:
            return
        batch, self._batch = self._batch, []
        writes: dict[Journal, list[bytes]] = {}
        for pending in batch:
            records = writes.get(pending.journal)
            if records is None:
                writes[pending.journal] = [pending.record]
            else:
                records.append(pending.record)
        failed: dict[Journal, BaseException] = {}
        for journal, records in writes.items():
            try:
                journal.write(b"".join(records))
            except OSError as exc:
                log.error("HTTP source: writing %s failed: %s", journal.path, exc)
                failed[journal] = exc
        if failed:
            self._complete([p for p in batch if p.journal in failed], failed)
            batch = [p for p in batch if p.journal not in failed]
            if not batch:
                return
        self._syncing = batch
        self._sync_sizes = {j: j.size for j in writes if j not in failed}
        self._syncer.request([j.index for j in self._sync_sizes])

    def _synced(self, errors: dict[int, int]) -> None:
        """The syncer's reply: an errno (0: done) per journal of the request."""
        batch = self._syncing
        if batch is None:
            return
        self._syncing = None
        failed: dict[Journal, BaseException] = {}
        ids: dict[Journal, list[str]] = {journal: [] for journal in self._sync_sizes}
        for pending in batch:
            ids[pending.journal].append(pending.id)
        for journal, size in self._sync_sizes.items():
            error = errors.get(journal.index, -1)
            if error == 0:
                journal.synced(size)
                journal.remember(size, ids[journal])
            else:
                failed[journal] = OSError(error, f"fsync of {journal.path} failed")
                log.error("HTTP source: fsync of %s failed: errno %d", journal.path, error)
                journal.rollback()
        self._sync_sizes = {}
        self._complete(batch, failed)
        if self._batch:
            self._flush()

    def _syncer_died(self, syncer: ProcessSyncer | ThreadSyncer) -> None:
        """The helper process is gone: go on with a thread (and redo its request)."""
        if syncer is not self._syncer:
            return
        log.error("HTTP source: the fsync helper process died; fsyncing in a thread")
        with contextlib.suppress(Exception):
            syncer.close()
        assert self._loop is not None
        self._syncer = ThreadSyncer(self, list(self._journals.values()))
        self._syncer.attach(self._loop)
        if self._syncing is not None:
            self._syncer.request([j.index for j in self._sync_sizes])

    def _complete(self, batch: list[_Pending], failed: dict[Journal, BaseException]) -> None:
        """Answer a written batch (loop thread): 200, or 500 where the write failed."""
        for pending in batch:
            journal = pending.journal
            journal.inflight.discard(pending.id)
            self._pending -= 1
            conn: _Connection | None = pending.conn
            if pending.conn.event_id != pending.id or not pending.conn.busy:
                conn = None  # answered already (500 at shutdown)
            if journal in failed:
                if conn is not None:
                    conn.reply(
                        500,
                        _json({"error": "Request processing failed", "id": pending.id}),
                        _JSON,
                    )
            elif conn is not None:
                conn.reply_ok(pending.id)
        if self._pending == 0 and self._drained is not None:
            self._drained.set()
