"""pynumaflow 0.14's server classes: same constructor arguments, same validation.

A server only records the UDF and its settings; :meth:`NumaflowServer.start`
hands it to flowspark's engine instead of opening a gRPC socket.
:func:`handler_factory` turns a server (or a bare handler) into a zero-argument
callable producing the handler to call for one key.

Classes count as subclasses of an ABC when they subclass flowspark's ABC or an
ABC of the same name from a ``pynumaflow.*`` module (checked by name, without
importing pynumaflow).

>>> async def passthrough(keys, datum):
...     yield datum
>>> server = MapStreamAsyncServer(passthrough, max_threads=32)
>>> server.kind, server.sock_path, server.max_threads
('map_stream', 'unix:///var/run/numaflow/mapstream.sock', 16)
>>> handler_factory(server, "map_stream")() is passthrough
True
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable
from typing import Any, ClassVar

from flowspark.api.udf.handlers import Accumulator, Mapper, MapStreamer, Reducer, ReduceStreamer

__all__ = [
    "NumaflowServer",
    "MapStreamAsyncServer",
    "ReduceStreamAsyncServer",
    "AccumulatorAsyncServer",
    "MapServer",
    "MapAsyncServer",
    "ReduceAsyncServer",
    "handler_factory",
    "derives_from",
    "UDF_KINDS",
    "MAX_MESSAGE_SIZE",
    "MAX_NUM_THREADS",
    "NUM_THREADS_DEFAULT",
]

MAX_MESSAGE_SIZE = 1024 * 1024 * 64
MAX_NUM_THREADS = 16
NUM_THREADS_DEFAULT = int(os.getenv("MAX_THREADS", "4"))

MAP_SOCK_PATH = "/var/run/numaflow/map.sock"
MAP_STREAM_SOCK_PATH = "/var/run/numaflow/mapstream.sock"
REDUCE_SOCK_PATH = "/var/run/numaflow/reduce.sock"
REDUCE_STREAM_SOCK_PATH = "/var/run/numaflow/reducestream.sock"
ACCUMULATOR_SOCK_PATH = "/var/run/numaflow/accumulator.sock"
MAP_SERVER_INFO_FILE_PATH = "/var/run/numaflow/mapper-server-info"
REDUCE_SERVER_INFO_FILE_PATH = "/var/run/numaflow/reducer-server-info"
REDUCE_STREAM_SERVER_INFO_FILE_PATH = "/var/run/numaflow/reducestreamer-server-info"
ACCUMULATOR_SERVER_INFO_FILE_PATH = "/var/run/numaflow/accumulator-server-info"

UDF_KINDS: dict[str, type] = {
    "map_stream": MapStreamer,
    "reduce_stream": ReduceStreamer,
    "accumulate": Accumulator,
    "map": Mapper,
    "reduce": Reducer,
}
"""Each UDF kind and the ABC its class-based handlers derive from."""

# Kinds whose handler is a class instantiated per key (or a plain function).
_PER_KEY_KINDS = frozenset({"reduce_stream", "accumulate", "reduce"})


def derives_from(cls: type, base: type) -> bool:
    """Whether ``cls`` subclasses ``base`` or pynumaflow's ABC of the same name."""
    if issubclass(cls, base):
        return True
    return any(
        klass.__name__ == base.__name__ and klass.__module__.startswith("pynumaflow.")
        for klass in cls.__mro__
    )


class _SharedHandler:
    """Handler factory for one handler shared by every key."""

    __slots__ = ("handler",)

    def __init__(self, handler: Callable[..., Any]) -> None:
        self.handler = handler

    def __call__(self) -> Callable[..., Any]:
        return self.handler

    def __repr__(self) -> str:
        return f"_SharedHandler({self.handler!r})"


class _HandlerPerInstance:
    """Handler factory building a new handler-class instance for each key."""

    __slots__ = ("handler_class", "init_args", "init_kwargs")

    def __init__(
        self, handler_class: type, init_args: tuple[Any, ...], init_kwargs: dict[str, Any]
    ) -> None:
        self.handler_class = handler_class
        self.init_args = init_args
        self.init_kwargs = init_kwargs

    def __call__(self) -> Callable[..., Any]:
        return self.handler_class(*self.init_args, **self.init_kwargs).handler

    def __repr__(self) -> str:
        return f"_HandlerPerInstance({self.handler_class.__qualname__}, {self.init_args!r})"


