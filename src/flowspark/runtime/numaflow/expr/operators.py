"""expr's operators on Go values: equality, comparison, arithmetic, ``..``, ``in``,
the string operators, and fetching, slicing and negating."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from flowspark.runtime.numaflow.expr.errors import ExprError
from flowspark.runtime.numaflow.expr.values import (
    _bytes,
    _go_type,
    _is_num,
    _text,
    _to_int,
    _wrap,
    go_format,
)

_RANGE_LIMIT = 1_000_000  # expr's memory budget for `a..b`


def _equal(a: Any, b: Any) -> bool:
    if _is_num(a) and _is_num(b):
        return a == b
    if type(a) is not type(b):  # reflect.DeepEqual: different types are never equal
        return False
    return bool(a == b)


def _compare(op: str) -> Callable[[Any, Any], bool]:
    test: Callable[[Any, Any], bool] = {
        "<": lambda a, b: a < b,
        "<=": lambda a, b: a <= b,
        ">": lambda a, b: a > b,
        ">=": lambda a, b: a >= b,
    }[op]

    def compare(a: Any, b: Any) -> bool:
        if (_is_num(a) and _is_num(b)) or (type(a) is str and type(b) is str):
            return test(a, b)
        raise ExprError(f"invalid operation: {_go_type(a)} {op} {_go_type(b)}")

    return compare


def _arith(op: str, on_ints: Callable[[int, int], Any], on_floats: Callable) -> Callable:
    def arith(a: Any, b: Any) -> Any:
        if type(a) is int and type(b) is int:
            return on_ints(a, b)
        if _is_num(a) and _is_num(b):
            return on_floats(float(a), float(b))
        if op == "+" and type(a) is str and type(b) is str:
            return a + b
        raise ExprError(f"invalid operation: {_go_type(a)} {op} {_go_type(b)}")

    return arith


def _int_div(a: int, b: int) -> int:
    if b == 0:
        raise ExprError("runtime error: integer divide by zero")
    q = abs(a) // abs(b)
    return _wrap(q if (a < 0) == (b < 0) else -q)


def _float_div(a: float, b: float) -> float:
    if b == 0:
        if a == 0 or math.isnan(a):
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1, b)
    return a / b


def _modulo(a: Any, b: Any) -> int:
    if type(a) is not int or type(b) is not int:
        raise ExprError(f"invalid operation: {_go_type(a)} % {_go_type(b)}")
    if b == 0:
        raise ExprError("runtime error: integer divide by zero")
    r = abs(a) % abs(b)
    return -r if a < 0 else r


def _power(a: Any, b: Any) -> float:
    if not (_is_num(a) and _is_num(b)):
        raise ExprError(f"invalid operation: float64({_go_type(a if not _is_num(a) else b)})")
    try:
        return math.pow(float(a), float(b))
    except OverflowError:
        return math.inf
    except ValueError:
        return math.nan


def _range(a: Any, b: Any) -> list[int]:
    low, high = _to_int(a), _to_int(b)
    if high - low + 1 >= _RANGE_LIMIT:
        raise ExprError("memory budget exceeded")
    return list(range(low, high + 1))


def _in(needle: Any, haystack: Any) -> bool:
    if haystack is None:
        return False
    if isinstance(haystack, list):
        return any(_equal(item, needle) for item in haystack)
    if isinstance(haystack, dict):
        if type(needle) is not str:
            raise ExprError(f"cannot use {_go_type(needle)} as index to {_go_type(haystack)}")
        return needle in haystack
    raise ExprError(f'operator "in" not defined on {_go_type(haystack)}')


def _string_op(op: str, test: Callable[[str, str], bool]) -> Callable[[Any, Any], bool]:
    def string_op(a: Any, b: Any) -> bool:
        if type(a) is not str or type(b) is not str:
            raise ExprError(f"invalid operation: {_go_type(a)} {op} {_go_type(b)}")
        return test(a, b)

    return string_op


_REGEX_CACHE: dict[str, re.Pattern[str]] = {}


def _matches(a: Any, b: Any) -> bool:
    if type(a) is not str or type(b) is not str:
        raise ExprError(f"invalid operation: {_go_type(a)} matches {_go_type(b)}")
    pattern = _REGEX_CACHE.get(b)
    if pattern is None:
        try:
            pattern = re.compile(b)
        except re.error as exc:
            raise ExprError(f"error parsing regexp: {exc}") from None
        if len(_REGEX_CACHE) < 256:
            _REGEX_CACHE[b] = pattern
    return pattern.search(a) is not None


_BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "==": _equal,
    "!=": lambda a, b: not _equal(a, b),
    "<": _compare("<"),
    "<=": _compare("<="),
    ">": _compare(">"),
    ">=": _compare(">="),
    "+": _arith("+", lambda a, b: _wrap(a + b), lambda a, b: a + b),
    "-": _arith("-", lambda a, b: _wrap(a - b), lambda a, b: a - b),
    "*": _arith("*", lambda a, b: _wrap(a * b), lambda a, b: a * b),
    "/": _arith("/", _int_div, _float_div),
    "%": _modulo,
    "**": _power,
    "..": _range,
    "in": _in,
    "not in": lambda a, b: not _in(a, b),
    "matches": _matches,
    "contains": _string_op("contains", lambda a, b: b in a),
    "startsWith": _string_op("startsWith", lambda a, b: a.startswith(b)),
    "endsWith": _string_op("endsWith", lambda a, b: a.endswith(b)),
}


def _negate(v: Any) -> Any:
    if type(v) is int:
        return _wrap(-v)
    if type(v) is float:
        return -v
    raise ExprError(f"invalid operation: - {_go_type(v)}")


def _fetch(obj: Any, key: Any, nilsafe: bool) -> Any:
    """expr's ``fetch``: a map's key (missing → nil), a list's or string's index."""
    if isinstance(obj, dict):
        if type(key) is not str:
            raise ExprError(f"cannot use {_go_type(key)} as index to {_go_type(obj)}")
        return obj.get(key)
    if isinstance(obj, (list, str)):
        seq = obj if isinstance(obj, list) else _bytes(obj)
        i = _to_int(key)
        if not 0 <= i < len(seq):
            raise ExprError(f"index out of range [{i}] with length {len(seq)}")
        return seq[i]
    if nilsafe and obj is None:
        return None
    raise ExprError(f"cannot fetch {go_format(key)} from {_go_type(obj)}")


def _slice(obj: Any, low: Any, high: Any) -> Any:
    if not isinstance(obj, (list, str)):
        raise ExprError(f"cannot slice {_go_type(obj)}")
    seq = obj if isinstance(obj, list) else _bytes(obj)
    a = 0 if low is None else _to_int(low)
    b = len(seq) if high is None else min(_to_int(high), len(seq))
    a = min(a, b)
    if a < 0:
        raise ExprError(f"slice bounds out of range [{a}:{b}]")
    part = seq[a:b]
    return part if isinstance(part, list) else _text(part)
