"""Spark Connect: a streamed run's micro-batches come back to the client.

On Spark Connect, ``foreachBatch`` runs on the server, but the flow's outputs live
in the client (a ``TestingOutput`` list, ``StdOutput`` on the client's stdout, the
sinks' exactly-once snapshots). So the server side is a small picklable
:class:`BatchForwarder`: it collects the micro-batch as Arrow, sends it to the
client's :class:`DeliveryServer` (TCP, a per-run token) and waits for the reply;
the client runs the real :class:`~flowspark.engine.sink.BatchDispatcher` on it. A
batch counts as written only when the client said so, so Spark commits it only
then, and a replay after a crash reaches the same dispatcher (which rewinds).
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import threading
from collections.abc import Callable
from typing import Any

import pyarrow as pa

__all__ = ["BatchForwarder", "DeliveryServer", "client_address"]

_HEADER = struct.Struct("<16sqQ")  # token, batch id, payload length


def _recv_exact(sock: socket.socket, size: int) -> bytes:
    chunks = []
    while size:
        chunk = sock.recv(min(size, 1 << 20))
        if not chunk:
            raise ConnectionError("the other side closed the connection")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


class DeliveryServer:
    """The client's end: accepts batches, hands each to ``deliver(table, batch_id)``,
    replies ``ok`` or the (pickled) error."""

    def __init__(self, deliver: Callable[[Any, int], None], host: str = "0.0.0.0") -> None:
        self.deliver = deliver
        self.token = os.urandom(16)
        self.listener = socket.create_server((host, 0))
        self.port = self.listener.getsockname()[1]
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        with conn:
            try:
                token, batch_id, size = _HEADER.unpack(_recv_exact(conn, _HEADER.size))
                if token != self.token:
                    return
                payload = _recv_exact(conn, size)
                table = pa.ipc.open_stream(payload).read_all()
                self.deliver(table, batch_id)
                reply = b"ok"
            except BaseException as exc:  # noqa: BLE001 - reported to the server's side
                self.error = exc
                reply = b"er" + str(exc)[:2000].encode("utf-8", "replace")
            with contextlib.suppress(OSError):
                conn.sendall(struct.pack("<Q", len(reply)) + reply)

    def forwarder(self, host: str) -> BatchForwarder:
        """The ``foreachBatch`` function for the server: it reaches this client at
        ``host`` (an address the Connect server can connect to)."""
        return BatchForwarder(host, self.port, self.token)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.listener.close()

    def __enter__(self) -> DeliveryServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class BatchForwarder:
    """``foreachBatch`` on the server: send the batch to the client, wait for it."""

    def __init__(self, host: str, port: int, token: bytes) -> None:
        self.host, self.port, self.token = host, port, token

    def __call__(self, df: Any, batch_id: int) -> None:
        table = df.toArrow()
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        payload = sink.getvalue().to_pybytes()
        with socket.create_connection((self.host, self.port), timeout=None) as sock:
            sock.sendall(_HEADER.pack(self.token, batch_id, len(payload)) + payload)
            (size,) = struct.unpack("<Q", _recv_exact(sock, 8))
            reply = _recv_exact(sock, size)
        if reply != b"ok":
            raise RuntimeError(f"flowspark client: {reply[2:].decode('utf-8', 'replace')}")


def client_address(remote: str) -> str:
    """The address of this machine that the Connect server at ``remote``
    (``sc://host:port/...``) reaches it by: ``$FLOWSPARK_CLIENT_HOST``, else the
    local address of a route to the server.

    >>> client_address("sc://127.0.0.1:15002")
    '127.0.0.1'
    """
    override = os.environ.get("FLOWSPARK_CLIENT_HOST")
    if override:
        return override
    hostport = remote.split("://", 1)[-1].split("/", 1)[0].split(";", 1)[0]
    host, _, port = hostport.rpartition(":")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect((host or hostport, int(port or 15002)))
        return str(probe.getsockname()[0])
