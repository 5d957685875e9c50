"""pynumaflow 0.14's user-defined source types: the ``Sourcer`` ABC and its messages.

Names, constructor signatures, properties and ``TypeError`` texts follow
``pynumaflow.sourcer``. What flowspark does with a ``Sourcer`` (reads per
micro-batch, acks after Spark commits) lives in
:mod:`flowspark.connectors.numaflow.udsource`.

>>> from datetime import datetime
>>> offset = Offset.offset_with_default_partition_id(b"7")
>>> message = Message(b"hi", offset, datetime(2024, 1, 1), keys=["k"])
>>> message.payload, message.offset.as_dict, message.keys, message.headers
(b'hi', {'offset': b'7', 'partition_id': 0}, ['k'], {})
>>> ReadRequest(num_records=10, timeout_in_ms=1000).num_records
10
"""

from __future__ import annotations

import os
from abc import ABCMeta, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeAlias

from flowspark.api.udf.types import _Getter, _validate_message_fields

__all__ = [
    "Offset",
    "Message",
    "ReadRequest",
    "AckRequest",
    "NackRequest",
    "PendingResponse",
    "PartitionsResponse",
    "Sourcer",
    "SourceCallable",
    "UserMetadata",
    "get_default_partitions",
]


def get_default_partitions() -> list[int]:
    """The default partition ids: ``[int($NUMAFLOW_REPLICA or 0)]``, as pynumaflow's.

    >>> get_default_partitions()
    [0]
    """
    return [int(os.getenv("NUMAFLOW_REPLICA", "0"))]


@dataclass
class UserMetadata:
    """pynumaflow's per-message user metadata: key/value pairs (bytes) in named groups.

    >>> meta = UserMetadata()
    >>> meta.add_key("g", "k", b"v")
    >>> meta.groups(), meta.keys("g"), meta.value("g", "k"), "g" in meta, len(meta)
    (['g'], ['k'], b'v', True, 1)
    >>> meta.remove_key("g", "k"), meta.groups()
    (b'v', [])
    """

    _data: dict[str, dict[str, bytes]] = field(default_factory=dict)

    def groups(self) -> list[str]:
        """The group names."""
        return list(self._data)

    def keys(self, group: str) -> list[str]:
        """The keys of ``group`` (``[]`` for an unknown group)."""
        return list(self._data.get(group) or {})

    def value(self, group: str, key: str) -> bytes | None:
        """The value of ``key`` in ``group`` (``None`` when absent)."""
        return (self._data.get(group) or {}).get(key)

    def add_key(self, group: str, key: str, value: bytes) -> None:
        """Set ``key`` of ``group`` to ``value``."""
        self._data.setdefault(group, {})[key] = value

    def remove_key(self, group: str, key: str) -> bytes | None:
        """Remove ``key`` from ``group`` (an emptied group goes too); its value or ``None``."""
        data = self._data.get(group)
        if data is None:
            return None
        value = data.pop(key, None)
        if not data:
            del self._data[group]
        return value

    def remove_group(self, group: str) -> dict[str, bytes] | None:
        """Remove ``group``; its data or ``None``."""
        return self._data.pop(group, None)

    def clear(self) -> None:
        """Remove every group."""
        self._data.clear()

    def __contains__(self, group: object) -> bool:
        return group in self._data

    def __getitem__(self, group: str) -> dict[str, bytes]:
        return self._data[group]

    def __setitem__(self, group: str, data: dict[str, bytes]) -> None:
        self._data[group] = data

    def __delitem__(self, group: str) -> None:
        del self._data[group]

    def __len__(self) -> int:
        return len(self._data)

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)


@dataclass(init=False, slots=True)
class Offset:
    """Where a message sits in the source: opaque bytes and a partition id."""

    _offset: bytes
    _partition_id: int

    def __init__(self, offset: bytes, partition_id: int) -> None:
        self._offset = offset
        self._partition_id = partition_id

    @classmethod
    def offset_with_default_partition_id(cls, offset: bytes) -> Offset:
        """An offset in the default partition (:func:`get_default_partitions`)."""
        return cls(offset=offset, partition_id=get_default_partitions()[0])

    @property
    def as_dict(self) -> dict[str, Any]:
        """``{"offset": bytes, "partition_id": int}``."""
        return {"offset": self._offset, "partition_id": self._partition_id}

    offset = _Getter[bytes]("_offset", "The offset's bytes.")
    partition_id = _Getter[int]("_partition_id", "The partition the message belongs to.")


