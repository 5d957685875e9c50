"""The expression language of Numaflow's pre-1.6 builtin filters and transformers.

Numaflow evaluated ``kwargs.expression`` with antonmedv/expr v1.9 over the env
``{"payload": <the message value as a string>}`` plus the functions ``json``,
``int``, ``string`` and ``sprig.*`` (``pkg/shared/expr``). This module parses
that language once (:func:`compile_expression`) and evaluates it many times,
with Go's value semantics: JSON numbers are float64, ``int / int`` divides
integers, ``int()`` is ``strconv.Atoi`` on strings, comparing a string with a
number is an error, a missing map key gives ``nil``. No Python code is ever
``eval``-ed.

>>> keep = compile_expression("int(json(payload).id) < 100")
>>> keep.eval_bool(payload_env(b'{"id": 5}')), keep.eval_bool(payload_env(b'{"id": "500"}'))
(True, False)
>>> keep.eval_bool(payload_env(b'{"id": "1700000000-0"}'))
Traceback (most recent call last):
    ...
flowspark.runtime.expr.ExprError: unable to evaluate expression 'int(json(payload).id) < 100': \
cannot convert "1700000000-0" to int
>>> hello = compile_expression(
...     "json(payload).msg == 'hello' && sprig.contains('good', string(json(payload).desc))"
... )
>>> hello.eval_bool(payload_env(b'{"msg": "hello", "desc": "a good day"}'))
True
>>> compile_expression("json(payload).time").eval_str(payload_env(b'{"time": 1662998400}'))
'1.6629984e+09'
>>> compile_expression("1 + (2")
Traceback (most recent call last):
    ...
flowspark.runtime.expr.ExprSyntaxError: invalid expression '1 + (2': unexpected end of \
expression at position 6

Supported: literals (ints incl. ``_`` separators and hex, floats, single- or
double-quoted strings with Go escapes, ``true``/``false``/``nil``, ``[...]``
arrays, ``{k: v}`` maps); identifiers from the env; ``a.b``, ``a?.b``,
``a["b"]``, ``a[0]``, ``a[1:3]``; calls ``json(x)``, ``int(x)``, ``string(x)``,
``len(x)`` and ``sprig.<name>(...)`` for the sprig functions in
:data:`SPRIG_FUNCTIONS`; operators ``not ! - + ** * / % + - .. == != < <= > >=
in not in matches contains startsWith endsWith and && or ||`` with expr's
precedences, and ``c ? a : b``. expr's closure builtins (``all``, ``map`` …)
are not supported; neither are sprig functions outside the list: both are
syntax errors, so a pipeline fails at start instead of dropping every message.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any, NamedTuple

__all__ = [
    "Expression",
    "ExprError",
    "ExprSyntaxError",
    "compile_expression",
    "payload_env",
    "go_format",
    "go_atoi",
    "SPRIG_FUNCTIONS",
]

_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1
_RANGE_LIMIT = 1_000_000  # expr's memory budget for `a..b`


class ExprError(Exception):
    """An expression failed while evaluating (bad ``int``, ``nil`` field, type mismatch …)."""


class ExprSyntaxError(ValueError):
    """An expression that does not parse; ``position`` is the 0-based offset of the error."""

    def __init__(self, text: str, message: str, position: int) -> None:
        super().__init__(f"invalid expression {text!r}: {message} at position {position}")
        self.text, self.message, self.position = text, message, position


def payload_env(value: bytes) -> dict[str, Any]:
    """Numaflow's env for a message value: ``{"payload": value as a string}``.

    Bytes that are not UTF-8 are kept (as surrogate escapes), as Go's ``string(msg)`` does.
    """
    return {"payload": value.decode("utf-8", "surrogateescape")}


# ----------------------------------------------------------------------- Go values


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


# --------------------------------------------------------------- env functions


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


# ----------------------------------------------------------------- sprig functions


def _bytes(s: str) -> bytes:
    return s.encode("utf-8", "surrogateescape")


def _text(b: bytes) -> str:
    return b.decode("utf-8", "surrogateescape")


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


# ------------------------------------------------------------------------ operators


def _equal(a: Any, b: Any) -> bool:
    if _is_num(a) and _is_num(b):
        return a == b
    if type(a) is not type(b):  # reflect.DeepEqual: different types are never equal
        return False
    return bool(a == b)


def _compare(op: str) -> Callable[[Any, Any], bool]:
    test = {
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
    return part if isinstance(obj, list) else _text(part)


# ----------------------------------------------------------------------------- lexer


class _Token(NamedTuple):
    kind: str  # num, str, ident, op, bracket, eof
    value: Any
    pos: int


_KEYWORD_OPERATORS = frozenset(
    {"in", "or", "and", "matches", "contains", "startsWith", "endsWith", "not"}
)
_ESCAPES = dict(zip("abfnrtv\\'\"`?", "\a\b\f\n\r\t\v\\'\"`?"))


def _is_alpha(ch: str) -> bool:
    return ch == "_" or ch == "$" or ch.isalpha()


def _is_alnum(ch: str) -> bool:
    return _is_alpha(ch) or ch.isdecimal()


class _Lexer:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[_Token] = []

    def fail(self, message: str, pos: int) -> ExprSyntaxError:
        return ExprSyntaxError(self.text, message, pos)

    def run(self) -> list[_Token]:
        text, i, n = self.text, 0, len(self.text)
        while i < n:
            ch = text[i]
            if ch.isspace():
                i += 1
            elif ch in "'\"":
                i = self.string(i)
            elif "0" <= ch <= "9" or (ch == "." and i + 1 < n and "0" <= text[i + 1] <= "9"):
                i = self.number(i)
            elif ch == "?":
                if text.startswith("?.", i):
                    self.tokens.append(_Token("op", "?.", i))
                    i += 2
                else:
                    self.tokens.append(_Token("op", "?", i))
                    i += 1
            elif ch in "([{)]}":
                self.tokens.append(_Token("bracket", ch, i))
                i += 1
            elif ch in "#,:%+-/":
                self.tokens.append(_Token("op", ch, i))
                i += 1
            elif ch in "&|!=*<>":
                size = 2 if i + 1 < n and text[i + 1] in "&|=*" else 1
                self.tokens.append(_Token("op", text[i : i + size], i))
                i += size
            elif ch == ".":
                size = 2 if text.startswith("..", i) else 1
                self.tokens.append(_Token("op", text[i : i + size], i))
                i += size
            elif _is_alnum(ch):
                i = self.word(i)
            else:
                raise self.fail(f"unrecognized character: {ch!r}", i)
        self.tokens.append(_Token("eof", None, n))
        return self.tokens

    def word(self, start: int) -> int:
        text, i = self.text, start
        while i < len(text) and _is_alnum(text[i]):
            i += 1
        word = text[start:i]
        if word == "not":  # `not in` is one operator when `in` is a whole word
            j = i
            while j < len(text) and text[j] == " ":
                j += 1
            if text.startswith("in", j) and (j + 2 == len(text) or text[j + 2] == " "):
                self.tokens.append(_Token("op", "not in", start))
                return j + 2
        kind = "op" if word in _KEYWORD_OPERATORS else "ident"
        self.tokens.append(_Token(kind, word, start))
        return i

    def number(self, start: int) -> int:
        text, i, n = self.text, start, len(self.text)
        if text.startswith(("0x", "0X"), i):
            i += 2
            while i < n and text[i] in "0123456789abcdefABCDEF_":
                i += 1
        else:
            while i < n and text[i] in "0123456789_":
                i += 1
            if i < n and text[i] == "." and not text.startswith("..", i):
                i += 1
                while i < n and text[i] in "0123456789_":
                    i += 1
            if i < n and text[i] in "eE":
                i += 1
                if i < n and text[i] in "+-":
                    i += 1
                while i < n and text[i] in "0123456789_":
                    i += 1
        if i < n and _is_alnum(text[i]):
            raise self.fail(f"bad number syntax: {text[start : i + 1]!r}", start)
        raw = text[start:i].replace("_", "")
        try:
            if raw[:2] in ("0x", "0X"):
                value: Any = int(raw, 16)
            elif any(c in raw for c in ".eE"):
                value = float(raw)
            else:
                value = int(raw)
        except ValueError:
            raise self.fail(f"invalid number literal {text[start:i]!r}", start) from None
        if type(value) is int and value > _INT64_MAX:
            raise self.fail(f"invalid integer literal {text[start:i]!r}: out of range", start)
        self.tokens.append(_Token("num", value, start))
        return i

    def string(self, start: int) -> int:
        text, quote, i, out = self.text, self.text[start], start + 1, []
        while True:
            if i >= len(text) or text[i] == "\n":
                raise self.fail("literal not terminated", start)
            ch = text[i]
            if ch == quote:
                break
            if ch != "\\":
                out.append(ch)
                i += 1
                continue
            esc = text[i + 1 : i + 2]
            if esc in _ESCAPES:
                out.append(_ESCAPES[esc])
                i += 2
            elif esc in ("x", "X", "u", "U"):
                size = {"x": 2, "X": 2, "u": 4, "U": 8}[esc]
                hexa = text[i + 2 : i + 2 + size]
                if len(hexa) != size or not all(c in "0123456789abcdefABCDEF" for c in hexa):
                    raise self.fail("invalid char escape", i)
                code = int(hexa, 16)
                if code > 0x10FFFF:
                    raise self.fail("invalid char escape", i)
                out.append(chr(code))
                i += 2 + size
            elif esc and esc in "0123":
                octal = text[i + 1 : i + 4]
                if len(octal) != 3 or not all(c in "01234567" for c in octal):
                    raise self.fail("invalid char escape", i)
                out.append(chr(int(octal, 8)))
                i += 4
            else:
                raise self.fail("invalid char escape", i)
        self.tokens.append(_Token("str", "".join(out), start))
        return i + 1


# ---------------------------------------------------------------------------- parser

# expr v1.9's operator table: (precedence, right-associative)
_BINARY_PRECEDENCE: dict[str, tuple[int, bool]] = {
    **dict.fromkeys(["or", "||"], (10, False)),
    **dict.fromkeys(["and", "&&"], (15, False)),
    **dict.fromkeys(["==", "!=", "<", ">", ">=", "<="], (20, False)),
    **dict.fromkeys(["not in", "in", "matches", "contains", "startsWith", "endsWith"], (20, False)),
    "..": (25, False),
    **dict.fromkeys(["+", "-"], (30, False)),
    **dict.fromkeys(["*", "/", "%"], (60, False)),
    "**": (70, True),
}
_UNARY_PRECEDENCE = {"not": 50, "!": 50, "-": 500, "+": 500}

Env = Mapping[str, Any]
Node = Callable[[Env], Any]


def _describe(token: _Token) -> str:
    return "end of expression" if token.kind == "eof" else f"token {token.value!r}"


class _Parser:
    """expr's precedence-climbing parser, building one closure per node."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _Lexer(text).run()
        self.i = 0

    @property
    def current(self) -> _Token:
        return self.tokens[self.i]

    def fail(self, message: str, token: _Token | None = None) -> ExprSyntaxError:
        return ExprSyntaxError(self.text, message, (token or self.current).pos)

    def unexpected(self) -> ExprSyntaxError:
        token = self.current
        return self.fail(f"unexpected {_describe(token)}", token)

    def advance(self) -> _Token:
        token = self.current
        if token.kind != "eof":
            self.i += 1
        return token

    def is_(self, kind: str, value: Any = None) -> bool:
        token = self.current
        return token.kind == kind and (value is None or token.value == value)

    def expect(self, kind: str, value: str) -> None:
        if not self.is_(kind, value):
            raise self.unexpected()
        self.advance()

    def parse(self) -> Node:
        node = self.expression(0)
        if self.current.kind != "eof":
            raise self.unexpected()
        return node

    def expression(self, precedence: int) -> Node:
        left = self.primary()
        while self.current.kind == "op" and self.current.value in _BINARY_PRECEDENCE:
            op = self.current.value
            op_precedence, right_assoc = _BINARY_PRECEDENCE[op]
            if op_precedence < precedence:
                break
            token = self.advance()
            right = self.expression(op_precedence if right_assoc else op_precedence + 1)
            left = self.binary(op, left, right, token)
        if precedence == 0:
            left = self.conditional(left)
        return left

    def binary(self, op: str, left: Node, right: Node, token: _Token) -> Node:
        if op in ("and", "&&"):
            return lambda env: right(env) if _need_bool(left(env)) else False
        if op in ("or", "||"):
            return lambda env: True if _need_bool(left(env)) else right(env)
        if op == "matches" and getattr(right, "constant", None) is not None:
            pattern = right.constant  # type: ignore[attr-defined]
            if type(pattern) is str:
                try:
                    regex = re.compile(pattern)
                except re.error as exc:
                    raise self.fail(f"error parsing regexp: {exc.msg}", token) from None

                def matches(env: Env) -> bool:
                    value = left(env)
                    if type(value) is not str:
                        raise ExprError(f"invalid operation: {_go_type(value)} matches string")
                    return regex.search(value) is not None

                return matches
        fn = _BINARY[op]
        return lambda env: fn(left(env), right(env))

    def conditional(self, cond: Node) -> Node:
        while self.is_("op", "?"):
            self.advance()
            if self.is_("op", ":"):  # `a ?: b`
                self.advance()
                yes, no = cond, self.expression(0)
            else:
                yes = self.expression(0)
                self.expect("op", ":")
                no = self.expression(0)
            cond = self._ternary(cond, yes, no)
        return cond

    @staticmethod
    def _ternary(cond: Node, yes: Node, no: Node) -> Node:
        return lambda env: yes(env) if _need_bool(cond(env)) else no(env)

    def primary(self) -> Node:
        token = self.current
        if token.kind == "op" and token.value in _UNARY_PRECEDENCE:
            self.advance()
            operand = self.expression(_UNARY_PRECEDENCE[token.value])
            if token.value in ("not", "!"):
                node: Node = lambda env: not _need_bool(operand(env))
            elif token.value == "-":
                node = lambda env: _negate(operand(env))
            else:
                node = operand
            return self.postfix(node)
        if self.is_("bracket", "("):
            self.advance()
            node = self.expression(0)
            self.expect("bracket", ")")
            return self.postfix(node)
        if token.kind == "op" and token.value in ("#", "."):
            raise self.fail("cannot use pointer accessor outside closure")
        return self.primary_expression()

    def primary_expression(self) -> Node:
        token = self.current
        if token.kind in ("num", "str"):
            self.advance()
            return _constant(token.value)
        if token.kind == "ident":
            self.advance()
            if token.value in ("true", "false", "nil"):
                return _constant({"true": True, "false": False, "nil": None}[token.value])
            if self.is_("bracket", "("):
                return self.postfix(self.call(token))
            return self.postfix(self.identifier(token))
        if self.is_("bracket", "["):
            self.advance()
            return self.postfix(self.array())
        if self.is_("bracket", "{"):
            self.advance()
            return self.postfix(self.map())
        raise self.unexpected()

    @staticmethod
    def identifier(token: _Token) -> Node:
        name = token.value
        if name == "sprig":
            sprig = {n: spec.fn for n, spec in SPRIG_FUNCTIONS.items()}
            node: Node = lambda env: env.get(name, sprig)
        else:
            node = lambda env: env.get(name)
        node.identifier = name  # type: ignore[attr-defined]
        return node

    def arguments(self) -> list[Node]:
        self.expect("bracket", "(")
        args: list[Node] = []
        while not self.is_("bracket", ")"):
            if args:
                self.expect("op", ",")
            args.append(self.expression(0))
        self.expect("bracket", ")")
        return args

    def call(self, token: _Token) -> Node:
        name = token.value
        if name in _CLOSURE_BUILTINS:
            raise self.fail(f"builtin {name}() with a closure is not supported", token)
        fn = _FUNCTIONS.get(name)
        if fn is None:
            raise self.fail(
                f"unknown function {name}(); expected one of json, int, string, len, sprig.*",
                token,
            )
        args = self.arguments()
        if len(args) != 1:
            raise self.fail(f"{name}() takes 1 argument, got {len(args)}", token)
        (arg,) = args
        return lambda env: fn(arg(env))

    def array(self) -> Node:
        items: list[Node] = []
        while not self.is_("bracket", "]"):
            if items:
                self.expect("op", ",")
                if self.is_("bracket", "]"):
                    break
            items.append(self.expression(0))
        self.expect("bracket", "]")
        return lambda env: [item(env) for item in items]

    def map(self) -> Node:
        pairs: list[tuple[Node, Node]] = []
        while not self.is_("bracket", "}"):
            if pairs:
                self.expect("op", ",")
                if self.is_("bracket", "}"):
                    break
            token = self.current
            if token.kind in ("num", "str", "ident"):
                self.advance()
                key: Node = _constant(go_format(token.value))
            elif self.is_("bracket", "("):
                key = self.expression(0)
            else:
                raise self.fail(
                    "a map key must be a quoted string, a number, a identifier, or an "
                    "expression enclosed in parentheses"
                )
            self.expect("op", ":")
            pairs.append((key, self.expression(0)))
        self.expect("bracket", "}")
        return lambda env: {k(env): v(env) for k, v in pairs}

    def postfix(self, node: Node) -> Node:
        nilsafe = False  # from the first `?.` on, the rest of the chain is nil-safe too
        while True:
            token = self.current
            if token.kind == "op" and token.value in (".", "?."):
                nilsafe = nilsafe or token.value == "?."
                self.advance()
                name_token = self.advance()
                name = name_token.value
                if name_token.kind not in ("ident", "op") or not (
                    isinstance(name, str) and name and _is_alpha(name[0]) and " " not in name
                ):
                    raise self.fail("expected name", name_token)
                if self.is_("bracket", "("):
                    node = self.method(node, name, name_token)
                else:
                    node = self._property(node, name, nilsafe)
            elif token.kind == "bracket" and token.value == "[":
                self.advance()
                node = self.index(node)
            else:
                return node

    @staticmethod
    def _property(node: Node, name: str, nilsafe: bool) -> Node:
        return lambda env: _fetch(node(env), name, nilsafe)

    def method(self, node: Node, name: str, token: _Token) -> Node:
        if getattr(node, "identifier", None) != "sprig":
            raise self.fail(f"method {name}() is not supported (only sprig.<function>)", token)
        spec = SPRIG_FUNCTIONS.get(name)
        if spec is None:
            raise self.fail(
                f"unknown function sprig.{name}; flowspark supports sprig."
                + ", sprig.".join(sorted(SPRIG_FUNCTIONS)),
                token,
            )
        args = self.arguments()
        if len(args) != len(spec.params):
            raise self.fail(
                f"sprig.{name}() takes {len(spec.params)} argument(s), got {len(args)}", token
            )
        return lambda env: _call_sprig(name, spec, [arg(env) for arg in args])

    def index(self, node: Node) -> Node:
        low: Node | None = None
        if self.is_("op", ":"):
            self.advance()
            high = None if self.is_("bracket", "]") else self.expression(0)
            self.expect("bracket", "]")
            return self._slice(node, None, high)
        low = self.expression(0)
        if self.is_("op", ":"):
            self.advance()
            high = None if self.is_("bracket", "]") else self.expression(0)
            self.expect("bracket", "]")
            return self._slice(node, low, high)
        self.expect("bracket", "]")
        key = low
        return lambda env: _fetch(node(env), key(env), False)

    @staticmethod
    def _slice(node: Node, low: Node | None, high: Node | None) -> Node:
        return lambda env: _slice(
            node(env), None if low is None else low(env), None if high is None else high(env)
        )


