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
>>> utc_from_us(-1)
UTCDateTime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=datetime.timezone.utc)
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from flowspark.shared.times import EPOCH, assume_utc

__all__ = ["UTCDateTime", "UTC_EPOCH", "as_utc", "utc_from_ms", "utc_from_us"]


class UTCDateTime(datetime):
    """An aware UTC datetime whose comparisons and subtraction take naive operands as UTC.

    Python tries a subclass's reflected operator first, so ``naive < utc_dt`` and
    ``naive - utc_dt`` work too. Hashing is the aware datetime's hash, consistent
    with ``==`` against aware datetimes (a naive datetime that compares equal
    hashes differently, as naive and aware datetimes always do).
    """

    __slots__ = ()

    # __eq__, __ne__, __lt__, __le__, __gt__, __ge__: set below, from _compare.

    def __hash__(self) -> int:
        return datetime.__hash__(assume_utc(self))

    def __sub__(self, other: Any) -> Any:
        if isinstance(other, datetime):
            return datetime.__sub__(assume_utc(self), assume_utc(other))
        return datetime.__sub__(self, other)

    def __rsub__(self, other: Any) -> Any:
        if isinstance(other, datetime):
            return datetime.__sub__(assume_utc(other), assume_utc(self))
        return NotImplemented


def _compare(name: str) -> Any:
    """``UTCDateTime``'s comparison ``name``: datetime's own, with naive operands as UTC."""
    compare = getattr(datetime, name)

    def method(self: UTCDateTime, other: Any) -> Any:
        if other.__class__ is UTCDateTime:  # the common case, at C speed
            return compare(self, other)
        return compare(assume_utc(self), assume_utc(other))

    method.__name__ = name
    method.__qualname__ = f"UTCDateTime.{name}"
    return method


for _name in ("__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__"):
    setattr(UTCDateTime, _name, _compare(_name))
del _name


def utc_from_ms(ms: int) -> UTCDateTime:
    """The :class:`UTCDateTime` ``ms`` milliseconds after the epoch."""
    return UTC_EPOCH + timedelta(milliseconds=ms)


def utc_from_us(us: int) -> UTCDateTime:
    """The :class:`UTCDateTime` ``us`` microseconds after the epoch."""
    return UTC_EPOCH + timedelta(microseconds=us)


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


UTC_EPOCH = as_utc(EPOCH, "EPOCH")
"""The epoch (:data:`flowspark.shared.times.EPOCH`) as a :class:`UTCDateTime`."""
