"""Standard output."""

from __future__ import annotations

from typing import Any

from flowspark.api.outputs import DynamicOutput, StatelessSink

__all__ = ["StdOutput"]


class _PrintSink(StatelessSink):
    def write_batch(self, items: list[Any]) -> None:
        for item in items:
            print(item)


class StdOutput(DynamicOutput):
    """Print each item with ``print(item)`` in the driver process, in order."""

    def build(self, worker_index: int, worker_count: int) -> StatelessSink:
        return _PrintSink()
