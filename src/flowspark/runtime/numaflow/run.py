"""Driving Numaflow handlers (async Python) inside Spark tasks.

Two shapes of handler run here:

* **map stream**: an async generator per datum. :func:`run_map_stream` drives
  each generator inline while it never really waits (the common case, ~1 µs of
  overhead per datum); a generator that awaits something real (a sleep, I/O)
  is finished as an asyncio task, at most ``concurrency`` at once, so slow
  handlers overlap as they do on Numaflow. Each datum's messages keep their
  yield order; datums' results are concatenated in input order.
* **stream handlers** (reduce stream, accumulator): one long-lived coroutine per
  key (or key and window) that reads ONE continuous ``datums`` stream.
  :class:`HandlerRun` keeps the suspended coroutine between micro-batches: each
  :meth:`HandlerRun.feed` appends datums and runs the handler until it waits for
  more; :meth:`HandlerRun.end` ends the stream, so the code after its
  ``async for`` runs.

>>> async def double(keys, datum):
...     yield datum * 2
...     yield datum * 3
>>> run_map_stream("s", double, [1, 2], 4, lambda d: [], lambda m, d, i: m)
[2, 3, 4, 6]
>>> async def count(datums, output):
...     n = 0
...     async for _ in datums:
...         n += 1
...     await output.put(n)
>>> run = HandlerRun(lambda datums, output: count(datums, output))
>>> run.feed([1, 2]), run.feed([3]), run.end()
([], [], [3])
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable, Coroutine
from typing import Any

from flowspark.runtime.errors import step_failure

__all__ = [
    "run_map_stream",
    "map_messages",
    "HandlerRun",
    "HandlerStep",
    "DatumStream",
    "OutputCollector",
    "event_loop",
]

_LOOP: asyncio.AbstractEventLoop | None = None


def event_loop() -> asyncio.AbstractEventLoop:
    """This process's event loop for handlers (one per Python worker, reused)."""
    global _LOOP
    if _LOOP is None or _LOOP.is_closed():
        _LOOP = asyncio.new_event_loop()
    return _LOOP


class HandlerStep:
    """A built step calling one handler, made by ``factory`` at first use in each
    process (the handler itself is never pickled with the step)."""

    def __init__(self, step_id: str, factory: Callable[[], Callable[..., Any]]) -> None:
        self.step_id, self.factory = step_id, factory
        self._handler: Callable[..., Any] | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_handler": None}

    @property
    def handler(self) -> Callable[..., Any]:
        """The handler (built on first use)."""
        if self._handler is None:
            self._handler = self.factory()
        return self._handler


# -- map stream ------------------------------------------------------------------------


class _Resume:
    """Await a coroutine that already ran up to its first real suspension."""

    __slots__ = ("coro", "first")

    def __init__(self, coro: Any, first: Any) -> None:
        self.coro, self.first = coro, first

    def __await__(self) -> Any:
        coro, yielded = self.coro, self.first
        while True:
            try:
                value = yield yielded
            except BaseException as exc:  # cancellation and friends go to the handler
                try:
                    yielded = coro.throw(exc)
                except StopIteration as stop:
                    return stop.value
            else:
                try:
                    yielded = coro.send(value)
                except StopIteration as stop:
                    return stop.value


async def _finish(agen: Any, step: Any, yielded: Any, out: list[Any]) -> None:
    try:
        out.append(await _Resume(step, yielded))
    except StopAsyncIteration:
        return
    async for message in agen:
        out.append(message)


def map_messages(handler: Callable[..., Any], keys: list[str], datum: Any) -> Any:
    """``handler(keys, datum)`` as an async generator of its messages, whichever shape
    the handler has (async generator, coroutine returning ``Messages``, ``Messages``)."""
    agen = handler(keys, datum)
    if hasattr(agen, "__anext__"):
        return agen
    if asyncio.iscoroutine(agen):  # an async Mapper (MapAsyncServer) returning Messages
        return _from_awaitable(agen)
    if agen is None:
        return _no_messages()
    if hasattr(agen, "__iter__"):  # a sync Mapper returning Messages
        return _from_iterable(agen)
    raise TypeError(f"a map-stream handler must yield Messages; it returned {type(agen).__name__}")


async def _no_messages() -> Any:
    return
    yield  # pragma: no cover - makes this an async generator


async def _from_iterable(messages: Any) -> Any:
    for message in messages:
        yield message


async def _from_awaitable(coro: Any) -> Any:
    messages = await coro
    if messages is None:
        return
    if not hasattr(messages, "__iter__"):
        raise TypeError(
            "an async map handler must return Messages (or a map-stream handler must "
            f"`yield Message(...)`); it returned {type(messages).__name__}"
        )
    for message in messages:
        yield message


