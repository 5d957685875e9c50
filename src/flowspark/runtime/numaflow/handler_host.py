"""A resident handler host: a keyed UDF step's live handlers stay in one process.

Spark runs a partition's task in whichever pooled Python worker is free, a
different one from batch to batch. A Numaflow stream handler (accumulator,
reduce stream) is a coroutine that must see one continuous datum stream, and it
cannot be pickled into Spark state. So the handlers of a step's partition live in
a *host*: a process started by the first task that needs it, in its own session
(``start_new_session``), that outlives tasks and serves every later task of that
partition over a Linux abstract-namespace socket named by the run and partition.
A task sends a key's datums (encoded as the WAL keeps them) and gets back what the
handler put; the handler is never rebuilt while its host lives.

Correctness does not rest on the host: Spark state keeps each handler's handle and
WAL (:mod:`flowspark.runtime.numaflow.handlers`). A host that does not hold the handler
(a restart, a host that died, a retried task, a partition that moved to another
executor) asks for the WAL and rebuilds it; what the replay puts is dropped. A
host that dies mid-call is started again and the call repeated against the WAL,
which does not yet hold the call's datums: nothing is lost or put twice.

A host exits when the Spark process that started its worker exits (it watches
that pid), or when the driver stops it as the run ends (:func:`stop_hosts`).

Wire: each message is an 8-byte length and a pickle. Requests:
``("logic", step_id, logic)``, ``("feed", step_id, key, window, handle, datums,
figures, replay)``, ``("end", step_id, key, window, handle, None, figures, replay)``,
``("stats",)``, ``("stop",)``; ``figures`` is the key's ``(WAL datums retained,
outbound watermark)`` for the run's progress, or ``None``; datums and WAL batches
travel encoded (:mod:`flowspark.runtime.codec`).
Replies: ``("ok", value)``, ``("replay",)`` (send the WAL), ``("fail", text)`` (a
user error, re-raised in the task as :class:`RemoteStepFailure`), ``("error", text)``.
"""

from __future__ import annotations

import contextlib
import io
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

from flowspark.runtime.codec import decode_items, encode_items
from flowspark.runtime.errors import RemoteStepFailure
from flowspark.runtime.numaflow.framing import HostLost, serve_connection
from flowspark.runtime.numaflow.framing import recv as _recv
from flowspark.runtime.numaflow.framing import send as _send
from flowspark.runtime.numaflow.handlers import (
    Call,
    Fed,
    HandlerRegistry,
    LocalHandlers,
    Replay,
)
from flowspark.shared.processes import pid_alive

__all__ = ["HostHandlers", "host_address", "start_hosts", "stop_hosts", "host_stats", "HostLost"]

# How long a task waits for a host it started to listen.
START_TIMEOUT_S = 30.0
# How long stop_hosts waits for a host it asked to stop before killing it.
STOP_TIMEOUT_S = 5.0
# How often a host checks that the Spark process it serves is alive.
WATCH_INTERVAL_S = 1.0


def host_address(run_id: str, partition: int) -> str:
    """The abstract socket name of a step's host for one partition of one run."""
    return f"\0flowspark-handlers-{run_id}-{partition}"


# -- the host process -----------------------------------------------------------------


class _NeedReplay(Exception):
    """The handler is not here: the task must send the WAL."""


def _no_replay() -> tuple[int, list[bytes]]:
    raise _NeedReplay


def _replay_of(sent: tuple[int, list[bytes]] | None) -> Replay:
    return _no_replay if sent is None else lambda: sent


