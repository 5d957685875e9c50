"""In-memory input and output, for tests and examples (``flowspark.testing``)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from flowspark.api.inputs import SeekableInput, Split
from flowspark.api.outputs import DynamicOutput, StatelessSink
from flowspark.runtime.codec import decode_items, encode_items

__all__ = ["TestingInput", "TestingOutput"]

# The most items one chunk carries through a stage.
CHUNK_ITEMS = 65536


class _SliceSplit(Split):
    """A slice of a ``range`` (travels as three numbers)."""

    def __init__(self, items: range) -> None:
        self.items = items

    def read(self) -> Iterator[Sequence[Any]]:
        items = self.items
        for i in range(0, len(items), CHUNK_ITEMS):
            yield items[i : i + CHUNK_ITEMS]


class _ChunkSplit(Split):
    """Encoded chunks of the input, each with the slice of it to read."""

    def __init__(self, pieces: list[tuple[bytes, int, int]]) -> None:
        self.pieces = pieces

    def read(self) -> Iterator[Sequence[Any]]:
        for data, lo, hi in self.pieces:
            items = decode_items(data)
            yield items if (lo, hi) == (0, len(items)) else items[lo:hi]


class _SpilledChunkSplit(Split):
    """Encoded chunks read from the run's spill file: ``(offset, length, lo, hi)`` each."""

    def __init__(self, path: str, pieces: list[tuple[int, int, int, int]]) -> None:
        self.path, self.pieces = path, pieces

    def read(self) -> Iterator[Sequence[Any]]:
        with open(self.path, "rb") as f:
            for offset, length, lo, hi in self.pieces:
                f.seek(offset)
                items = decode_items(f.read(length))
                yield items if (lo, hi) == (0, len(items)) else items[lo:hi]


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
        self._chunks: list[bytes] | None = None
        self._spill: tuple[str, list[tuple[int, int]]] | None = None
        self._spill_dir: str | None = None

    def for_run(self, scratch_dir: str | None) -> TestingInput:
        """When executors share the driver's disk (``scratch_dir``), a copy that spills
        its encoded chunks to a file there as it is pickled for Spark, so that
        micro-batches carry file offsets instead of the data itself."""
        if scratch_dir is None:
            return self
        prepared = object.__new__(TestingInput)  # not copy.copy: that pickles the data
        prepared.__dict__.update(self.__dict__, _spill_dir=scratch_dir)
        return prepared

    def __getstate__(self) -> dict[str, Any]:
        # Items travel to Spark's planning process once, pre-encoded in chunks,
        # so planning a micro-batch ships bytes instead of pickling objects again.
        state: dict[str, Any] = {"batch_size": self.batch_size, "length": len(self.items)}
        if isinstance(self.items, range):
            state["range"] = self.items
            return state
        chunks = (
            encode_items(list(self.items[i : i + CHUNK_ITEMS]))
            for i in range(0, len(self.items), CHUNK_ITEMS)
        )
        spill_dir = getattr(self, "_spill_dir", None)
        if spill_dir is None:
            state["chunks"] = list(chunks)
            return state
        fd, path = tempfile.mkstemp(prefix="testing-input-", suffix=".bin", dir=spill_dir)
        spans = []
        with os.fdopen(fd, "wb") as f:
            for data in chunks:
                spans.append((f.tell(), len(data)))
                f.write(data)
        state["spill"] = (path, spans)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.batch_size = state["batch_size"]
        self._length = state["length"]
        self.items = state.get("range")  # type: ignore[assignment]
        self._chunks = state.get("chunks")
        self._spill = state.get("spill")

    def list_parts(self) -> list[str]:
        return ["iterable"]

    def end_offset(self, part: str) -> int:
        return len(self.items) if self.items is not None else self._length

    def splits(self, part: str, start: int, end: int, pieces: int) -> list[Split]:
        size = max(1, -(-(end - start) // max(1, pieces)))
        bounds = [(a, min(end, a + size)) for a in range(start, end, size)]
        if self._spill is not None:
            return [_SpilledChunkSplit(self._spill[0], self._spilled(a, b)) for a, b in bounds]
        if self._chunks is None:
            if isinstance(self.items, range):
                return [_SliceSplit(self.items[a:b]) for a, b in bounds]
            return [
                _ChunkSplit([(encode_items(list(self.items[a:b])), 0, b - a)]) for a, b in bounds
            ]
        return [_ChunkSplit(self._pieces(a, b)) for a, b in bounds]

    def _spilled(self, start: int, end: int) -> list[tuple[int, int, int, int]]:
        spans = self._spill[1]  # type: ignore[index]
        return [(*spans[c], lo, hi) for c, lo, hi in self._slices(start, end)]

    def _slices(self, start: int, end: int) -> Iterator[tuple[int, int, int]]:
        """``(chunk, lo, hi)``: the chunks covering ``[start, end)`` and what of each to read."""
        for c in range(start // CHUNK_ITEMS, -(-end // CHUNK_ITEMS)):
            base = c * CHUNK_ITEMS
            yield c, max(start, base) - base, min(end, base + CHUNK_ITEMS) - base

    def _pieces(self, start: int, end: int) -> list[tuple[bytes, int, int]]:
        """The encoded chunks covering ``[start, end)`` and the slice of each to read."""
        return [(self._chunks[c], lo, hi) for c, lo, hi in self._slices(start, end)]  # type: ignore[index]


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
