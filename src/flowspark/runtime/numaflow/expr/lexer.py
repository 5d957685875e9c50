"""expr's tokens: numbers, strings with Go escapes, identifiers, operators and brackets."""

from __future__ import annotations

from typing import Any, NamedTuple

from flowspark.runtime.numaflow.expr.errors import ExprSyntaxError
from flowspark.runtime.numaflow.expr.values import _INT64_MAX


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