class _Host:
    """The registry and the logics it serves; one lock: handlers run one at a time."""

    def __init__(self) -> None:
        self.handlers = LocalHandlers()
        self.logics: dict[str, Any] = {}
        self.lock = threading.Lock()
        # (step id, key) -> (WAL datums retained, outbound watermark ms), as the
        # key's last call told: for the run's progress figures.
        self.wal_figures: dict[tuple[str, str], tuple[int, int]] = {}

    def handle(self, request: tuple[Any, ...]) -> tuple[Any, ...]:
        op = request[0]
        if op == "logic":
            _, step_id, logic = request
            self.logics.setdefault(step_id, logic)
            return ("ok", None)
        if op == "stats":
            with self.lock:
                return ("ok", self.stats())
        if op not in ("feed", "end"):
            return ("error", f"unknown request {op!r}")
        _, step_id, key, window, handle, datums, figures, sent = request
        if figures is not None:
            self.wal_figures[(step_id, key)] = figures
        elif op == "end" and window is None:
            self.wal_figures.pop((step_id, key), None)
        logic = self.logics.get(step_id)
        if logic is None:
            return ("error", f"step {step_id!r} is unknown to this handler host")
        replay = _replay_of(sent)
        out = io.StringIO()
        with self.lock, contextlib.redirect_stdout(out):
            try:
                if op == "feed":
                    items = list(decode_items(datums))
                    fed = self.handlers.feed(logic, key, window, handle, items, datums, replay)
                else:
                    fed = self.handlers.end(logic, key, window, handle, replay)
            except _NeedReplay:
                return ("replay",)
            except RemoteStepFailure as failure:
                return ("fail", str(failure))
        text = out.getvalue().encode("utf-8", "backslashreplace")
        return ("ok", (fed.handle, fed.base, encode_items(fed.messages), text))

    def stats(self) -> dict[str, dict[str, int]]:
        """Per step: open handlers, rebuilds, WAL datums retained, the least outbound
        watermark over its keys (ms), and this host's pid."""
        steps: dict[str, dict[str, int]] = {}
        for step_id in self.logics:
            marks = [m for (s, _), (_, m) in self.wal_figures.items() if s == step_id]
            steps[step_id] = {
                "open_handlers": sum(1 for k in self.handlers.live if k[1] == step_id),
                "rebuilds": self.handlers.rebuilds.get(step_id, 0),
                "wal_datums": sum(n for (s, _), (n, _) in self.wal_figures.items() if s == step_id),
                "outbound_watermark_ms": min(marks) if marks else -1,
                "pid": os.getpid(),
            }
        return steps


def _watch(pid: int) -> None:
    while pid_alive(pid):
        time.sleep(WATCH_INTERVAL_S)
    os._exit(0)


