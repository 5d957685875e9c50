"""The data types shared by flowspark's pynumaflow-compatible SDK modules and by the engine.

Names, constructor signatures, property behaviour and ``TypeError`` texts follow
pynumaflow 0.14. Every datetime a handler sees is a
:class:`~flowspark.api.udf.times.UTCDateTime` (aware UTC that compares with naive
datetimes as UTC), where pynumaflow mixes naive and aware ones.

>>> from datetime import datetime, timezone
>>> d = MapStreamDatum(["k"], b"v", datetime(2022, 9, 12, 16, 0), datetime(2022, 9, 12, 16, 1))
>>> d.event_time.tzinfo is timezone.utc, d.watermark > datetime(2022, 9, 12, 16, 0)
(True, True)
>>> StreamMessage(b"out", keys=d.keys) == StreamMessage(b"out", ["k"])
True
>>> acc = AccumulatorDatum(["k"], b"v", d.event_time, d.watermark, "id-1")
>>> AccumulatorMessage.from_datum(acc).id
'id-1'
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from operator import attrgetter
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Self, TypeVar, overload

from flowspark.api.udf.times import UTCDateTime, as_utc

__all__ = [
    "DROP",
    "Datum",
    "MapStreamDatum",
    "ReduceStreamDatum",
    "AccumulatorDatum",
    "StreamMessage",
    "AccumulatorMessage",
    "Messages",
    "IntervalWindow",
    "Metadata",
    "ReduceWindow",
    "KeyedWindow",
]

DROP = "U+005C__DROP__"
"""The tag of a message that must not be forwarded anywhere."""

M = TypeVar("M")
_S = TypeVar("_S", bound="StreamMessage")
_A = TypeVar("_A", bound="AccumulatorMessage")
_D = TypeVar("_D", bound="Datum")
_M = TypeVar("_M", bound="MetadataDatum")
_T = TypeVar("_T")


def _validate_message_fields(value: Any, keys: Any, tags: Any) -> None:
    """pynumaflow's construction-time checks of a message's value, keys and tags."""
    if value is not None and not isinstance(value, bytes):
        raise TypeError(f"Message 'value' must be bytes, got {type(value).__name__}")
    if keys is not None and (
        not isinstance(keys, list) or not all(isinstance(k, str) for k in keys)
    ):
        raise TypeError(f"Message 'keys' must be a list of strings, got {keys!r}")
    if tags is not None and (
        not isinstance(tags, list) or not all(isinstance(t, str) for t in tags)
    ):
        raise TypeError(f"Message 'tags' must be a list of strings, got {tags!r}")


class _Getter(property, Generic[_T]):
    """A read-only property giving the attribute ``attr`` (dotted for a nested one),
    typed ``_T`` without an annotation (``name = _Getter[T]("_attr", "doc")``): in a
    dataclass an annotated one would be a field.

    >>> class Point:
    ...     x = _Getter[int]("_x", "The x.")
    ...     def __init__(self) -> None:
    ...         self._x = 3
    >>> Point().x
    3
    """

    def __init__(self, attr: str, doc: str) -> None:
        super().__init__(attrgetter(attr), doc=doc)
        self.__doc__ = doc  # a subclass's own docstring would be read in its place

    if TYPE_CHECKING:  # what a type checker sees; at run time, property's own

        @overload
        def __get__(self, obj: None, owner: type[Any] | None = None, /) -> Self: ...
        @overload
        def __get__(self, obj: object, owner: type[Any] | None = None, /) -> _T: ...
        def __get__(self, obj: object, owner: type[Any] | None = None, /) -> Any: ...


def _reader(attr: str, doc: str) -> Any:
    """A read-only property giving the attribute ``attr`` (dotted for a nested one); its
    type is the annotation of the class attribute it is assigned to."""
    return _Getter[Any](attr, doc)


def _repr_showing(name: str, *attrs: str) -> Callable[[Any], str]:
    """A ``__repr__`` giving ``name(attr=value, ...)`` of the attributes ``attrs``."""

    def __repr__(self: Any) -> str:
        shown = ", ".join(f"{attr}={getattr(self, attr)!r}" for attr in attrs)
        return f"{name}({shown})"

    return __repr__


def _times_of(datum: Any) -> tuple[UTCDateTime, UTCDateTime]:
    """The (event time, watermark) of any datum-like object, as UTC datetimes."""
    return (
        as_utc(datum.event_time, "Datum.event_time"),
        as_utc(datum.watermark, "Datum.watermark"),
    )


class _UserMetadata:
    """pynumaflow's ``user_metadata`` of a datum or message (flowspark stores it as given)."""

    __slots__ = ()

    _user_metadata: Any

    user_metadata: Any = _reader("_user_metadata", "The user metadata given (``None`` when none).")


