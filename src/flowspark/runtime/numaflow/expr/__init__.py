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
flowspark.runtime.numaflow.expr.ExprError: unable to evaluate expression \
'int(json(payload).id) < 100': cannot convert "1700000000-0" to int
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
flowspark.runtime.numaflow.expr.ExprSyntaxError: invalid expression '1 + (2': unexpected end of \
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

The parts: ``lexer`` (the tokens), ``parser`` (a closure per node), ``operators``,
``functions`` (``json`` … and the sprig table), ``values`` (Go's values) and
``errors``; this module is their face.
"""

from __future__ import annotations

from typing import Any

from flowspark.runtime.numaflow.expr.errors import ExprError, ExprSyntaxError
from flowspark.runtime.numaflow.expr.functions import SPRIG_FUNCTIONS
from flowspark.runtime.numaflow.expr.parser import Env, Node, _Parser
from flowspark.runtime.numaflow.expr.values import go_atoi, go_format

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


def payload_env(value: bytes) -> dict[str, Any]:
    """Numaflow's env for a message value: ``{"payload": value as a string}``.

    Bytes that are not UTF-8 are kept (as surrogate escapes), as Go's ``string(msg)`` does.
    """
    return {"payload": value.decode("utf-8", "surrogateescape")}


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
