"""Numaflow's HTTP source: an HTTP(S) server that journals every event durably, and
the flowspark input that reads the journal.

The server (:class:`HttpServer`) runs in the process that starts the flow; the
input (:class:`HttpInput`) is read by Spark's Python workers. They share nothing
but the journal files, so the input is picklable and never holds the server.

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
fsyncs.
Any other reply, or none (a crash, a dropped connection), means the event may or
may not be journaled: retry with the same ``x-numaflow-id``.

Dedup (a flowspark extension)
-----------------------------

Numaflow answers 409 for an id that is *in flight*. flowspark answers 409 for an
id in flight OR already in the vertex's journal (the index is rebuilt from the
journals at start), so a client that retries after a crash or a lost reply gets
exactly-once ingestion: 200 or 409 both mean "journaled exactly once". The index
holds every id of the journal in memory (about 100 bytes per event).

Journal format
--------------

A file starts with the 8 bytes ``FSPKHTJ1``; then records, each::

    u32 body length | u32 CRC-32 of the body | body
    body = i64 event time ms | u32 meta length | u16 key count | u16 header count
           | meta: id, keys, then header name, value, ... (ASCII, NUL-separated)
           | payload (the rest)

little-endian. A torn final record (a crash mid-write) fails its length or CRC
check: readers stop before it and the server cuts it off when it restarts on the
same directory (keeping a copy as ``<vertex>.journal.torn.<offset>``). Next to
each journal, ``<vertex>.journal.synced`` holds the journal length (u64, then its
complement as a check against torn reads) known to
be fsync'ed; readers never read past it (a reader of a journal without one reads
up to its last valid record). One server at a time may own a directory's
journals (an ``flock`` on each file).

Address
-------

:func:`resolve_address`: explicit values win, then the environment variables
``FLOWSPARK_HTTP_HOST`` and ``FLOWSPARK_HTTP_PORT``, then ``127.0.0.1:8443``. TLS
(HTTPS) when a certificate and key are given; plain HTTP otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import logging
import mmap
import os
import random
import re
import select
import ssl
import struct
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import formatdate
from itertools import chain
from pathlib import Path
from typing import Any

from flowspark.api.inputs import PartitionedInput, StatefulSource
from flowspark.api.udf.times import utc_from_ms
from flowspark.api.udf.types import Datum

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

log = logging.getLogger(__name__)

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8443
HOST_ENV = "FLOWSPARK_HTTP_HOST"
PORT_ENV = "FLOWSPARK_HTTP_PORT"

# The largest request body accepted (axum's default body limit: 2 MB).
MAX_BODY_BYTES = 2 * 1024 * 1024
# The largest request head (request line and headers).
MAX_HEAD_BYTES = 64 * 1024
# A reader returns at most this many events per ``next_batch``...
READ_MAX_ITEMS = 10_000
# ... read from at most this many bytes (a single larger record is read whole).
READ_MAX_BYTES = 8 * 1024 * 1024
# A reader with nothing new asks again after this long.
READ_IDLE_WAIT = timedelta(milliseconds=10)

JOURNAL_MAGIC = b"FSPKHTJ1"
JOURNAL_SUFFIX = ".journal"
SYNCED_SUFFIX = ".journal.synced"
_HEADER = struct.Struct("<II")  # body length, CRC-32 of the body
_BODY = struct.Struct("<qIHH")  # event time ms, meta length, key count, header count
# The synced length, then its complement: the server updates it in place (a shared
# mmap) while readers read it, and a reader can see a torn or all-zero value
# (measured: 3.6 % of reads racing a busy writer); a pair that does not check out
# is read again.
_SYNCED = struct.Struct("<QQ")
_MASK64 = (1 << 64) - 1
_MAX_RECORD = 64 * 1024 * 1024  # a larger length field is corruption, not a record

# Event times a Python datetime can hold (0001-01-01 .. 9999-12-31T23:59:59.999 UTC).
_MIN_EVENT_MS = -62_135_596_800_000
_MAX_EVENT_MS = 253_402_300_799_999
_I64 = 1 << 63
_INTEGER = re.compile(r"[+-]?[0-9]+")
# Control characters (other than HTAB) and bare CR/LF are not allowed in a head.
_BAD_CHAR = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
# Header names (lower-cased, one a line) that are all RFC 9110 tokens.
_TOKENS = re.compile(r"[!#$%&'*+.^_`|~0-9a-z-]+(?:\n[!#$%&'*+.^_`|~0-9a-z-]+)*")
_FRAMING = frozenset(("content-length", "transfer-encoding", "connection", "expect"))
_VERTEX_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


# ---------------------------------------------------------------------------- addressing


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


# ------------------------------------------------------------------------------- journal


@dataclass(frozen=True)
class JournalRecord:
    """One journaled event. ``offset`` is where its record starts, ``end`` where it ends."""

    id: str
    event_time_ms: int
    keys: list[str]
    headers: dict[str, str]
    payload: bytes
    offset: int = 0
    end: int = 0


def _encode(
    event_id: str, event_ms: int, keys: list[str], headers: dict[str, str], payload: bytes
) -> bytes:
    """One journal record (all strings are ASCII without NUL: the server checks)."""
    meta = "\0".join([event_id, *keys, *chain.from_iterable(headers.items())]).encode("ascii")
    body = _BODY.pack(event_ms, len(meta), len(keys), len(headers)) + meta + payload
    return _HEADER.pack(len(body), zlib.crc32(body)) + body


# What _parse makes of each record.
_IDS, _RECORDS, _DATUMS = 0, 1, 2


def _parse(buf: bytes, base: int, limit: int, mode: int) -> tuple[list[Any], int, int]:
    """Parse the valid, complete records at the start of ``buf`` (which starts at file
    offset ``base``), at most ``limit``. Returns ``(items, used, need)``: items are
    ids, :class:`JournalRecord` s or :class:`Datum` s (by ``mode``); ``used`` the
    bytes they span; ``need`` the whole length of the next record when it is
    incomplete in ``buf``, -1 when it is invalid (torn or corrupt), 0 when ``buf``
    or ``limit`` ran out."""
    items: list[Any] = []
    append = items.append
    view = memoryview(buf)
    size = len(buf)
    pos = 0
    unpack_header = _HEADER.unpack_from
    unpack_body = _BODY.unpack_from
    crc32 = zlib.crc32
    make = Datum._make
    body_size = _BODY.size
    last_ms: int | None = None
    last_t = None
    while len(items) < limit:
        if size - pos < 8:
            return items, pos, (8 if pos < size else 0)
        length, crc = unpack_header(buf, pos)
        if length < body_size or length > _MAX_RECORD:
            return items, pos, -1
        end = pos + 8 + length
        if end > size:
            return items, pos, 8 + length
        if crc32(view[pos + 8 : end]) != crc:
            return items, pos, -1
        event_ms, meta_len, n_keys, n_headers = unpack_body(buf, pos + 8)
        meta_start = pos + 8 + body_size
        meta_end = meta_start + meta_len
        if meta_end > end:
            return items, pos, -1
        try:
            meta = str(view[meta_start:meta_end], "ascii")
        except UnicodeDecodeError:
            return items, pos, -1
        if mode == _IDS:
            cut = meta.find("\0")
            append(meta if cut < 0 else meta[:cut])
        else:
            parts = meta.split("\0")
            if len(parts) != 1 + n_keys + 2 * n_headers:
                return items, pos, -1
            keys = parts[1 : 1 + n_keys]
            headers = dict(zip(parts[1 + n_keys :: 2], parts[2 + n_keys :: 2]))
            payload = bytes(view[meta_end:end])
            if mode == _DATUMS:
                if event_ms != last_ms:  # events often share a millisecond
                    last_ms, last_t = event_ms, utc_from_ms(event_ms)
                append(make(keys, payload, last_t, last_t, headers, parts[0], []))
            else:
                append(JournalRecord(parts[0], event_ms, keys, headers, payload, base + pos,
                                     base + end))  # fmt: skip
        pos = end
    return items, pos, 0


def _read_records(
    fd: int, start: int, end: int, limit: int, mode: int, max_bytes: int = READ_MAX_BYTES
) -> tuple[list[Any], int, bool]:
    """Records from ``[start, end)`` of an open journal: ``(items, offset after them,
    stopped at an invalid record)``. Reads about ``max_bytes`` at a time."""
    items: list[Any] = []
    pos = start
    while pos < end and len(items) < limit:
        want = min(end - pos, max_bytes)
        buf = os.pread(fd, want, pos)
        got, used, need = _parse(buf, pos, limit - len(items), mode)
        if not got and need > len(buf) and pos + need <= end:  # one record larger than want
            buf = os.pread(fd, need, pos)
            got, used, need = _parse(buf, pos, limit - len(items), mode)
        items.extend(got)
        pos += used
        if need < 0:
            return items, pos, True
        if used == 0 or len(buf) < want:
            break
    return items, pos, False


def _pack_synced(size: int) -> bytes:
    return _SYNCED.pack(size, ~size & _MASK64)


def _read_synced(path: str) -> int | None:
    """The fsync'ed length recorded next to a journal, or None when there is none.

    >>> import tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "in.journal.synced")
    >>> with open(path, "wb") as f:
    ...     _ = f.write(_pack_synced(1234))
    >>> _read_synced(path)
    1234
    """
    for attempt in range(10_000):
        try:
            with open(path, "rb") as f:
                raw = f.read(_SYNCED.size)
        except FileNotFoundError:
            return None
        if len(raw) < _SYNCED.size:
            return None
        size, check = _SYNCED.unpack(raw)
        if size == ~check & _MASK64:
            return size
        if attempt % 100 == 99:
            time.sleep(0.001)  # read while the server was writing it: again
    raise RuntimeError(f"{path}: the synced length never reads consistently")


def read_journal(path: str | Path, offset: int = 0) -> list[JournalRecord]:
    """Every complete, valid record of the journal at ``path`` from ``offset`` on (a
    torn tail is ignored), without regard to the ``.synced`` length.

    >>> import tempfile
    >>> d = tempfile.mkdtemp()
    >>> with open(os.path.join(d, "in.journal"), "wb") as f:
    ...     _ = f.write(JOURNAL_MAGIC + _encode("a", 5, ["k"], {"h": "v"}, b"x") + b"torn")
    >>> [(r.id, r.event_time_ms, r.keys, r.headers, r.payload) for r in read_journal(f.name)]
    [('a', 5, ['k'], {'h': 'v'}, b'x')]
    """
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        size = os.fstat(fd).st_size
        start = max(offset, len(JOURNAL_MAGIC))
        _check_magic(fd, str(path))
        records, _, _ = _read_records(fd, start, size, 1 << 62, _RECORDS)
        return records
    finally:
        os.close(fd)


def _check_magic(fd: int, path: str) -> bool:
    """True when the file starts with the journal magic, False when it is a (torn)
    prefix of it; ValueError when it is not a journal."""
    head = os.pread(fd, len(JOURNAL_MAGIC), 0)
    if head == JOURNAL_MAGIC:
        return True
    if JOURNAL_MAGIC.startswith(head):
        return False
    raise ValueError(f"{path} is not a flowspark HTTP journal")


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _check_vertex(vertex: str) -> str:
    if not isinstance(vertex, str) or not _VERTEX_NAME.fullmatch(vertex):
        raise ValueError(
            f"an HTTP source vertex name must match {_VERTEX_NAME.pattern}; got {vertex!r}"
        )
    return vertex


class _Journal:
    """The server side of one vertex's journal: the append fd, the id index, the
    ids in flight."""

    def __init__(self, directory: Path, vertex: str) -> None:
        self.directory = directory
        self.path = directory / (vertex + JOURNAL_SUFFIX)
        self.synced_path = directory / (vertex + SYNCED_SUFFIX)
        self.fd = -1
        self.synced_fd = -1
        self.synced_map: mmap.mmap | None = None
        self.index = 0  # in the server's list of journals
        self.size = 0  # bytes written
        self.synced_size = 0  # bytes fsync'ed
        self.ids: set[str] = set()
        self.inflight: set[str] = set()
        self.broken: str | None = None

    def open(self) -> None:
        """Open and lock the files (quick; the index is rebuilt by :meth:`rebuild`)."""
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self.fd)
            self.fd = -1
            raise RuntimeError(f"{self.path} is in use by another HTTP source server") from None
        try:
            _check_magic(self.fd, str(self.path))
        except ValueError:
            self.close()
            raise
        self.synced_fd = os.open(self.synced_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)

    def rebuild(self) -> None:
        """Index every journaled id, truncate a torn tail, record the synced length."""
        size = os.fstat(self.fd).st_size
        if not _check_magic(self.fd, str(self.path)):  # new, or torn while being created
            os.ftruncate(self.fd, 0)
            os.write(self.fd, JOURNAL_MAGIC)
            size = len(JOURNAL_MAGIC)
            os.fsync(self.fd)
            _fsync_dir(self.directory)
        ids, end, _ = _read_records(self.fd, len(JOURNAL_MAGIC), size, 1 << 62, _IDS)
        if end < size:  # a torn tail (or corruption): keep a copy, then cut it off
            aside = self.path.with_name(f"{self.path.name}.torn.{end}")
            with open(aside, "wb") as f:
                pos = end
                while pos < size:
                    chunk = os.pread(self.fd, min(size - pos, READ_MAX_BYTES), pos)
                    if not chunk:
                        break
                    f.write(chunk)
                    pos += len(chunk)
                f.flush()
                os.fsync(f.fileno())
            log.warning(
                "%s: cut off %d invalid bytes at byte %d (a torn tail); copied to %s",
                self.path,
                size - end,
                end,
                aside,
            )
            os.ftruncate(self.fd, end)
        os.fsync(self.fd)
        self.ids = set(ids)
        if len(self.ids) != len(ids):
            log.warning("%s holds %d duplicate ids", self.path, len(ids) - len(self.ids))
        self.size = self.synced_size = end
        os.pwrite(self.synced_fd, _pack_synced(end), 0)
        os.ftruncate(self.synced_fd, _SYNCED.size)
        os.fsync(self.synced_fd)
        # Updated in memory after each fsync (no syscall); readers see it through
        # the page cache.
        self.synced_map = mmap.mmap(self.synced_fd, _SYNCED.size)
        _fsync_dir(self.directory)

    def write(self, data: bytes) -> None:
        """Append ``data`` (not yet durable: see :meth:`synced`); on failure, cut the
        journal back to where it was."""
        if self.broken:
            raise OSError(self.broken)
        start = self.size
        try:
            view = memoryview(data)
            while view:
                written = os.write(self.fd, view)
                view = view[written:]
        except OSError:
            self.rollback(start)
            raise
        self.size = start + len(data)

    def synced(self, size: int) -> None:
        """The first ``size`` bytes are fsync'ed: tell the readers."""
        self.synced_size = size
        assert self.synced_map is not None
        self.synced_map[:] = _pack_synced(size)

    def rollback(self, size: int | None = None) -> None:
        """Cut the journal back to ``size`` (default: its fsync'ed length)."""
        size = self.synced_size if size is None else size
        try:
            os.ftruncate(self.fd, size)
            os.fsync(self.fd)
        except OSError as exc:
            self.broken = f"journal {self.path} is unusable: {exc}"
            log.error("HTTP source: %s", self.broken)
        self.size = size

    def close(self) -> None:
        if self.synced_map is not None:
            with contextlib.suppress(Exception):
                self.synced_map.close()
            self.synced_map = None
        for fd in (self.fd, self.synced_fd):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.fd = self.synced_fd = -1


