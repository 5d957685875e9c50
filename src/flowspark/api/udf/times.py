"""UTC datetimes that also get along with naive ones.

pynumaflow hands handlers naive-UTC datetimes (``Timestamp.ToDatetime()``), and
user code compares them with naive values such as ``datetime.fromtimestamp(-1)``.
flowspark hands out :class:`UTCDateTime` instead: an aware UTC datetime that
treats any naive operand as UTC, so both styles of user code keep working.

>>> from datetime import datetime, timedelta
>>> wm = utc_from_ms(1_662_998_460_000)
>>> wm > datetime(2022, 9, 12, 16, 0), datetime(2022, 9, 12, 16, 1) == wm
(True, True)
>>> wm - datetime(2022, 9, 12, 16, 0)
datetime.timedelta(seconds=60)
>>> to_ms(wm + timedelta(milliseconds=5))
1662998460005
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

__all__ = ["UTCDateTime", "as_utc", "utc_from_ms", "to_ms"]

_ONE_MS = timedelta(milliseconds=1)


def _assume_utc(value: Any) -> Any:
    """``value`` with UTC attached when it is a naive datetime; anything else unchanged."""
    if isinstance(value, datetime):
        tz = value.tzinfo
        if tz is None or (tz is not UTC and value.utcoffset() is None):
            return value.replace(tzinfo=UTC)
    return value


class UTCDateTime(datetime):
    """An aware UTC datetime whose comparisons and subtraction take naive operands as UTC.

    Python tries a subclass's reflected operator first, so ``naive < utc_dt`` and
    ``naive - utc_dt`` work too. Hashing is the aware datetime's hash, consistent
    with ``==`` against aware datetimes (a naive datetime that compares equal
    hashes differently, as naive and aware datetimes always do).
    """

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        if other.__class__ is UTCDateTime:  # the common case, at C speed
            return datetime.__eq__(self, other)
        return datetime.__eq__(_assume_utc(self), _assume_utc(other))

    def __ne__(self, other: object) -> bool:
        if other.__class__ is UTCDateTime:  # the common case, at C speed
            return datetime.__ne__(self, other)
        return datetime.__ne__(_assume_utc(self), _assume_utc(other))

    def __lt__(self, other: datetime) -> bool:
        if other.__class__ is UTCDateTime:  # the common case, at C speed
            return datetime.__lt__(self, other)
        return datetime.__lt__(_assume_utc(self), _assume_utc(other))

    def __le__(self, other: datetime) -> bool:
        if other.__class__ is UTCDateTime:  # the common case, at C speed
            return datetime.__le__(self, other)
        return datetime.__le__(_assume_utc(self), _assume_utc(other))

    def __gt__(self, other: datetime) -> bool:
        if other.__class__ is UTCDateTime:  # the common case, at C speed
            return datetime.__gt__(self, other)
        return datetime.__gt__(_assume_utc(self), _assume_utc(other))

    def __ge__(self, other: datetime) -> bool:
        if other.__class__ is UTCDateTime:  # the common case, at C speed
            return datetime.__ge__(self, other)
        return datetime.__ge__(_assume_utc(self), _assume_utc(other))

    def __hash__(self) -> int:
        return datetime.__hash__(_assume_utc(self))

    def __sub__(self, other: Any) -> Any:
        if isinstance(other, datetime):
            return datetime.__sub__(_assume_utc(self), _assume_utc(other))
        return datetime.__sub__(self, other)

    def __rsub__(self, other: Any) -> Any:
        if isinstance(other, datetime):
            return datetime.__sub__(_assume_utc(other), _assume_utc(self))
        return NotImplemented


_EPOCH = UTCDateTime(1970, 1, 1, tzinfo=UTC)
_PLAIN_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def utc_from_ms(ms: int) -> UTCDateTime:
    """The :class:`UTCDateTime` ``ms`` milliseconds after the epoch."""
    return _EPOCH + timedelta(milliseconds=ms)


def to_ms(dt: datetime) -> int:
    """Milliseconds since the epoch (floored) of ``dt``; a naive ``dt`` is taken as UTC."""
    if not isinstance(dt, datetime):
        raise TypeError(f"to_ms needs a datetime; got {type(dt).__name__}")
    return datetime.__sub__(_assume_utc(dt), _PLAIN_EPOCH) // _ONE_MS


def as_utc(value: Any, what: str) -> UTCDateTime:
    """``value`` as a :class:`UTCDateTime`: aware ones converted to UTC, naive ones taken as UTC.

    ``what`` names the field in the ``TypeError`` raised for non-datetimes
    (pynumaflow's text, e.g. ``"Datum.event_time"``).
    """
    if type(value) is UTCDateTime and value.tzinfo is UTC:
        return value
    if not isinstance(value, datetime):
        raise TypeError(f"Wrong data type: {type(value)} for {what}")
    tz = value.tzinfo
    if tz is not None and tz is not UTC and value.utcoffset() is not None:
        value = value.astimezone(UTC)
    return UTCDateTime(
        value.year,
        value.month,
        value.day,
        value.hour,
        value.minute,
        value.second,
        value.microsecond,
        UTC,
    )
