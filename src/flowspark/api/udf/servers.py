"""What pynumaflow 0.14's servers share, without running anything.

:class:`NumaflowServer` records a UDF and pynumaflow's settings; the server
classes themselves (``MapStreamAsyncServer`` …, whose ``start()`` runs the UDF
on Spark) live above the engine, in :mod:`flowspark.serve`.
:func:`handler_factory` turns a server (or a bare handler) into a zero-argument
callable producing the handler to call for one key.

Classes count as subclasses of an ABC when they subclass flowspark's ABC or an
ABC of the same name from a ``pynumaflow.*`` module (checked by name, without
importing pynumaflow).

>>> async def passthrough(keys, datum):
...     yield datum
>>> handler_factory(passthrough, "map_stream")() is passthrough
True
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, ClassVar, TypedDict

from flowspark.api.udf.handlers import (
    Accumulator,
    BatchMapper,
    Mapper,
    MapStreamer,
    Reducer,
    ReduceStreamer,
)

__all__ = [
    "capturing_servers",
    "ServerOptions",
    "AsyncServerOptions",
    "PerKeyOptions",
    "set_server_options",
    "start_or_capture",
    "host_servers",
    "NumaflowServer",
    "OneHandlerServer",
    "handler_factory",
    "derives_from",
    "handler_callable",
    "UDF_KINDS",
    "MAX_MESSAGE_SIZE",
    "MAX_NUM_THREADS",
    "NUM_THREADS_DEFAULT",
]

MAX_MESSAGE_SIZE = 1024 * 1024 * 64
MAX_NUM_THREADS = 16
NUM_THREADS_DEFAULT = int(os.getenv("MAX_THREADS", "4"))

UDF_KINDS: dict[str, type] = {
    "map_stream": MapStreamer,
    "reduce_stream": ReduceStreamer,
    "accumulate": Accumulator,
    "map": Mapper,
    "reduce": Reducer,
    "batch_map": BatchMapper,
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


def handler_callable(handler: Any, base: type) -> Callable[..., Any]:
    """The callable to run for a handler shared by every datum: an instance of ``base``
    (flowspark's or pynumaflow's; its ``handler``) or any callable.

    A ``base`` subclass (not an instance) or a non-callable raises ``TypeError``.
    """
    if isinstance(handler, type):
        if derives_from(handler, base):
            raise TypeError(
                f"Invalid handler {handler}: pass an instance of the {base.__name__} "
                f"subclass, not the class"
            )
    elif derives_from(type(handler), base):
        return handler.handler
    if not callable(handler):
        raise TypeError(
            f"Invalid handler {handler!r}: expected a function or a {base.__name__} instance"
        )
    return handler


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
    arguments); for ``map_stream``/``map``/``batch_map`` a function, callable or
    ABC instance (one handler shared by all keys). Invalid handlers raise pynumaflow's
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
    return _SharedHandler(handler_callable(server_or_handler, base))


class ServerOptions(TypedDict, total=False):
    """The settings every pynumaflow server takes after its handler (keyword-only here).

    Their defaults are pynumaflow's: the server's own ``sock_path`` and
    ``server_info_file`` (its ``default_paths``), :data:`MAX_MESSAGE_SIZE` and
    :data:`NUM_THREADS_DEFAULT` threads (at most :data:`MAX_NUM_THREADS` are kept).
    """

    sock_path: str
    max_message_size: int
    max_threads: int
    server_info_file: str


class AsyncServerOptions(ServerOptions, total=False):
    """An async server's settings: :class:`ServerOptions` and a ``shutdown_callback``
    (recorded; ``None`` by default)."""

    shutdown_callback: Callable[..., Any] | None


class PerKeyOptions(AsyncServerOptions, total=False):
    """The settings of a server whose handler class is built per key:
    :class:`AsyncServerOptions` and that class's ``init_args`` (default ``()``) and
    ``init_kwargs`` (default ``None``: none)."""

    init_args: tuple[Any, ...]
    init_kwargs: dict[str, Any] | None


def set_server_options(
    server: Any,
    options: ServerOptions,
    default_paths: tuple[str, str],
    accepted: frozenset[str] = ServerOptions.__optional_keys__,
) -> None:
    """pynumaflow's settings attributes of ``server``, as its servers set them, from the
    keyword arguments it was given; ``default_paths``: its default ``sock_path`` and
    ``server_info_file``. A keyword not in ``accepted`` raises ``TypeError``, as for
    any function.

    >>> class Server: ...
    >>> server = Server()
    >>> set_server_options(server, {"max_threads": 32}, ("/tmp/s.sock", "/tmp/info"))
    >>> server.sock_path, server.max_threads, server.server_info_file
    ('unix:///tmp/s.sock', 16, '/tmp/info')
    >>> set_server_options(server, {"sock": "/tmp/x"}, ("/tmp/s.sock", "/tmp/info"))
    Traceback (most recent call last):
    ...
    TypeError: Server.__init__() got an unexpected keyword argument 'sock'
    """
    unexpected = [name for name in options if name not in accepted]
    if unexpected:
        raise TypeError(
            f"{type(server).__name__}.__init__() got an unexpected keyword argument "
            f"{unexpected[0]!r}"
        )
    sock_path, server_info_file = default_paths
    max_message_size = options.get("max_message_size", MAX_MESSAGE_SIZE)
    server.sock_path = f"unix://{options.get('sock_path', sock_path)}"
    server.max_message_size = max_message_size
    server.max_threads = min(options.get("max_threads", NUM_THREADS_DEFAULT), MAX_NUM_THREADS)
    server.server_info_file = options.get("server_info_file", server_info_file)
    server._server_options = [
        ("grpc.max_send_message_length", max_message_size),
        ("grpc.max_receive_message_length", max_message_size),
    ]


class NumaflowServer:
    """What all servers share: the UDF kind, its handler factory and pynumaflow's
    settings attributes (see :mod:`flowspark.serve` for the servers)."""

    kind: ClassVar[str]
    default_paths: ClassVar[tuple[str, str]]
    """The default ``sock_path`` and ``server_info_file`` (pynumaflow's)."""
    make_handler: Callable[[], Callable[..., Any]]
    """Zero-argument callable producing the handler for one key."""
    _server_options: list[tuple[str, int]]
    """gRPC options, as pynumaflow's servers keep them (:func:`set_server_options`)."""

    def _set_options(self, options: ServerOptions) -> None:
        set_server_options(self, options, self.default_paths)

    def _set_async_options(
        self,
        options: AsyncServerOptions,
        accepted: frozenset[str] = AsyncServerOptions.__optional_keys__,
    ) -> None:
        """:meth:`_set_options`, and an async server's ``shutdown_callback``."""
        set_server_options(self, options, self.default_paths, accepted)
        self.shutdown_callback = options.get("shutdown_callback")

    def _one_handler(self, handler: Any, resolve: Callable[[Any], Callable[..., Any]]) -> None:
        """Take one handler (``.handler``) for every datum: ``resolve(handler)`` checks it
        now and gives the callable to run in each task."""
        resolve(handler)  # validate
        self.handler = handler
        self.make_handler = functools.partial(resolve, handler)

    def _per_key(self, handler: Any, options: PerKeyOptions) -> None:
        """Set up an async server whose handler is a function or a class built per key."""
        self._set_async_options(options, PerKeyOptions.__optional_keys__)
        self.init_args = options.get("init_args", ())
        self.init_kwargs = options.get("init_kwargs") or {}
        self.make_handler = handler_factory(handler, self.kind, self.init_args, self.init_kwargs)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(kind={self.kind!r}, handler={self.make_handler!r})"


class OneHandlerServer(NumaflowServer):
    """A server whose one handler, kept as ``.handler``, serves every datum (the sink and
    source-transform servers)."""

    udf_kind: ClassVar[str]
    """The same as ``kind`` (these servers have both names)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(handler={self.handler!r})"


# While set, ``start()`` of any server records the server instead of running it:
# how a pipeline vertex takes its handler from a pynumaflow UDF script.
_CAPTURED: ContextVar[list[Any] | None] = ContextVar("flowspark_captured_servers", default=None)


@contextmanager
def capturing_servers() -> Iterator[list[Any]]:
    """Within the block, ``server.start()`` appends the server to the yielded list and
    returns at once (nothing is served).

    >>> from flowspark.mapstreamer import MapStreamAsyncServer
    >>> with capturing_servers() as started:
    ...     MapStreamAsyncServer(lambda keys, datum: None).start()
    >>> [type(s).__name__ for s in started]
    ['MapStreamAsyncServer']
    """
    started: list[Any] = []
    token = _CAPTURED.set(started)
    try:
        yield started
    finally:
        _CAPTURED.reset(token)


# Set in a process that runs a UDF script whole (a side-input vertex's UDF process):
# ``start()`` of a server, in whichever thread calls it, serves the server there.
_HOSTING: Callable[[Any], None] | None = None


def host_servers(serve: Callable[[Any], None] | None) -> None:
    """From now on (``None``: no longer), ``server.start()`` calls ``serve(server)``."""
    global _HOSTING
    _HOSTING = serve


def start_or_capture(server: Any, run: Callable[[], None]) -> None:
    """What every server's ``start()`` does: recorded while :func:`capturing_servers`
    is active, served by the hook of :func:`host_servers` if one is set, else ``run()``."""
    started = _CAPTURED.get()
    if started is not None:
        started.append(server)
        return
    if _HOSTING is not None:
        _HOSTING(server)
        return
    run()
