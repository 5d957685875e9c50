"""bytewax 0.21's step ids: ``@operator``, and the streams and flows it scopes.

Every bytewax 0.21 operator is a function decorated with :func:`operator`. A
call ``op.map("double", s, fn)`` in flow ``"f"`` names its step ``"f.double"``;
an operator made of other operators (``count_final``, or one of yours) names
its inner steps under its own id: ``"f.count.init_count"``. The decorator does
what bytewax's does before a builder runs: it binds the arguments (an
incorrect call is a ``TypeError``), checks the step id (a ``str`` without
``.``), checks that arguments annotated as streams are streams, finds the one
scope the streams and flows belong to, refuses a step id already used there
(``ValueError``), and hands the builder its streams and flow re-scoped to the
new step, so the steps it adds are named under it. What the builder returns is
scoped back to the caller.

Streams are :class:`ScopedStream`: a flowspark :class:`~flowspark.api.dataflow.Stream`
(so the engine sees the steps it always runs) that also knows its scope,
``stream_id``, ``flow()`` and ``then``.

>>> from flowspark.api.dataflow import Dataflow
>>> from flowspark.connectors.memory import TestingInput
>>> @operator
... def twice(step_id: str, up: Stream[int]) -> Stream[int]:
...     return up.map(f"{step_id}.double", lambda x: x * 2)
>>> flow = Dataflow("f")
>>> s = ScopedStream.at_top(flow.source("f.inp", TestingInput([1])))
>>> out = twice("twice", s)
>>> out.stream_id, [step.step_id for step in flow.steps]
('f.twice.down', ['f.inp', 'f.twice.double'])
>>> twice("twice", s)
Traceback (most recent call last):
...
ValueError: step 'f.twice' already exists; do you have two steps with the same ID?
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import re
import typing
from collections.abc import Callable
from dataclasses import dataclass
from types import FunctionType
from typing import Any, TypeVar, overload

from flowspark.api.dataflow import Dataflow, Stream, X_co

__all__ = ["Scope", "ScopedFlow", "ScopedStream", "operator", "f_repr", "flow_of"]

F = TypeVar("F", bound=Callable[..., Any])


def f_repr(f: Callable[..., Any]) -> str:
    """A function's module, name and first line, for error messages (bytewax's ``f_repr``).

    >>> def my_f(x):
    ...     pass
    >>> f_repr(my_f)
    "<function 'flowspark.operators.scoping.my_f' line 1>"
    """
    if isinstance(f, FunctionType):
        return f"<function {f'{f.__module__}.{f.__qualname__}'!r} line {f.__code__.co_firstlineno}>"
    return repr(f)


@dataclass(frozen=True)
class Scope:
    """Where new steps go: under ``parent_id`` (a flow id, or an operator's full id)
    in ``flow`` (compared by identity)."""

    parent_id: str
    flow: Dataflow

    @classmethod
    def top(cls, flow: Dataflow) -> Scope:
        """The scope of the flow itself; bytewax refuses a flow id with a ``.``."""
        if "." in flow.flow_id:
            raise ValueError("flow ID can't contain a period `.`")
        return cls(flow.flow_id, flow)


class ScopedStream(Stream[X_co]):
    """A stream as bytewax 0.21's operators hand it out: a flowspark stream that knows
    the scope it is used in.

    Its items are the outputs of one step's port; ``stream_id`` is bytewax's name
    for it (``"flow.step.down"``). ``flow()`` is the dataflow (a method, as in
    bytewax 0.21); ``then(op_fn, step_id, ...)`` is ``op_fn(step_id, self, ...)``.
    """

    __slots__ = ("_scope", "_stream_id")

    def __init__(self, base: Stream[Any], scope: Scope, stream_id: str) -> None:
        super().__init__(base._flow, base._port)
        self._scope = scope
        self._stream_id = stream_id

    @classmethod
    def at_top(cls, base: Stream[Any]) -> ScopedStream[Any]:
        """``base`` as a stream of its flow's own scope."""
        if isinstance(base, ScopedStream):
            return base
        return cls(base, Scope.top(base._flow), f"{base.step_id}.down")

    @property
    def stream_id(self) -> str:
        """bytewax's id of this stream: its operator's full id and the port's name."""
        return self._stream_id

    def flow(self) -> Any:  # type: ignore[override]  # a method in bytewax 0.21
        """The dataflow this stream belongs to (seen from inside an operator: its scope)."""
        if self._scope == Scope.top(self._flow):
            return self._flow
        return ScopedFlow(self._scope)

    def then(self, op_fn: Callable[..., Any], step_id: str, *args: Any, **kwargs: Any) -> Any:
        """Chain an operator: ``s.then(op.map, "m", fn)`` is ``op.map("m", s, fn)``."""
        return op_fn(step_id, self, *args, **kwargs)

    def _with_scope(self, scope: Scope, stream_id: str | None = None) -> ScopedStream[Any]:
        return ScopedStream(self, scope, stream_id or self._stream_id)

    def __repr__(self) -> str:
        return f"Stream({self._stream_id!r})"


class ScopedFlow:
    """A :class:`~flowspark.api.dataflow.Dataflow` seen from inside an operator: the
    operators it is passed to name their steps under that operator. Every other
    attribute is the flow's."""

    __slots__ = ("_scope",)

    def __init__(self, scope: Scope) -> None:
        self._scope = scope

    def __getattr__(self, name: str) -> Any:
        return getattr(self._scope.flow, name)

    def __repr__(self) -> str:
        return f"Dataflow({self._scope.flow.flow_id!r}, scope={self._scope.parent_id!r})"


def flow_of(value: Dataflow | ScopedFlow) -> Dataflow:
    """The dataflow behind a flow argument (re-scoped or not)."""
    return value._scope.flow if isinstance(value, ScopedFlow) else value


def _scope_of(value: Any) -> Scope | None:
    if isinstance(value, ScopedStream | ScopedFlow):
        return value._scope
    if isinstance(value, Stream):
        return Scope.top(value._flow)
    if isinstance(value, Dataflow):
        return Scope.top(value)
    return None


def _rescoped(value: Any, scope: Scope) -> Any:
    """``value`` (a stream or a flow; others as they are) in ``scope``."""
    if isinstance(value, Stream):
        return ScopedStream.at_top(value)._with_scope(scope)
    if isinstance(value, Dataflow | ScopedFlow):
        return ScopedFlow(scope)
    return value


def _is_stream_type(annotation: Any) -> bool:
    """Whether an annotation names a stream (``Stream``, ``Stream[X]``, ``KeyedStream[V]``)."""
    if isinstance(annotation, str):  # not resolvable: go by the name
        return re.search(r"\b(Keyed)?Stream\b", annotation) is not None
    typ = annotation if isinstance(annotation, type) else typing.get_origin(annotation)
    return isinstance(typ, type) and issubclass(typ, Stream)


def _stream_params(builder: Callable[..., Any], sig: inspect.Signature) -> frozenset[str]:
    try:
        hints = typing.get_type_hints(builder)
    except Exception:  # an annotation naming something not importable here
        hints = {}
    return frozenset(
        name
        for name, param in sig.parameters.items()
        if _is_stream_type(hints.get(name, param.annotation))
    )


def _flat(value: Any, kind: inspect._ParameterKind) -> list[Any]:
    if kind == inspect.Parameter.VAR_POSITIONAL:
        return list(value)
    if kind == inspect.Parameter.VAR_KEYWORD:
        return list(value.values())
    return [value]


def _check_streams(sig: inspect.Signature, bound: inspect.BoundArguments, names: Any) -> None:
    for name in names:
        kind = sig.parameters[name].kind
        if kind == inspect.Parameter.VAR_POSITIONAL:
            desc = f"{name!r} *args all"
        elif kind == inspect.Parameter.VAR_KEYWORD:
            desc = f"{name!r} **kwargs all"
        else:
            desc = f"{name!r} argument"
        for value in _flat(bound.arguments[name], kind):
            if not isinstance(value, Stream):
                raise TypeError(
                    f"{desc} must be a `Stream`; got a {type(value)!r} instead; did you "
                    "forget to unpack the result of an operator that returns multiple streams?"
                )


def _one_scope(sig: inspect.Signature, bound: inspect.BoundArguments) -> Scope:
    scopes: set[Scope] = set()
    for name, value in bound.arguments.items():
        for item in _flat(value, sig.parameters[name].kind):
            scope = _scope_of(item)
            if scope is not None:
                scopes.add(scope)
    if len(scopes) != 1:
        found = sorted(s.parent_id for s in scopes)
        raise AssertionError(
            f"inconsistent stream scoping; found {len(scopes)} scopes {found!r}; expected "
            "one; an operator needs its streams (or its flow) from the scope it is called "
            "in: a stream made inside another operator, or of another flow, cannot be "
            "used here"
        )
    return scopes.pop()


def _rescope_arguments(sig: inspect.Signature, bound: inspect.BoundArguments, scope: Scope) -> None:
    for name, value in list(bound.arguments.items()):
        kind = sig.parameters[name].kind
        if kind == inspect.Parameter.VAR_POSITIONAL:
            bound.arguments[name] = tuple(_rescoped(v, scope) for v in value)
        elif kind == inspect.Parameter.VAR_KEYWORD:
            bound.arguments[name] = {k: _rescoped(v, scope) for k, v in value.items()}
        else:
            bound.arguments[name] = _rescoped(value, scope)


def _rescope_result(out: Any, scope: Scope, full_id: str) -> Any:
    """What a builder returned, scoped back to the caller: a stream, the streams of a
    returned dataclass (``BranchOut``) or tuple, or ``None``."""
    if isinstance(out, Stream):
        return ScopedStream.at_top(out)._with_scope(scope, f"{full_id}.down")
    if dataclasses.is_dataclass(out) and not isinstance(out, type):
        changes = {
            f.name: ScopedStream.at_top(v)._with_scope(scope, f"{full_id}.{f.name}")
            for f in dataclasses.fields(out)
            if isinstance(v := getattr(out, f.name), Stream)
        }
        return dataclasses.replace(out, **changes) if changes else out
    if isinstance(out, tuple):
        return tuple(_rescope_result(v, scope, full_id) for v in out)
    return out


def _wrap(builder: Callable[..., Any]) -> Callable[..., Any]:
    sig = inspect.signature(builder)
    if "step_id" not in sig.parameters:
        raise TypeError("builder function requires a 'step_id' parameter")
    stream_params = _stream_params(builder, sig)
    name = getattr(builder, "__name__", "operator")

    @functools.wraps(builder)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"operator {name!r} called incorrectly; see cause above") from exc
        bound.apply_defaults()
        _check_streams(sig, bound, stream_params)
        step_id = bound.arguments["step_id"]
        if not isinstance(step_id, str):
            raise TypeError("'step_id' must be a `str`")
        if "." in step_id:
            raise ValueError("'step_id' can't contain any periods '.'")
        outer = _one_scope(sig, bound)
        full_id = f"{outer.parent_id}.{step_id}"
        if outer.flow.uses_id(full_id):
            raise ValueError(
                f"step {full_id!r} already exists; do you have two steps with the same ID?"
            )
        _rescope_arguments(sig, bound, Scope(full_id, outer.flow))
        bound.arguments["step_id"] = full_id
        out = builder(*bound.args, **bound.kwargs)
        outer.flow.reserve_id(full_id)  # an operator made of steps named under it
        return _rescope_result(out, outer, full_id)

    return run


@overload
def operator(builder: F) -> F: ...


@overload
def operator(*, _core: bool = False) -> Callable[[F], F]: ...


def operator(builder: Any = None, *, _core: bool = False) -> Any:
    """Make ``builder(step_id, ...)`` a bytewax 0.21 operator (see the module doc).

    The builder gets its full step id (``"flow.outer.this"``) as ``step_id`` and
    its streams and flow scoped to it; the operators it calls add steps named
    under it. ``_core`` is accepted as bytewax's decorator takes it.
    """
    if builder is not None:
        return _wrap(builder)
    return _wrap
