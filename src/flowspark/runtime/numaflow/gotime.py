"""Time strings as Numaflow's Go code parsed them: Go layouts and dateparse.

Numaflow's pre-1.6 ``eventTimeExtractor`` and ``timeExtractionFilter`` builtins
(:mod:`flowspark.runtime.numaflow.builtins`) turn a string into an event time
with a Go layout (:func:`parse_go_time`, Go's ``time.Parse``) or, without one,
like ``dateparse.ParseStrict`` (:func:`parse_date_strict`), both in UTC as
Numaflow ran them (``time.Local`` = UTC).

>>> parse_event_time("2024-01-02T03:04:05Z").isoformat()
'2024-01-02T03:04:05+00:00'
>>> parse_event_time("02/01/2024 03:04", "02/01/2006 15:04").isoformat()
'2024-01-02T03:04:00+00:00'
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

from flowspark.api.udf.times import UTCDateTime, as_utc, utc_from_us

__all__ = ["parse_event_time", "parse_go_time", "parse_date_strict"]


def parse_event_time(text: str, layout: str | None = None) -> UTCDateTime:
    """``text`` as an event time: with a Go ``layout`` (:func:`parse_go_time`), else
    like ``dateparse.ParseStrict`` (:func:`parse_date_strict`). Errors: ``ValueError``."""
    parsed = parse_go_time(layout, text) if layout else parse_date_strict(text)
    return as_utc(parsed, "event time")


_LONG_MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
_LONG_DAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]
_STD_0X = ["ZeroMonth", "ZeroDay", "ZeroHour12", "ZeroMinute", "ZeroSecond", "Year"]
_TZ_CHUNKS = {
    "-": [
        ("-070000", "NumSecondsTZ"),
        ("-07:00:00", "NumColonSecondsTZ"),
        ("-0700", "NumTZ"),
        ("-07:00", "NumColonTZ"),
        ("-07", "NumShortTZ"),
    ],
    "Z": [
        ("Z070000", "ISOSecondsTZ"),
        ("Z07:00:00", "ISOColonSecondsTZ"),
        ("Z0700", "ISOTZ"),
        ("Z07:00", "ISOColonTZ"),
        ("Z07", "ISOShortTZ"),
    ],
}


def _next_chunk(layout: str) -> tuple[str, str | None, int, str]:
    """Go's ``nextStdChunk``: ``(literal prefix, element, digits, rest of layout)``."""
    n = len(layout)
    for i, c in enumerate(layout):
        rest = layout[i:]
        if c == "J" and rest.startswith("Jan"):
            if rest.startswith("January"):
                return layout[:i], "LongMonth", 0, layout[i + 7 :]
            if not rest[3:4].islower():
                return layout[:i], "Month", 0, layout[i + 3 :]
        elif c == "M" and rest.startswith("Mon"):
            if rest.startswith("Monday"):
                return layout[:i], "LongWeekDay", 0, layout[i + 6 :]
            if not rest[3:4].islower():
                return layout[:i], "WeekDay", 0, layout[i + 3 :]
        elif c == "M" and rest.startswith("MST"):
            return layout[:i], "TZ", 0, layout[i + 3 :]
        elif c == "0" and i + 1 < n and "1" <= layout[i + 1] <= "6":
            return layout[:i], _STD_0X[int(layout[i + 1]) - 1], 0, layout[i + 2 :]
        elif c == "0" and rest.startswith("002"):
            return layout[:i], "ZeroYearDay", 0, layout[i + 3 :]
        elif c == "1":
            if rest.startswith("15"):
                return layout[:i], "Hour", 0, layout[i + 2 :]
            return layout[:i], "NumMonth", 0, layout[i + 1 :]
        elif c == "2":
            if rest.startswith("2006"):
                return layout[:i], "LongYear", 0, layout[i + 4 :]
            return layout[:i], "Day", 0, layout[i + 1 :]
        elif c == "_" and rest.startswith("_2"):
            if rest.startswith("_2006"):
                return layout[: i + 1], "LongYear", 0, layout[i + 5 :]
            return layout[:i], "UnderDay", 0, layout[i + 2 :]
        elif c == "_" and rest.startswith("__2"):
            return layout[:i], "UnderYearDay", 0, layout[i + 3 :]
        elif c in "345":
            return layout[:i], {"3": "Hour12", "4": "Minute", "5": "Second"}[c], 0, rest[1:]
        elif (c == "P" and rest.startswith("PM")) or (c == "p" and rest.startswith("pm")):
            return layout[:i], rest[:2], 0, layout[i + 2 :]
        elif c in _TZ_CHUNKS:
            for chunk, std in _TZ_CHUNKS[c]:
                if rest.startswith(chunk):
                    return layout[:i], std, 0, layout[i + len(chunk) :]
        elif c in ".," and i + 1 < n and layout[i + 1] in "09":
            j = i + 1
            while j < n and layout[j] == layout[i + 1]:
                j += 1
            if not (j < n and layout[j].isdigit()):
                std = "Frac0" if layout[i + 1] == "0" else "Frac9"
                return layout[:i], std, j - i - 1, layout[j:]
    return layout, None, 0, ""


