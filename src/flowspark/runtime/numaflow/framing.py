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

import pickle
import socket
import struct
from typing import Any

from flowspark.runtime import pickling

__all__ = ["HostLost", "send", "recv"]

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
