"""Carrying a user function's exception from a Spark worker back to the driver.

A worker cannot hand the driver a Python exception object: Spark turns it into
text inside a JVM exception. So the worker raises :class:`RemoteStepFailure`,
whose message embeds the failure (step id, function, item repr, the user's
traceback, the exception) between markers; the driver finds the markers in
Spark's error text and raises a clean error instead of pages of JVM stack.

The error raised to the user keeps the user's exception type, so code that
catches what its own step raised (``except ZeroDivisionError``, bytewax's
``TypeError`` for a stateful step fed a non-``(key, value)`` item) still catches
it: it is an instance of a class derived from both :class:`StepError` and the
original class (``StepError[ZeroDivisionError]``), made once per class. Its
``str()`` names the step, the function, the item (truncated) and the original
type and message; ``__cause__`` is the original exception; ``step_id``,
``function`` and ``item`` are attributes (unless the original has attributes of
those names: the user's own attributes win, except on an inner flow's
:class:`StepError`, which is wrapped again for the outer step).

Fallbacks, so that ``isinstance(err, original_type)`` holds whenever the type is
known and the step and item are always in ``str(err)`` or its notes:

* the combined class cannot be made (a layout or metaclass conflict, a class
  that refuses subclasses, an instance that cannot be made without calling
  ``__init__``): the original exception itself is raised, with the flowspark
  message added as a note and ``step_id``/``function``/``item`` set on it;
* the original is not an :class:`Exception` (``KeyboardInterrupt``,
  ``SystemExit``, other ``BaseException``): it is not wrapped either (a stop is
  not a step's failure), only given the note;
* the original's class cannot be brought to the driver at all: a plain
  :class:`StepError` whose ``__cause__`` is a ``RuntimeError`` with the original
  type name and message.

Exceptions that do not survive pickling (an unpicklable attribute, an
``__init__`` whose signature does not match ``args``) still travel: the worker
then sends the class, ``args`` and the attributes that pickle, and the driver
rebuilds the instance without calling ``__init__``.
"""

from __future__ import annotations

import base64
import contextlib
import re
import threading
import types
from dataclasses import dataclass
from typing import Any

import cloudpickle

from flowspark.runtime.user_traceback import WRAPPED, Part, capture, render

__all__ = [
    "StepError",
    "RemoteStepFailure",
    "step_failure",
    "find_step_error",
    "user_error",
    "short_repr",
]

_BEGIN = "<<flowspark-step-failure:"
_END = ":flowspark-step-failure>>"
_PATTERN = re.compile(re.escape(_BEGIN) + r"([A-Za-z0-9+/=]+)" + re.escape(_END))
REPR_LIMIT = 200
MESSAGE_LIMIT = 2_000
TRACEBACK_LIMIT = 20_000
PICKLE_LIMIT = MESSAGE_LIMIT * 4  # a huge exception would bloat Spark's error text
# Begins the note that carries the worker's traceback (the user's frames only).
WORKER_TRACEBACK = "Traceback in the Spark worker:\n"
_ATTRIBUTES = ("step_id", "function", "item")
# Set on an instance by BaseException itself; never copied from the original.
_OWN = frozenset(vars(BaseException)) | frozenset(vars(object)) | {"__dict__", "__weakref__"}


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def short_repr(obj: Any, limit: int = REPR_LIMIT) -> str:
    """``repr(obj)`` cut to ``limit`` characters (never raises)."""
    try:
        text = repr(obj)
    except Exception as exc:  # a broken __repr__ must not hide the real error
        text = f"<unrepresentable {type(obj).__name__}: {exc!r}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _safe_str(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception as broken:
        return f"<unprintable {type(exc).__name__}: {broken!r}>"