def _digit(value: str, i: int) -> bool:
    return i < len(value) and "0" <= value[i] <= "9"


def _getnum(value: str, fixed: bool, width: int = 2) -> tuple[int, str]:
    """Go's ``getnum``/``getnum3``: 1 to ``width`` digits (exactly ``width`` if fixed)."""
    n = 0
    while n < width and _digit(value, n):
        n += 1
    if n == 0 or (fixed and n < width):
        raise ValueError("bad number")
    return int(value[:n]), value[n:]


def _lookup(names: list[str], value: str) -> tuple[int, str]:
    for index, name in enumerate(names):
        if value[: len(name)].lower() == name.lower():
            return index, value[len(name) :]
    raise ValueError("bad name")


def _skip(value: str, prefix: str) -> str:
    """Go's ``skip``: drop the literal ``prefix``; runs of spaces match runs of spaces."""
    while prefix:
        if prefix[0] == " ":
            if value and value[0] != " ":
                raise ValueError("bad literal")
            prefix, value = prefix.lstrip(" "), value.lstrip(" ")
            continue
        if not value or value[0] != prefix[0]:
            raise ValueError("bad literal")
        prefix, value = prefix[1:], value[1:]
    return value


def _nanos(value: str, nbytes: int) -> int:
    if value[:1] not in (".", ","):
        raise ValueError("bad fraction")
    digits = value[1 : min(nbytes, 10)]
    if not digits.isdigit() or not digits.isascii():
        raise ValueError("bad fraction")
    return int(digits.ljust(9, "0"))


def _signed_offset(value: str) -> int:
    """Go's ``parseSignedOffset``: length of ``±N`` (N ≤ 12) at the start, else 0."""
    match = re.match(r"[+-]([0-9]+)", value)
    return len(match.group(0)) if match and int(match.group(1)) <= 12 else 0


def _zone_name_length(value: str) -> int:
    """Go's ``parseTimeZone``: the length of a zone name at the start, else 0."""
    if len(value) < 3:
        return 0
    if value[:4] in ("ChST", "MeST"):
        return 4
    if value.startswith("GMT"):
        return 3 + _signed_offset(value[3:])
    if value[0] in "+-":
        return _signed_offset(value)
    upper = len(re.match(r"[A-Z]{0,6}", value).group(0))  # type: ignore[union-attr]
    if upper == 3 or (upper == 4 and (value[3] == "T" or value[:4] == "WITA")):
        return upper
    return 5 if upper == 5 and value[4] == "T" else 0


