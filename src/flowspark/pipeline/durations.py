"""Numaflow's value formats: Go durations and Kubernetes quantities.

Every time field of a Pipeline (``readTimeout``, ``maxDelay``, windows,
``allowedLateness``, backoff ``interval``/``cap``, generator ``duration``/``jitter``)
is a Go duration string, as ``time.ParseDuration`` reads it. Storage sizes are
Kubernetes quantities (``10Gi``, ``500M``, ``1e3``).
"""

from __future__ import annotations

import re
from datetime import timedelta
from fractions import Fraction

from flowspark.pipeline.errors import PipelineSpecError

__all__ = ["parse_duration", "parse_quantity"]

# Nanoseconds per unit, as Go's time.unitMap (µ: U+00B5 micro sign, μ: U+03BC mu).
_UNITS = {
    "ns": 1,
    "us": 1_000,
    "\u00b5s": 1_000,
    "\u03bcs": 1_000,
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}
_MAX_NS = 1 << 63  # Go's Duration is an int64 of nanoseconds
_NUMBER = re.compile(r"([0-9]*)(?:\.([0-9]*))?")
_UNIT = re.compile(r"[^0-9.]*")


def parse_duration(text: str | int | float, path: str) -> timedelta:
    """``text`` read as Go's ``time.ParseDuration`` does: an optional sign, then one or
    more decimal numbers (fractions allowed), each with a unit ``ns``, ``us``/``µs``,
    ``ms``, ``s``, ``m`` or ``h``; a bare ``0`` is allowed. Sub-microsecond parts are
    truncated (``timedelta`` holds microseconds). Negative durations parse; the caller
    decides whether a field may be negative. ``path`` names the field in the error.

    >>> parse_duration("2h45m", "spec.limits.readTimeout")
    datetime.timedelta(seconds=9900)
    >>> parse_duration("1.5h", "x") == timedelta(minutes=90), parse_duration("-300ms", "x")
    (True, datetime.timedelta(days=-1, seconds=86399, microseconds=700000))
    >>> parse_duration("1d", "spec.watermark.maxDelay")
    Traceback (most recent call last):
    ...
    flowspark.pipeline.errors.PipelineSpecError: spec.watermark.maxDelay: invalid duration '1d', expected Go duration like '300ms', '1.5h' or '2h45m'
    """  # noqa: E501
    nanos = _duration_nanos(text)
    if nanos is None:
        raise PipelineSpecError(
            f"{path}: invalid duration {text!r}, expected Go duration like '300ms', '1.5h' "
            "or '2h45m'"
        )
    return timedelta(microseconds=int(Fraction(nanos, 1000)))  # int() truncates toward 0


def _duration_nanos(text: str | int | float) -> int | None:
    """Go's ``time.ParseDuration`` in nanoseconds; ``None`` where Go returns an error."""
    if isinstance(text, bool) or not isinstance(text, (str, int, float)):
        return None
    s = str(text)
    negative = s[:1] == "-"
    if s[:1] in ("-", "+"):
        s = s[1:]
    if s == "0":
        return 0
    if not s:
        return None
    total = 0
    while s:
        number = _NUMBER.match(s)
        assert number is not None  # the pattern matches the empty string
        whole, fraction = number.group(1), number.group(2)
        if not whole and not fraction:  # no digit before the unit (".s", "s")
            return None
        s = s[number.end() :]
        unit_text = _UNIT.match(s)
        assert unit_text is not None
        unit = _UNITS.get(unit_text.group())
        if unit is None:  # a missing or unknown unit
            return None
        s = s[unit_text.end() :]
        value = int(whole or "0") * unit
        if fraction:
            value += int(Fraction(int(fraction), 10 ** len(fraction)) * unit)
        total += value
        if total > _MAX_NS:
            return None
    if not negative and total > _MAX_NS - 1:
        return None
    return -total if negative else total


# Kubernetes resource.Quantity: a signed decimal number and an optional suffix.
_QUANTITY = re.compile(
    r"([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?[0-9]+|n|u|m|k|M|G|T|P|E)?"
)
_SUFFIXES = {
    **{s: 1024**i for i, s in enumerate(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"), start=1)},
    **{"n": 1e-9, "u": 1e-6, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12},
    **{"P": 1e15, "E": 1e18},
}


def parse_quantity(value: str | int | float, path: str) -> float:
    """A Kubernetes quantity (``10Gi``, ``500M``, ``1e3``, ``250m``, or a number) as a
    float: binary suffixes ``Ki Mi Gi Ti Pi Ei``, decimal ``n u m k M G T P E``, or an
    exponent ``e±N``. ``path`` names the field in the error.

    >>> parse_quantity("10Gi", "x"), parse_quantity("1e3", "x"), parse_quantity(2, "x")
    (10737418240.0, 1000.0, 2.0)
    >>> parse_quantity("10GB", "spec.vertices[2].udf.groupBy.storage.persistentVolumeClaim.volumeSize")
    Traceback (most recent call last):
    ...
    flowspark.pipeline.errors.PipelineSpecError: spec.vertices[2].udf.groupBy.storage.persistentVolumeClaim.volumeSize: invalid quantity '10GB', expected a Kubernetes quantity like '10Gi', '500M' or '1e3'
    """  # noqa: E501
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    match = _QUANTITY.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise PipelineSpecError(
            f"{path}: invalid quantity {value!r}, expected a Kubernetes quantity like '10Gi', "
            "'500M' or '1e3'"
        )
    number, suffix = float(match.group(1)), match.group(2)
    if not suffix:
        return number
    if suffix[0] in "eE" and len(suffix) > 1:
        return number * 10.0 ** int(suffix[1:])
    return number * _SUFFIXES[suffix]