def _function_name(fn: Any) -> str:
    """The name of the user's function: its qualified name; for a wrapper of ours (a
    private class), the name of the handler it wraps, never the wrapper's.

    >>> import functools
    >>> _function_name(functools.partial(len))
    'len'
    """
    if isinstance(fn, str):
        return fn
    for _ in range(4):  # wrappers of wrappers, not forever
        name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
        if isinstance(name, str) and name:
            return name
        if not type(fn).__name__.startswith("_") and not hasattr(fn, "func"):
            return type(fn).__name__  # a callable object of the user's class
        inner = next((getattr(fn, a) for a in WRAPPED if getattr(fn, a, None) is not None), None)
        if inner is None:
            break
        fn = inner
    name = type(fn).__name__
    return name.lstrip("_") or "handler"


def _item_text(item: Any) -> str:
    """The item's repr, cut; a keyed handler's failure without a datum at hand (while
    it started or closed) names the key only, not ``datum None``."""
    text = short_repr(item)
    if text.startswith("key ") and getattr(item, "datum", True) is None:
        return text.partition(", datum ")[0]
    return text


def _message(step_id: str, function: str, item: str, error: str) -> str:
    on = item if item.startswith("key ") else f"item {item}"  # a keyed handler's key
    return f"step {step_id!r} ({function}) failed on {on}: {error}"


class StepError(Exception):
    """A user function raised while a flow ran.

    ``str()`` names the step, the function and the item; ``__cause__`` is the
    user's original exception, with the worker-side traceback attached as a
    note when it ran in a Spark worker. The errors flowspark raises are
    instances of a subclass that also derives from the original's class (see
    :func:`user_error`).
    """

    step_id: str
    function: str
    item: str
    _flowspark_original: type[BaseException] | None = None

    def __init__(self, step_id: str, function: str, item: str, error: str) -> None:
        super().__init__(_message(step_id, function, item, error))
        self.step_id = step_id
        self.function = function
        self.item = item

    def __str__(self) -> str:
        # The flowspark message, even when the user's class formats str() its own way.
        return BaseException.__str__(self)

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            _restore_step_error,
            (type(self)._flowspark_original, self.args, dict(vars(self)), _slot_values(self)),
        )


def _restore_step_error(
    original: type[BaseException] | None,
    args: tuple[Any, ...],
    state: dict[str, Any],
    slots: dict[str, Any],
) -> StepError:
    """Unpickle a :class:`StepError` (``__init__`` is not called)."""
    cls = StepError if original is None else _combined_class(original)
    error = None if cls is None else _blank(cls, args)
    if error is None:  # cannot happen for a class that pickled, but never fail unpickling
        error = StepError.__new__(StepError)
    _restore_state(error, state, slots)
    error.args = args
    return error


class RemoteStepFailure(Exception):
    """Raised in a worker; its message is the encoded failure for the driver."""


# -- the combined class ----------------------------------------------------------------

_combined: dict[type[BaseException], type[StepError] | None] = {}
_combined_lock = threading.Lock()


def _combined_class(original: type[BaseException]) -> type[StepError] | None:
    """``StepError[original]``: a subclass of both (cached); ``None`` if none can be made."""
    if issubclass(original, StepError):
        return original
    with _combined_lock:
        if original in _combined:
            return _combined[original]
        name = f"StepError[{original.__name__}]"
        namespace = {
            "__module__": __name__,
            "__qualname__": name,
            "__doc__": f"A step's failure that is also a {original.__qualname__}.",
            "_flowspark_original": original,
        }
        try:
            cls: type[StepError] | None = types.new_class(
                name, (StepError, original), exec_body=lambda ns: ns.update(namespace)
            )
        except Exception:  # layout or metaclass conflict, a final class, __init_subclass__
            cls = None
        _combined[original] = cls
        return cls


def _blank(cls: type[BaseException], args: tuple[Any, ...]) -> Any:
    """An instance of ``cls`` made without its ``__init__`` (``None`` if it cannot be)."""
    for attempt in (args, ()):
        try:
            obj = cls.__new__(cls, *attempt)
        except Exception:
            continue
        if isinstance(obj, cls):
            return obj
    return None