def _numeric_zone(std: str, value: str) -> tuple[int, str]:
    """A numeric offset (seconds east of UTC) at the start of ``value``."""
    parts: tuple[slice, ...]  # hours, minutes, seconds: as many as the layout has
    if "Colon" in std and "Seconds" in std:
        size, parts = 9, (slice(1, 3), slice(4, 6), slice(7, 9))
        ok = value[3:4] == ":" and value[6:7] == ":"
    elif "Colon" in std:
        size, parts, ok = 6, (slice(1, 3), slice(4, 6)), value[3:4] == ":"
    elif "Seconds" in std:
        size, parts, ok = 7, (slice(1, 3), slice(3, 5), slice(5, 7)), True
    elif "Short" in std:
        size, parts, ok = 3, (slice(1, 3),), True
    else:
        size, parts, ok = 5, (slice(1, 3), slice(3, 5)), True
    if len(value) < size or not ok or value[0] not in "+-":
        raise ValueError("bad zone")
    seconds = 0
    for part, unit in zip(parts, (3600, 60, 1)):
        seconds += _getnum(value[part], True)[0] * unit
    return (seconds if value[0] == "+" else -seconds), value[size:]


def parse_go_time(layout: str, value: str) -> datetime:
    """Go's ``time.Parse(layout, value)`` with ``time.Local`` = UTC.

    Layouts use Go's reference time ``Mon Jan 2 15:04:05 MST 2006``; a fractional
    second may follow the seconds even when the layout has none. A zone name
    other than ``UTC`` (``MST``, ``CEST`` …) counts as UTC+0, as it does in Go when
    the local zone is UTC. Year 0 (no year in the layout) is not representable: an
    error.

    >>> parse_go_time("2006-01-02T15:04:05Z07:00", "2021-02-18T21:54:42.123+01:00").isoformat()
    '2021-02-18T21:54:42.123000+01:00'
    >>> parse_go_time("Jan _2 2006 3:04PM", "Feb  3 2024 4:05PM").isoformat()
    '2024-02-03T16:05:00+00:00'
    >>> parse_go_time("2006-01-02", "2024-02-30")
    Traceback (most recent call last):
        ...
    ValueError: parsing time '2024-02-30' as '2006-01-02': day out of range
    """
    original = value
    year, month, day, yday = 0, -1, -1, -1
    hour = minute = second = nanos = 0
    offset: int | None = None
    pm = am = False

    def fail(problem: str) -> ValueError:
        return ValueError(f"parsing time {original!r} as {layout!r}: {problem}")

    rest = layout
    while True:
        before = rest
        prefix, std, digits, rest = _next_chunk(rest)
        element = before[len(prefix) : len(before) - len(rest)]
        try:
            value = _skip(value, prefix)
        except ValueError:
            raise fail(f"cannot parse {value!r} as {prefix!r}") from None
        if std is None:
            if value:
                raise fail(f"extra text: {value!r}")
            break
        hold, problem = value, ""
        try:
            if std == "Year":
                if not (_digit(value, 0) and _digit(value, 1)):
                    raise ValueError
                year, value = int(value[:2]), value[2:]
                year += 1900 if year >= 69 else 2000
            elif std == "LongYear":
                if len(value) < 4 or not value[:4].isdigit() or not value[:4].isascii():
                    raise ValueError
                year, value = int(value[:4]), value[4:]
            elif std in ("Month", "LongMonth"):
                names = _LONG_MONTHS if std == "LongMonth" else [m[:3] for m in _LONG_MONTHS]
                index, value = _lookup(names, value)
                month = index + 1
            elif std in ("NumMonth", "ZeroMonth"):
                month, value = _getnum(value, std == "ZeroMonth")
                problem = "" if 1 <= month <= 12 else "month out of range"
            elif std in ("WeekDay", "LongWeekDay"):
                names = _LONG_DAYS if std == "LongWeekDay" else [d[:3] for d in _LONG_DAYS]
                value = _lookup(names, value)[1]
            elif std in ("Day", "UnderDay", "ZeroDay"):
                if std == "UnderDay" and value[:1] == " ":
                    value = value[1:]
                day, value = _getnum(value, std == "ZeroDay")
            elif std in ("UnderYearDay", "ZeroYearDay"):
                if std == "UnderYearDay":
                    value = value[2:] if value[:2] == "  " else value[value[:1] == " " :]
                yday, value = _getnum(value, std == "ZeroYearDay", 3)
            elif std == "Hour":
                hour, value = _getnum(value, False)
                problem = "" if hour < 24 else "hour out of range"
            elif std in ("Hour12", "ZeroHour12"):
                hour, value = _getnum(value, std == "ZeroHour12")
                problem = "" if hour <= 12 else "hour out of range"
            elif std in ("Minute", "ZeroMinute"):
                minute, value = _getnum(value, std == "ZeroMinute")
                problem = "" if minute < 60 else "minute out of range"
            elif std in ("Second", "ZeroSecond"):
                second, value = _getnum(value, std == "ZeroSecond")
                problem = "" if second < 60 else "second out of range"
                following = _next_chunk(rest)[1]
                if (
                    value[:1] in (".", ",")
                    and _digit(value, 1)
                    and following
                    not in (
                        "Frac0",
                        "Frac9",
                    )
                ):
                    n = 2
                    while _digit(value, n):
                        n += 1
                    nanos, value = _nanos(value, n), value[n:]
            elif std in ("PM", "pm"):
                marker, value = value[:2], value[2:]
                if marker not in ({"PM", "AM"} if std == "PM" else {"pm", "am"}):
                    raise ValueError
                pm, am = marker.upper() == "PM", marker.upper() == "AM"
            elif std.startswith("ISO") and value[:1] == "Z":
                offset, value = 0, value[1:]
            elif std.startswith(("ISO", "Num")):
                offset, value = _numeric_zone(std, value)
            elif std == "TZ":
                if value.startswith("UTC"):
                    offset, value = 0, value[3:]
                else:
                    size = _zone_name_length(value)
                    if not size:
                        raise ValueError
                    name, value = value[:size], value[size:]
                    gmt = re.fullmatch(r"GMT([+-][0-9]+)", name)
                    offset = int(gmt.group(1)) * 3600 if gmt else 0
            elif std == "Frac0":
                if len(value) < 1 + digits:
                    raise ValueError
                nanos, value = _nanos(value, 1 + digits), value[1 + digits :]
            elif std == "Frac9" and value[:1] in (".", ",") and _digit(value, 1):
                n = 1
                while _digit(value, n):
                    n += 1
                nanos, value = _nanos(value, n), value[n:]
        except ValueError:
            raise fail(f"cannot parse {hold!r} as {element!r}") from None
        if problem:
            raise fail(problem)
    if pm and hour < 12:
        hour += 12
    elif am and hour == 12:
        hour = 0
    if not 1 <= year <= 9999:
        raise fail("year out of range")
    if yday >= 0:
        if (
            not 1
            <= yday
            <= (366 if (year % 4 == 0 and year % 100 != 0) or year % 400 == 0 else 365)
        ):
            raise fail("day-of-year out of range")
        date = datetime(year, 1, 1) + timedelta(days=yday - 1)
        if (month >= 0 and month != date.month) or (day >= 0 and day != date.day):
            raise fail("day-of-year does not match")
        month, day = date.month, date.day
    month, day = max(month, 1), (1 if day < 0 else day)
    tz = UTC if not offset else timezone(timedelta(seconds=offset))
    try:
        return datetime(year, month, day, hour, minute, second, nanos // 1000, tz)
    except ValueError:
        raise fail("day out of range") from None


_MONTH_NUMBERS = {
    **{m.lower(): i for i, m in enumerate(_LONG_MONTHS, 1)},
    **{m[:3].lower(): i for i, m in enumerate(_LONG_MONTHS, 1)},
    "sept": 9,
}
_WEEKDAYS = {d.lower() for d in _LONG_DAYS} | {d[:3].lower() for d in _LONG_DAYS}

_TIME = (
    r"(?P<H>\d{1,2}):(?P<M>\d{2})(?::(?P<S>\d{2}))?(?:[.,:](?P<F>\d+))?"
    r"(?:\s?(?P<AP>[AaPp][Mm]))?"
)
_ZONE = (
    r"(?P<zone>(?:\s?Z|\s?[+-]\d{2}(?::?\d{2})?|\s[A-Z]{3,5}(?:[+-]\d{1,2}(?::?\d{2})?)?)?"
    r"(?:\s+(?:[A-Z]{3,5}|[+-]\d{2}|\([^)]*\)|m=[+-][0-9.]+))*)"
)
_MON = r"(?P<mon>[A-Za-z]{3,9})\.?"
_YEAR = r"(?P<y>\d{4}|'?\d{2})"


def _shape(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.ASCII)


# Each shape: a full-match pattern with named parts y, m or mon, d, time, zone.
_DATE_SHAPES = [
    _shape(rf"(?P<y>\d{{4}})-(?P<m>\d{{1,2}})(?:-(?P<d>\d{{1,2}})(?:(?:T|\s+){_TIME})?)?{_ZONE}"),
    _shape(rf"(?P<y>\d{{4}})/(?P<m>\d{{1,2}})/(?P<d>\d{{1,2}})(?:\s+{_TIME})?{_ZONE}"),
    _shape(r"(?P<y>\d{4})\.(?P<m>\d{1,2})(?:\.(?P<d>\d{1,2}))?"),
    _shape(rf"(?P<y>\d{{4}})-{_MON}-(?P<d>\d{{1,2}})"),
    _shape(rf"(?P<d>\d{{1,2}})-{_MON}-(?P<y>\d{{4}})(?:\s+{_TIME}{_ZONE})?"),
    _shape(rf"(?P<d>\d{{1,2}})/{_MON}/(?P<y>\d{{4}})(?:[:\s]{_TIME}{_ZONE})?"),
    _shape(rf"(?P<d>\d{{1,2}})\s+{_MON},?\s+{_YEAR}(?:,?\s+{_TIME}{_ZONE})?"),
    _shape(
        rf"{_MON}\s+(?P<d>\d{{1,2}})(?:st|nd|rd|th)?,?\s+{_YEAR}"
        rf"(?:,?\s+(?:at\s+)?{_TIME}{_ZONE})?"
    ),
]
# After a weekday: RFC 1123/850, ANSIC/Unix/Ruby date, JavaScript's Date.toString.
_WEEKDAY_SHAPES = [
    _shape(rf"(?P<d>\d{{1,2}})[\s-]{_MON}[\s-]{_YEAR}\s+{_TIME}{_ZONE}"),
    _shape(
        rf"{_MON}\s+(?P<d>\d{{1,2}})\s+{_TIME}"
        r"(?P<zone>\s+(?:[A-Z]{3,5}(?:[+-]\d{2}:?\d{2})?|[+-]\d{2}:?\d{2}))?\s+(?P<y>\d{4})"
    ),
    _shape(rf"{_MON}\s+(?P<d>\d{{1,2}})\s+(?P<y>\d{{4}})\s+{_TIME}{_ZONE}"),
]
_AMBIGUOUS = _shape(r"\d{1,2}[/.:]\d{1,2}([/.:].*)?|\d{1,2}-[A-Za-z]{3,9}-\d{2}(\s.*)?")
_EPOCH_DIGITS = {10: 1_000_000, 13: 1_000, 16: 1, 19: 0}  # µs per unit (19: ns)


def _zone_seconds(zone: str | None) -> int:
    """Seconds east of UTC of the first offset in ``zone`` (names alone: UTC+0)."""
    match = re.search(r"([+-])(\d{1,2})(?::?(\d{2}))?", zone or "")
    if match is None:
        return 0
    seconds = int(match.group(2)) * 3600 + int(match.group(3) or 0) * 60
    return -seconds if match.group(1) == "-" else seconds


def _from_parts(parts: dict[str, str | None]) -> datetime:
    year_text = (parts.get("y") or "").lstrip("'")
    year = int(year_text)
    if len(year_text) == 2:
        year += 1900 if year >= 69 else 2000
    if parts.get("mon"):
        month = _MONTH_NUMBERS.get(parts["mon"].lower())  # type: ignore[union-attr]
        if month is None:
            raise ValueError(f"unknown month {parts['mon']!r}")
    else:
        month = int(parts.get("m") or 1)
    hour = int(parts.get("H") or 0)
    ampm = (parts.get("AP") or "").upper()
    if ampm:
        if not 1 <= hour <= 12:
            raise ValueError("hour out of range")
        hour = hour % 12 + (12 if ampm == "PM" else 0)
    micros = int((parts.get("F") or "0")[:6].ljust(6, "0"))
    offset = timedelta(seconds=_zone_seconds(parts.get("zone")))
    return datetime(
        year,
        month,
        int(parts.get("d") or 1),
        hour,
        int(parts.get("M") or 0),
        int(parts.get("S") or 0),
        micros,
        UTC if not offset else timezone(offset),
    )


def _from_digits(text: str) -> datetime:
    if len(text) == 14:
        return parse_go_time("20060102150405", text)
    if len(text) == 8:
        return parse_go_time("20060102", text)
    if len(text) == 4:
        return parse_go_time("2006", text)
    if len(text) not in _EPOCH_DIGITS or int(text) >= 2**63:
        raise ValueError(f"unrecognized format {text!r}")
    unit = _EPOCH_DIGITS[len(text)]
    micros = int(text) * unit if unit else int(text) // 1000
    return utc_from_us(micros)


def parse_date_strict(text: str) -> datetime:
    """araddon/dateparse's ``ParseStrict`` (the formats most logs and JSON use) in UTC.

    All digits: 10/13/16/19 digits are epoch seconds/ms/µs/ns, 14 ``yyyyMMddhhmmss``,
    8 ``yyyymmdd``, 4 a year. Otherwise ISO-8601/RFC 3339 with ``T`` or a space,
    ``yyyy/mm/dd``, ``yyyy.mm.dd``, RFC 1123/850/822, ANSIC, Unix and Ruby dates,
    ``Jan 2, 2006``, ``2 January 2006``, ``02/Jan/2006:15:04:05 -0700``, each with
    optional time, fraction, AM/PM and zone (``Z``, ``±hh[:mm]``, a name: UTC+0).
    Dates whose day and month cannot be told apart (``03/04/2024``, ``3.4.24``,
    ``08-Jan-24``) are errors, as in ParseStrict.

    >>> parse_date_strict("1673239888123").isoformat()
    '2023-01-09T04:51:28.123000+00:00'
    >>> parse_date_strict("Mon, 02 Jan 2006 15:04:05 -0700").isoformat()
    '2006-01-02T15:04:05-07:00'
    >>> parse_date_strict("03/04/2024")
    Traceback (most recent call last):
        ...
    ValueError: This date has ambiguous mm/dd vs dd/mm type format: '03/04/2024'
    """
    text = text.strip()
    if text.isdigit() and text.isascii():
        return _from_digits(text)
    if _AMBIGUOUS.fullmatch(text):
        raise ValueError(f"This date has ambiguous mm/dd vs dd/mm type format: {text!r}")
    shapes = _DATE_SHAPES
    first, _, rest = text.partition(" ")
    if first.rstrip(",").lower() in _WEEKDAYS:
        text, shapes = rest.strip(), _WEEKDAY_SHAPES
    for shape in shapes:
        match = shape.fullmatch(text)
        if match:
            return _from_parts(match.groupdict())
    raise ValueError(f"unrecognized date format {text!r}")