def serve(address: str, watch_pid: int) -> int:
    """Run a host at ``address`` until ``watch_pid`` exits or a stop request comes."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(address)
    except OSError:
        return 0  # another task started this host first: it serves
    listener.listen(64)
    threading.Thread(target=_watch, args=(watch_pid,), daemon=True).start()
    host = _Host()
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=serve_connection, args=(conn, host.handle), daemon=True).start()


# -- the task's side ------------------------------------------------------------------

# This worker's connections: address -> (socket, step ids whose logic the host has).
_CONNECTIONS: dict[str, tuple[socket.socket, set[str]]] = {}
_STARTED: list[subprocess.Popen] = []


def _start_host(address: str, watch_pid: int) -> subprocess.Popen:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    return subprocess.Popen(
        [sys.executable, "-m", __name__, address[1:], str(watch_pid)],
        stdin=subprocess.DEVNULL,
        stdout=sys.__stderr__.fileno() if sys.__stderr__ else subprocess.DEVNULL,
        env=env,
        start_new_session=True,  # outlives the task, the worker and its signals
        close_fds=True,
    )


def _connect(address: str, start: bool = True) -> socket.socket | None:
    deadline = time.monotonic() + START_TIMEOUT_S
    started, pause = not start, 0.002
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(address)
            return sock
        except (ConnectionRefusedError, FileNotFoundError):
            sock.close()
        if not started:
            _STARTED.append(_start_host(address, os.getppid()))
            started = True
        elif not start or time.monotonic() > deadline:
            if not start:
                return None
            raise HostLost(f"the handler host did not start within {START_TIMEOUT_S:g} s")
        time.sleep(pause)
        pause = min(pause * 2, 0.1)


def _drop(address: str) -> None:
    found = _CONNECTIONS.pop(address, None)
    if found is not None:
        with contextlib.suppress(OSError):
            found[0].close()


class HostHandlers(HandlerRegistry):
    """A :class:`~flowspark.runtime.numaflow.handlers.HandlerRegistry` in the host of one step's
    partition (``run_id`` names the run: a new run never reaches an old host)."""

    def __init__(self, run_id: str, partition: int) -> None:
        self.address = host_address(run_id, partition)

    def _serve(self, logic: Any, call: Call) -> Fed:
        op, encoded = ("end", None) if call.feeding is None else ("feed", call.feeding[1])
        request = (op, logic.step_id, call.key, call.window, call.handle, encoded, call.figures)
        sent = None
        for attempt in range(3):
            try:
                reply = self._ask(logic, (*request, sent))
                if reply[0] == "replay":
                    sent = call.replay()
                    reply = self._ask(logic, (*request, sent))
            except (HostLost, OSError):
                # The host died (its handlers with it): start another, which rebuilds
                # from the WAL. The WAL does not hold this call's datums yet.
                _drop(self.address)
                if attempt == 2:
                    raise
                continue
            return _fed(reply)
        raise AssertionError("unreachable")  # pragma: no cover

    def _ask(self, logic: Any, request: tuple[Any, ...]) -> Any:
        found = _CONNECTIONS.get(self.address)
        if found is None:
            sock = _connect(self.address)
            assert sock is not None
            found = _CONNECTIONS[self.address] = (sock, set())
        sock, known = found
        if logic.step_id not in known:
            _send(sock, ("logic", logic.step_id, logic))
            if _recv(sock)[0] != "ok":  # pragma: no cover - the host accepts any logic
                raise HostLost("the handler host refused the step")
            known.add(logic.step_id)
        _send(sock, request)
        return _recv(sock)


def _fed(reply: tuple[Any, ...]) -> Fed:
    kind = reply[0]
    if kind == "fail":
        raise RemoteStepFailure(reply[1])
    if kind != "ok":
        raise RuntimeError(f"the handler host failed: {reply[1] if len(reply) > 1 else reply}")
    handle, base, messages, text = reply[1]
    if text:
        sys.stdout.write(text.decode("utf-8"))  # the task captures it with its own prints
    return Fed(handle, base, list(decode_items(messages)))


def _one_shot(address: str, request: tuple[Any, ...]) -> Any:
    sock = _connect(address, start=False)
    if sock is None:
        return None
    with sock:
        sock.settimeout(5.0)
        _send(sock, request)
        if request[0] == "stop":
            with contextlib.suppress(OSError, HostLost):
                _recv(sock)  # returns when the host has exited
            return None
        return _recv(sock)[1]


def host_stats(run_id: str, partitions: int) -> list[dict[str, dict[str, int]]]:
    """The figures of the run's hosts on this machine (those that are running)."""
    found = []
    for partition in range(partitions):
        with contextlib.suppress(OSError, HostLost):
            stats = _one_shot(host_address(run_id, partition), ("stats",))
            if stats is not None:
                found.append(stats)
    return found


def start_hosts(run_id: str, partitions: int) -> list[subprocess.Popen]:
    """Start the run's hosts ahead of its first tasks (a local run's driver does), so
    that a task finds its host listening instead of waiting for one to start (0.3-0.6 s
    each, measured here). They watch this process; a task that finds none starts it.
    Give what this returns to :func:`stop_hosts`, which reaps them."""
    return [_start_host(host_address(run_id, p), os.getpid()) for p in range(partitions)]


def stop_hosts(run_id: str, partitions: int, started: Sequence[subprocess.Popen] = ()) -> None:
    """Stop the run's hosts on this machine (the run has ended; none is needed), and
    reap those of them this process ``started``."""
    for partition in range(partitions):
        with contextlib.suppress(OSError, HostLost):
            _one_shot(host_address(run_id, partition), ("stop",))
    for process in started:
        try:
            process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


if __name__ == "__main__":
    sys.exit(serve("\0" + sys.argv[1], int(sys.argv[2])))