def _slot_values(exc: BaseException) -> dict[str, Any]:
    """Attributes of ``exc`` kept outside its ``__dict__``: ``__slots__`` and the
    fields of builtin exceptions (``OSError.errno``, ``StopIteration.value``...)."""
    values: dict[str, Any] = {}
    for klass in type(exc).__mro__:
        if klass is StepError or klass.__dict__.get("_flowspark_original"):
            continue
        for name, attr in vars(klass).items():
            if name in _OWN or name in values:
                continue
            if isinstance(attr, (types.MemberDescriptorType, types.GetSetDescriptorType)):
                try:
                    values[name] = attr.__get__(exc, klass)
                except Exception:  # an empty slot
                    continue
    return values


def _restore_state(obj: BaseException, state: dict[str, Any], slots: dict[str, Any]) -> None:
    """Put ``state`` (a ``__dict__``) and ``slots`` on ``obj``, skipping what will not set."""
    for name, value in slots.items():
        try:
            object.__setattr__(obj, name, value)
        except Exception:  # read-only (set by __new__ already) or of the wrong type
            continue
    obj.__dict__.update(state)
    notes = state.get("__notes__")
    if isinstance(notes, list):
        obj.__dict__["__notes__"] = list(notes)  # notes added later stay apart


def _has_attribute(obj: BaseException, name: str) -> bool:
    try:
        getattr(obj, name)
    except Exception:
        return False
    return True


def _set_attributes(obj: BaseException, values: dict[str, str], user: BaseException) -> None:
    ours = isinstance(user, StepError)  # an inner flow's error: the outer step wins
    for name, value in values.items():
        if not ours and _has_attribute(user, name):
            continue  # the user's own attribute of that name wins
        try:
            object.__setattr__(obj, name, value)
        except Exception:
            continue


def _add_note(exc: BaseException, note: str) -> None:
    with contextlib.suppress(Exception):  # a __notes__ that is not a list
        exc.add_note(note)


def _combine(
    step_id: str, function: str, item: str, error_text: str, original: BaseException | None
) -> BaseException:
    """The error for the user: ``StepError[type(original)]`` or a fallback (module doc)."""
    message = _message(step_id, function, item, error_text)
    attributes = {"step_id": step_id, "function": function, "item": item}
    if original is None:
        error = StepError(step_id, function, item, error_text)
        error.__cause__ = RuntimeError(error_text)
        return error
    cls = _combined_class(type(original)) if isinstance(original, Exception) else None
    combined = None if cls is None else _blank(cls, original.args)
    if combined is None:  # not wrapped: the original itself, with the message as a note
        _add_note(original, message)
        _set_attributes(original, attributes, original)
        return original
    _restore_state(combined, dict(vars(original)), _slot_values(original))
    combined.args = (message,)
    _set_attributes(combined, attributes, original)
    combined.__cause__ = original
    return combined


def user_error(step_id: str, function: Any, item: Any, exc: BaseException) -> BaseException:
    """The error to raise for the user when ``function(item)`` raised ``exc`` in step
    ``step_id``, in this process: an instance of both :class:`StepError` and
    ``type(exc)`` whose ``__cause__`` is ``exc`` (fallbacks: see the module doc).

    ``function`` is a callable or a name; ``item`` the item itself (its repr is cut).
    """
    error_text = f"{type(exc).__name__}: {_cut(_safe_str(exc), MESSAGE_LIMIT)}"
    return _combine(step_id, _function_name(function), _item_text(item), error_text, exc)


# -- worker to driver ------------------------------------------------------------------


@dataclass(frozen=True)
class _Failure:
    step_id: str
    function: str
    item: str
    error_type: str
    error_message: str
    worker_traceback: tuple[Part, ...]  # the user's frames (see user_traceback)
    pickled_error: bytes | None  # the exception, when it survives a pickle round trip
    pickled_state: bytes | None  # else its _State


