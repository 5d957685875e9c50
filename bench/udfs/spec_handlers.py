"""The spec pages' handlers that the benchmark runs on flowspark and on pynumaflow, written once.

Each builder takes the module the page's code imports from (``flowspark.accumulator``
or ``pynumaflow.accumulator`` …: the import prefix is all that differs) and returns
the page's code bound to it, so both systems run the same user code (the batch-map
example's is read from its file under ``examples/``). The handlers are built when
called, so that importing this module imports neither system.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, Callable
from datetime import datetime
from pathlib import Path
from types import ModuleType
from typing import Any

BATCHMAP_EXAMPLE = (
    Path(__file__).resolve().parents[2] / "examples" / "numaflow" / "udfs" / "batchmap_flatmap.py"
)


def stream_sorter(accumulator: ModuleType, flush_at_end: bool = True) -> type:
    """The spec's ``StreamSorter`` (pynumaflow accumulator example) on ``accumulator``.

    As on the spec page, with its bug fixed (the loop reads ``async for datum in
    datums``; the page's ``async for _`` leaves ``datum`` unbound) and everything
    left flushed after the loop (the page's second version): a key's stream ends at
    its ``CLOSE`` on pynumaflow, at the end of the input on flowspark. With
    ``flush_at_end`` false, the page's first version: what the last watermark did not
    pass stays in ``sorted_buffer``.
    """
    Datum, Message = accumulator.Datum, accumulator.Message

    class StreamSorter(accumulator.Accumulator):
        def __init__(self) -> None:
            self.latest_wm = datetime.fromtimestamp(-1)
            self.sorted_buffer: list[Datum] = []

        async def handler(self, datums: AsyncIterable[Datum], output: Any) -> None:
            async for datum in datums:
                # If watermark has moved forward
                if datum.watermark and datum.watermark > self.latest_wm:
                    self.latest_wm = datum.watermark
                    await self.flush_buffer(output)
                self.insert_sorted(datum)
            if flush_at_end:
                await self.flush_buffer(output, flush_all=True)

        def insert_sorted(self, datum: Datum) -> None:
            # Binary insert to keep sorted buffer in order
            left, right = 0, len(self.sorted_buffer)
            while left < right:
                mid = (left + right) // 2
                if self.sorted_buffer[mid].event_time > datum.event_time:
                    right = mid
                else:
                    left = mid + 1
            self.sorted_buffer.insert(left, datum)

        async def flush_buffer(self, output: Any, flush_all: bool = False) -> None:
            i = 0
            for datum in self.sorted_buffer:
                if not flush_all and datum.event_time > self.latest_wm:
                    break
                await output.put(Message.from_datum(datum))
                i += 1
            # Remove flushed items
            self.sorted_buffer = self.sorted_buffer[i:]

    return StreamSorter


def map_stream_handler(mapstreamer: ModuleType) -> Callable[..., AsyncIterable[Any]]:
    """The spec's ``map_stream_handler`` (pynumaflow map-streamer example) on
    ``mapstreamer``: split the value on commas, one message per part."""
    Datum, Message = mapstreamer.Datum, mapstreamer.Message

    async def map_stream_handler(_: list[str], datum: Datum) -> AsyncIterable[Message]:
        val = datum.value
        _ = datum.event_time
        _ = datum.watermark
        strs = val.decode("utf-8").split(",")

        if len(strs) == 0:
            yield Message.to_drop()
            return
        for s in strs:
            yield Message(str.encode(s))

    return map_stream_handler


def batch_flatmap(batchmapper: ModuleType) -> type:
    """pynumaflow's batch-map example ``Flatmap`` (``examples/batchmap/flatmap``) on
    ``batchmapper``: per datum of the batch, a ``BatchResponse`` for its id holding one
    message per comma-separated part. The code is flowspark's copy of the example
    (``examples/numaflow/udfs/batchmap_flatmap.py``), its import prefix swapped for
    ``batchmapper``'s."""
    code = BATCHMAP_EXAMPLE.read_text()
    ours = "from flowspark.batchmapper import"
    if ours not in code:
        raise RuntimeError(f"{BATCHMAP_EXAMPLE} no longer imports {ours!r}")
    code = code.replace(ours, f"from {batchmapper.__name__} import")
    namespace: dict[str, Any] = {"__name__": BATCHMAP_EXAMPLE.stem}  # not __main__: no server
    exec(compile(code, str(BATCHMAP_EXAMPLE), "exec"), namespace)
    return namespace["Flatmap"]
