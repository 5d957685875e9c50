"""Go's values as expr sees them: their ``%T`` and ``%v``, ``strconv.Atoi``, int64
wrapping, and strings as UTF-8 bytes."""

from __future__ import annotations

import json
import math
import re
from decimal import Decimal
from typing import Any

from flowspark.runtime.numaflow.expr.errors import ExprError

_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1


def _go_type(value: Any) -> str:
    """Go's ``%T`` of a value as expr sees it."""
    if value is None:
        return "<nil>"
    if value is True or value is False:
        return "bool"
    return {
        int: "int",
        float: "float64",
        str: "string",
        list: "[]interface {}",
        dict: "map[string]interface {}",
    }.get(type(value), "func")


def _go_float(x: float) -> str:
    """Go's ``%v`` of a float64: shortest digits, exponent form outside [1e-4, 1e6)."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "+Inf" if x > 0 else "-Inf"
    if x == 0:
        return "-0" if math.copysign(1, x) < 0 else "0"
    sign, digit_tuple, exponent = Decimal(repr(x)).as_tuple()
    digits = "".join(map(str, digit_tuple)).rstrip("0") or "0"
    exponent = int(exponent) + len(digit_tuple) - len(digits)
    e10 = len(digits) - 1 + exponent
    minus = "-" if sign else ""
    if e10 < -4 or e10 >= 6:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{minus}{mantissa}e{'-' if e10 < 0 else '+'}{abs(e10):02d}"
    if e10 < 0:
        return f"{minus}0.{'0' * (-e10 - 1)}{digits}"
    whole, frac = digits[: e10 + 1].ljust(e10 + 1, "0"), digits[e10 + 1 :]
    return f"{minus}{whole}.{frac}" if frac else f"{minus}{whole}"


def go_format(value: Any) -> str:
    """Go's ``fmt.Sprintf("%v", value)`` for the values expressions produce.

    >>> go_format(1.5), go_format(1e6), go_format(100.0), go_format(7), go_format(None)
    ('1.5', '1e+06', '100', '7', '<nil>')
    >>> go_format({"b": [1, "x"], "a": True})
    'map[a:true b:[1 x]]'
    """
    if value is None:
        return "<nil>"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if type(value) is float:
        return _go_float(value)
    if isinstance(value, list):
        return "[" + " ".join(go_format(v) for v in value) + "]"
    if isinstance(value, dict):
        items = sorted(value.items(), key=lambda kv: str(kv[0]))
        return "map[" + " ".join(f"{go_format(k)}:{go_format(v)}" for k, v in items) + "]"
    return str(value)


def _go_quote(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False) if isinstance(value, str) else go_format(value)


def _wrap(n: int) -> int:
    """``n`` as a Go int (int64, wrapping around)."""
    if _INT64_MIN <= n <= _INT64_MAX:
        return n
    return (n - _INT64_MIN) % 2**64 + _INT64_MIN


_ATOI = re.compile(r"[+-]?[0-9]+")


def go_atoi(text: str) -> int:
    """Go's ``strconv.Atoi``: optional sign, ASCII decimal digits, int64 range.

    >>> go_atoi("-42"), go_atoi("+7")
    (-42, 7)
    >>> go_atoi(" 1")
    Traceback (most recent call last):
        ...
    ValueError: strconv.Atoi: parsing " 1": invalid syntax
    """
    if not _ATOI.fullmatch(text):
        raise ValueError(f"strconv.Atoi: parsing {_go_quote(text)}: invalid syntax")
    number = int(text)
    if not _INT64_MIN <= number <= _INT64_MAX:
        raise ValueError(f"strconv.Atoi: parsing {_go_quote(text)}: value out of range")
    return number


def _is_num(v: Any) -> bool:
    return type(v) is int or type(v) is float


def _need_bool(v: Any) -> bool:
    if v is not True and v is not False:
        raise ExprError(f"interface conversion: interface {{}} is {_go_type(v)}, not bool")
    return v


def _to_int(v: Any) -> int:
    """expr's ``toInt`` (indexes, ranges): ints, floats truncated."""
    if type(v) is int:
        return v
    if type(v) is float and math.isfinite(v):
        return _wrap(int(v))
    raise ExprError(f"invalid operation: int({_go_type(v)})")


def _bytes(s: str) -> bytes:
    return s.encode("utf-8", "surrogateescape")


def _text(b: bytes) -> str:
    return b.decode("utf-8", "surrogateescape")
