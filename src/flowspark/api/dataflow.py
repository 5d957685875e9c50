"""`Dataflow` (bytewax 0.17's method API) and `Stream` (a handle for DAGs).

A flow is only a description: building one touches no Spark. ``Dataflow``
methods extend the flow's single chain exactly as bytewax 0.17 does (and return
``None``, so the page's doctests print nothing); ``flow.input`` also returns a
:class:`Stream`, whose methods return new streams, for flows with branches,
merges and several inputs or outputs.

>>> from flowspark.dataflow import Dataflow
>>> from flowspark.testing import TestingInput, TestingOutput
>>> flow = Dataflow()
>>> nums = flow.input("nums", TestingInput(range(6)))
>>> evens, odds = nums.branch(lambda x: x % 2 == 0)
>>> out = []
>>> _ = evens.map(lambda x: x * 10).merge(odds).output("out", TestingOutput(out))
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import Any, Generic, TypeVar

from flowspark.api.inputs import Input
from flowspark.api.outputs import Output, writes_on_executors
from flowspark.api.steps import Port, Step, operator
from flowspark.api.udf.checks import check_datum_functions, check_route
from flowspark.api.udf.handlers import BatchMapper, Mapper, Reducer
from flowspark.api.udf.servers import NumaflowServer, derives_from, handler_factory
from flowspark.api.window import ClockConfig, SlidingWindow, TumblingWindow, WindowConfig
from flowspark.api.windowing import check_window_configs

__all__ = ["Dataflow", "Stream", "WindowLogicStream", "WindowStream"]

X_co = TypeVar("X_co", covariant=True)
"""The type of a stream's items (``Stream[int]`` in annotations, as bytewax 0.21 writes)."""

MAP_STREAM_CONCURRENCY = 500
"""How many map-stream handlers of one micro-batch may wait at once, by default."""


def _check_callable(kind: str, role: str, fn: Any) -> None:
    if not callable(fn):
        raise TypeError(f"{kind}: {role} must be callable; got {type(fn).__name__} {fn!r:.80}")


def _fn_operator(kind: str, doc: str) -> Callable[..., Stream]:
    """The :class:`Stream` method of a stateless operator that calls the user's function
    (its role is the kind's ``fn`` in ``OPERATORS``): ``(fn)`` or ``(step_id, fn)``."""

    def method(self: Stream, *args: Any) -> Stream:
        return self._fn_step(kind, args)

    method.__name__, method.__qualname__, method.__doc__ = kind, f"Stream.{kind}", doc
    return method


