"""HTTP/1.1 on asyncio, server side: requests parsed from a connection's bytes, replies
written back. Nothing here knows Numaflow or the journal.

A connection (:class:`HttpConnection`) serves one request at a time, in order
(pipelined requests wait in its buffer); it handles ``Content-Length`` and
chunked bodies, ``Expect: 100-continue``, keep-alive (HTTP/1.1's default,
HTTP/1.0's ``Connection: keep-alive``) and absolute-form targets. A malformed
head is answered 400 and the connection closed; 413 for a body over
:data:`MAX_BODY_BYTES`, 431 for a head over :data:`MAX_HEAD_BYTES`, 501 for a
transfer coding other than ``chunked``, 505 for an HTTP version other than 1.0
and 1.1.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from email.utils import formatdate
from typing import Any

__all__ = ["HttpConnection", "Request", "BadRequest", "DateCache", "REASONS"]

# The largest request body accepted (axum's default body limit: 2 MB).
MAX_BODY_BYTES = 2 * 1024 * 1024
# The largest request head (request line and headers).
MAX_HEAD_BYTES = 64 * 1024

# Control characters (other than HTAB) and bare CR/LF are not allowed in a head.
_BAD_CHAR = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
# Header names (lower-cased, one a line) that are all RFC 9110 tokens.
_TOKENS = re.compile(r"[!#$%&'*+.^_`|~0-9a-z-]+(?:\n[!#$%&'*+.^_`|~0-9a-z-]+)*")
_FRAMING = frozenset(("content-length", "transfer-encoding", "connection", "expect"))


REASONS = {
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


class DateCache:
    """The ``Date`` header's value, formatted once a second."""

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
class Request:
    """One parsed request: header names lower-cased, in order; the whole body."""

    method: str
    path: str
    http10: bool
    keep_alive: bool
    headers: list[tuple[str, str]] = field(default_factory=list)
    ascii: bool = True  # every header value is ASCII
    body: bytes = b""


class BadRequest(Exception):
    """A request that cannot be served: answered ``status``, then the connection closes."""

    def __init__(self, status: int = 400) -> None:
        super().__init__(status)
        self.status = status


class HttpConnection(asyncio.Protocol):
    """One HTTP/1.x connection: requests are handled one at a time, in order.

    ``on_request(connection, request)`` gets each complete request and answers it
    with :meth:`reply`, at once or later: one that answers later sets ``busy``, and
    the requests after it wait in the buffer until the reply (reading pauses once
    the buffer outgrows a request's limits). ``date()`` gives the ``Date`` header.
    ``half_close``: keep the write side open for a pending reply after the client's
    EOF (TLS cannot half-close).
    """

    def __init__(
        self,
        on_request: Callable[[Any, Request], None],  # (this connection, its request)
        date: Callable[[], bytes],
        half_close: bool = True,
    ) -> None:
        self.on_request = on_request
        self.date = date
        self.half_close = half_close
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.busy = False  # a request waits for its reply
        self.closed = False
        self.paused = False
        self.request: Request | None = None
        self._head_end = 0
        self._length = 0  # content length; -1: chunked
        self._pending_request: Request | None = None
        self._expect_continue = False
        self._continue_sent = False
        self.eof = False  # the client will send no more
        self._processing = False

    # -- asyncio callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True

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
        return True if self.half_close else None

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
        lines = [b"%s%d %s\r\n" % (head, status, REASONS.get(status, "Error").encode())]
        if ctype is not None:
            lines.append(b"content-type: %s\r\n" % ctype)
        lines.append(b"content-length: %d\r\n" % len(body))
        if not keep:
            lines.append(b"connection: close\r\n")
        elif http10:
            lines.append(b"connection: keep-alive\r\n")
        lines.append(b"date: %s\r\n\r\n" % self.date())
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
                except BadRequest as bad:
                    self.request = None
                    self.reply(bad.status, close=True)
                    return
                if request is None:
                    break
                self.request = request
                self.on_request(self, request)
        finally:
            self._processing = False
        if self.eof and not self.busy and not self.closed and self.transport is not None:
            self.closed = True
            self.transport.close()

    def _parse(self) -> Request | None:
        buf = self.buf
        if self.request is None and self._head_end == 0:
            while buf[:2] == b"\r\n":  # RFC 9112 2.2: ignore empty lines before a request
                del buf[:2]
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                if len(buf) > MAX_HEAD_BYTES:
                    raise BadRequest(431)
                return None
            if end > MAX_HEAD_BYTES:
                raise BadRequest(431)
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

    def _maybe_continue(self, request: Request) -> None:
        if not self._continue_sent and self._expect_continue and self.transport is not None:
            self._continue_sent = True
            self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def _parse_head(self, head: str) -> Request:
        flat = head.replace("\r\n", " ")
        if not flat.isprintable() and _BAD_CHAR.search(flat):  # (tabs, obs-text: allowed)
            raise BadRequest()
        cut = head.find("\r\n")
        if cut < 0:
            request_line, block = head, ""
        else:
            request_line, block = head[:cut], head[cut + 2 :]
        parts = request_line.split(" ")
        if len(parts) != 3:
            raise BadRequest()
        method, target, version = parts
        if not method or not target:
            raise BadRequest()
        if version == "HTTP/1.1":
            http10 = False
        elif version == "HTTP/1.0":
            http10 = True
        elif version.startswith("HTTP/"):
            raise BadRequest(505)
        else:
            raise BadRequest()
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
                    raise BadRequest()
                name = name.lower()
                names.append(name)
                headers.append((name, value.strip(" \t")))
            if not _TOKENS.fullmatch("\n".join(names)):  # no blank, no obs-fold
                raise BadRequest()
        length: int | None = None
        chunked = False
        connection = ""
        expect = False
        for name, value in headers:
            if name not in _FRAMING:
                continue
            if name == "content-length":
                if not value.isdigit() or not value.isascii():
                    raise BadRequest()
                n = int(value)
                if length is not None and n != length:
                    raise BadRequest()
                length = n
            elif name == "transfer-encoding":
                codings = [c.strip().lower() for c in value.split(",") if c.strip()]
                if codings != ["chunked"]:
                    raise BadRequest(501)
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
                raise BadRequest(413)
        if connection:
            tokens = {t.strip() for t in connection.split(",")}
            keep_alive = "keep-alive" in tokens if http10 else "close" not in tokens
        else:
            keep_alive = not http10
        self._expect_continue = expect and not http10
        return Request(method, path, http10, keep_alive, headers, head.isascii())

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
                raise BadRequest() from None
            if size < 0:
                raise BadRequest()
            pos = eol + 2
            if size == 0:
                break
            total += size
            if total > MAX_BODY_BYTES:
                raise BadRequest(413)
            if len(buf) < pos + size + 2:
                return None
            if buf[pos + size : pos + size + 2] != b"\r\n":
                raise BadRequest()
            chunks.append(bytes(buf[pos : pos + size]))
            pos += size + 2
        while True:  # trailers, up to an empty line
            eol = buf.find(b"\r\n", pos)
            if eol < 0:
                return None
            if eol == pos:
                return b"".join(chunks), eol + 2
            pos = eol + 2
