"""Keep the JVM's chatter off the user's terminal.

Spark prints lines no setting silences: three start-up banners on stderr (the
incubator-module warning, "Setting default log level…", "To adjust logging
level…") and, from PySpark's transformWithState driver runner, progress lines
on stdout at every query start. While the JVM starts, flowspark points file
descriptors 1 and 2 at pipes; the JVM and every process it starts keep them,
and daemon threads forward everything except those lines to the real stdout
and stderr.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator

__all__ = ["filtered_jvm_output", "NOISE"]

NOISE = (
    b"WARNING: Using incubator modules",
    b"Setting default log level to",
    b"To adjust logging level use sc.setLogLevel",
    b"Starting Streaming TransformWithState",
    b"Streaming TransformWithState",
)


def _forward(read_fd: int, target_fd: int) -> None:
    dropped_last = False
    with os.fdopen(read_fd, "rb", buffering=0) as pipe:
        for line in iter(pipe.readline, b""):
            if line.startswith(NOISE) or (dropped_last and not line.strip()):
                dropped_last = True
                continue
            dropped_last = False
            with contextlib.suppress(OSError):
                os.write(target_fd, line)


@contextlib.contextmanager
def filtered_jvm_output() -> Iterator[None]:
    """Processes started inside this block write stdout/stderr through the noise filter."""
    saved: list[tuple[int, int]] = []
    try:
        for fd in (1, 2):
            read_fd, write_fd = os.pipe()
            # Read from the start: a JVM that fills the pipe while starting would block.
            threading.Thread(
                target=_forward, args=(read_fd, fd), name=f"flowspark-jvm-fd{fd}", daemon=True
            ).start()
            saved.append((fd, os.dup(fd)))
            os.dup2(write_fd, fd)
            os.close(write_fd)
        yield
    finally:
        for fd, copy in saved:
            os.dup2(copy, fd)
            os.close(copy)
