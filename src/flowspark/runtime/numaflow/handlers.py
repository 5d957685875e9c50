"""Where Numaflow's live stream handlers are kept between micro-batches.

A keyed UDF step (:mod:`flowspark.runtime.numaflow.keyed`) keeps, in Spark state, each
live handler's *handle* ``(gen, fed, emitted)`` — which incarnation, how many datums
it has seen, how many messages it has put — and a write-ahead log (WAL) of the
datums fed to it that are still retained. The handler itself, a suspended
coroutine, lives in a :class:`HandlerRegistry`:

* :class:`LocalHandlers`, in this process: for a whole input handled in one call,
  for tests, and inside a resident host;
* :class:`~flowspark.runtime.numaflow.handler_host.HostHandlers`, in a resident host process
  per step and partition that outlives Spark's tasks, so a key's handler stays put
  whichever Python worker runs the key's task (see that module).

Both answer the same two calls, :meth:`HandlerRegistry.feed` and
:meth:`HandlerRegistry.end`. The handler they find is used when it matches the
handle. Otherwise it is rebuilt: a fresh handler is fed the WAL's retained datums
and what it puts then is dropped (it was emitted before). A handler of the same
incarnation that is only behind (it missed the last batches) is fed just the datums
it missed, if the WAL still holds them. The result is the same as if the handler
had never stopped, for handlers that are deterministic in their datums and keep
nothing older than the WAL retains (Numaflow's own replay makes the same
assumption).

>>> from flowspark.runtime.codec import encode_items
>>> from flowspark.runtime.numaflow.run import HandlerRun
>>> class Echo:
...     step_id, run_id, force_rebuild = "echo", "r1", False
...     def _start(self, key, window):
...         async def echo(datums, output):
...             async for d in datums:
...                 await output.put(d)
...         return HandlerRun(echo)
...     def _failure(self, key, datum, exc):
...         return exc
>>> reg = LocalHandlers()
>>> first = reg.feed(Echo(), "k", None, None, [1, 2], b"", lambda: (0, []))
>>> first.messages, first.handle[1:]
([1, 2], (2, 2))
>>> reg.live.clear()  # the handler is lost: rebuilt from the WAL, its replay dropped
>>> wal = [encode_items([1, 2])]
>>> again = reg.feed(Echo(), "k", None, first.handle, [3], b"", lambda: (0, wal))
>>> again.messages, again.handle[1:], again.base, reg.rebuilds
([3], (3, 3), 2, {'echo': 1})
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from flowspark.runtime.codec import decode_items
from flowspark.runtime.numaflow.run import HandlerRun

__all__ = [
    "Call",
    "Fed",
    "Handle",
    "HandlerRegistry",
    "LocalHandlers",
    "Replay",
    "UdfLogicLike",
]

# (gen, fed, emitted): which incarnation, datums it has seen, messages it has put.
Handle = tuple[str, int, int]
# The WAL's retained entries of an incarnation: (datums trimmed before them, the
# entries: each a batch of datums encoded by flowspark.runtime.codec.encode_items).
Replay = Callable[[], tuple[int, list[bytes]]]


class UdfLogicLike(Protocol):
    """What a registry needs of a keyed UDF logic."""

    step_id: str
    run_id: str
    force_rebuild: bool

    def _start(self, key: str, window: Any) -> HandlerRun: ...

    def _failure(self, key: str, datum: Any, exc: Exception) -> Exception: ...


@dataclass
class Fed:
    """What one call did: the handle after it and the messages put during it
    (``base``: how many the handler had put before them)."""

    handle: Handle
    base: int
    messages: list[Any]


@dataclass(frozen=True, slots=True)
class Call:
    """One :meth:`HandlerRegistry.feed` (``feeding``: its datums and their encoding) or
    :meth:`HandlerRegistry.end` (``feeding`` ``None``)."""

    key: str
    window: Any
    handle: Handle | None
    replay: Replay
    figures: tuple[int, int] | None
    feeding: tuple[list[Any], bytes] | None


class HandlerRegistry:
    """Live handlers by (step, key, window); see the module doc. Subclasses answer each
    call in :meth:`_serve`."""

    def feed(
        self,
        logic: Any,
        key: str,
        window: Any,
        handle: Handle | None,
        datums: list[Any],
        encoded: bytes,
        replay: Replay,
        figures: tuple[int, int] | None = None,
    ) -> Fed:
        """Feed ``datums`` (``encoded``: the same, as the WAL keeps them) to the key's
        handler (a new one if ``handle`` is ``None``)."""
        return self._serve(logic, Call(key, window, handle, replay, figures, (datums, encoded)))

    def end(
        self,
        logic: Any,
        key: str,
        window: Any,
        handle: Handle,
        replay: Replay,
        figures: tuple[int, int] | None = None,
    ) -> Fed:
        """End the handler's datum stream; what it puts until it returns. It is gone after.
        (``figures``: the key's WAL datums and outbound watermark, for progress.)"""
        return self._serve(logic, Call(key, window, handle, replay, figures, None))

    def _serve(self, logic: Any, call: Call) -> Fed:
        raise NotImplementedError


@dataclass
class LocalHandlers(HandlerRegistry):
    """Handlers in this process. ``rebuilds`` counts, per step, the handlers rebuilt
    from a WAL."""

    live: dict[tuple[str, str, str, Any], HandlerRun] = field(default_factory=dict)
    rebuilds: dict[str, int] = field(default_factory=dict)

    def _serve(self, logic: Any, call: Call) -> Fed:
        key, window = call.key, call.window
        run = self._attach(logic, key, window, call.handle, call.replay)
        base = run.emitted
        if call.feeding is not None:
            messages = self._call(logic, key, run, run.feed, call.feeding[0])
        else:
            try:
                messages = self._call(logic, key, run, lambda _: run.end(), None)
            finally:
                self.forget(logic, key, window)
        return Fed((run.gen, run.fed, run.emitted), base, messages)

    def forget(self, logic: Any, key: str, window: Any) -> None:
        run = self.live.pop((logic.run_id, logic.step_id, key, window), None)
        if run is not None:
            run.close()

    # -- finding or rebuilding the handler ----------------------------------------------

    def _attach(
        self, logic: Any, key: str, window: Any, handle: Handle | None, replay: Replay
    ) -> HandlerRun:
        where = (logic.run_id, logic.step_id, key, window)
        run = self.live.get(where)
        if handle is None:  # a new stream
            if run is not None:
                run.close()
            return self._open(logic, key, window)
        gen, fed, emitted = handle
        if run is not None and not logic.force_rebuild:
            if run.gen == gen and run.fed == fed:
                return run
            if run.gen == gen and run.fed < fed:
                # The same incarnation, behind (it missed the key's last batches):
                # feed it what it missed, if the WAL still holds all of that.
                trimmed, batches = replay()
                if run.fed >= trimmed:
                    self._catch_up(logic, key, run, batches, run.fed - trimmed)
                    if run.fed == fed:
                        run.emitted = emitted
                        return run
        trimmed, batches = replay()  # before anything changes: a host may ask for it
        if run is not None:
            run.close()
        run = self._open(logic, key, window)
        run.gen = gen  # the same incarnation, rebuilt: a twin elsewhere may catch up
        run.fed = trimmed  # the datums the WAL no longer holds count as seen
        self._catch_up(logic, key, run, batches, 0)
        run.emitted = emitted
        self.rebuilds[logic.step_id] = self.rebuilds.get(logic.step_id, 0) + 1
        return run

    def _open(self, logic: Any, key: str, window: Any) -> HandlerRun:
        where = (logic.run_id, logic.step_id, key, window)
        for stale in [k for k in self.live if k[1] == logic.step_id and k[0] != logic.run_id]:
            self.live.pop(stale).close()  # an earlier run's: can never match again
        try:
            run = logic._start(key, window)
        except Exception as exc:
            raise logic._failure(key, None, exc) from None
        self.live[where] = run
        return run

    def _catch_up(
        self, logic: Any, key: str, run: HandlerRun, entries: list[bytes], skip: int
    ) -> None:
        """Feed ``run`` the WAL entries' datums after the first ``skip``; what it puts
        was emitted before: dropped."""
        for entry in entries:
            datums = decode_items(entry)
            if skip >= len(datums):
                skip -= len(datums)
                continue
            self._call(logic, key, run, run.feed, list(datums[skip:]))
            skip = 0

    @staticmethod
    def _call(logic: Any, key: str, run: HandlerRun, fn: Any, datums: Any) -> list[Any]:
        try:
            return fn(datums)
        except Exception as exc:
            raise logic._failure(key, run.datums.last, exc) from None