# ----------------------------------------------------------------------------- the input


class HttpInput(PartitionedInput):
    """The events an :class:`HttpServer` journaled for ``vertex`` under ``journal_dir``.

    One part, named after the vertex; its state is the journal byte offset after the
    last event read, so a restarted flow resumes exactly after the last committed
    snapshot. Items are :class:`~flowspark.api.udf.types.Datum` s: keys, payload,
    event time (header or arrival), watermark = event time, headers, id. Live: it
    never ends. Picklable (two strings); it reads the files and never the server.
    """

    is_live = True

    def __init__(self, journal_dir: str | Path, vertex: str) -> None:
        self.journal_dir = str(journal_dir)
        self.vertex = _check_vertex(vertex)

    def list_parts(self) -> list[str]:
        return [self.vertex]

    def build_part(self, for_part: str, resume_state: Any | None) -> StatefulSource:
        if for_part != self.vertex:
            raise ValueError(f"HttpInput({self.vertex!r}) has no part {for_part!r}")
        return _JournalPart(
            os.path.join(self.journal_dir, self.vertex + JOURNAL_SUFFIX),
            os.path.join(self.journal_dir, self.vertex + SYNCED_SUFFIX),
            int(resume_state or 0),
        )

    def __repr__(self) -> str:
        return f"HttpInput({self.journal_dir!r}, {self.vertex!r})"