async def _map_chunk(
    step_id: str,
    handler: Callable[..., Any],
    datums: list[Any],
    concurrency: int,
    keys_of: Callable[[Any], list[str]],
) -> list[list[Any]]:
    results: list[list[Any]] = []
    pending: dict[asyncio.Future[Any], Any] = {}

    async def settle(return_when: str) -> None:
        done, _ = await asyncio.wait(pending, return_when=return_when)
        for task in done:
            datum = pending.pop(task)
            exc = task.exception()
            if exc is not None:
                for other in pending:
                    other.cancel()
                raise step_failure(step_id, handler, datum, exc)

    for datum in datums:
        out: list[Any] = []
        results.append(out)
        try:
            agen = map_messages(handler, keys_of(datum), datum)
            while True:
                step = agen.__anext__()
                try:
                    yielded = step.send(None)
                except StopIteration as stop:
                    out.append(stop.value)
                    continue
                except StopAsyncIteration:
                    break
                task = asyncio.ensure_future(_finish(agen, step, yielded, out))
                pending[task] = datum
                if len(pending) >= concurrency:
                    await settle(asyncio.FIRST_COMPLETED)
                break
        except Exception as exc:
            for running in pending:  # nothing of a failed chunk may run on later
                running.cancel()
            raise step_failure(step_id, handler, datum, exc) from None
    while pending:
        await settle(asyncio.ALL_COMPLETED)
    return results


def run_map_stream(
    step_id: str,
    handler: Callable[..., Any],
    datums: list[Any],
    concurrency: int,
    keys_of: Callable[[Any], list[str]],
    to_item: Callable[[Any, Any, int], Any],
) -> list[Any]:
    """Run ``handler(keys, datum)`` for each datum; return ``to_item(message, datum, i)``
    for every message in order (``None`` results are dropped)."""
    loop = event_loop()
    per_datum = loop.run_until_complete(_map_chunk(step_id, handler, datums, concurrency, keys_of))
    items = []
    for datum, messages in zip(datums, per_datum):
        for i, message in enumerate(messages):
            try:
                item = to_item(message, datum, i)
            except Exception as exc:
                raise step_failure(step_id, handler, datum, exc) from None
            if item is not None:
                items.append(item)
    return items


# -- stream handlers -----------------------------------------------------------------------


class _WaitForData:
    """Awaited by :class:`DatumStream` when the batch's datums are used up."""

    __slots__ = ()

    def __await__(self) -> Any:
        yield _WAITING


_WAITING = object()
_WAIT = _WaitForData()


class DatumStream:
    """The ``datums`` a stream handler reads with ``async for``; fed batch by batch."""

    __slots__ = ("buffer", "pos", "ended", "last")

    def __init__(self) -> None:
        self.buffer: list[Any] = []
        self.pos = 0
        self.ended = False
        self.last: Any = None

    def __aiter__(self) -> DatumStream:
        return self

    async def __anext__(self) -> Any:
        while True:
            if self.pos < len(self.buffer):
                datum = self.buffer[self.pos]
                self.pos += 1
                self.last = datum
                return datum
            if self.ended:
                raise StopAsyncIteration
            await _WAIT

    def waiting(self) -> bool:
        return self.pos >= len(self.buffer) and not self.ended


class OutputCollector:
    """The ``output`` a stream handler writes to: ``await output.put(message)``."""

    __slots__ = ("items",)

    def __init__(self) -> None:
        self.items: list[Any] = []

    async def put(self, item: Any) -> None:
        """Emit ``item`` (a ``Message``) downstream."""
        self.items.append(item)

    def take(self) -> list[Any]:
        items, self.items = self.items, []
        return items


class HandlerRun:
    """One live stream handler: a suspended coroutine plus its datum stream.

    ``start(datums, output)`` must return the handler's coroutine. ``gen`` names
    this incarnation and ``fed`` counts the datums it has seen, so the keyed
    step can tell whether the run it finds still matches Spark's state.
    """

    def __init__(self, start: Callable[[DatumStream, OutputCollector], Coroutine]) -> None:
        self.datums = DatumStream()
        self.output = OutputCollector()
        self.coro = start(self.datums, self.output)
        if not asyncio.iscoroutine(self.coro):
            raise TypeError(
                "a stream handler must be an `async def` function (or a class whose "
                f"`handler` is one); calling it returned {type(self.coro).__name__}"
            )
        self.gen = uuid.uuid4().hex
        self.fed = 0
        self.emitted = 0
        self.done = False

    def feed(self, datums: list[Any]) -> list[Any]:
        """Hand ``datums`` to the handler; return what it put until it waits for more."""
        if self.done:
            # The handler returned before its stream ended: the rest is not read.
            self.fed += len(datums)
            return []
        stream = self.datums
        stream.buffer, stream.pos = datums, 0
        self.fed += len(datums)
        self._resume()
        return self._taken()

    def end(self) -> list[Any]:
        """End the stream; return what the handler put until it returned."""
        self.datums.ended = True
        if not self.done:
            self._resume()
        if not self.done:
            raise RuntimeError("the handler kept waiting after its datum stream ended")
        return self._taken()

    def _taken(self) -> list[Any]:
        items = self.output.take()
        self.emitted += len(items)
        return items

    def _resume(self) -> None:
        event_loop().run_until_complete(self._drive())

    async def _drive(self) -> None:
        coro = self.coro
        while True:
            try:
                yielded = coro.send(None)
            except StopIteration:
                self.done = True
                return
            if yielded is _WAITING:
                if self.datums.waiting():
                    return
                continue
            if yielded is None:  # a bare yield, e.g. asyncio.sleep(0)
                await asyncio.sleep(0)
                continue
            # A real future (a sleep, I/O): wait for it on the loop; resuming the
            # handler then hands it the future's result or raises its error there.
            with contextlib.suppress(BaseException):
                yielded._asyncio_future_blocking = False  # set by the handler's own await
                await yielded

    def close(self) -> None:
        """Drop the coroutine without running it further."""
        self.coro.close()
        self.done = True