def _constant(value: Any) -> Node:
    def constant(env: Env) -> Any:
        return value

    constant.constant = value  # type: ignore[attr-defined]
    return constant


# ------------------------------------------------------------------------ expression


class Expression:
    """A parsed expression: evaluate it with :meth:`eval`, :meth:`eval_bool` or
    :meth:`eval_str`. Pickles as its text (parsed again when unpickled)."""

    __slots__ = ("text", "_node")

    def __init__(self, text: str, node: Node) -> None:
        self.text = text
        self._node = node

    def eval(self, env: Env) -> Any:
        """The value of the expression over ``env``; a failure raises :class:`ExprError`."""
        try:
            return self._node(env)
        except ExprError as exc:
            raise ExprError(f"unable to evaluate expression {self.text!r}: {exc}") from None
        except (ArithmeticError, ValueError, TypeError, RecursionError) as exc:
            raise ExprError(f"unable to evaluate expression {self.text!r}: {exc}") from exc

    def eval_bool(self, env: Env) -> bool:
        """Numaflow's ``EvalBool``: the value, which must be a bool."""
        result = self.eval(env)
        if result is not True and result is not False:
            raise ExprError(f"unable to cast expression result {go_format(result)!r} to bool")
        return result

    def eval_str(self, env: Env) -> str:
        """Numaflow's ``EvalStr``: the value formatted with Go's ``%v``."""
        return go_format(self.eval(env))

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (compile_expression, (self.text,))

    def __repr__(self) -> str:
        return f"compile_expression({self.text!r})"


def compile_expression(text: str) -> Expression:
    """Parse ``text``; a syntax error raises :class:`ExprSyntaxError` (a ``ValueError``)
    naming the expression and the 0-based position of the error."""
    if not isinstance(text, str):
        raise TypeError(f"an expression must be a string; got {type(text).__name__}")
    try:
        node = _Parser(text).parse()
    except RecursionError:
        raise ExprSyntaxError(text, "expression nested too deeply", 0) from None
    return Expression(text, node)
