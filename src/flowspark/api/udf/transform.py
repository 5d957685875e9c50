"""pynumaflow 0.14's ``pynumaflow.sourcetransformer`` data types, handler ABC and servers.

A source transformer runs on every message a source reads, before the source
watermark is computed: it may change the value, keys, tags and **event time**
of a message, or drop it. Names, constructor signatures and properties follow
pynumaflow 0.14 (a server's settings are keyword-only). The server classes here
only record the handler and pynumaflow's settings; their ``start()`` lives in
:mod:`flowspark.sourcetransformer`.
User/system metadata are stored as given (flowspark does not fill them).

>>> from datetime import datetime, timezone
>>> now = datetime.fromtimestamp(1662998400, timezone.utc)
>>> def handler(keys, datum):
...     return Messages(Message(datum.value, event_time=datum.event_time, keys=keys))
>>> server = SourceTransformServer(handler)
>>> server.udf_kind, server.handler is handler
('sourcetransform', True)
>>> Message.to_drop(now).tags == [DROP]
True
"""

from __future__ import annotations

import os
from abc import ABCMeta, abstractmethod
from collections.abc import Callable
from datetime import datetime
from typing import Any, Unpack

from flowspark.api.udf.handlers import _CallsHandler
from flowspark.api.udf.servers import (
    AsyncServerOptions,
    OneHandlerServer,
    ServerOptions,
    handler_callable,
)
from flowspark.api.udf.times import UTCDateTime, as_utc
from flowspark.api.udf.types import (
    DROP,
    Messages,
    _Payload,
    _reader,
    _UserMetadata,
    _validate_message_fields,
)
from flowspark.api.udf.types import MetadataDatum as _BaseDatum

__all__ = [
    "Datum",
    "Message",
    "Messages",
    "DROP",
    "SourceTransformer",
    "SourceTransformServer",
    "SourceTransformAsyncServer",
    "SourceTransformMultiProcServer",
    "transform_handler",
    "SOURCE_TRANSFORMER_SOCK_PATH",
    "SOURCE_TRANSFORMER_SERVER_INFO_FILE_PATH",
]

SOURCE_TRANSFORMER_SOCK_PATH = "/var/run/numaflow/sourcetransform.sock"
SOURCE_TRANSFORMER_SERVER_INFO_FILE_PATH = "/var/run/numaflow/sourcetransformer-server-info"
_PROCESS_COUNT = os.cpu_count() or 1

# pynumaflow's default event time of a Message built with event_time=None ("no year 0").
_NO_EVENT_TIME = datetime(1, 1, 1, 0, 0)


class Datum(_BaseDatum):
    """pynumaflow's ``sourcetransformer.Datum(keys, value, event_time, watermark,
    headers=None, user_metadata=None, system_metadata=None)``: one message read by the
    source (see :class:`~flowspark.api.udf.types.MetadataDatum`)."""

    __slots__ = ()


class Message(_Payload, _UserMetadata):
    """pynumaflow's ``sourcetransformer.Message(value, event_time, keys=None, tags=None,
    user_metadata=None)``: the message with its (new) **event time**, which is required.

    ``event_time`` is stored as a UTCDateTime (a naive one taken as UTC); ``None``
    gives pynumaflow's ``datetime(1, 1, 1)``.
    """

    __slots__ = ("_value", "_event_time", "_keys", "_tags", "_user_metadata")

    def __init__(
        self,
        value: bytes,
        event_time: datetime | None,
        keys: list[str] | None = None,
        tags: list[str] | None = None,
        user_metadata: Any = None,
    ) -> None:
        _validate_message_fields(value, keys, tags)
        self._value = value or b""
        self._event_time = as_utc(event_time or _NO_EVENT_TIME, "Message.event_time")
        self._keys = keys or []
        self._tags = tags or []
        self._user_metadata = user_metadata

    @classmethod
    def to_drop(cls, event_time: datetime) -> Message:
        """A message that is not forwarded (tags ``[DROP]``); ``event_time`` still counts
        for the source watermark."""
        return cls(b"", event_time, None, [DROP])

    event_time: UTCDateTime = _reader("_event_time", "The event time the message continues with.")

    def _fields(self) -> tuple[Any, ...]:
        return (self._value, self._event_time, self._keys, self._tags)

    def __repr__(self) -> str:
        return (
            f"Message(value={self._value!r}, event_time={self._event_time!r}, "
            f"keys={self._keys!r}, tags={self._tags!r})"
        )


class SourceTransformer(_CallsHandler, metaclass=ABCMeta):
    """A source transformer: ``handler(keys, datum)`` returns the datum's messages.

    ``handler`` may be ``async`` (for ``SourceTransformAsyncServer``). Calling an
    instance calls ``handler``.
    """

    @abstractmethod
    def handler(self, keys: list[str], datum: Datum) -> Messages[Message]:
        """Return the messages for ``datum`` (each with its event time)."""
        raise NotImplementedError


def transform_handler(handler: Any) -> Callable[..., Any]:
    """The callable to run for a source transformer given as a server of this module,
    a :class:`SourceTransformer` (flowspark's or pynumaflow's) instance, or a function
    (sync or ``async``).

    A SourceTransformer class (not an instance) or a non-callable raises ``TypeError``.
    """
    if isinstance(handler, _SourceTransformServerBase):
        handler = handler.handler
    return handler_callable(handler, SourceTransformer)


class _SourceTransformServerBase(OneHandlerServer):
    """What the source-transform servers share: the handler (``.handler``) and
    pynumaflow's settings. ``start()`` is defined by :mod:`flowspark.sourcetransformer`."""

    kind = udf_kind = "sourcetransform"
    default_paths = (SOURCE_TRANSFORMER_SOCK_PATH, SOURCE_TRANSFORMER_SERVER_INFO_FILE_PATH)

    def _setup(self, source_transform_instance: Any) -> None:
        self._one_handler(source_transform_instance, transform_handler)
        self.source_transform_instance = source_transform_instance


class SourceTransformServer(_SourceTransformServerBase):
    """pynumaflow's ``sourcetransformer.SourceTransformServer``: a SourceTransformer
    instance or a function ``handler(keys, datum) -> Messages``."""

    def __init__(self, source_transform_instance: Any, **options: Unpack[ServerOptions]) -> None:
        self._set_options(options)
        self._setup(source_transform_instance)


class SourceTransformAsyncServer(_SourceTransformServerBase):
    """pynumaflow's ``sourcetransformer.SourceTransformAsyncServer``: a SourceTransformer
    instance with an ``async`` handler or an async function ``handler(keys, datum)``."""

    def __init__(
        self, source_transform_instance: Any, **options: Unpack[AsyncServerOptions]
    ) -> None:
        self._set_async_options(options)
        self._setup(source_transform_instance)


class SourceTransformMultiProcServer(_SourceTransformServerBase):
    """pynumaflow's ``sourcetransformer.SourceTransformMultiProcServer``: as
    :class:`SourceTransformServer`; ``server_count`` is recorded (Spark's tasks are
    the parallelism on flowspark)."""

    def __init__(
        self,
        source_transform_instance: Any,
        server_count: int = _PROCESS_COUNT,
        **options: Unpack[ServerOptions],
    ) -> None:
        self._set_options(options)
        self._setup(source_transform_instance)
        self._process_count = min(server_count, 2 * _PROCESS_COUNT)
        self._server_options += [("grpc.so_reuseport", 1), ("grpc.so_reuseaddr", 1)]
