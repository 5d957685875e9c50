"""Messages between a Spark task and a resident process of flowspark's, over a socket.

Each message is an 8-byte length and a pickle (classes defined in a user's
``__main__`` are pickled by value). :class:`HostLost` is raised when the other
side closes the connection.

>>> import socket
>>> left, right = socket.socketpair()
>>> send(left, ("ok", [1, 2]))
>>> recv(right)
('ok', [1, 2])
"""

from __future__ import annotations

import os
import pickle
import socket
import struct
import traceback
from collections.abc import Callable
from typing import Any

from flowspark.runtime import pickling

__all__ = ["HostLost", "send", "recv", "serve_connection"]

_HEADER = struct.Struct("!Q")


class HostLost(RuntimeError):
    """A resident process went away while a task talked to it."""


def send(sock: socket.socket, obj: Any) -> None:
    """Send ``obj`` as one message."""
    try:
        data = pickle.dumps(obj, protocol=5)
    except Exception:  # classes pickled by value (a user's Message subclass in __main__)
        data = pickling.dumps(obj, protocol=5)
    sock.sendall(_HEADER.pack(len(data)) + data)


def _recv_exactly(sock: socket.socket, size: int) -> bytearray:
    buf = bytearray(size)
    view, got = memoryview(buf), 0
    while got < size:
        n = sock.recv_into(view[got:])
        if n == 0:
            raise HostLost("the other process closed the connection")
        got += n
    return buf


def recv(sock: socket.socket) -> Any:
    """Receive one message."""
    (size,) = _HEADER.unpack(_recv_exactly(sock, _HEADER.size))
    return pickle.loads(_recv_exactly(sock, size))


def serve_connection(conn: socket.socket, answer: Callable[[Any], Any]) -> None:
    """A resident process's side of one connection: each request's ``answer``, until
    the other side closes it; a ``("stop",)`` request ends the process. An exception
    ``answer`` raises (a bug of flowspark's) is sent back as ``("error", traceback)``."""
    with conn:
        while True:
            try:
                request = recv(conn)
            except (HostLost, OSError):
                return
            if request[0] == "stop":
                os._exit(0)
            try:
                reply = answer(request)
            except Exception:
                reply = ("error", traceback.format_exc())
            try:
                send(conn, reply)
            except OSError:
                return