class _JournalPart(StatefulSource):
    """Reads one journal from a byte offset, up to its fsync'ed length."""

    def __init__(
        self, path: str, synced_path: str, offset: int, max_items: int = READ_MAX_ITEMS
    ) -> None:
        self.path = path
        self.synced_path = synced_path
        self.offset = offset
        self.max_items = max_items
        self._fd = -1
        self._got = True  # (so the first read is at once)
        self._warned_at = -1
        self._limit: int | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_fd"] = -1
        return state

    def _available(self) -> int:
        synced = _read_synced(self.synced_path)
        return os.fstat(self._fd).st_size if synced is None else synced

    def next_batch(self) -> list[Datum]:
        self._got = False
        if self._fd < 0:
            try:
                self._fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:
                return []
        if self.offset < len(JOURNAL_MAGIC):
            if not _check_magic(self._fd, self.path):
                return []  # not created yet
            self.offset = len(JOURNAL_MAGIC)
        end = self._available()
        if self._limit is not None:
            end = min(end, self._limit)
        if end < self.offset:
            raise RuntimeError(
                f"{self.path} is {end} bytes long but this flow already read up to byte "
                f"{self.offset}: the journal was replaced or lost (a flow's checkpoint "
                "must keep its HTTP journal directory)"
            )
        if end == self.offset:
            return []
        items, pos, invalid = _read_records(self._fd, self.offset, end, self.max_items, _DATUMS)
        if invalid and not items and self._warned_at != pos:
            self._warned_at = pos
            log.warning(
                "%s: invalid record at byte %d; waiting for the server to repair it", self.path, pos
            )
        self.offset = pos
        self._got = bool(items)
        return items

    def next_awake(self) -> datetime | None:
        if self._got:
            return None
        return datetime.now(UTC) + READ_IDLE_WAIT

    def snapshot(self) -> int:
        return self.offset

    def limit_to(self, snapshot: Any) -> None:
        """Read no further than byte ``snapshot`` (a replayed micro-batch)."""
        self._limit = int(snapshot)

    def close(self) -> None:
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = -1


