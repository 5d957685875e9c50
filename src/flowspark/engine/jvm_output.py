"""Keep the JVM's start-up banners off the user's terminal.

Spark's launcher and log setup print three lines to stderr that no setting
silences (the incubator-module warning, "Setting default log level…", "To
adjust logging level…"). While the JVM starts, flowspark points file
descriptor 2 at a pipe; the JVM and every process it starts keep that pipe as
their stderr, and a daemon thread forwards everything but those banners to the
real stderr, line by line.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator

__all__ = ["filtered_jvm_stderr", "BANNERS"]

BANNERS = (
    b"WARNING: Using incubator modules",
    b"Setting default log level to",
    b"To adjust logging level use sc.setLogLevel",
)


def _forward(read_fd: int) -> None:
    with os.fdopen(read_fd, "rb", buffering=0) as pipe:
        for line in iter(pipe.readline, b""):
            if not line.startswith(BANNERS):
                with contextlib.suppress(OSError):
                    os.write(2, line)


@contextlib.contextmanager
def filtered_jvm_stderr() -> Iterator[None]:
    """Processes started inside this block write stderr through the banner filter."""
    read_fd, write_fd = os.pipe()
    # Read from the start: a JVM that fills the pipe while starting would block.
    threading.Thread(
        target=_forward, args=(read_fd,), name="flowspark-jvm-stderr", daemon=True
    ).start()
    saved = os.dup(2)
    os.dup2(write_fd, 2)
    os.close(write_fd)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
