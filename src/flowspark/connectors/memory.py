"""In-memory input and output, for tests and examples (``flowspark.testing``)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from flowspark.inputs import SeekableInput, Split
from flowspark.outputs import DynamicOutput, StatelessSink

__all__ = ["TestingInput", "TestingOutput"]

# The most items one chunk carries through a stage.
CHUNK_ITEMS = 65536


class _SliceSplit(Split):
    """A slice of the input's items (a ``range`` slice stays a ``range``)."""

    def __init__(self, items: Sequence[Any]) -> None:
        self.items = items

    def read(self) -> Iterator[Sequence[Any]]:
        items = self.items
        for i in range(0, len(items), CHUNK_ITEMS):
            yield items[i : i + CHUNK_ITEMS]


class TestingInput(SeekableInput):
    """Emit the items of an iterable, in order, as one partition named ``"iterable"``.

    A ``list``, ``tuple`` or ``range`` is used as is; any other iterable is read
    into a list when the input is created, so it must be finite. The offset is
    the item index, so a restart resumes after the last committed item.
    ``batch_size`` is the number of items per source batch (per epoch when
    ``epoch_interval=0``).
    """

    __test__ = False  # not a pytest test class

    def __init__(self, ib: Iterable[Any], batch_size: int = 1) -> None:
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive int; got {batch_size!r}")
        self.items: Sequence[Any] = ib if isinstance(ib, (list, tuple, range)) else list(ib)
        self.batch_size = batch_size

    def list_parts(self) -> list[str]:
        return ["iterable"]

    def end_offset(self, part: str) -> int:
        return len(self.items)

    def splits(self, part: str, start: int, end: int, pieces: int) -> list[Split]:
        size = max(1, -(-(end - start) // max(1, pieces)))
        return [_SliceSplit(self.items[a : min(end, a + size)]) for a in range(start, end, size)]


class _ListSink(StatelessSink):
    def __init__(self, ls: list[Any]) -> None:
        self._ls = ls

    def write_batch(self, items: list[Any]) -> None:
        self._ls.extend(items)


class TestingOutput(DynamicOutput):
    """Append every item to the caller's list (sinks run in the driver process)."""

    __test__ = False

    def __init__(self, ls: list[Any]) -> None:
        if not hasattr(ls, "extend"):
            raise TypeError(f"TestingOutput needs a list to append to; got {type(ls).__name__}")
        self.ls = ls

    def build(self, worker_index: int, worker_count: int) -> StatelessSink:
        return _ListSink(self.ls)