class Stream(Generic[X_co]):
    """A stream of items flowing out of one step of a :class:`Dataflow`.

    Every operator method adds a step fed by this stream and returns the new
    step's stream. Stateless operators take an optional leading ``step_id``
    (``s.map("double", fn)``); without one a readable id is generated.
    ``Stream[int]`` names the type of its items in annotations.
    """

    __slots__ = ("_flow", "_port")

    def __init__(self, flow: Dataflow, port: Port | None) -> None:
        self._flow = flow
        self._port = port

    @property
    def flow(self) -> Dataflow:
        """The flow this stream belongs to."""
        return self._flow

    @property
    def step_id(self) -> str:
        """The id of the step that produces this stream (``""`` before any input)."""
        return self._port.step.step_id if self._port else ""

    @property
    def _ports(self) -> tuple[Port, ...]:
        return (self._port,) if self._port else ()

    def __repr__(self) -> str:
        return f"Stream({self.step_id!r})"

    # -- stateless operators -------------------------------------------------

    map = _fn_operator("map", "Transform each item one-to-one: ``mapper(item) -> item'``.")
    filter = _fn_operator("filter", "Keep items for which ``predicate(item)`` is true.")
    filter_map = _fn_operator("filter_map", "Map, dropping items whose result is ``None``.")
    flat_map = _fn_operator(
        "flat_map", "Emit each element of ``mapper(item)`` (an iterable) downstream."
    )
    flat_map_batch = _fn_operator(
        "flat_map_batch",
        """Emit each element of ``mapper(items)``, called with a list of items at once.

        How many items a list holds is the engine's choice (a chunk of a
        micro-batch), as in bytewax 0.21.
        """,
    )
    inspect = _fn_operator(
        "inspect", "Call ``inspector(item)`` on each item; items pass on unchanged."
    )
    inspect_epoch = _fn_operator(
        "inspect_epoch",
        "Call ``inspector(epoch, item)``; the epoch is the micro-batch number, from 1.",
    )
    inspect_worker = _fn_operator(
        "inspect_worker",
        """Call ``inspector(worker_index, item)``; the worker is the Spark partition index.

        bytewax 0.17 documents ``(item, worker)`` but calls ``(worker, item)``;
        flowspark follows what bytewax actually does.
        """,
    )
    inspect_debug = _fn_operator(
        "inspect_debug",
        """Call ``inspector(step_id, item, epoch, worker)``; items pass on unchanged.

        As bytewax 0.21's ``inspect_debug``: the epoch is the micro-batch number
        (from 1), the worker the Spark partition index.
        """,
    )

    def redistribute(self, step_id: str | None = None) -> Stream:
        """Spread items round-robin over all Spark partitions for the next steps."""
        return self._add("redistribute", step_id)

    def branch(self, *args: Any) -> tuple[Stream, Stream]:
        """Split into ``(trues, falses)`` by ``predicate(item)``."""
        step_id, fn = self._split_args("branch", args)
        _check_callable("branch", "predicate", fn)
        step = self._flow._add_step("branch", step_id, self._ports, {"predicate": fn})
        return Stream(self._flow, Port(step, 0)), Stream(self._flow, Port(step, 1))

    def merge(self, *others: Stream, step_id: str | None = None) -> Stream:
        """Combine this stream with ``others`` into one stream."""
        for other in others:
            if not isinstance(other, Stream):
                raise TypeError(f"merge: expected Stream objects; got {type(other).__name__}")
            if other._flow is not self._flow:
                raise ValueError("merge: streams belong to different Dataflows")
        ports = tuple(p for s in (self, *others) for p in s._ports)
        step = self._flow._add_step("merge", step_id, ports)
        return Stream(self._flow, Port(step))

    def output(self, step_id: str, output: Any) -> Stream:
        """Write items to ``output``; items also pass on downstream unmodified."""
        if not isinstance(output, Output):
            raise TypeError(
                f"output {step_id!r}: expected a flowspark Output "
                f"(e.g. TestingOutput, StdOutput, FileOutput); got {type(output).__name__}"
            )
        where = getattr(output, "writes_on", "driver")
        if where != "driver" and not writes_on_executors(output):
            raise ValueError(
                f"output {step_id!r}: writes_on is 'driver' or, for a DynamicOutput or "
                f"PartitionedOutput, 'executors'; got {where!r} on a {type(output).__name__}"
            )
        step = self._flow._add_step("output", step_id, self._ports, args={"output": output})
        return Stream(self._flow, Port(step))

    # -- stateful operators (items must be ``(key: str, value)``) --------------

    def reduce(self, step_id: str, reducer: Callable, is_complete: Callable) -> Stream:
        """Fold each key's values into an accumulator; emit ``(key, acc)`` when complete.

        The first value starts the accumulator; ``is_complete(acc)`` decides when
        to emit and forget it. Incomplete keys emit nothing at the end of input.
        """
        _check_callable("reduce", "reducer", reducer)
        _check_callable("reduce", "is_complete", is_complete)
        return self._add("reduce", step_id, {"reducer": reducer, "is_complete": is_complete})

    def stateful_map(self, step_id: str, builder: Callable, mapper: Callable) -> Stream:
        """``mapper(state, value) -> (state, out)`` per key; emits ``(key, out)``.

        ``builder`` makes a new key's state: called with the key if it takes one
        argument, else with none. A ``None`` state forgets the key.
        """
        _check_callable("stateful_map", "builder", builder)
        _check_callable("stateful_map", "mapper", mapper)
        return self._add("stateful_map", step_id, {"builder": builder, "mapper": mapper})

    def stateful_batch(self, step_id: str, builder: Callable[[Any], Any]) -> Stream:
        """Run a logic object per key, as bytewax 0.21's ``stateful_batch``; emits
        ``(key, value)`` for each value it returns.

        ``builder(resume_state)`` makes a key's logic (``None``: a new key); the
        logic has ``on_batch(values) -> (emit, discard)``, ``on_notify()``,
        ``on_eof()`` (both return the same pair), ``notify_at() -> datetime | None``
        and ``snapshot()``. The state kept between micro-batches is the snapshot:
        the logic is rebuilt from it with ``builder(snapshot)``.
        """
        _check_callable("stateful_batch", "builder", builder)
        return self._add("stateful_batch", step_id, {"builder": builder})

    def window(
        self,
        step_id: str,
        clock: Any,
        windower: Any,
        builder: Callable[[Any], Any],
        ordered: bool = True,
    ) -> WindowLogicStream:
        """bytewax 0.21's windows: a window logic per key and window id, made by
        ``builder(resume_state)`` (``on_value``, ``on_merge``, ``on_close``,
        ``snapshot``). Emits ``(key, (window_id, value))`` for what a logic
        returns; ``.late`` has ``(key, (window_id, value))`` and ``.meta`` ``(key,
        (window_id, WindowMetadata))`` when a window closes. ``clock`` and
        ``windower`` are :mod:`flowspark.api.windowing`'s; ``ordered`` applies
        values in time order. The 0.21 operators (:mod:`flowspark.operators.windowing`)
        return these streams as ``WindowOut``.
        """
        check_window_configs(step_id, clock, windower)
        _check_callable("window", "builder", builder)
        args = {"clock": clock, "windower": windower, "ordered": bool(ordered)}
        step = self._flow._add_step("window", step_id, self._ports, {"builder": builder}, args)
        return WindowLogicStream(self._flow, Port(step, 0))

    def batch(self, step_id: str, max_size: int, timeout: timedelta) -> Stream:
        """Emit ``(key, [values])`` at ``max_size``, ``timeout`` after a batch starts, and at
        the end of input."""
        if not isinstance(max_size, int) or max_size < 1:
            raise ValueError(
                f"batch {step_id!r}: max_size must be a positive int; got {max_size!r}"
            )
        if not isinstance(timeout, timedelta) or timeout <= timedelta(0):
            raise TypeError(
                f"batch {step_id!r}: timeout must be a positive timedelta; got {timeout!r}"
            )
        return self._add("batch", step_id, args={"max_size": max_size, "timeout": timeout})

    def reduce_window(
        self,
        step_id: str,
        clock_config: Any,
        window_config: Any,
        reducer: Callable,
        *,
        with_window: bool = False,
    ) -> WindowStream:
        """Reduce each key's values per window; emit ``(key, acc)`` when a window closes."""
        _check_callable("reduce_window", "reducer", reducer)
        return self._window(
            "reduce_window", step_id, clock_config, window_config, {"reducer": reducer}, with_window
        )

    def fold_window(
        self,
        step_id: str,
        clock_config: Any,
        window_config: Any,
        builder: Callable,
        folder: Callable,
        *,
        with_window: bool = False,
    ) -> WindowStream:
        """Fold each key's values per window into ``builder()``; emit ``(key, acc)`` at close."""
        _check_callable("fold_window", "builder", builder)
        _check_callable("fold_window", "folder", folder)
        return self._window(
            "fold_window",
            step_id,
            clock_config,
            window_config,
            {"builder": builder, "folder": folder},
            with_window,
        )

    def collect_window(
        self, step_id: str, clock_config: Any, window_config: Any, *, with_window: bool = False
    ) -> WindowStream:
        """Emit ``(key, [values sorted by time])`` for each window when it closes."""
        return self._window("collect_window", step_id, clock_config, window_config, {}, with_window)

    def _window(
        self,
        kind: str,
        step_id: str,
        clock_config: Any,
        window_config: Any,
        fns: dict[str, Any],
        with_window: bool,
    ) -> WindowStream:
        if not isinstance(clock_config, ClockConfig):
            raise TypeError(
                f"{kind} {step_id!r}: clock_config must be EventClockConfig or "
                f"SystemClockConfig; got {type(clock_config).__name__}"
            )
        if not isinstance(window_config, WindowConfig):
            raise TypeError(
                f"{kind} {step_id!r}: window_config must be TumblingWindow, SlidingWindow or "
                f"SessionWindow; got {type(window_config).__name__}"
            )
        args = {
            "clock_config": clock_config,
            "window_config": window_config,
            "with_window": bool(with_window),
        }
        step = self._flow._add_step(kind, step_id, self._ports, fns, args)
        return WindowStream(self._flow, Port(step, 0))

    # -- Numaflow UDFs: datums in, datums out -------------------------------------

    def to_datums(
        self,
        step_id: str | None = None,
        *,
        keys: Callable[[Any], Any] | None = None,
        value: Callable[[Any], Any] | None = None,
        event_time: Callable[[Any], Any] | None = None,
        headers: Callable[[Any], dict[str, str]] | None = None,
        id: Callable[[Any], str] | None = None,  # noqa: A002 - Numaflow's name
    ) -> Stream:
        """Turn plain items into Numaflow datums for ``map_stream``/``batch_map``/
        ``reduce_stream``/``accumulate``.

        Each argument is a function of the item. Defaults: a ``(str, value)`` pair
        gives keys ``[key]`` and its value; other items have no keys and are the
        value; ``str`` values are UTF-8 encoded; without ``event_time`` a datum is
        stamped with the time it is converted at.
        """
        fns = {"keys": keys, "value": value, "event_time": event_time, "headers": headers, "id": id}
        check_datum_functions(step_id or "to_datums", fns)
        given = {name: fn for name, fn in fns.items() if fn is not None}
        return self._add("to_datums", step_id or None, given)

    def map_stream(
        self, step_id: str, handler: Any, concurrency: int = MAP_STREAM_CONCURRENCY
    ) -> Stream:
        """Numaflow map stream: ``handler(keys, datum)`` is an async generator of
        ``Message``s (a ``MapStreamer`` instance or an ``async def`` function).

        Handlers of one micro-batch run concurrently (at most ``concurrency`` waiting
        at once); each datum's messages keep their order and inherit its event time.
        ``DROP``-tagged messages are not forwarded.
        """
        _check_step_id("map_stream", step_id)
        if not isinstance(concurrency, int) or concurrency < 1:
            raise ValueError(
                f"map_stream {step_id!r}: concurrency must be a positive int; got {concurrency!r}"
            )
        factory = handler_factory(handler, map_handler_kind(handler))
        return self._add("map_stream", step_id, {"factory": factory}, {"concurrency": concurrency})

    def batch_map(self, step_id: str, handler: Any, batch_size: int = 500) -> Stream:
        """Numaflow batch map: ``handler(datums)`` reads a batch of at most ``batch_size``
        datums (Numaflow's ``readBatchSize``) and returns a ``BatchResponse`` for each
        datum's ``id`` (a ``BatchMapper`` instance, an ``async def`` function or a
        ``BatchMapAsyncServer``).

        A datum's id, as the handler sees it, is its own when the batch's ids are all
        non-empty and distinct, else its position in the batch (``"0"``, ``"1"`` …).
        Every id must be answered exactly once (else the step fails, naming the id).
        Outputs follow the datums' order and inherit their event time, watermark and
        headers, with id ``"{request id}-{index}"``; ``DROP``-tagged messages are not
        forwarded. A batch never spans two micro-batch chunks.
        """
        _check_step_id("batch_map", step_id)
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
            raise ValueError(
                f"batch_map {step_id!r}: batch_size must be a positive int; got {batch_size!r}"
            )
        factory = handler_factory(handler, "batch_map")
        return self._add("batch_map", step_id, {"factory": factory}, {"batch_size": batch_size})

    def cycle(self, step_id: str, runner: Any) -> Stream:
        """The vertices of a Numaflow cycle as one keyed step: ``(key, (vertex, datum))``
        pairs go round ``runner`` (a ``CycleRunner``), a budget of rounds per
        micro-batch; what is still on the cycle waits in the step's state for the next
        one. Emits ``(key, (vertex, datum))`` for the outputs of the vertices with edges
        out of the cycle. Numaflow pipelines with cycles are built on it.
        """
        _check_step_id("cycle", step_id)
        return self._add("cycle", step_id, None, {"runner": runner})

    def reduce_stream(
        self,
        step_id: str,
        handler: Any,
        window: Any,
        allowed_lateness: timedelta = timedelta(0),
        keyed: bool = True,
        init_args: tuple[Any, ...] = (),
        init_kwargs: dict[str, Any] | None = None,
        *,
        watermark_delay: timedelta = timedelta(0),
        clock: str | None = None,
    ) -> WindowStream:
        """Numaflow reduce stream: ``handler(keys, datums, output, md)`` per key and window.

        ``window`` is a ``TumblingWindow`` (Numaflow's fixed window; a ``timedelta``
        means one aligned to the epoch) or a ``SlidingWindow``. What the handler
        puts is emitted in the micro-batch that produced it, timed at the window's
        end - 1 ms; its ``datums`` end when the window closes (the key's watermark
        minus ``allowed_lateness`` reaches the end). A ``ReduceStreamer`` subclass
        gets a new instance per key and window (``init_args``/``init_kwargs``);
        a ``Reducer`` (non-stream) emits only at the close. Datums whose windows
        have all closed go to ``.late``. ``clock``: see :meth:`accumulate`.
        """
        _check_step_id("reduce_stream", step_id)
        if isinstance(window, timedelta):
            window = TumblingWindow(length=window)
        if not isinstance(window, (TumblingWindow, SlidingWindow)):
            raise TypeError(
                f"reduce_stream {step_id!r}: window must be a TumblingWindow (fixed) or "
                f"SlidingWindow; got {type(window).__name__}"
            )
        _check_duration("reduce_stream", step_id, "allowed_lateness", allowed_lateness)
        _check_duration("reduce_stream", step_id, "watermark_delay", watermark_delay)
        _check_clock("reduce_stream", step_id, clock)
        args = {
            "factory": _reduce_factory(handler, init_args, init_kwargs),
            "window_config": window,
            "allowed_lateness": allowed_lateness,
            "watermark_delay": watermark_delay,
            "clock": clock,
        }
        step = self._keyed_udf("reduce_stream", step_id, handler, keyed, args)
        return WindowStream(self._flow, Port(step, 0))

    def accumulate(
        self,
        step_id: str,
        handler: Any,
        timeout: timedelta,
        init_args: tuple[Any, ...] = (),
        init_kwargs: dict[str, Any] | None = None,
        *,
        watermark_delay: timedelta = timedelta(0),
        clock: str | None = None,
    ) -> Stream:
        """Numaflow accumulator: one ``handler(datums, output)`` per key, for as long as
        the key is active.

        The handler reads the key's datums in arrival order, each carrying the
        watermark, and puts ``Message``s (e.g. ``Message.from_datum(d)``)
        whenever it likes; its stream ends when the watermark passes the key's
        latest event time + ``timeout``, or at the end of a bounded input. An
        ``Accumulator`` subclass gets a new instance per key
        (``init_args``/``init_kwargs``).

        ``clock``: the watermark, as in a Numaflow vertex, is one for all keys
        (``"vertex"``, the default): the least over the input parts of the event
        times they sent, minus ``watermark_delay``, so a key times out while
        others are busy. ``"key"``: each key's own latest event time minus
        ``watermark_delay``, and a key without datums for ``timeout`` of system
        time ends. A flow has one clock: it is per key when a step asks for it or
        the flow has bytewax keyed steps.
        """
        _check_step_id("accumulate", step_id)
        if not isinstance(timeout, timedelta) or timeout < timedelta(0):
            raise TypeError(
                f"accumulate {step_id!r}: timeout must be a timedelta >= 0; got {timeout!r}"
            )
        _check_duration("accumulate", step_id, "watermark_delay", watermark_delay)
        _check_clock("accumulate", step_id, clock)
        args = {
            "factory": handler_factory(handler, "accumulate", tuple(init_args), init_kwargs),
            "timeout": timeout,
            "watermark_delay": watermark_delay,
            "clock": clock,
        }
        step = self._keyed_udf("accumulate", step_id, handler, True, args)
        return Stream(self._flow, Port(step))

    def route(self, step_id: str | None = None, *, tags: Any = (), operator: str = "or") -> Stream:
        """Numaflow conditional forwarding: keep datums whose tags match ``tags``.

        ``operator`` ``"or"`` (default): any of them; ``"and"``: all; ``"not"``:
        none. Without ``tags`` everything passes.
        """
        check_route(tags, operator)
        return self._add("route", step_id, args={"tags": tuple(tags), "operator": operator})

    # -- helpers ---------------------------------------------------------------

    def _key_datums(self, what: str, step_id: str, keyed: bool) -> Stream:
        """Datums as ``(routing key, datum)``: what a keyed Numaflow step groups by."""
        return self._add("key_datums", step_id, args={"what": what, "keyed": keyed})

    def _keyed_udf(
        self, kind: str, step_id: str, handler: Any, keyed: bool, args: dict[str, Any]
    ) -> Step:
        """A keyed Numaflow step (``kind``) calling ``handler`` on this stream's datums,
        grouped by their keys (``keyed`` false: all under one key)."""
        keyed_items = self._key_datums(f"{kind} {step_id!r}", f"{step_id}.key", keyed)
        return self._flow._add_step(kind, step_id, keyed_items._ports, {"handler": handler}, args)

    def _split_args(self, kind: str, args: tuple[Any, ...]) -> tuple[str | None, Any]:
        if len(args) == 1:
            return None, args[0]
        if len(args) == 2 and isinstance(args[0], str):
            return args[0], args[1]
        raise TypeError(f"{kind}() takes (fn) or (step_id, fn); got {len(args)} arguments")

    def _fn_step(self, kind: str, args: tuple[Any, ...]) -> Stream:
        role = operator(kind).fn
        assert role is not None  # a stateless kind that calls the user's function
        step_id, fn = self._split_args(kind, args)
        _check_callable(kind, role, fn)
        return self._add(kind, step_id, {role: fn})

    def _add(
        self,
        kind: str,
        step_id: str | None,
        fns: dict[str, Any] | None = None,
        args: dict[str, Any] | None = None,
    ) -> Stream:
        step = self._flow._add_step(kind, step_id, self._ports, fns, args)
        return Stream(self._flow, Port(step))


