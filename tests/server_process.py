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


class ServerProcess:
    """Subclasses say how to start theirs in :meth:`start` (with :meth:`_launch`)."""

    proc: subprocess.Popen | None = None

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
