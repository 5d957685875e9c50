"""The running Spark task as user code sees it: its micro-batch and partition, and
the text it prints (which travels to the driver, see ``runtime/task.py``).

>>> with capture_stdout() as captured:
...     print("hi")
>>> captured.take().decode().split(), task_context().worker
(['hi'], 0)
"""

from __future__ import annotations

import io
import sys
from typing import Any

from flowspark.runtime.stage import StageContext

__all__ = ["capture_stdout", "task_context"]


class capture_stdout:  # noqa: N801 - used like a function
    """Collect what user code prints (``with capture_stdout() as cap: ...; cap.take()``)."""

    def __init__(self) -> None:
        self.buffer = io.StringIO()
        self.saved: Any = None

    def __enter__(self) -> capture_stdout:
        self.saved, sys.stdout = sys.stdout, self.buffer
        return self

    def __exit__(self, *exc: object) -> None:
        sys.stdout = self.saved

    def take(self) -> bytes:
        """The captured text since the last call, as UTF-8."""
        text = self.buffer.getvalue()
        if text:
            self.buffer.seek(0)
            self.buffer.truncate()
        return text.encode("utf-8", "backslashreplace")


def task_context() -> StageContext:
    """The epoch (micro-batch id + 1), worker (partition id) and attempt id of the
    running task."""
    from pyspark import TaskContext  # noqa: PLC0415 pyspark: runtime imports without it

    tc = TaskContext.get()
    if tc is None:
        return StageContext()
    batch_id = tc.getLocalProperty("streaming.sql.batchId")
    epoch = int(batch_id) + 1 if batch_id is not None else 1
    return StageContext(epoch=epoch, worker=tc.partitionId(), attempt=tc.taskAttemptId())
