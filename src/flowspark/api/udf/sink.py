"""pynumaflow 0.14's ``pynumaflow.sinker`` data types, handler ABC and server settings.

Names, constructor signatures and properties follow pynumaflow 0.14 (a server's
settings are keyword-only). The server classes here only record the handler and
pynumaflow's settings; their ``start()`` lives above the engine, in
:mod:`flowspark.sinker`. :func:`run_sink_handler` calls a handler (a :class:`Sinker`
instance, a function, or an ``async`` one of either) with one batch of datums and
returns its responses.

User/system metadata are stored as given (flowspark does not fill them).

>>> from datetime import datetime, timezone
>>> now = datetime.fromtimestamp(1662998400, timezone.utc)
>>> def handler(datums):
...     return Responses(*(Response.as_success(d.id) for d in datums))
>>> server = SinkServer(handler)
>>> server.udf_kind, server.handler is handler
('sink', True)
>>> [r.success for r in run_sink_handler(handler, [Datum(["k"], "id-1", b"v", now, now)])]
[True]
"""

from __future__ import annotations

import inspect
import os
from abc import ABCMeta, abstractmethod
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar, Unpack

from flowspark.api.udf.handlers import _CallsHandler
from flowspark.api.udf.servers import (
    AsyncServerOptions,
    OneHandlerServer,
    ServerOptions,
    handler_callable,
)
from flowspark.api.udf.types import MetadataDatum as _BaseDatum
from flowspark.api.udf.types import (
    _FieldsEq,
    _reader,
    _SliceFreeList,
    _UserMetadata,
    _validate_message_fields,
)
from flowspark.shared.asyncrun import run_to_completion

__all__ = [
    "Datum",
    "Message",
    "Response",
    "Responses",
    "Sinker",
    "SinkServer",
    "SinkAsyncServer",
    "sink_handler",
    "run_sink_handler",
    "SINK_SOCK_PATH",
    "SINK_SERVER_INFO_FILE_PATH",
]

SINK_SOCK_PATH = "/var/run/numaflow/sink.sock"
FALLBACK_SINK_SOCK_PATH = "/var/run/numaflow/fb-sink.sock"
ON_SUCCESS_SINK_SOCK_PATH = "/var/run/numaflow/ons-sink.sock"
SINK_SERVER_INFO_FILE_PATH = "/var/run/numaflow/sinker-server-info"
FALLBACK_SINK_SERVER_INFO_FILE_PATH = "/var/run/numaflow/fb-sinker-server-info"
ON_SUCCESS_SINK_SERVER_INFO_FILE_PATH = "/var/run/numaflow/ons-sinker-server-info"
ENV_UD_CONTAINER_TYPE = "NUMAFLOW_UD_CONTAINER_TYPE"
UD_CONTAINER_FALLBACK_SINK = "fb-udsink"
UD_CONTAINER_ON_SUCCESS_SINK = "ons-udsink"
# The socket and server-info paths each container type serves at (as pynumaflow's).
_CONTAINER_PATHS = {
    UD_CONTAINER_FALLBACK_SINK: (FALLBACK_SINK_SOCK_PATH, FALLBACK_SINK_SERVER_INFO_FILE_PATH),
    UD_CONTAINER_ON_SUCCESS_SINK: (
        ON_SUCCESS_SINK_SOCK_PATH,
        ON_SUCCESS_SINK_SERVER_INFO_FILE_PATH,
    ),
}

R = TypeVar("R")
_Options = TypeVar("_Options", bound=ServerOptions)


# ------------------------------------------------------------------------------- datum


class Datum(_BaseDatum):
    """pynumaflow's ``sinker.Datum``: one message to write, with its id (``.id``; see
    :class:`~flowspark.api.udf.types.MetadataDatum`)."""

    __slots__ = ()

    def __init__(
        self,
        keys: list[str],
        sink_msg_id: str,
        value: bytes,
        event_time: datetime,
        watermark: datetime,
        headers: dict[str, str] | None = None,
        user_metadata: Any = None,
        system_metadata: Any = None,
    ) -> None:
        super().__init__(
            keys, value, event_time, watermark, headers, user_metadata, system_metadata
        )
        self._id = sink_msg_id or ""

    def __str__(self) -> str:
        return (
            f"keys: {self._keys}, id: {self._id}, "
            f"value: {self._value.decode('utf-8', 'backslashreplace')}, "
            f"event_time: {self._event_time}, watermark: {self._watermark}, "
            f"headers: {self._headers}"
        )

    __repr__ = __str__


# --------------------------------------------------------------------------- responses


class Message(_FieldsEq, _UserMetadata):
    """pynumaflow's on-success ``sinker.Message(value, keys=None, user_metadata=None)``."""

    __slots__ = ("_value", "_keys", "_user_metadata")

    def __init__(
        self, value: bytes, keys: list[str] | None = None, user_metadata: Any = None
    ) -> None:
        _validate_message_fields(value, keys, None)
        self._value = value
        self._keys = keys
        self._user_metadata = user_metadata

    def with_keys(self, keys: list[str] | None) -> Message:
        """Set the keys; returns the message."""
        self._keys = keys
        return self

    def with_user_metadata(self, user_metadata: Any) -> Message:
        """Set the user metadata; returns the message."""
        self._user_metadata = user_metadata
        return self

    keys: list[str] | None = _reader("_keys", "The keys (``None`` when not given).")
    value: bytes = _reader("_value", "The payload.")

    def _fields(self) -> tuple[Any, ...]:
        return (self._value, self._keys, self._user_metadata)

    def __repr__(self) -> str:
        return f"Message(value={self._value!r}, keys={self._keys!r})"