@dataclass(init=False, slots=True)
class Message:
    """A message the source reads: payload, offset, event time, keys, headers, metadata."""

    _payload: bytes
    _offset: Offset
    _event_time: datetime
    _keys: list[str]
    _headers: dict[str, str]
    _user_metadata: UserMetadata

    def __init__(
        self,
        payload: bytes,
        offset: Offset,
        event_time: datetime,
        keys: list[str] | None = None,
        headers: dict[str, str] | None = None,
        user_metadata: UserMetadata | None = None,
    ) -> None:
        _validate_message_fields(payload, keys, None)
        self._payload = payload
        self._offset = offset
        self._event_time = event_time
        self._keys = keys or []
        self._headers = headers or {}
        self._user_metadata = user_metadata or UserMetadata()

    payload = _Getter[bytes]("_payload", "The message's bytes.")
    keys = _Getter[list[str]]("_keys", "The message's keys.")
    offset = _Getter[Offset]("_offset", "The message's offset (what ``ack_handler`` gets back).")
    event_time = _Getter[datetime](
        "_event_time", "The message's event time (a naive one counts as UTC)."
    )
    headers = _Getter[dict[str, str]]("_headers", "The message's headers.")
    user_metadata = _Getter[UserMetadata]("_user_metadata", "The message's user metadata.")


def _int_field(value: Any, what: str) -> int:
    if not isinstance(value, int):
        raise TypeError(f"Wrong data type: {type(value)} for {what}")
    return value


@dataclass(init=False, slots=True)
class ReadRequest:
    """A read: up to ``num_records`` messages, within ``timeout_in_ms`` milliseconds."""

    _num_records: int
    _timeout_in_ms: int

    def __init__(self, num_records: int, timeout_in_ms: int) -> None:
        self._num_records = _int_field(num_records, "ReadRequest.num_records")
        self._timeout_in_ms = _int_field(timeout_in_ms, "ReadRequest.timeout_in_ms")

    num_records = _Getter[int]("_num_records", "The most messages to read.")
    timeout_in_ms = _Getter[int]("_timeout_in_ms", "The time the read may take, in milliseconds.")


@dataclass(init=False, slots=True)
class _OffsetsRequest:
    """A request that carries offsets (what ``AckRequest`` and ``NackRequest`` share)."""

    _offsets: list[Offset]

    def __init__(self, offsets: list[Offset]) -> None:
        self._offsets = offsets

    offsets = _Getter[list[Offset]]("_offsets", "The offsets the request is about.")


@dataclass(init=False, slots=True)
class AckRequest(_OffsetsRequest):
    """The offsets of messages delivered for good (flowspark: in a committed micro-batch)."""


@dataclass(init=False, slots=True)
class NackRequest(_OffsetsRequest):
    """The offsets of messages to deliver again (flowspark never sends one: see the docs)."""


@dataclass(init=False, slots=True)
class PendingResponse:
    """How many messages the source holds unread (negative: not known)."""

    _count: int

    def __init__(self, count: int) -> None:
        self._count = _int_field(count, "Pending.count")

    count = _Getter[int]("_count", "The number of pending messages.")


@dataclass(init=False, slots=True)
class PartitionsResponse:
    """The source's active partitions."""

    _partitions: list[int]

    def __init__(self, partitions: list[int]) -> None:
        if not isinstance(partitions, list):
            raise TypeError(f"Wrong data type: {type(partitions)} for Partition.partitions")
        self._partitions = partitions

    partitions = _Getter[list[int]]("_partitions", "The active partition ids.")


class Sourcer(metaclass=ABCMeta):
    """A user-defined source: pynumaflow's ``Sourcer`` ABC (every handler is async)."""

    @abstractmethod
    async def read_handler(self, datum: ReadRequest, output: Any) -> None:
        """Put up to ``datum.num_records`` :class:`Message` s on ``output``
        (``await output.put(message)``)."""

    @abstractmethod
    async def ack_handler(self, ack_request: AckRequest) -> None:
        """The messages at ``ack_request.offsets`` are delivered: forget them."""

    @abstractmethod
    async def nack_handler(self, nack_request: NackRequest) -> None:
        """Deliver the messages at ``nack_request.offsets`` again."""

    @abstractmethod
    async def pending_handler(self) -> PendingResponse:
        """How many messages wait to be read."""

    @abstractmethod
    async def active_partitions_handler(self) -> PartitionsResponse:
        """The partitions this source reads now."""

    async def total_partitions_handler(self) -> int | None:
        """The number of partitions in all (``None``: not reported)."""
        return None


SourceCallable: TypeAlias = Sourcer