# ---------------------------------------------------------------------------------- datums


class Datum:
    """One input event: keys, value, event time, watermark, headers, id and tags.

    The per-SDK subclasses carry pynumaflow's exact constructor signatures; this
    base is what the engine builds (through the unvalidated :meth:`_make`).
    """

    __slots__ = ("_keys", "_value", "_event_time", "_watermark", "_headers", "_id", "_tags")

    _keys: list[str]
    _value: bytes
    _event_time: UTCDateTime
    _watermark: UTCDateTime
    _headers: dict[str, str]
    _id: str
    _tags: list[str]

    def __init__(
        self,
        keys: list[str],
        value: bytes,
        event_time: datetime,
        watermark: datetime,
        headers: dict[str, str] | None = None,
        *,
        id: str = "",
        tags: list[str] | None = None,
    ) -> None:
        self._keys = keys or []
        self._value = value or b""
        self._event_time = as_utc(event_time, "Datum.event_time")
        self._watermark = as_utc(watermark, "Datum.watermark")
        self._headers = headers or {}
        self._id = id
        self._tags = tags or []

    @classmethod
    def _make(
        cls: type[_D],
        keys: list[str],
        value: bytes,
        event_time: UTCDateTime,
        watermark: UTCDateTime,
        headers: dict[str, str],
        id: str,
        tags: list[str],
    ) -> _D:
        """Build without checks or copies (for the engine: times already UTCDateTime)."""
        datum = object.__new__(cls)
        datum._keys = keys
        datum._value = value
        datum._event_time = event_time
        datum._watermark = watermark
        datum._headers = headers
        datum._id = id
        datum._tags = tags
        return datum

    keys: list[str] = _reader("_keys", "The keys of the event.")
    value: bytes = _reader("_value", "The payload of the event.")
    event_time: UTCDateTime = _reader("_event_time", "The event time of the event (aware UTC).")
    watermark: UTCDateTime = _reader("_watermark", "The watermark when it was read (aware UTC).")

    @property
    def headers(self) -> dict[str, str]:
        """A copy of the headers of the event."""
        return self._headers.copy()

    id: str = _reader("_id", 'The id of the event ("" when it has none).')
    tags: list[str] = _reader("_tags", "The tags it was forwarded with (flowspark extension).")

    def _fields(self) -> tuple[Any, ...]:
        """The fields, in :meth:`_make`'s order."""
        return (
            self._keys,
            self._value,
            self._event_time,
            self._watermark,
            self._headers,
            self._id,
            self._tags,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Datum):
            return NotImplemented
        return self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]

    __repr__ = _repr_showing(
        "Datum", "keys", "value", "event_time", "watermark", "headers", "id", "tags"
    )

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return (type(self)._make, self._fields())


class MetadataDatum(Datum, _UserMetadata):
    """A datum with pynumaflow's user and system metadata: the source transformer's
    ``Datum`` (this constructor) and the sink's (whose constructor takes an id too).

    Times are stored as UTCDateTime (naive ones taken as UTC); a non-datetime
    raises pynumaflow's ``TypeError("Wrong data type: ... for Datum.event_time")``.
    """

    __slots__ = ("_user_metadata", "_system_metadata")

    def __init__(
        self,
        keys: list[str],
        value: bytes,
        event_time: datetime,
        watermark: datetime,
        headers: dict[str, str] | None = None,
        user_metadata: Any = None,
        system_metadata: Any = None,
    ) -> None:
        super().__init__(keys, value, event_time, watermark, headers)
        self._user_metadata = user_metadata
        self._system_metadata = system_metadata

    @classmethod
    def _make_with_metadata(
        cls: type[_M], fields: tuple[Any, ...], user_metadata: Any, system_metadata: Any
    ) -> _M:
        datum = cls._make(*fields)
        datum._user_metadata = user_metadata
        datum._system_metadata = system_metadata
        return datum

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        fields = (self._fields(), self._user_metadata, self._system_metadata)
        return (type(self)._make_with_metadata, fields)

    system_metadata: Any = _reader("_system_metadata", "The system metadata (``None`` when none).")


