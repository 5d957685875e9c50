"""Outputs that write where the data is: a sink per Spark task of each micro-batch.

An output that declares ``writes_on = "executors"`` (flowspark's JetStream output,
or a user's :class:`~flowspark.api.outputs.DynamicOutput` that says so) is not
written by the driver. The micro-batch's rows take one more map on their way to the
driver (:class:`ExecutorWrites`, a ``mapInArrow``): each task builds the output's
sink with its partition as ``worker_index``, writes that output's rows in their
order, closes the sink, and passes every other row on. In place of the rows it
wrote, the driver receives one count row per output (:data:`WRITTEN_COUNT_PORT`).

A sink with ``begin_batch(batch_id, run_token)`` gets the recovery directory's token
followed by ``.`` and the partition: a task that Spark runs again (a retry, a
replayed micro-batch) names its writes as the first attempt did, and two tasks of
one micro-batch never name theirs alike.

>>> from flowspark.api.outputs import DynamicOutput, StatelessSink
>>> from flowspark.runtime.codec import decode_count, encode_items
>>> from flowspark.runtime.task import rows_to_batch
>>> class Printed(DynamicOutput):
...     writes_on = "executors"
...     def build(self, worker_index, worker_count):
...         class Sink(StatelessSink):
...             def write_batch(self, items):
...                 print(worker_index, worker_count, items)
...         return Sink()
>>> writes = ExecutorWrites({7: ExecutorOutput("out", Printed(), "tok")}, 3, 2)
>>> rows = rows_to_batch([7, 5, 7], [None] * 3, [encode_items([1, 2]), b"x", encode_items([3])], 0)
>>> out = list(writes([rows]))
>>> [batch.column(0).to_pylist() for batch in out]
[[5], [-1, -7]]
>>> text, count = out[-1].column(2).to_pylist()
>>> text.decode().splitlines(), decode_count(count)
(['0 2 [1, 2]', '0 2 [3]'], ('out', 3))
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from flowspark.runtime.codec import STDOUT_PORT, WRITTEN_COUNT_PORT, decode_items, encode_count
from flowspark.runtime.errors import step_failure
from flowspark.runtime.task import capture_stdout, rows_to_batch, task_context

__all__ = ["ExecutorOutput", "ExecutorWrites"]


@dataclass(frozen=True)
class ExecutorOutput:
    """An output written on the executors: its step id, the output (a
    ``DynamicOutput``), and the recovery directory's run token."""

    step_id: str
    output: Any
    token: str


class _TaskSink:
    """One output's sink in one task: built on its first rows, begun for the batch."""

    def __init__(self, target: ExecutorOutput, batch_id: int, worker: int, workers: int) -> None:
        self.target = target
        self.written = 0
        try:
            self.sink = target.output.build(worker, workers)
            begin = getattr(self.sink, "begin_batch", None)
            if begin is not None:
                begin(batch_id, f"{target.token}.{worker}")
        except Exception as exc:
            raise step_failure(target.step_id, "build", f"worker {worker}", exc) from None

    def write(self, items: list[Any]) -> None:
        try:
            self.sink.write_batch(items)
        except Exception as exc:  # the user's sink: the driver re-raises it with its type
            raise step_failure(self.target.step_id, "write_batch", items[:3], exc) from None
        self.written += len(items)

    def close(self) -> None:
        try:
            self.sink.close()
        except Exception as exc:
            raise step_failure(self.target.step_id, "close", None, exc) from None


class ExecutorWrites:
    """The ``mapInArrow`` function of one micro-batch (``batch_id``) that writes the rows
    of ``outputs`` (by port) through a sink per task, ``workers`` being the run's
    parallelism, and yields every other row, then the count and printed-text rows."""

    def __init__(self, outputs: dict[int, ExecutorOutput], batch_id: int, workers: int) -> None:
        self.outputs = outputs
        self.batch_id = batch_id
        self.workers = workers

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        worker = task_context().worker
        ports = pa.array(list(self.outputs), pa.int32())
        sinks: dict[int, _TaskSink] = {}
        captured = capture_stdout()
        try:
            for batch in batches:
                ours = pc.is_in(batch.column(0), value_set=ports)
                if not pc.any(ours).as_py():
                    yield batch
                    continue
                others = batch.filter(pc.invert(ours))
                if others.num_rows:
                    yield others
                mine = batch.filter(ours)
                for port, data in zip(mine.column(0).to_pylist(), mine.column(2).to_pylist()):
                    with captured:
                        self._write(sinks, port, data, worker)
            with captured:
                for sink in sinks.values():
                    sink.close()
        except BaseException:
            with contextlib.suppress(Exception), captured:
                for sink in sinks.values():
                    sink.sink.close()
            raise
        rows = [
            (WRITTEN_COUNT_PORT, encode_count(s.target.step_id, s.written)) for s in sinks.values()
        ]
        text = captured.take()
        if text:
            rows.insert(0, (STDOUT_PORT, text))
        if rows:
            yield rows_to_batch([p for p, _ in rows], [None] * len(rows), [d for _, d in rows], 0)

    def _write(self, sinks: dict[int, _TaskSink], port: int, data: bytes, worker: int) -> None:
        sink = sinks.get(port)
        if sink is None:
            sink = sinks[port] = _TaskSink(self.outputs[port], self.batch_id, worker, self.workers)
        items = decode_items(data)
        sink.write(items if isinstance(items, list) else list(items))