# ------------------------------------------------------------------------------ the server


@dataclass(frozen=True)
class HttpRoute:
    """``POST /vertices/{vertex}``; with ``token``, requests need ``Bearer <token>``."""

    vertex: str
    token: str | None = None


_REASONS = {
    100: "Continue",
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    405: "Method Not Allowed",
    409: "Conflict",
    413: "Payload Too Large",
    429: "Too Many Requests",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    501: "Not Implemented",
    503: "Service Unavailable",
    505: "HTTP Version Not Supported",
}
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


class _DateCache:
    def __init__(self) -> None:
        self._second = -1
        self._value = b""

    def __call__(self) -> bytes:
        now = int(time.time())
        if now != self._second:
            self._second = now
            self._value = formatdate(now, usegmt=True).encode()
        return self._value


@dataclass(slots=True)
class _Pending:
    """A request waiting for its journal write."""

    journal: _Journal
    record: bytes
    conn: _Connection
    id: str


@dataclass(slots=True)
class _Request:
    method: str
    path: str
    http10: bool
    keep_alive: bool
    headers: list[tuple[str, str]] = field(default_factory=list)
    ascii: bool = True  # every header value is ASCII
    body: bytes = b""


class _BadRequest(Exception):
    def __init__(self, status: int = 400) -> None:
        super().__init__(status)
        self.status = status


