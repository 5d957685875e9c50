"""The functions an expression may call: ``json``, ``int``, ``string``, ``len`` and
``sprig.<name>`` for the sprig functions in :data:`SPRIG_FUNCTIONS`."""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections.abc import Callable
from typing import Any, NamedTuple

from flowspark.runtime.numaflow.expr.errors import ExprError
from flowspark.runtime.numaflow.expr.values import (
    _bytes,
    _go_quote,
    _go_type,
    _text,
    go_atoi,
    go_format,
)


def _fn_json(v: Any) -> Any:
    if v is None:
        return None
    if type(v) is not str:
        raise ExprError(f"json() needs a string; got {_go_type(v)}")

    def reject(constant: str) -> Any:
        raise ValueError(f"invalid character {constant[0]!r} looking for beginning of value")

    def as_float64(text: str) -> float:
        number = float(text)
        if math.isinf(number):
            raise ValueError(f"cannot unmarshal number {text} into Go value of type float64")
        return number

    try:
        obj = json.loads(v, parse_int=as_float64, parse_float=as_float64, parse_constant=reject)
    except ValueError as exc:
        raise ExprError(f"cannot convert {_go_quote(v)} to object: {exc}") from None
    if obj is None:  # Go unmarshals null into a nil map: it has no keys
        return {}
    if not isinstance(obj, dict):
        raise ExprError(
            f"cannot convert {_go_quote(v)} to object: json: cannot unmarshal "
            f"{_JSON_KINDS.get(type(obj), 'number')} into Go value of "
            "type map[string]interface {}"
        )
    return obj


_JSON_KINDS = {list: "array", str: "string", bool: "bool"}


def _fn_int(v: Any) -> int:
    if type(v) is str:
        try:
            return go_atoi(v)
        except ValueError:
            raise ExprError(f"cannot convert {_go_quote(v)} to int") from None
    if type(v) is int:
        return v
    if type(v) is float and math.isfinite(v) and -(2.0**63) <= v < 2.0**63:
        return int(v)
    raise ExprError(f"cannot convert {_go_quote(v)} to int")


def _fn_string(v: Any) -> str:
    return "" if v is None else go_format(v)


def _fn_len(v: Any) -> int:
    if type(v) is str:
        return len(v.encode("utf-8", "surrogateescape"))
    if isinstance(v, (list, dict)):
        return len(v)
    raise ExprError(f"invalid argument for len (type {_go_type(v)})")


_FUNCTIONS: dict[str, Callable[[Any], Any]] = {
    "json": _fn_json,
    "int": _fn_int,
    "string": _fn_string,
    "len": _fn_len,
}
_CLOSURE_BUILTINS = frozenset({"all", "none", "any", "one", "filter", "map", "count"})


def _b64dec(s: str) -> str:
    try:
        return _text(base64.b64decode(_bytes(s), validate=True))
    except (binascii.Error, ValueError):  # sprig returns Go's error text
        data = _bytes(s)
        alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
        bad = next((i for i, c in enumerate(data) if c not in alphabet), len(data))
        return f"illegal base64 data at input byte {bad}"


def _title(s: str) -> str:
    out, after_sep = [], True
    for ch in s:
        out.append(ch.upper() if after_sep else ch)
        after_sep = not (ch.isalnum() or ch == "_")
    return "".join(out)


def _substr(start: int, end: int, s: str) -> str:
    b = _bytes(s)
    if start < 0:
        return _text(b[:end])
    if end < 0 or end > len(b):
        return _text(b[start:])
    return _text(b[start:end])


def _trunc(c: int, s: str) -> str:
    b = _bytes(s)
    if c < 0 and len(b) + c > 0:
        return _text(b[len(b) + c :])
    if c >= 0 and len(b) > c:
        return _text(b[:c])
    return s


def _atoi(s: str) -> int:
    try:
        return go_atoi(s)
    except ValueError:
        return 0


def _regex_match(regex: str, s: str) -> bool:
    try:
        return re.search(regex, s) is not None
    except re.error:
        return False


class _Sprig(NamedTuple):
    fn: Callable[..., Any]
    params: str  # one letter per parameter: s = string, i = int, a = any


SPRIG_FUNCTIONS: dict[str, _Sprig] = {
    "contains": _Sprig(lambda sub, s: sub in s, "ss"),
    "hasPrefix": _Sprig(lambda pre, s: s.startswith(pre), "ss"),
    "hasSuffix": _Sprig(lambda suf, s: s.endswith(suf), "ss"),
    "trim": _Sprig(lambda s: s.strip(), "s"),
    "trimAll": _Sprig(lambda cut, s: s.strip(cut), "ss"),
    "trimPrefix": _Sprig(lambda pre, s: s[len(pre) :] if s.startswith(pre) else s, "ss"),
    "trimSuffix": _Sprig(lambda suf, s: s[: -len(suf)] if suf and s.endswith(suf) else s, "ss"),
    "upper": _Sprig(str.upper, "s"),
    "lower": _Sprig(str.lower, "s"),
    "title": _Sprig(_title, "s"),
    "nospace": _Sprig(lambda s: "".join(s.split()), "s"),
    "repeat": _Sprig(lambda n, s: s * n, "is"),
    "replace": _Sprig(lambda old, new, s: s.replace(old, new), "sss"),
    "substr": _Sprig(_substr, "iis"),
    "trunc": _Sprig(_trunc, "is"),
    "splitList": _Sprig(lambda sep, s: s.split(sep) if sep else list(s), "ss"),
    "b64enc": _Sprig(lambda s: base64.b64encode(_bytes(s)).decode("ascii"), "s"),
    "b64dec": _Sprig(_b64dec, "s"),
    "toString": _Sprig(lambda v: go_format(v), "a"),
    "atoi": _Sprig(_atoi, "s"),
    "regexMatch": _Sprig(_regex_match, "ss"),
}
"""The sprig functions ``sprig.<name>(...)`` may call, with sprig's argument order."""


def _call_sprig(name: str, spec: _Sprig, args: list[Any]) -> Any:
    for value, kind in zip(args, spec.params):
        if kind == "s" and type(value) is not str:
            raise ExprError(f"sprig.{name}: reflect: Call using {_go_type(value)} as type string")
        if kind == "i" and type(value) is not int:
            raise ExprError(f"sprig.{name}: reflect: Call using {_go_type(value)} as type int")
    return spec.fn(*args)
