"""pynumaflow's ``NonBlockingIterator``: the output queue of reduce-stream and accumulator handlers.

>>> import asyncio
>>> async def roundtrip() -> list[int]:
...     output = NonBlockingIterator()
...     for item in (1, 2):
...         await output.put(item)
...     await output.put(STREAM_EOF)
...     return [item async for item in output.read_iterator()]
>>> asyncio.run(roundtrip())
[1, 2]
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, Generic, TypeVar

__all__ = ["NonBlockingIterator", "STREAM_EOF"]

STREAM_EOF = "EOF"
"""The sentinel that ends :meth:`NonBlockingIterator.read_iterator`."""

T = TypeVar("T")


class NonBlockingIterator(Generic[T]):
    """An async iterator backed by an (unbounded by default) ``asyncio.Queue``."""

    __slots__ = ("_queue",)

    def __init__(self, size: int = 0) -> None:
        self._queue: asyncio.Queue[Any] = asyncio.Queue(maxsize=size)

    async def read_iterator(self) -> AsyncIterator[T]:
        """Yield the queued items until the ``"EOF"`` sentinel arrives."""
        while True:
            item = await self._queue.get()
            if item == STREAM_EOF:
                return
            yield item

    async def put(self, item: T) -> None:
        """Queue ``item``, then give the event loop a turn so consumers make progress."""
        await self._queue.put(item)
        await asyncio.sleep(0)