def _check_clock(kind: str, step_id: str, clock: Any) -> None:
    if clock not in (None, "vertex", "key"):
        raise ValueError(f"{kind} {step_id!r}: clock must be 'vertex' or 'key'; got {clock!r}")


def _check_step_id(kind: str, step_id: Any) -> None:
    if not isinstance(step_id, str) or not step_id:
        raise TypeError(f"{kind}: step_id must be a non-empty str; got {step_id!r}")


def _check_duration(kind: str, step_id: str, name: str, value: Any) -> None:
    if not isinstance(value, timedelta) or value < timedelta(0):
        raise TypeError(f"{kind} {step_id!r}: {name} must be a timedelta >= 0; got {value!r}")


def _server_kind(handler: Any) -> str | None:
    """The UDF kind of a flowspark server object (``MapStreamAsyncServer`` …), if it is one."""
    return handler.kind if isinstance(handler, NumaflowServer) else None


def map_handler_kind(handler: Any) -> str:
    """``"map"`` for a (non-stream) ``Mapper`` instance (ours or pynumaflow's) or a map
    server, else ``"map_stream"``; a batch map UDF is refused (it has a step of its own)."""
    kind = _server_kind(handler)
    if kind == "batch_map" or derives_from(type(handler), BatchMapper):
        raise TypeError(
            f"map_stream: {type(handler).__name__} is a batch map UDF; run it with "
            "stream.batch_map(step_id, handler, batch_size=500)"
        )
    if kind is not None:
        return kind
    return "map" if derives_from(type(handler), Mapper) else "map_stream"