class _PlainDatum(Datum):
    """A datum built with pynumaflow's ``Datum(keys, value, event_time, watermark,
    headers=None)``."""

    __slots__ = ()

    def __init__(
        self,
        keys: list[str],
        value: bytes,
        event_time: datetime,
        watermark: datetime,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(keys, value, event_time, watermark, headers)


class MapStreamDatum(_PlainDatum):
    """pynumaflow's ``mapstreamer.Datum`` (also ``mapper``/``reducer``): headers return a copy."""

    __slots__ = ()


class ReduceStreamDatum(_PlainDatum):
    """pynumaflow's ``reducestreamer.Datum``: ``headers`` returns the internal dict."""

    __slots__ = ()

    headers: dict[str, str] = _reader("_headers", "The headers (the internal dict, as pynumaflow).")


class AccumulatorDatum(Datum):
    """pynumaflow's ``accumulator.Datum``: takes the message id as ``id_``."""

    __slots__ = ()

    def __init__(
        self,
        keys: list[str],
        value: bytes,
        event_time: datetime,
        watermark: datetime,
        id_: str,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(keys, value, event_time, watermark, headers, id=id_)


# -------------------------------------------------------------------------------- messages


class _FieldsEq:
    """``==`` of two objects of the same class: their ``_fields()`` (the attributes
    ``_field_names`` names, unless a subclass says otherwise) are equal. Not hashable
    unless a subclass says how."""

    __slots__ = ()

    _field_names: ClassVar[tuple[str, ...]]

    def _fields(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self._field_names)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._fields() == other._fields()


class _FieldsHash(_FieldsEq):
    """:class:`_FieldsEq` whose hash is that of its (hashable) ``_fields()``."""

    __slots__ = ()

    def __hash__(self) -> int:
        return hash(self._fields())


class _Payload(_FieldsEq):
    """What every message kind with tags reads the same way: value, keys and tags."""

    __slots__ = ()

    _value: bytes
    _keys: list[str]
    _tags: list[str]

    value: bytes = _reader("_value", "The payload.")
    keys: list[str] = _reader("_keys", "The keys for the next vertex.")
    tags: list[str] = _reader("_tags", "The tags for conditional forwarding.")


class StreamMessage(_Payload):
    """pynumaflow's ``Message(value, keys=None, tags=None)`` of map stream, reduce stream,
    map and reduce.

    ``to_drop(datum)`` additionally remembers the datum's (event time, watermark)
    in ``_times`` so the engine can still move the watermark past a dropped input.
    """

    __slots__ = ("_value", "_keys", "_tags", "_times")
    _field_names = ("_value", "_keys", "_tags")

    def __init__(
        self, value: bytes, keys: list[str] | None = None, tags: list[str] | None = None
    ) -> None:
        _validate_message_fields(value, keys, tags)
        self._value = value or b""
        self._keys = keys or []
        self._tags = tags or []
        self._times: tuple[UTCDateTime, UTCDateTime] | None = None

    @classmethod
    def to_drop(cls: type[_S], datum: Any = None) -> _S:
        """A message that is not forwarded: value ``b""``, keys ``[]``, tags ``[DROP]``."""
        message = cls(b"", None, [DROP])
        if datum is not None:
            message._times = _times_of(datum)
        return message

    __repr__ = _repr_showing("Message", "value", "keys", "tags")


class AccumulatorMessage(_Payload):
    """pynumaflow's ``accumulator.Message``: a message with its own times, headers and id.

    Given datetimes are stored as UTCDateTime (naive ones taken as UTC).
    """

    __slots__ = (
        "_value",
        "_keys",
        "_tags",
        "_watermark",
        "_event_time",
        "_headers",
        "_id",
        "_times",
    )
    _field_names = ("_value", "_keys", "_tags", "_watermark", "_event_time", "_headers", "_id")

    def __init__(
        self,
        value: bytes,
        keys: list[str] | None = None,
        tags: list[str] | None = None,
        watermark: datetime | None = None,
        event_time: datetime | None = None,
        headers: dict[str, str] | None = None,
        id: str | None = None,
    ) -> None:
        _validate_message_fields(value, keys, tags)
        self._value = value or b""
        self._keys = keys or []
        self._tags = tags or []
        self._watermark = None if watermark is None else as_utc(watermark, "Message.watermark")
        self._event_time = None if event_time is None else as_utc(event_time, "Message.event_time")
        self._headers = headers or {}
        self._id = id or ""
        self._times: tuple[UTCDateTime, UTCDateTime] | None = None

    @classmethod
    def to_drop(cls: type[_A], datum: Any = None) -> _A:
        """A message that is not forwarded; with a datum it carries the datum's times."""
        if datum is None:
            return cls(b"", None, [DROP])
        event_time, watermark = _times_of(datum)
        message = cls(b"", None, [DROP], watermark=watermark, event_time=event_time)
        message._times = (event_time, watermark)
        return message

    @classmethod
    def from_datum(cls: type[_A], datum: Any) -> _A:
        """A message copying a datum's value, keys, watermark, event time, headers and id.

        Tags are not copied (``[]``), like pynumaflow. Any datum-like object works;
        a missing ``id`` gives ``""``.
        """
        return cls(
            value=datum.value,
            keys=datum.keys,
            watermark=datum.watermark,
            event_time=datum.event_time,
            headers=datum.headers,
            id=getattr(datum, "id", ""),
        )

    watermark: UTCDateTime | None = _reader("_watermark", "Its watermark (``None`` when not set).")
    event_time: UTCDateTime | None = _reader("_event_time", "Its event time (``None``: not set).")

    @property
    def headers(self) -> dict[str, str]:
        """A copy of the headers."""
        return self._headers.copy()

    id: str = _reader("_id", 'The message id ("" when not set).')

    __repr__ = _repr_showing(
        "Message", "value", "keys", "tags", "watermark", "event_time", "headers", "id"
    )


class ItemList(Sequence[M]):
    """pynumaflow's list-like results (``Messages``, ``Responses``, ``BatchResponses``):
    built from ``*items``, shown as the list of them."""

    __slots__ = ("_items",)

    def __init__(self, *items: M) -> None:
        self._items: list[M] = list(items)

    def __str__(self) -> str:
        return str(self._items)

    def __repr__(self) -> str:
        return str(self)

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[M]:
        return iter(self._items)


class _SliceFreeList(ItemList[M]):
    """pynumaflow's ``Messages``/``Responses``: an appendable sequence that refuses
    slicing; ``_what`` names it in the errors."""

    __slots__ = ()

    _what: ClassVar[str]

    def __getitem__(self, index: int) -> M:  # type: ignore[override]
        if isinstance(index, slice):
            raise TypeError(f"Slicing is not supported for {self._what}")
        return self._items[index]

    def items(self) -> list[M]:
        """The underlying list (deprecated in pynumaflow: iterate or index instead)."""
        warnings.warn(
            "Using items is deprecated and will be removed in v0.5. "
            f"Iterate or index the {self._what} object instead.",
            DeprecationWarning,
            stacklevel=2,
        )
        return self._items


class Messages(_SliceFreeList[M]):
    """pynumaflow's ``Messages(*messages)``: an appendable sequence that refuses slicing."""

    __slots__ = ()

    _what = "Messages"

    def append(self, message: M) -> None:
        """Add ``message`` at the end."""
        self._items.append(message)


# --------------------------------------------------------------------------------- windows


class IntervalWindow(_FieldsHash):
    """The ``[start, end)`` of a window; both stored as UTCDateTime."""

    __slots__ = ("_start", "_end")
    _field_names = __slots__

    def __init__(self, start: datetime, end: datetime) -> None:
        self._start = as_utc(start, "IntervalWindow.start")
        self._end = as_utc(end, "IntervalWindow.end")

    start: UTCDateTime = _reader("_start", "The start of the window.")
    end: UTCDateTime = _reader("_end", "The end of the window.")

    __repr__ = _repr_showing("IntervalWindow", "start", "end")


class Metadata(_FieldsEq):
    """What a reduce handler learns about its window: ``md.interval_window``."""

    __slots__ = ("_interval_window",)
    _field_names = __slots__

    def __init__(self, interval_window: IntervalWindow) -> None:
        self._interval_window = interval_window

    interval_window: IntervalWindow = _reader("_interval_window", "The window being reduced.")

    def __hash__(self) -> int:
        return hash(self._interval_window)

    __repr__ = _repr_showing("Metadata", "interval_window")


class ReduceWindow(_FieldsHash):
    """A reduce window: an :class:`IntervalWindow` plus its slot."""

    __slots__ = ("_window", "_slot")
    _field_names: ClassVar[tuple[str, ...]] = __slots__  # KeyedWindow adds its keys

    def __init__(self, start: datetime, end: datetime, slot: str = "") -> None:
        self._window = IntervalWindow(start, end)
        self._slot = slot

    start: UTCDateTime = _reader("_window.start", "The start of the window.")
    end: UTCDateTime = _reader("_window.end", "The end of the window.")
    slot: str = _reader("_slot", "The slot of the window.")
    window: IntervalWindow = _reader("_window", "The interval window.")

    __repr__ = _repr_showing("ReduceWindow", "start", "end", "slot")


class KeyedWindow(ReduceWindow):
    """An accumulator window: an :class:`IntervalWindow`, its slot and its keys.

    Unlike pynumaflow, instances built without ``keys`` do not share one list.
    """

    __slots__ = ("_keys",)
    _field_names = ("_window", "_slot", "_keys")

    def __init__(
        self, start: datetime, end: datetime, slot: str = "", keys: list[str] | None = None
    ) -> None:
        super().__init__(start, end, slot)
        self._keys: list[str] = [] if keys is None else keys

    keys: list[str] = _reader("_keys", "The keys the window belongs to.")

    __hash__ = None  # type: ignore[assignment]

    __repr__ = _repr_showing("KeyedWindow", "start", "end", "slot", "keys")
