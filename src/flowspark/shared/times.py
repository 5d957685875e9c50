"""The epoch, and datetimes and durations in milliseconds: flowspark's one time module.

Times travel as whole milliseconds since the Unix epoch (UTC). A datetime's
milliseconds come in two contracts:

* :func:`aware_to_ms`: the clocks and windows of bytewax flows, whose times must
  be timezone-aware; a naive datetime is refused (``ValueError``).
* :func:`naive_as_utc_to_ms`: Numaflow's event times and watermarks, which
  pynumaflow hands out as naive UTC datetimes; a naive datetime is taken as UTC.

Both floor to the millisecond (a microsecond before the epoch is ``-1``) and
convert aware datetimes of any zone to UTC.

>>> from datetime import timezone
>>> aware_to_ms(datetime(2022, 1, 1, 2, tzinfo=timezone(timedelta(hours=2))))
1640995200000
>>> naive_as_utc_to_ms(datetime(1969, 12, 31, 23, 59, 59, 999999))
-1
>>> datetime_from_ms(1_500)
datetime.datetime(1970, 1, 1, 0, 0, 1, 500000, tzinfo=datetime.timezone.utc)
>>> duration_ms(timedelta(seconds=2, microseconds=999))
2000
>>> seconds_to_ms(1.0019), seconds_to_ms(-1.0019)
(1001, -1001)
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

__all__ = [
    "EPOCH",
    "ONE_MS",
    "ONE_US",
    "assume_utc",
    "aware_to_ms",
    "naive_as_utc_to_ms",
    "datetime_from_ms",
    "duration_ms",
    "event_ms",
    "seconds_to_ms",
]

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
"""The Unix epoch, an aware UTC datetime."""
ONE_MS = timedelta(milliseconds=1)
ONE_US = timedelta(microseconds=1)


def assume_utc(value: Any) -> Any:
    """``value`` with UTC attached when it is a naive datetime; anything else unchanged.

    A datetime whose ``tzinfo`` gives no offset counts as naive.
    """
    if isinstance(value, datetime):
        tz = value.tzinfo
        if tz is None or (tz is not UTC and value.utcoffset() is None):
            return value.replace(tzinfo=UTC)
    return value


def aware_to_ms(dt: Any) -> int:
    """Milliseconds since the epoch (floored) of an aware datetime; naive ones are
    refused (``ValueError``), anything else too (``TypeError``)."""
    if not isinstance(dt, datetime):
        raise TypeError(f"the clock needs a datetime; got {type(dt).__name__} {dt!r:.80}")
    if dt.tzinfo is None or dt.utcoffset() is None:
        raise ValueError(
            f"the clock needs timezone-aware datetimes (tzinfo=timezone.utc); got naive {dt!r}"
        )
    return (dt - EPOCH) // ONE_MS


def event_ms(dt: Any) -> int:
    """:func:`aware_to_ms` with the common case first: a hot loop's event time.

    >>> event_ms(datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC))
    1000
    """
    try:
        return (dt - EPOCH) // ONE_MS
    except TypeError:
        return aware_to_ms(dt)  # raises the clear error for naive or non-datetimes


def naive_as_utc_to_ms(dt: Any) -> int:
    """Milliseconds since the epoch (floored) of ``dt``; a naive ``dt`` is taken as UTC.
    Anything but a datetime is refused (``TypeError``)."""
    if not isinstance(dt, datetime):
        raise TypeError(f"to_ms needs a datetime; got {type(dt).__name__}")
    return datetime.__sub__(assume_utc(dt), EPOCH) // ONE_MS


def datetime_from_ms(ms: int) -> datetime:
    """The aware UTC datetime ``ms`` milliseconds after the epoch."""
    return EPOCH + timedelta(milliseconds=ms)


def duration_ms(td: timedelta) -> int:
    """Whole milliseconds of ``td`` (floored)."""
    return td // ONE_MS


def seconds_to_ms(seconds: float) -> int:
    """Whole milliseconds of ``seconds`` (a float such as ``time.time()``), truncated
    toward zero as ``int()`` does."""
    return int(seconds * 1000)
