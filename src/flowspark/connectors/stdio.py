"""Standard output.

When standard output is a pipe whose reader has gone (``python -m flowspark.run
flow.py | head -1``), printing fails with ``BrokenPipeError``: the run stops, and
:func:`silence_stdout` points standard output at ``/dev/null`` so that nothing
else (a later print, Python's flush at exit) fails on it again.
:func:`stdout_closed` tells the command line to end quietly.
"""

from __future__ import annotations

import os
import select
import sys
from typing import Any

from flowspark.api.outputs import DynamicOutput, StatelessSink
from flowspark.api.sinks import Sink

__all__ = ["StdOutput", "StdOutSink", "silence_stdout", "stdout_closed"]

_closed = False  # set once standard output has been found closed


def silence_stdout() -> None:
    """Point standard output (the file descriptor under ``sys.stdout``) at
    ``/dev/null``, after its reader closed it; remember that it was closed."""
    global _closed  # noqa: PLW0603 - one process, one standard output
    _closed = True
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # replaced by an object without a file
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


def stdout_closed() -> bool:
    """Whether standard output was found closed, or is a pipe nobody reads any more."""
    if _closed:
        return True
    if not hasattr(select, "poll"):
        return False
    try:
        fd = sys.stdout.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        events = poller.poll(0)
    except (AttributeError, OSError, ValueError):
        return False
    return any(mask & select.POLLERR for _, mask in events)


class _PrintSink(StatelessSink):
    def write_batch(self, items: list[Any]) -> None:
        try:
            for item in items:
                print(item)
            sys.stdout.flush()  # each batch as it comes, also into a pipe
        except BrokenPipeError:
            silence_stdout()
            raise


class StdOutput(DynamicOutput):
    """Print each item with ``print(item)`` in the driver process, in order; a
    closed standard output stops the run (see the module doc)."""

    def build(self, worker_index: int, worker_count: int) -> StatelessSink:
        return _PrintSink()


class StdOutSink(StdOutput, Sink[Any]):
    """bytewax 0.21's ``StdOutSink``: :class:`StdOutput` under its 0.21 name (each item
    printed with ``print``, which writes ``str(item)`` and a newline, as bytewax does)."""