def _reduce_factory(handler: Any, init_args: Any, init_kwargs: Any) -> Any:
    """The per-key-and-window handler factory of ``reduce_stream``; a ``Reducer`` is
    wrapped so that its returned ``Messages`` are put at the window's close."""
    kind = _server_kind(handler)
    if kind is not None:
        is_reducer = kind == "reduce"
    else:
        is_reducer = (isinstance(handler, type) and derives_from(handler, Reducer)) or (
            inspect.isfunction(handler) and len(inspect.signature(handler).parameters) == 3
        )
    if is_reducer:
        return _ReducerAsStream(handler_factory(handler, "reduce", tuple(init_args), init_kwargs))
    return handler_factory(handler, "reduce_stream", tuple(init_args), init_kwargs)


class _ReducerAsStream:
    """A ``Reducer`` factory made to look like a ``ReduceStreamer`` one."""

    def __init__(self, factory: Any) -> None:
        self.factory = factory

    def __call__(self) -> Callable[..., Any]:
        reducer = self.factory()

        async def handler(keys: list[str], datums: Any, output: Any, md: Any) -> None:
            for message in await reducer(keys, datums, md):
                await output.put(message)

        return handler


class WindowStream(Stream):
    """The results of a window operator; ``.late`` is the stream of its late items.

    Late items (their window already closed, or in no window) are never dropped
    silently: they flow on ``late`` as ``(key, value)``, and the run reports how
    many there were.
    """

    __slots__ = ()

    @property
    def late(self) -> Stream:
        """``(key, value)`` items that arrived after their window closed."""
        assert self._port is not None  # a window step's stream is its step's
        return Stream(self._flow, Port(self._port.step, 1))


