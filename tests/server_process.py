"""A server that a test runs as a child process on a loopback port (its output in a log
file), waits for, and stops by pid; a ``with`` block runs it."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Self

from flowspark.engine.cluster import free_port


class ServerProcess:
    """Subclasses say how to start theirs in :meth:`start` (with :meth:`_launch`, or
    :meth:`_launch_on_a_free_port`)."""

    proc: subprocess.Popen | None = None
    port: int

    def start(self) -> Self:
        raise NotImplementedError

    def _launch(
        self,
        cmd: list[str],
        log_file: Path,
        ready: Callable[[], Any],
        wait_s: float,
        pause_s: float,
    ) -> Self:
        """Run ``cmd``, its output appended to ``log_file``, until ``ready()`` stops raising
        ``OSError`` (at most ``wait_s`` seconds, every ``pause_s``)."""
        log = open(log_file, "ab")  # noqa: SIM115 - the server's, for as long as it runs
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=log)
        deadline = time.monotonic() + wait_s
        while True:
            try:
                ready()
                return self
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    name = Path(cmd[0]).name
                    raise RuntimeError(f"{name} did not start (see {log.name})") from None
                time.sleep(pause_s)

    def _launch_on_a_free_port(
        self,
        command: Callable[[int], list[str]],
        log_dir: Path,
        ready: Callable[[], Any],
        wait_s: float,
        pause_s: float,
        attempts: int = 3,
    ) -> Self:
        """:meth:`_launch` of ``command(self.port)``. A port that was free when it was
        probed can be taken before the server binds it (by another test's JVM, or an
        outgoing connection): then the server exits saying so, and this tries another."""
        for attempt in range(attempts):
            cmd = command(self.port)
            log_file = log_dir / f"{Path(cmd[0]).name}-{self.port}.log"
            try:
                return self._launch(cmd, log_file, ready, wait_s, pause_s)
            except RuntimeError:
                taken = "in use" in log_file.read_text(errors="replace")
                if not taken or attempt == attempts - 1:
                    raise
                self.port = free_port()
        raise AssertionError("unreachable")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
            self.proc.wait(timeout=20)
        self.proc = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def interrupt(proc: subprocess.Popen, timeout_s: float = 60) -> None:
    """Stop a run as Ctrl-C does (SIGINT); if it has not ended in ``timeout_s``, SIGKILL
    its process group (the run was started with ``start_new_session=True``)."""
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