@dataclass(frozen=True)
class _State:
    """An exception taken apart: rebuilt on the driver without its ``__init__``."""

    cls: type[BaseException]
    args: tuple[Any, ...]
    state: dict[str, Any]
    slots: dict[str, Any]

    def rebuild(self) -> BaseException | None:
        obj = _blank(self.cls, self.args)
        if obj is None:
            return None
        _restore_state(obj, self.state, self.slots)
        with contextlib.suppress(Exception):
            obj.args = self.args
        return obj


def _dumps(obj: Any) -> bytes | None:
    try:
        data: bytes = cloudpickle.dumps(obj)
    except Exception:
        return None
    return data if len(data) <= PICKLE_LIMIT else None


def _picklable(values: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in values.items() if _dumps(value) is not None}


def _pickle_exception(exc: BaseException, message: str) -> tuple[bytes | None, bytes | None]:
    """``(pickled exception, None)`` if it round-trips, else ``(None, pickled _State)``
    (``None`` twice if not even its class pickles)."""
    pickled = _dumps(exc)
    if pickled is not None:
        try:
            cloudpickle.loads(pickled)
        except Exception:  # e.g. an __init__ that does not take ``args`` back
            pickled = None
        else:
            return pickled, None
    args = exc.args if _dumps(exc.args) is not None else (message,)
    for state in (
        _State(type(exc), args, _picklable(dict(vars(exc))), _picklable(_slot_values(exc))),
        _State(type(exc), (message,), {}, {}),
    ):
        data = _dumps(state)
        if data is not None:
            return None, data
    return None, None


def step_failure(step_id: str, fn: Any, item: Any, exc: BaseException) -> RemoteStepFailure:
    """Build the exception a worker raises when ``fn(item)`` raised ``exc``.

    An ``exc`` that is already a step's failure (a handler's, a Numaflow cycle's
    vertex's, run inside this step) is returned as it is: it names the step it
    happened in."""
    if isinstance(exc, RemoteStepFailure):
        return exc
    message = _cut(_safe_str(exc), MESSAGE_LIMIT)
    pickled, state = _pickle_exception(exc, message)
    failure = _Failure(
        step_id=step_id,
        function=_function_name(fn),
        item=_item_text(item),
        error_type=type(exc).__name__,
        error_message=message,
        worker_traceback=capture(exc),
        pickled_error=pickled,
        pickled_state=state,
    )
    payload = base64.b64encode(cloudpickle.dumps(failure)).decode("ascii")
    return RemoteStepFailure(
        f"step {step_id!r} failed on item {failure.item}: {failure.error_type}: "
        f"{failure.error_message} {_BEGIN}{payload}{_END}"
    )


def _original(failure: _Failure) -> BaseException | None:
    """The worker's exception rebuilt on the driver (``None`` if its class is unknown)."""
    try:
        if failure.pickled_error is not None:
            exc = cloudpickle.loads(failure.pickled_error)
            return exc if isinstance(exc, BaseException) else None
        if failure.pickled_state is not None:
            state = cloudpickle.loads(failure.pickled_state)
            return state.rebuild() if isinstance(state, _State) else None
    except Exception:  # e.g. the class's module is not importable on the driver
        return None
    return None


def find_step_error(text: str) -> BaseException | None:
    """The user's error embedded in Spark's error ``text``, if any: as :func:`user_error`
    builds it, the worker's traceback a note on the original (``__cause__``)."""
    match = _PATTERN.search(text)
    if match is None:
        return None
    failure: _Failure = cloudpickle.loads(base64.b64decode(match.group(1)))
    original = _original(failure)
    error_text = f"{failure.error_type}: {failure.error_message}"
    error = _combine(failure.step_id, failure.function, failure.item, error_text, original)
    # On the original (the cause, or the error itself if not wrapped), not on both.
    where = error.__cause__ if error.__cause__ is not None else error
    if any(part.frames for part in failure.worker_traceback):  # else it only repeats str()
        text = _cut(render(failure.worker_traceback), TRACEBACK_LIMIT)
        _add_note(where, WORKER_TRACEBACK + text)
    return error
