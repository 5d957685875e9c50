"""pynumaflow 0.14's batch-map types: the batch's ``Datum`` and the handler's responses.

A batch-map handler reads one batch of datums and answers each request id with a
:class:`BatchResponse` (its messages, possibly none); :class:`BatchResponses`
collects the answers. Names, constructor signatures, ``repr``s and behaviour
(slicing allowed, ``items()`` without a warning) follow ``pynumaflow.batchmapper``.

>>> from datetime import datetime, timezone
>>> from flowspark.api.udf.types import StreamMessage as Message
>>> t = datetime(2024, 1, 1, tzinfo=timezone.utc)
>>> datum = BatchMapDatum("id-1", ["k"], b"a,b", t, t)
>>> response = BatchResponse.from_id(datum.id)
>>> for part in datum.value.split(b","):
...     response.append(Message(part))
>>> BatchResponses(response)
[BatchResponse(_id='id-1', messages=[Message(value=b'a', keys=[], tags=[]), \
Message(value=b'b', keys=[], tags=[])])]
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar, overload

from flowspark.api.udf.types import Datum, ItemList

__all__ = ["BatchMapDatum", "BatchResponse", "BatchResponses"]

_R = TypeVar("_R", bound="BatchResponse")


class BatchMapDatum(Datum):
    """pynumaflow's ``batchmapper.Datum(id, keys, value, event_time, watermark, headers=None)``:
    the request id comes first; ``headers`` returns a copy.

    Times are stored as UTCDateTime (naive ones taken as UTC); a non-datetime raises
    pynumaflow's ``TypeError("Wrong data type: ... for Datum.event_time")``.
    """

    __slots__ = ()

    def __init__(
        self,
        id: str,  # noqa: A002 - pynumaflow's name
        keys: list[str],
        value: bytes,
        event_time: datetime,
        watermark: datetime,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(keys, value, event_time, watermark, headers, id=id)


@dataclass(slots=True)
class BatchResponse:
    """The answer to one request of a batch: its id and the messages it gives (none: the
    request produces nothing, as a response of only ``Message.to_drop()`` does)."""

    _id: str
    messages: list[Any]

    @classmethod
    def from_id(cls: type[_R], id_: str) -> _R:
        """An answer to request ``id_`` with no messages yet (``append`` them)."""
        return cls(id_, [])

    @classmethod
    def with_msgs(cls: type[_R], id_: str, msgs: list[Any]) -> _R:
        """An answer to request ``id_`` with the messages ``msgs`` (the list itself)."""
        return cls(id_, msgs)

    def append(self, message: Any) -> None:
        """Add ``message`` to the answer."""
        self.messages.append(message)

    def items(self) -> list[Any]:
        """The messages (the list itself)."""
        return self.messages

    @property
    def id(self) -> str:
        """The request id this answers."""
        return self._id


class BatchResponses(ItemList[Any]):
    """pynumaflow's ``BatchResponses(*responses)``: the answers of one batch, appendable.

    Unlike ``Messages``, a slice is allowed (it gives a list) and ``items()`` is
    not deprecated, as in pynumaflow.
    """

    __slots__ = ()

    @overload
    def __getitem__(self, index: int) -> Any: ...

    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...

    def __getitem__(self, index: int | slice) -> Any:
        return self._items[index]

    def append(self, response: Any) -> None:
        """Add ``response`` (a :class:`BatchResponse`) at the end."""
        self._items.append(response)

    def items(self) -> list[Any]:
        """The responses (the list itself)."""
        return self._items
