"""A map vertex's UDF script, run whole in a process of its own, as its container runs on Numaflow.

A UDF that reads side inputs is written for a long-lived container: its
``__main__`` reads the side-input file, starts a thread that watches the
directory, starts its server in another thread and joins them; the handler reads
the value the watcher keeps in the handler object. Such a script cannot be
captured in the driver and pickled into Spark's workers (its ``main`` never
returns, and its value lives in one process). So the driver runs it here, with
``SIDE_INPUT_DIR_PATH`` set to the vertex's side-input directory: ``start()`` of
its server, in whichever thread calls it, serves the handler over a Linux
abstract socket, and the vertex's Spark tasks call it there through a
:class:`RemoteMapHandler` (one round trip per datum).

The process runs on the driver's machine, so its vertex runs in local mode only.
It exits when the driver does (it watches the driver's pid) or when asked.

Wire (:mod:`flowspark.runtime.numaflow.framing`): ``("kind",)`` -> ``("ok",
kind)``; ``("map", keys, datum)`` -> ``("ok", [messages])`` or ``("fail",
text)`` (the user's error, raised in the task as a step failure);
``("stop",)``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import runpy
import socket
import subprocess
import sys
import threading
import time
import traceback
import uuid
from pathlib import Path
from typing import Any

from flowspark.api.udf.servers import NumaflowServer, host_servers
from flowspark.runtime.errors import RemoteStepFailure, step_failure
from flowspark.runtime.numaflow.framing import HostLost, recv, send, serve_connection
from flowspark.runtime.numaflow.run import map_messages
from flowspark.shared.processes import pid_alive

__all__ = ["ScriptProcess", "RemoteMapHandler", "HOSTED_KINDS"]

HOSTED_KINDS = ("map", "map_stream")
"""The UDF kinds a script process serves."""

# How long the driver waits for a UDF script to start its server.
START_TIMEOUT_S = 60.0
# How often the process checks that the driver is alive.
WATCH_INTERVAL_S = 1.0


# -- the process ----------------------------------------------------------------------


class _Served:
    """The one server a script starts, served on ``address`` once started."""

    def __init__(self, vertex: str, address: str) -> None:
        self.vertex, self.address = vertex, address
        self.server: Any = None
        self.handler: Any = None

    def serve(self, server: Any) -> None:
        """The ``start()`` hook: take ``server`` and serve it in this thread, forever."""
        if self.server is not None:
            raise RuntimeError(f'vertex "{self.vertex}": the UDF file starts a second server')
        self.server, self.handler = server, server.make_handler()
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(self.address)
        listener.listen(64)
        while True:
            conn, _ = listener.accept()
            threading.Thread(target=self._connection, args=(conn,), daemon=True).start()

    def _connection(self, conn: socket.socket) -> None:
        loop = asyncio.new_event_loop()  # one per connection: calls run side by side
        serve_connection(conn, lambda request: self._answer(request, loop))

    def _answer(self, request: tuple[Any, ...], loop: asyncio.AbstractEventLoop) -> tuple[Any, ...]:
        if request[0] == "kind":
            return ("ok", self.server.kind)
        _, keys, datum = request
        try:
            return (
                "ok",
                loop.run_until_complete(_collect(map_messages(self.handler, keys, datum))),
            )
        except Exception as exc:
            return ("fail", str(step_failure(self.vertex, self.handler, datum, exc)))


async def _collect(messages: Any) -> list[Any]:
    return [message async for message in messages]


def _watch(pid: int) -> None:
    while pid_alive(pid):
        time.sleep(WATCH_INTERVAL_S)
    os._exit(0)


def main(script: str, address: str, vertex: str, driver_pid: int) -> int:
    """Run ``script`` as ``__main__``; serve the server it starts at ``address``."""
    threading.Thread(target=_watch, args=(driver_pid,), daemon=True).start()
    sys.path.insert(0, str(Path(script).resolve().parent))
    served = _Served(vertex, address)
    host_servers(served.serve)
    try:
        namespace = runpy.run_path(script, run_name="__main__")
    except Exception:
        traceback.print_exc()
        return 1
    if served.server is None:  # no start() call: a server built at module level will do
        found = [v for v in namespace.values() if isinstance(v, NumaflowServer)]
        if len(found) != 1:
            print(f"{script}: starts {len(found)} servers; expected one", file=sys.stderr)
            return 1
        served.serve(found[0])
    threading.Event().wait()  # the script's own thread serves
    return 0


# -- the driver's side ----------------------------------------------------------------


class ScriptProcess:
    """A UDF script to run in its own process for ``vertex``; its address is fixed when
    this is made, so the vertex's handler (:meth:`handler`) can be built before it runs."""

    def __init__(self, script: str | os.PathLike[str], vertex: str) -> None:
        self.script, self.vertex = str(script), vertex
        self.address = f"\0flowspark-udf-{os.getpid()}-{uuid.uuid4().hex[:12]}"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, env: dict[str, str]) -> None:
        """Start the script with ``env`` added to this process's environment."""
        environ = {**os.environ, **env, "PYTHONUNBUFFERED": "1"}
        environ["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        self.process = subprocess.Popen(
            [sys.executable, "-m", __name__, self.script, self.address[1:], self.vertex]
            + [str(os.getpid())],
            stdin=subprocess.DEVNULL,
            env=environ,
            start_new_session=True,  # a Ctrl-C reaches the driver, which stops it
        )

    def kind(self, timeout: float = START_TIMEOUT_S) -> str:
        """The kind of server the script started (waits for it; ``RuntimeError`` if the
        script exits or starts none in ``timeout`` seconds)."""
        assert self.process is not None, "start() first"
        deadline = time.monotonic() + timeout
        while True:
            code = self.process.poll()
            if code is not None:
                raise RuntimeError(f"the UDF file exited with code {code} before it started")
            with (
                contextlib.suppress(ConnectionRefusedError, FileNotFoundError),
                socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock,
            ):
                sock.connect(self.address)
                send(sock, ("kind",))
                return str(recv(sock)[1])
            if time.monotonic() > deadline:
                raise RuntimeError(f"the UDF file started no server within {timeout:g} s")
            time.sleep(0.05)

    def handler(self) -> RemoteMapHandler:
        """What the vertex's tasks call."""
        return RemoteMapHandler(self.address, self.vertex)

    def stop(self) -> None:
        """Stop the process (and reap it)."""
        if self.process is None:
            return
        with (
            contextlib.suppress(OSError, HostLost),
            socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock,
        ):
            sock.settimeout(2.0)
            sock.connect(self.address)
            send(sock, ("stop",))
            with contextlib.suppress(OSError, HostLost):
                recv(sock)
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