class WindowLogicStream(WindowStream):
    """The results of bytewax 0.21's ``window`` step; ``.meta`` is the stream of its
    closed windows' metadata (made only when it leads to an output)."""

    __slots__ = ()

    @property
    def meta(self) -> Stream:
        """``(key, (window_id, WindowMetadata))`` of each window as it closes."""
        assert self._port is not None  # a window step's stream is its step's
        return Stream(self._flow, Port(self._port.step, 2))


class Dataflow:
    """A dataflow: inputs, the steps between them, and outputs.

    The bytewax 0.17 methods (``flow.map(f)`` …) extend one chain that starts at
    the last ``flow.input``. For DAGs use the :class:`Stream` that
    ``flow.input`` returns.
    """

    def __init__(self, flow_id: str = "flow") -> None:
        self.flow_id = flow_id
        self.steps: list[Step] = []
        self._ids: set[str] = set()
        self._head: Stream | None = None
        # Context managers a run enters before it starts and exits when it ends (e.g.
        # the HTTP server that a Numaflow pipeline's ``http`` sources read from).
        self.services: list[Any] = []

    def __repr__(self) -> str:
        return f"Dataflow({self.flow_id!r}, steps={[s.step_id for s in self.steps]})"

    # -- building ---------------------------------------------------------------

    def _add_step(
        self,
        kind: str,
        step_id: str | None,
        upstreams: tuple[Port, ...],
        fns: dict[str, Any] | None = None,
        args: dict[str, Any] | None = None,
    ) -> Step:
        if step_id is None:
            step_id = self._fresh_id(kind, fns)
        elif not isinstance(step_id, str) or not step_id:
            raise TypeError(f"{kind}: step_id must be a non-empty str; got {step_id!r}")
        elif step_id in self._ids:
            raise ValueError(
                f"step id {step_id!r} is used twice in this dataflow; step ids must be unique"
            )
        step = Step(kind, step_id, upstreams, dict(fns or {}), dict(args or {}))
        self._ids.add(step_id)
        self.steps.append(step)
        return step

    def uses_id(self, step_id: str) -> bool:
        """Whether ``step_id`` names a step of this flow, or was reserved.

        >>> flow = Dataflow("f")
        >>> flow.reserve_id("f.count")
        >>> flow.uses_id("f.count"), flow.uses_id("f.other")
        (True, False)
        """
        return step_id in self._ids

    def reserve_id(self, step_id: str) -> None:
        """Keep ``step_id`` from naming any later step: the id of an operator made of
        other steps (a bytewax 0.21 ``@operator``), whose own steps are named under it."""
        self._ids.add(step_id)

    def _fresh_id(self, kind: str, fns: dict[str, Any] | None) -> str:
        fn = next(iter(fns.values())) if fns else None
        name = getattr(fn, "__name__", "") if fn is not None else ""
        base = f"{kind}_{name}" if name and name != "<lambda>" else kind
        step_id, n = base, 1
        while step_id in self._ids:
            n += 1
            step_id = f"{base}_{n}"
        return step_id

    def _chain(self) -> Stream:
        # Steps added before any input are recorded (as bytewax 0.17 allows) but
        # receive no items; running a flow without an input is an error.
        return self._head if self._head is not None else Stream(self, None)

    def input(self, step_id: str, input: Any) -> Stream:  # noqa: A002 - bytewax's name
        """Add an input; items flow from it to the steps added after it.

        Returns the input's :class:`Stream`. A second ``flow.input`` merges its
        items into the flow's chain.
        """
        stream = self.source(step_id, input)
        self._head = stream if self._head is None else self._head.merge(stream)
        return stream

    def source(self, step_id: str, input: Any) -> Stream:  # noqa: A002 - as input()
        """Add an input as its own :class:`Stream` (a DAG's root), merged into nothing.

        >>> from flowspark.testing import TestingInput
        >>> flow = Dataflow("two_roots")
        >>> a = flow.source("a", TestingInput([1]))
        >>> b = flow.source("b", TestingInput([2]))
        >>> [s.step_id for s in flow.steps]
        ['a', 'b']
        """
        if not isinstance(input, Input):
            raise TypeError(
                f"input {step_id!r}: expected a flowspark Input "
                f"(e.g. TestingInput, FileInput, DirInput); got {type(input).__name__}"
            )
        step = self._add_step("input", step_id, (), args={"input": input})
        return Stream(self, Port(step))

    def _extend(self, stream: Stream) -> None:
        self._head = stream

    def map(self, mapper: Callable[[Any], Any]) -> None:
        """Map is a one-to-one transformation of items."""
        self._extend(self._chain().map(mapper))

    def filter(self, predicate: Callable[[Any], bool]) -> None:
        """Filter selectively keeps only some items."""
        self._extend(self._chain().filter(predicate))

    def filter_map(self, mapper: Callable[[Any], Any]) -> None:
        """Map, and drop items for which the mapper returns ``None``."""
        self._extend(self._chain().filter_map(mapper))

    def flat_map(self, mapper: Callable[[Any], Iterable[Any]]) -> None:
        """Flat map is a one-to-many transformation of items."""
        self._extend(self._chain().flat_map(mapper))

    def inspect(self, inspector: Callable[[Any], None]) -> None:
        """Observe items without modifying them."""
        self._extend(self._chain().inspect(inspector))

    def inspect_epoch(self, inspector: Callable[[int, Any], None]) -> None:
        """Observe items and their epoch (micro-batch number, from 1)."""
        self._extend(self._chain().inspect_epoch(inspector))

    def inspect_worker(self, inspector: Callable[[int, Any], None]) -> None:
        """Observe items and their worker index (Spark partition): ``inspector(worker, item)``."""
        self._extend(self._chain().inspect_worker(inspector))

    def redistribute(self) -> None:
        """Redistribute items round-robin across all Spark partitions."""
        self._extend(self._chain().redistribute())

    def output(self, step_id: str, output: Any) -> None:
        """Write items to an output; items pass on downstream unmodified."""
        self._extend(self._chain().output(step_id, output))

    # -- stateful operators -------------------------------------------------------

    def reduce(self, step_id: str, reducer: Callable, is_complete: Callable) -> None:
        """Reduce lets you combine items for a key into an accumulator."""
        self._extend(self._chain().reduce(step_id, reducer, is_complete))

    def stateful_map(self, step_id: str, builder: Callable, mapper: Callable) -> None:
        """Map values one-to-one with a persistent state per key."""
        self._extend(self._chain().stateful_map(step_id, builder, mapper))

    def batch(self, step_id: str, max_size: int, timeout: timedelta) -> None:
        """Batch each key's values until ``max_size`` or ``timeout``."""
        self._extend(self._chain().batch(step_id, max_size, timeout))

    def reduce_window(
        self, step_id: str, clock_config: Any, window_config: Any, reducer: Callable, **kw: Any
    ) -> None:
        """Combine all items for a key within a window into an accumulator."""
        self._extend(
            self._chain().reduce_window(step_id, clock_config, window_config, reducer, **kw)
        )

    def fold_window(
        self,
        step_id: str,
        clock_config: Any,
        window_config: Any,
        builder: Callable,
        folder: Callable,
        **kw: Any,
    ) -> None:
        """Fold all items for a key within a window into ``builder()``."""
        self._extend(
            self._chain().fold_window(step_id, clock_config, window_config, builder, folder, **kw)
        )

    def collect_window(
        self, step_id: str, clock_config: Any, window_config: Any, **kw: Any
    ) -> None:
        """Collect all items for a key within a window, sorted by time."""
        self._extend(self._chain().collect_window(step_id, clock_config, window_config, **kw))

    # -- Numaflow UDFs --------------------------------------------------------------

    def to_datums(self, step_id: str | None = None, **converters: Any) -> None:
        """Turn items into Numaflow datums (see :meth:`Stream.to_datums`)."""
        self._extend(self._chain().to_datums(step_id, **converters))

    def map_stream(
        self, step_id: str, handler: Any, concurrency: int = MAP_STREAM_CONCURRENCY
    ) -> None:
        """Numaflow map stream (see :meth:`Stream.map_stream`)."""
        self._extend(self._chain().map_stream(step_id, handler, concurrency))

    def batch_map(self, step_id: str, handler: Any, batch_size: int = 500) -> None:
        """Numaflow batch map (see :meth:`Stream.batch_map`)."""
        self._extend(self._chain().batch_map(step_id, handler, batch_size))

    def reduce_stream(self, step_id: str, handler: Any, window: Any, **kw: Any) -> None:
        """Numaflow reduce stream (see :meth:`Stream.reduce_stream`)."""
        self._extend(self._chain().reduce_stream(step_id, handler, window, **kw))

    def accumulate(self, step_id: str, handler: Any, timeout: timedelta, **kw: Any) -> None:
        """Numaflow accumulator (see :meth:`Stream.accumulate`)."""
        self._extend(self._chain().accumulate(step_id, handler, timeout, **kw))

    def route(self, step_id: str | None = None, *, tags: Any = (), operator: str = "or") -> None:
        """Numaflow conditional forwarding by tags (see :meth:`Stream.route`)."""
        self._extend(self._chain().route(step_id, tags=tags, operator=operator))
