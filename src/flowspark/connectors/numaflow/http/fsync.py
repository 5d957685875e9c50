"""Where the HTTP source's fsyncs run: a helper process, or a thread.

The helper is a child process (``python -I -S -c``) that fsyncs journals on
request, so that the server's event loop never blocks on a disk and no second
Python thread of the server's process contends for the GIL (measured with 32
clients: about 1.6 times the events per second and 1.5 times the events per
CPU-second of fsyncing in a thread). Request: u16 n, n x u16 journal index;
reply: n x i32 errno (0: synced). It exits when its stdin closes (the server
stopped or died). Without it (no interpreter to run, or it died) a thread
fsyncs (:class:`ThreadSyncer`).

Both syncers answer on the server's event loop: ``server._synced({index: errno})``
per request, ``server._syncer_died(syncer)`` when the helper is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import struct
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from flowspark.connectors.numaflow.http.journal import Journal

__all__ = ["ProcessSyncer", "ThreadSyncer", "SyncedListener"]


class SyncedListener(Protocol):
    """What a syncer answers to (the server)."""

    def _synced(self, errors: dict[int, int]) -> None: ...

    def _syncer_died(self, syncer: Any) -> None: ...


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


class ProcessSyncer:
    """fsyncs journals in the helper process; replies arrive on the event loop."""

    def __init__(self, server: SyncedListener, journals: list[Journal]) -> None:
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


class ThreadSyncer:
    """The fallback: fsyncs journals in a thread of this process."""

    pid = None

    def __init__(self, server: SyncedListener, journals: list[Journal]) -> None:
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
