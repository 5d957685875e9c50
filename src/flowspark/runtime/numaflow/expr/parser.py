"""expr's precedence-climbing parser: an expression's tokens become one closure per
node, which evaluates it over an env."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from flowspark.runtime.numaflow.expr.errors import ExprError, ExprSyntaxError
from flowspark.runtime.numaflow.expr.functions import (
    _CLOSURE_BUILTINS,
    _FUNCTIONS,
    SPRIG_FUNCTIONS,
    _call_sprig,
)
from flowspark.runtime.numaflow.expr.lexer import _is_alpha, _Lexer, _Token
from flowspark.runtime.numaflow.expr.operators import _BINARY, _fetch, _negate, _slice
from flowspark.runtime.numaflow.expr.values import _go_type, _need_bool, go_format

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