def _per_key_factory(
    handler: Any, base: type, init_args: tuple[Any, ...], init_kwargs: dict[str, Any]
) -> Callable[[], Callable[..., Any]]:
    """pynumaflow's ``get_handler``: a function, or a subclass of ``base`` built per key."""
    if inspect.isfunction(handler):
        if init_args or init_kwargs:
            raise TypeError("Cannot pass function handler with init args or kwargs")
        return _SharedHandler(handler)
    if isinstance(handler, type) and derives_from(handler, base):
        return _HandlerPerInstance(handler, tuple(init_args), dict(init_kwargs))
    raise TypeError(
        f"Invalid Class Type {handler}: "
        f"Please make sure the class type is passed, and it is a subclass of {base.__name__}"
    )


def _shared_factory(handler: Any, base: type) -> Callable[[], Callable[..., Any]]:
    """A map-kind handler: an instance of ``base`` (its ``handler``) or any callable."""
    if isinstance(handler, type):
        if derives_from(handler, base):
            raise TypeError(
                f"Invalid handler {handler}: pass an instance of the {base.__name__} "
                f"subclass, not the class"
            )
    elif derives_from(type(handler), base):
        return _SharedHandler(handler.handler)
    if not callable(handler):
        raise TypeError(
            f"Invalid handler {handler!r}: expected a function or a {base.__name__} instance"
        )
    return _SharedHandler(handler)


def handler_factory(
    server_or_handler: Any,
    kind: str,
    init_args: tuple[Any, ...] = (),
    init_kwargs: dict[str, Any] | None = None,
) -> Callable[[], Callable[..., Any]]:
    """A zero-argument callable producing the handler callable for one key.

    ``server_or_handler`` is a server of this module (its own handler and init
    arguments are used; its ``kind`` must be ``kind``) or a bare handler: for
    ``kind`` in ``reduce_stream``/``accumulate``/``reduce`` a function or a
    subclass of the kind's ABC (a new instance per key, built with the init
    arguments); for ``map_stream``/``map`` a function, callable or ABC instance
    (one handler shared by all keys). Invalid handlers raise pynumaflow's
    ``TypeError``.
    """
    if isinstance(server_or_handler, NumaflowServer):
        server = server_or_handler
        if server.kind != kind:
            raise TypeError(
                f"expected a {kind!r} server, got {type(server).__name__} "
                f"(a {server.kind!r} server)"
            )
        if init_args or init_kwargs:
            raise TypeError("init args and kwargs of a server are given to the server")
        return server.make_handler
    try:
        base = UDF_KINDS[kind]
    except KeyError:
        raise ValueError(
            f"unknown UDF kind {kind!r}; expected one of {sorted(UDF_KINDS)}"
        ) from None
    if kind in _PER_KEY_KINDS:
        return _per_key_factory(server_or_handler, base, init_args, init_kwargs or {})
    return _shared_factory(server_or_handler, base)


class NumaflowServer:
    """What all servers share: pynumaflow's settings attributes and :meth:`start`."""

    kind: ClassVar[str]
    make_handler: Callable[[], Callable[..., Any]]
    """Zero-argument callable producing the handler for one key."""

    def _set_options(
        self, sock_path: str, max_message_size: int, max_threads: int, server_info_file: str
    ) -> None:
        self.sock_path = f"unix://{sock_path}"
        self.max_message_size = max_message_size
        self.max_threads = min(max_threads, MAX_NUM_THREADS)
        self.server_info_file = server_info_file
        self._server_options = [
            ("grpc.max_send_message_length", self.max_message_size),
            ("grpc.max_receive_message_length", self.max_message_size),
        ]

    def _per_key(
        self,
        handler: Any,
        init_args: tuple[Any, ...],
        init_kwargs: dict[str, Any] | None,
        sock_path: str,
        max_message_size: int,
        max_threads: int,
        server_info_file: str,
        shutdown_callback: Callable[..., Any] | None,
    ) -> None:
        """Set up a server whose handler is a function or a class built per key."""
        self.init_args = init_args
        self.init_kwargs = init_kwargs or {}
        self.make_handler = handler_factory(handler, self.kind, init_args, self.init_kwargs)
        self._set_options(sock_path, max_message_size, max_threads, server_info_file)
        self.shutdown_callback = shutdown_callback

    def start(self) -> None:
        """Run the UDF with flowspark's engine (instead of serving gRPC)."""
        from flowspark.engine.udf_serve import serve

        serve(self)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(kind={self.kind!r}, handler={self.make_handler!r})"


class MapStreamAsyncServer(NumaflowServer):
    """pynumaflow's ``mapstreamer.MapStreamAsyncServer``: a MapStreamer instance or a function."""

    kind = "map_stream"

    def __init__(
        self,
        map_stream_instance: Any,
        sock_path: str = MAP_STREAM_SOCK_PATH,
        max_message_size: int = MAX_MESSAGE_SIZE,
        max_threads: int = NUM_THREADS_DEFAULT,
        server_info_file: str = MAP_SERVER_INFO_FILE_PATH,
        shutdown_callback: Callable[..., Any] | None = None,
    ) -> None:
        self.make_handler = handler_factory(map_stream_instance, self.kind)
        self.map_stream_instance = map_stream_instance
        self._set_options(sock_path, max_message_size, max_threads, server_info_file)
        self.shutdown_callback = shutdown_callback


