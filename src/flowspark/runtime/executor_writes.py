"""Outputs that write where the data is: a sink per Spark task of each micro-batch.

An output that declares ``writes_on = "executors"`` (flowspark's JetStream output,
or a user's :class:`~flowspark.api.outputs.DynamicOutput` that says so) is not
written by the driver. The task whose level emits the output's items writes them
itself, as they leave its program (:func:`write_here`, called by
``runtime/task.leaving_rows``): through a sink it builds on its first items, with its
partition as ``worker_index``, and closes when the task ends (:func:`close_task_sinks`).
In place of the items, the driver receives count rows (:data:`WRITTEN_COUNT_PORT`),
and what the sink printed.

A sink with ``begin_batch(batch_id, run_token)`` gets the recovery directory's token
followed by ``.`` and the partition: a task that Spark runs again (a retry, a
replayed micro-batch) names its writes as the first attempt did, and two tasks of
one micro-batch never name theirs alike (one level writes an output: the one of its
step).

>>> from flowspark.api.outputs import DynamicOutput, StatelessSink
>>> from flowspark.runtime.codec import decode_count
>>> class Printed(DynamicOutput):
...     writes_on = "executors"
...     def build(self, worker_index, worker_count):
...         class Sink(StatelessSink):
...             def write_batch(self, items):
...                 print(worker_index, worker_count, items)
...         return Sink()
>>> target = ExecutorOutput("out", Printed(), 2, "tok")
>>> [(port, data) for port, _, data in write_here(target, [1, 2])]
[(-1, b'0 2 [1, 2]\\n'), (-7, b'out\\x1f2')]
>>> [decode_count(data) for port, _, data in write_here(target, range(3)) if port == -7]
[('out', 3)]
>>> close_task_sinks()
b''
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from flowspark.runtime.codec import STDOUT_PORT, WRITTEN_COUNT_PORT, encode_count
from flowspark.runtime.errors import step_failure
from flowspark.runtime.stage import StageContext
from flowspark.runtime.task_context import capture_stdout, task_context

__all__ = ["ExecutorOutput", "close_task_sinks", "with_token", "write_here"]


@dataclass(frozen=True)
class ExecutorOutput:
    """An output written on the executors: its step id, the output (a
    ``DynamicOutput``), the sinks' ``worker_count`` (the run's parallelism) and the
    recovery directory's run token (set once the run has its directory)."""

    step_id: str
    output: Any
    workers: int
    token: str = ""


def with_token(target: ExecutorOutput, token: str) -> ExecutorOutput:
    """``target`` naming its writes by ``token``."""
    return replace(target, token=token)


class _TaskSink:
    """One output's sink in the running task: built on its first items, begun for
    the micro-batch."""

    def __init__(self, target: ExecutorOutput, ctx: StageContext) -> None:
        self.target = target
        try:
            self.sink = target.output.build(ctx.worker, target.workers)
            begin = getattr(self.sink, "begin_batch", None)
            if begin is not None:
                begin(ctx.epoch - 1, f"{target.token}.{ctx.worker}")
        except Exception as exc:
            raise step_failure(target.step_id, "build", f"worker {ctx.worker}", exc) from None

    def write(self, items: list[Any]) -> None:
        try:
            self.sink.write_batch(items)
        except Exception as exc:  # the user's sink: the driver re-raises it with its type
            raise step_failure(self.target.step_id, "write_batch", items[:3], exc) from None

    def close(self) -> None:
        try:
            self.sink.close()
        except Exception as exc:
            raise step_failure(self.target.step_id, "close", None, exc) from None


# This process's sinks for the task it runs now (a Spark Python worker runs one task
# at a time), by step id, and that task's attempt id.
_sinks: dict[str, _TaskSink] = {}
_attempt: int | None = None


def write_here(target: ExecutorOutput, items: Iterable[Any]) -> Iterator[tuple[int, None, bytes]]:
    """Write ``items`` through the running task's sink of ``target``; yield the rows
    that go to the driver instead: what the sink printed, and the count written."""
    global _attempt
    ctx = task_context()
    if ctx.attempt != _attempt:  # a new task: the last one's sinks are done
        with contextlib.suppress(Exception):
            close_task_sinks()
        _attempt = ctx.attempt
    values = items if isinstance(items, list) else list(items)
    with capture_stdout() as captured:
        sink = _sinks.get(target.step_id)
        if sink is None:
            sink = _sinks[target.step_id] = _TaskSink(target, ctx)
        sink.write(values)
    text = captured.take()
    if text:
        yield STDOUT_PORT, None, text
    yield WRITTEN_COUNT_PORT, None, encode_count(target.step_id, len(values))


def close_task_sinks() -> bytes:
    """Close the running task's sinks (its end), each once, the others too when one
    fails (its error is raised then); return what they printed."""
    sinks = list(_sinks.values())
    _sinks.clear()
    errors: list[Exception] = []
    with capture_stdout() as captured:
        for sink in sinks:
            try:
                sink.close()
            except Exception as exc:
                errors.append(exc)
    if errors:
        raise errors[0]
    return captured.take()
