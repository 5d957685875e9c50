"""bytewax 0.21's helpers for a partition's ``next_batch``: lists from an async
iterator with a timeout, or from a getter function.

>>> import queue
>>> q = queue.Queue()
>>> for x in (1, 2, 3):
...     q.put(x)
>>> batches = batch_getter_ex(q.get_nowait, 2)
>>> next(batches), next(batches), next(batches)
([1, 2], [3], [])
>>> it = iter([1, None, 2])
>>> [next(batch_getter(lambda: next(it), 5)) for _ in range(3)]
[[1], [2], []]
"""

from __future__ import annotations

import asyncio
import queue
from collections.abc import AsyncIterable, Callable, Iterator
from datetime import timedelta
from typing import Any, TypeVar

__all__ = ["batch_async", "batch_getter", "batch_getter_ex"]

X = TypeVar("X")


_NO_ITEM: Any = object()


def _batches(take: Callable[[], X], batch_size: int) -> Iterator[list[X]]:
    """Lists of up to ``batch_size`` items from ``take()``; a list ends early when it
    returns ``_NO_ITEM``. A ``StopIteration`` from ``take`` yields the last list and ends."""
    while True:
        batch: list[X] = []
        while len(batch) < batch_size:
            try:
                item = take()
            except StopIteration:
                yield batch
                return
            if item is _NO_ITEM:
                break
            batch.append(item)
        yield batch


def batch_getter(
    getter: Callable[[], X], batch_size: int, yield_on: X | None = None
) -> Iterator[list[X]]:
    """Lists of up to ``batch_size`` items from ``getter()``; a list ends early when
    the getter returns ``yield_on`` (no item yet). A ``StopIteration`` from the getter
    yields the last list and ends."""

    def take() -> X:
        item = getter()
        return _NO_ITEM if item == yield_on else item

    return _batches(take, batch_size)


def batch_getter_ex(
    getter: Callable[[], X], batch_size: int, yield_ex: type[Exception] = queue.Empty
) -> Iterator[list[X]]:
    """Lists of up to ``batch_size`` items from ``getter()``; a list ends early when
    the getter raises ``yield_ex`` (no item yet). A ``StopIteration`` from the getter
    yields the last list and ends."""

    def take() -> X:
        try:
            return getter()
        except yield_ex:
            return _NO_ITEM

    return _batches(take, batch_size)


def batch_async(
    aib: AsyncIterable[X],
    timeout: timedelta,
    batch_size: int,
    loop: asyncio.AbstractEventLoop | None = None,
) -> Iterator[list[X]]:
    """Lists of up to ``batch_size`` items of an async iterable, each gathered for at
    most ``timeout`` (so ``next_batch`` never blocks longer); ends with the iterable.

    An item still awaited when the time is up is kept for the next list.

    >>> async def numbers():
    ...     for i in range(5):
    ...         yield i
    >>> list(batch_async(numbers(), timedelta(seconds=1), 2))
    [[0, 1], [2, 3], [4]]
    """
    it = aib.__aiter__()
    run = loop if loop is not None else asyncio.new_event_loop()
    pending: asyncio.Future[Any] | None = None

    async def gather() -> list[X]:
        nonlocal pending
        got: list[X] = []
        while len(got) < batch_size:
            if pending is None:
                pending = asyncio.ensure_future(it.__anext__(), loop=run)
            try:
                item = await asyncio.shield(pending)
            except asyncio.CancelledError:  # the time is up: keep what is pending
                break
            except StopAsyncIteration:
                pending = None
                if got:
                    break
                raise
            pending = None
            got.append(item)
        return got

    while True:
        try:
            yield run.run_until_complete(asyncio.wait_for(gather(), timeout.total_seconds()))
        except StopAsyncIteration:
            return