class ReduceStreamAsyncServer(NumaflowServer):
    """pynumaflow's ``reducestreamer.ReduceStreamAsyncServer``: a ReduceStreamer subclass
    (a new instance per key and window) or a function."""

    kind = "reduce_stream"

    def __init__(
        self,
        reduce_stream_instance: Any,
        init_args: tuple[Any, ...] = (),
        init_kwargs: dict[str, Any] | None = None,
        sock_path: str = REDUCE_STREAM_SOCK_PATH,
        max_message_size: int = MAX_MESSAGE_SIZE,
        max_threads: int = NUM_THREADS_DEFAULT,
        server_info_file: str = REDUCE_STREAM_SERVER_INFO_FILE_PATH,
        shutdown_callback: Callable[..., Any] | None = None,
    ) -> None:
        self.reduce_stream_handler = reduce_stream_instance
        self._per_key(
            reduce_stream_instance, init_args, init_kwargs,
            sock_path, max_message_size, max_threads, server_info_file, shutdown_callback,
        )  # fmt: skip


class AccumulatorAsyncServer(NumaflowServer):
    """pynumaflow's ``accumulator.AccumulatorAsyncServer``: an Accumulator subclass
    (a new instance per key opening) or a function ``f(datums, output)``."""

    kind = "accumulate"

    def __init__(
        self,
        accumulator_instance: Any,
        init_args: tuple[Any, ...] = (),
        init_kwargs: dict[str, Any] | None = None,
        sock_path: str = ACCUMULATOR_SOCK_PATH,
        max_message_size: int = MAX_MESSAGE_SIZE,
        max_threads: int = NUM_THREADS_DEFAULT,
        server_info_file: str = ACCUMULATOR_SERVER_INFO_FILE_PATH,
        shutdown_callback: Callable[..., Any] | None = None,
    ) -> None:
        self.accumulator_handler = accumulator_instance
        self._per_key(
            accumulator_instance, init_args, init_kwargs,
            sock_path, max_message_size, max_threads, server_info_file, shutdown_callback,
        )  # fmt: skip


class MapServer(NumaflowServer):
    """pynumaflow's synchronous ``mapper.MapServer``: a Mapper instance or a function."""

    kind = "map"

    def __init__(
        self,
        mapper_instance: Any,
        sock_path: str = MAP_SOCK_PATH,
        max_message_size: int = MAX_MESSAGE_SIZE,
        max_threads: int = NUM_THREADS_DEFAULT,
        server_info_file: str = MAP_SERVER_INFO_FILE_PATH,
    ) -> None:
        self.make_handler = handler_factory(mapper_instance, self.kind)
        self.mapper_instance = mapper_instance
        self._set_options(sock_path, max_message_size, max_threads, server_info_file)


class MapAsyncServer(MapServer):
    """pynumaflow's ``mapper.MapAsyncServer``: a Mapper instance or an async function."""

    def __init__(
        self,
        mapper_instance: Any,
        sock_path: str = MAP_SOCK_PATH,
        max_message_size: int = MAX_MESSAGE_SIZE,
        max_threads: int = NUM_THREADS_DEFAULT,
        server_info_file: str = MAP_SERVER_INFO_FILE_PATH,
        shutdown_callback: Callable[..., Any] | None = None,
    ) -> None:
        super().__init__(
            mapper_instance, sock_path, max_message_size, max_threads, server_info_file
        )
        self.shutdown_callback = shutdown_callback


class ReduceAsyncServer(NumaflowServer):
    """pynumaflow's ``reducer.ReduceAsyncServer``: a Reducer subclass or a function."""

    kind = "reduce"

    def __init__(
        self,
        reducer_instance: Any,
        init_args: tuple[Any, ...] = (),
        init_kwargs: dict[str, Any] | None = None,
        sock_path: str = REDUCE_SOCK_PATH,
        max_message_size: int = MAX_MESSAGE_SIZE,
        max_threads: int = NUM_THREADS_DEFAULT,
        server_info_file: str = REDUCE_SERVER_INFO_FILE_PATH,
        shutdown_callback: Callable[..., Any] | None = None,
    ) -> None:
        self.reducer_handler = reducer_instance
        self._per_key(
            reducer_instance, init_args, init_kwargs,
            sock_path, max_message_size, max_threads, server_info_file, shutdown_callback,
        )  # fmt: skip