# This worker's connections, by address.
_CONNECTIONS: dict[str, socket.socket] = {}
_LOCK = threading.Lock()


class RemoteMapHandler:
    """A map-stream handler that calls the vertex's script process (picklable)."""

    def __init__(self, address: str, vertex: str) -> None:
        self.address, self.vertex = address, vertex

    def __call__(self, keys: list[str], datum: Any) -> list[Any]:
        with _LOCK:
            try:
                sock = _CONNECTIONS.get(self.address)
                if sock is None:
                    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                    sock.connect(self.address)
                    _CONNECTIONS[self.address] = sock
                send(sock, ("map", keys, datum))
                reply = recv(sock)
            except (HostLost, OSError) as exc:
                dropped = _CONNECTIONS.pop(self.address, None)
                if dropped is not None:
                    dropped.close()
                raise HostLost(
                    f'vertex "{self.vertex}": its UDF process is gone or out of reach ({exc}); '
                    "it runs on the driver's machine, so a vertex that reads side inputs "
                    "runs in local mode only"
                ) from None
        if reply[0] == "fail":
            raise RemoteStepFailure(reply[1])
        return list(reply[1])

    def __repr__(self) -> str:
        return f"<UDF process of vertex {self.vertex!r}>"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], "\0" + sys.argv[2], sys.argv[3], int(sys.argv[4])))