@dataclass(slots=True)
class Response:
    """pynumaflow's ``sinker.Response``: what became of the datum with ``id``.

    Build one with :meth:`as_success`, :meth:`as_failure`, :meth:`as_fallback` or
    :meth:`as_on_success`.
    """

    id: str
    success: bool
    err: str | None
    fallback: bool
    on_success: bool
    on_success_msg: Message | None

    @classmethod
    def as_success(cls, id_: str) -> Response:
        """The datum was written."""
        return cls(id_, True, None, False, False, None)

    @classmethod
    def as_failure(cls, id_: str, err_msg: str) -> Response:
        """The datum could not be written (retried per the sink's ``retryStrategy``)."""
        return cls(id_, False, err_msg, False, False, None)

    @classmethod
    def as_fallback(cls, id_: str) -> Response:
        """Write the datum to the fallback sink."""
        return cls(id_, False, None, True, False, None)

    @classmethod
    def as_on_success(cls, id_: str, on_success: Message | None = None) -> Response:
        """Written; send ``on_success`` (or the datum itself when ``None``) to the
        onSuccess sink."""
        return cls(id_, False, None, False, True, on_success)


class Responses(_SliceFreeList[R]):
    """pynumaflow's ``Responses(*responses)``: an appendable sequence that refuses slicing."""

    __slots__ = ()

    _what = "Responses"

    def append(self, response: R) -> None:
        """Add ``response`` at the end."""
        self._items.append(response)


# ----------------------------------------------------------------------------- handler


class Sinker(_CallsHandler, metaclass=ABCMeta):
    """A user-defined sink: ``handler(datums)`` returns one response per datum.

    ``handler`` may be ``async`` (then ``datums`` is an async iterable), as with
    pynumaflow's ``SinkAsyncServer``. Calling an instance calls ``handler``.
    """

    @abstractmethod
    def handler(self, datums: Iterator[Datum]) -> Responses[Response]:
        """Write ``datums``; return a :class:`Response` for each datum's id."""
        raise NotImplementedError


def sink_handler(handler: Any) -> Callable[..., Any]:
    """The callable to run for a sink UDF given as a server of this module, a
    :class:`Sinker` (flowspark's or pynumaflow's) instance, or a function.

    A Sinker class (not an instance) or a non-callable raises ``TypeError``.
    """
    if isinstance(handler, _SinkServerBase):
        handler = handler.handler
    return handler_callable(handler, Sinker)


def _is_async(fn: Any) -> bool:
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(fn, "__call__", None)  # noqa: B004 - a callable object's own method
    return call is not None and inspect.iscoroutinefunction(call)


async def _aiter(datums: list[Any]) -> AsyncIterator[Any]:
    for datum in datums:
        yield datum


def run_sink_handler(handler: Any, datums: Iterable[Datum]) -> list[Any]:
    """Call a sink handler with one batch of datums; return its responses as a list.

    A synchronous handler gets an iterator of the datums, an ``async`` one an async
    iterable (and is run to completion on an event loop), as pynumaflow's
    ``SinkServer`` / ``SinkAsyncServer`` do.
    """
    fn = sink_handler(handler)
    batch = list(datums)
    if _is_async(fn):
        result = run_to_completion(lambda: fn(_aiter(batch)), thread_name="flowspark-udsink")
    else:
        result = fn(iter(batch))
        if inspect.isawaitable(result):  # an async callable not detected up front
            if inspect.iscoroutine(result):
                result.close()
            result = run_to_completion(lambda: fn(_aiter(batch)), thread_name="flowspark-udsink")
    if result is None:
        raise TypeError(f"sink handler {fn!r} returned None; expected Responses")
    return list(result)


# ----------------------------------------------------------------------------- servers


def _in_container(options: _Options) -> _Options:
    """``options`` with the fallback / onSuccess sink's paths where
    ``NUMAFLOW_UD_CONTAINER_TYPE`` names that container (over given ones, as pynumaflow)."""
    container_paths = _CONTAINER_PATHS.get(os.getenv(ENV_UD_CONTAINER_TYPE, ""))
    if container_paths is not None:
        options["sock_path"], options["server_info_file"] = container_paths
    return options


class _SinkServerBase(OneHandlerServer):
    """What both sink servers share: the handler (``.handler``) and pynumaflow's settings.

    With ``NUMAFLOW_UD_CONTAINER_TYPE`` set to ``fb-udsink`` / ``ons-udsink`` the
    socket and server-info paths switch to the fallback / onSuccess ones, as in
    pynumaflow. ``start()`` is defined by :mod:`flowspark.sinker`.
    """

    kind = udf_kind = "sink"
    default_paths = (SINK_SOCK_PATH, SINK_SERVER_INFO_FILE_PATH)

    def _setup(self, sinker_instance: Any) -> None:
        self._one_handler(sinker_instance, sink_handler)
        self.sinker_instance = sinker_instance


class SinkServer(_SinkServerBase):
    """pynumaflow's ``sinker.SinkServer``: a Sinker instance or a function
    ``handler(datums: Iterator[Datum]) -> Responses``."""

    def __init__(self, sinker_instance: Any, **options: Unpack[ServerOptions]) -> None:
        self._set_options(_in_container(options))
        self._setup(sinker_instance)


class SinkAsyncServer(_SinkServerBase):
    """pynumaflow's ``sinker.SinkAsyncServer``: a Sinker instance with an ``async``
    handler or an async function ``handler(datums: AsyncIterable[Datum]) -> Responses``."""

    def __init__(self, sinker_instance: Any, **options: Unpack[AsyncServerOptions]) -> None:
        self._set_async_options(_in_container(options))
        self._setup(sinker_instance)