class _Connection(asyncio.Protocol):
    """One HTTP/1.x connection: requests are handled one at a time, in order."""

    def __init__(self, server: HttpServer) -> None:
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.busy = False  # a request waits for its journal write
        self.closed = False
        self.paused = False
        self.request: _Request | None = None
        self._head_end = 0
        self._length = 0  # content length; -1: chunked
        self._pending_request: _Request | None = None
        self._expect_continue = False
        self._continue_sent = False
        self.eof = False  # the client will send no more
        self._processing = False
        self.event_id = ""  # of the request waiting for its journal write

    # -- asyncio callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.server._conns.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.server._conns.discard(self)

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        self.buf += data
        if not self.busy:
            self._process()
        if (
            self.busy
            and not self.paused
            and not self.closed
            and len(self.buf) > MAX_BODY_BYTES + MAX_HEAD_BYTES
            and self.transport is not None
        ):
            self.paused = True
            self.transport.pause_reading()

    def eof_received(self) -> bool | None:
        self.eof = True
        if not self.busy and self.transport is not None:
            self.closed = True
            self.transport.close()
        # keep the write side open for a pending reply (TLS cannot half-close)
        return None if self.server.certfile else True

    # -- replies

    def reply(
        self, status: int, body: bytes = b"", ctype: bytes | None = None, close: bool = False
    ) -> None:
        """Send a reply to the current request, then go on with the next one."""
        request = self.request
        self.request = None
        self.busy = False
        if self.closed or self.transport is None or self.transport.is_closing():
            return
        keep = request is not None and request.keep_alive and not close
        http10 = request is not None and request.http10
        head = b"HTTP/1.0 " if http10 else b"HTTP/1.1 "
        lines = [b"%s%d %s\r\n" % (head, status, _REASONS.get(status, "Error").encode())]
        if ctype is not None:
            lines.append(b"content-type: %s\r\n" % ctype)
        lines.append(b"content-length: %d\r\n" % len(body))
        if not keep:
            lines.append(b"connection: close\r\n")
        elif http10:
            lines.append(b"connection: keep-alive\r\n")
        lines.append(b"date: %s\r\n\r\n" % self.server._date())
        lines.append(body)
        self.transport.write(b"".join(lines))
        if not keep:
            self.closed = True
            self.transport.close()
            return
        if self.paused:
            self.paused = False
            self.transport.resume_reading()
        if self.buf or self.eof:
            self._process()

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
            b"date: %s\r\n\r\n%s" % (len(body), self.server._date(), body)
        )
        if self.buf or self.eof:
            self._process()

    # -- parsing

    def _process(self) -> None:
        """Handle the buffered requests, one at a time (not re-entered by replies)."""
        if self._processing:
            return
        self._processing = True
        try:
            while not self.busy and not self.closed and self.buf:
                try:
                    request = self._parse()
                except _BadRequest as bad:
                    self.request = None
                    self.reply(bad.status, close=True)
                    return
                if request is None:
                    break
                self.request = request
                self.server._handle(self, request)
        finally:
            self._processing = False
        if self.eof and not self.busy and not self.closed and self.transport is not None:
            self.closed = True
            self.transport.close()

    def _parse(self) -> _Request | None:
        buf = self.buf
        if self.request is None and self._head_end == 0:
            while buf[:2] == b"\r\n":  # RFC 9112 2.2: ignore empty lines before a request
                del buf[:2]
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                if len(buf) > MAX_HEAD_BYTES:
                    raise _BadRequest(431)
                return None
            if end > MAX_HEAD_BYTES:
                raise _BadRequest(431)
            self._head_end = end + 4
            self._pending_request = self._parse_head(bytes(buf[:end]).decode("latin-1"))
        request = self._pending_request
        assert request is not None
        start = self._head_end
        if self._length >= 0:
            stop = start + self._length
            if len(buf) < stop:
                self._maybe_continue(request)
                return None
            request.body = bytes(buf[start:stop])
        else:
            parsed = self._parse_chunked(start)
            if parsed is None:
                self._maybe_continue(request)
                return None
            request.body, stop = parsed
        del buf[:stop]
        self._head_end = 0
        self._continue_sent = False
        self._pending_request = None
        return request

    def _maybe_continue(self, request: _Request) -> None:
        if not self._continue_sent and self._expect_continue and self.transport is not None:
            self._continue_sent = True
            self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def _parse_head(self, head: str) -> _Request:
        flat = head.replace("\r\n", " ")
        if not flat.isprintable() and _BAD_CHAR.search(flat):  # (tabs, obs-text: allowed)
            raise _BadRequest()
        cut = head.find("\r\n")
        if cut < 0:
            request_line, block = head, ""
        else:
            request_line, block = head[:cut], head[cut + 2 :]
        parts = request_line.split(" ")
        if len(parts) != 3:
            raise _BadRequest()
        method, target, version = parts
        if not method or not target:
            raise _BadRequest()
        if version == "HTTP/1.1":
            http10 = False
        elif version == "HTTP/1.0":
            http10 = True
        elif version.startswith("HTTP/"):
            raise _BadRequest(505)
        else:
            raise _BadRequest()
        if target[0] != "/" and target.startswith(("http://", "https://")):  # absolute form
            slash = target.find("/", target.find("//") + 2)
            target = target[slash:] if slash >= 0 else "/"
        path = target.split("?", 1)[0]
        headers: list[tuple[str, str]] = []
        if block:
            names = []
            for line in block.split("\r\n"):
                name, sep, value = line.partition(":")
                if not sep:
                    raise _BadRequest()
                name = name.lower()
                names.append(name)
                headers.append((name, value.strip(" \t")))
            if not _TOKENS.fullmatch("\n".join(names)):  # no blank, no obs-fold
                raise _BadRequest()
        length: int | None = None
        chunked = False
        connection = ""
        expect = False
        for name, value in headers:
            if name not in _FRAMING:
                continue
            if name == "content-length":
                if not value.isdigit() or not value.isascii():
                    raise _BadRequest()
                n = int(value)
                if length is not None and n != length:
                    raise _BadRequest()
                length = n
            elif name == "transfer-encoding":
                codings = [c.strip().lower() for c in value.split(",") if c.strip()]
                if codings != ["chunked"]:
                    raise _BadRequest(501)
                chunked = True
            elif name == "connection":
                connection = value.lower()
            else:  # expect
                expect = value.lower() == "100-continue"
        if chunked:
            self._length = -1
        else:
            self._length = length or 0
            if self._length > MAX_BODY_BYTES:
                raise _BadRequest(413)
        if connection:
            tokens = {t.strip() for t in connection.split(",")}
            keep_alive = "keep-alive" in tokens if http10 else "close" not in tokens
        else:
            keep_alive = not http10
        self._expect_continue = expect and not http10
        return _Request(method, path, http10, keep_alive, headers, head.isascii())

    def _parse_chunked(self, pos: int) -> tuple[bytes, int] | None:
        buf = self.buf
        chunks = []
        total = 0
        while True:
            eol = buf.find(b"\r\n", pos)
            if eol < 0:
                return None
            size_text = bytes(buf[pos:eol]).split(b";", 1)[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                raise _BadRequest() from None
            if size < 0:
                raise _BadRequest()
            pos = eol + 2
            if size == 0:
                break
            total += size
            if total > MAX_BODY_BYTES:
                raise _BadRequest(413)
            if len(buf) < pos + size + 2:
                return None
            if buf[pos + size : pos + size + 2] != b"\r\n":
                raise _BadRequest()
            chunks.append(bytes(buf[pos : pos + size]))
            pos += size + 2
        while True:  # trailers, up to an empty line
            eol = buf.find(b"\r\n", pos)
            if eol < 0:
                return None
            if eol == pos:
                return b"".join(chunks), eol + 2
            pos = eol + 2


# The fsync helper: a child process that fsyncs journals on request, so the event
# loop never blocks on a disk and no second Python thread contends for the GIL.
# Request: u16 n, n x u16 journal index; reply: n x i32 errno (0: synced). It exits
# when its stdin closes (the server stopped or died).
_FSYNC_HELPER = """
import os, signal, struct, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)
fds = [os.open(p, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC) for p in sys.argv[1:]]
os.write(1, b"R")
def read(n):
    data = b""
    while len(data) < n:
        chunk = os.read(0, n - len(data))
        if not chunk:
            sys.exit(0)
        data += chunk
    return data
while True:
    (n,) = struct.unpack("<H", read(2))
    errors = []
    for i in struct.unpack("<%dH" % n, read(2 * n)):
        try:
            os.fsync(fds[i])
            errors.append(0)
        except OSError as exc:
            errors.append(exc.errno or -1)
    os.write(1, struct.pack("<%di" % n, *errors))
"""


class _ProcessSyncer:
    """fsyncs journals in the helper process; replies arrive on the event loop."""

    def __init__(self, server: HttpServer, journals: list[_Journal]) -> None:
        self.server = server
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _FSYNC_HELPER, *(str(j.path) for j in journals)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            bufsize=0,
            close_fds=True,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.pid = self.proc.pid
        self.in_fd = self.proc.stdin.fileno()
        self.out_fd = self.proc.stdout.fileno()
        self.expect = 0  # reply bytes awaited
        self.buf = b""
        ready, _, _ = select.select([self.out_fd], [], [], 30)
        if not ready or os.read(self.out_fd, 1) != b"R":
            self.close()
            raise RuntimeError("the fsync helper did not start")

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        loop.add_reader(self.out_fd, self._readable)
        self.loop = loop

    def request(self, indices: list[int]) -> None:
        self.expect = 4 * len(indices)
        self.indices = indices
        self.buf = b""
        try:
            os.write(self.in_fd, struct.pack(f"<H{len(indices)}H", len(indices), *indices))
        except OSError:
            self.loop.call_soon(self._died)

    def _readable(self) -> None:
        try:
            data = os.read(self.out_fd, 65536)
        except OSError:
            data = b""
        if not data:
            self._died()
            return
        self.buf += data
        if len(self.buf) >= self.expect:
            errors = struct.unpack(f"<{len(self.indices)}i", self.buf[: self.expect])
            self.buf = b""
            self.expect = 0
            self.server._synced(dict(zip(self.indices, errors)))

    def _died(self) -> None:
        with contextlib.suppress(Exception):
            self.loop.remove_reader(self.out_fd)
        self.server._syncer_died(self)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.loop.remove_reader(self.out_fd)
        for pipe in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError):
                pipe.close()  # type: ignore[union-attr]
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class _ThreadSyncer:
    """The fallback: fsyncs journals in a thread of this process."""

    pid = None

    def __init__(self, server: HttpServer, journals: list[_Journal]) -> None:
        self.server = server
        self.journals = journals
        self.executor = ThreadPoolExecutor(1, thread_name_prefix="flowspark-http-fsync")

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop

    def request(self, indices: list[int]) -> None:
        future = self.executor.submit(self._fsync, indices)
        future.add_done_callback(
            lambda f: self.loop.call_soon_threadsafe(self.server._synced, f.result())
        )

    def _fsync(self, indices: list[int]) -> dict[int, int]:
        errors = {}
        for i in indices:
            try:
                os.fsync(self.journals[i].fd)
                errors[i] = 0
            except OSError as exc:
                errors[i] = exc.errno or -1
        return errors

    def close(self) -> None:
        self.executor.shutdown(wait=True)


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
    ) -> None:
        routes = list(routes)
        if not routes:
            raise ValueError("an HTTP source server needs at least one route")
        self.routes: dict[str, HttpRoute] = {}
        for route in routes:
            if _check_vertex(route.vertex) in self.routes:
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
        self._journals: dict[str, _Journal] = {}
        self._conns: set[_Connection] = set()
        self._pending = 0  # requests accepted and not answered yet
        self._batch: list[_Pending] = []  # accepted, not written yet
        self._syncing: list[_Pending] | None = None  # written, being fsync'ed
        self._sync_sizes: dict[_Journal, int] = {}
        self._flush_scheduled = False
        self._syncer: _ProcessSyncer | _ThreadSyncer | None = None
        self._date = _DateCache()
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
        journals: dict[str, _Journal] = {}
        try:
            for vertex in self.routes:
                journal = _Journal(self.journal_dir, vertex)
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
        await self._done

    def _rebuild(self) -> _ProcessSyncer | _ThreadSyncer:
        journals = list(self._journals.values())
        for index, journal in enumerate(journals):
            journal.index = index
            journal.rebuild()
        if self._ready_gate is not None:
            self._ready_gate.wait()
        if self._fsync_helper:
            try:
                return _ProcessSyncer(self, journals)
            except Exception as exc:  # e.g. no interpreter to run it
                log.warning("HTTP source: no fsync helper process (%s); using a thread", exc)
        return _ThreadSyncer(self, journals)

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

    def _handle(self, conn: _Connection, request: _Request) -> None:
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

    def _ingest(self, conn: _Connection, request: _Request, journal: _Journal) -> None:
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
            event_ms = self._event_ms(event_time)
            if isinstance(event_ms, bytes):
                conn.reply(400, event_ms, _JSON)
                return
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
        record = _encode(event_id, event_ms, keys, forwarded, request.body)
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
        writes: dict[_Journal, list[bytes]] = {}
        for pending in batch:
            records = writes.get(pending.journal)
            if records is None:
                writes[pending.journal] = [pending.record]
            else:
                records.append(pending.record)
        failed: dict[_Journal, BaseException] = {}
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
        failed: dict[_Journal, BaseException] = {}
        for journal, size in self._sync_sizes.items():
            error = errors.get(journal.index, -1)
            if error == 0:
                journal.synced(size)
            else:
                failed[journal] = OSError(error, f"fsync of {journal.path} failed")
                log.error("HTTP source: fsync of %s failed: errno %d", journal.path, error)
                journal.rollback()
        self._sync_sizes = {}
        self._complete(batch, failed)
        if self._batch:
            self._flush()

    def _syncer_died(self, syncer: Any) -> None:
        """The helper process is gone: go on with a thread (and redo its request)."""
        if syncer is not self._syncer:
            return
        log.error("HTTP source: the fsync helper process died; fsyncing in a thread")
        with contextlib.suppress(Exception):
            syncer.close()
        assert self._loop is not None
        self._syncer = _ThreadSyncer(self, list(self._journals.values()))
        self._syncer.attach(self._loop)
        if self._syncing is not None:
            self._syncer.request([j.index for j in self._sync_sizes])

    def _complete(self, batch: list[_Pending], failed: dict[_Journal, BaseException]) -> None:
        """Answer a written batch (loop thread): 200, or 500 where the write failed."""
        for pending in batch:
            journal = pending.journal
            journal.inflight.discard(pending.id)
            self._pending -= 1
            conn = pending.conn
            if conn.event_id != pending.id or not conn.busy:
                conn = None  # answered already (500 at shutdown)
            if journal in failed:
                if conn is not None:
                    conn.reply(
                        500,
                        _json({"error": "Request processing failed", "id": pending.id}),
                        _JSON,
                    )
            else:
                journal.ids.add(pending.id)
                if conn is not None:
                    conn.reply_ok(pending.id)
        if self._pending == 0 and self._drained is not None:
            self._drained.set()
