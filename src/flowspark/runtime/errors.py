"""Carrying a user function's exception from a Spark worker back to the driver.

A worker cannot hand the driver a Python exception object: Spark turns it into
text inside a JVM exception. So the worker raises :class:`RemoteStepFailure`,
whose message embeds the failure (step id, function, item repr, the user's
traceback, the pickled exception) between markers; the driver finds the markers
in Spark's error text and raises a clean :class:`StepError` instead of pages of
JVM stack.
"""

from __future__ import annotations

import base64
import re
import traceback
from dataclasses import dataclass
from typing import Any

import cloudpickle

__all__ = ["StepError", "RemoteStepFailure", "step_failure", "find_step_error", "short_repr"]

_BEGIN = "<<flowspark-step-failure:"
_END = ":flowspark-step-failure>>"
_PATTERN = re.compile(re.escape(_BEGIN) + r"([A-Za-z0-9+/=]+)" + re.escape(_END))
REPR_LIMIT = 200
MESSAGE_LIMIT = 2_000
TRACEBACK_LIMIT = 20_000


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def short_repr(obj: Any, limit: int = REPR_LIMIT) -> str:
    """``repr(obj)`` cut to ``limit`` characters (never raises)."""
    try:
        text = repr(obj)
    except Exception as exc:  # a broken __repr__ must not hide the real error
        text = f"<unrepresentable {type(obj).__name__}: {exc!r}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _function_name(fn: Any) -> str:
    if isinstance(fn, str):
        return fn
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    return name or type(fn).__name__


@dataclass(frozen=True)
class _Failure:
    step_id: str
    function: str
    item: str
    error_type: str
    error_message: str
    remote_traceback: str
    pickled_error: bytes | None


class StepError(Exception):
    """A user function raised while a flow ran.

    ``str()`` names the step, the function and the item; ``__cause__`` is the
    user's original exception (when it could be pickled), with the worker-side
    traceback attached as a note.
    """

    def __init__(self, step_id: str, function: str, item: str, error: str) -> None:
        super().__init__(f"step {step_id!r} ({function}) failed on item {item}: {error}")
        self.step_id = step_id
        self.function = function
        self.item = item


class RemoteStepFailure(Exception):
    """Raised in a worker; its message is the encoded failure for the driver."""


def step_failure(step_id: str, fn: Any, item: Any, exc: BaseException) -> RemoteStepFailure:
    """Build the exception a worker raises when ``fn(item)`` raised ``exc``."""
    try:
        pickled: bytes | None = cloudpickle.dumps(exc)
    except Exception:
        pickled = None
    if pickled is not None and len(pickled) > MESSAGE_LIMIT * 4:
        pickled = None  # a huge exception would bloat Spark's error text
    failure = _Failure(
        step_id=step_id,
        function=_function_name(fn),
        item=short_repr(item),
        error_type=type(exc).__name__,
        error_message=_cut(str(exc), MESSAGE_LIMIT),
        remote_traceback=_cut("".join(traceback.format_exception(exc)), TRACEBACK_LIMIT),
        pickled_error=pickled,
    )
    payload = base64.b64encode(cloudpickle.dumps(failure)).decode("ascii")
    return RemoteStepFailure(
        f"step {step_id!r} failed on item {failure.item}: {failure.error_type}: "
        f"{failure.error_message} {_BEGIN}{payload}{_END}"
    )


def find_step_error(text: str) -> StepError | None:
    """Rebuild the :class:`StepError` embedded in Spark's error ``text``, if any."""
    match = _PATTERN.search(text)
    if match is None:
        return None
    failure: _Failure = cloudpickle.loads(base64.b64decode(match.group(1)))
    error = StepError(
        failure.step_id,
        failure.function,
        failure.item,
        f"{failure.error_type}: {failure.error_message}",
    )
    cause: BaseException | None = None
    if failure.pickled_error is not None:
        try:
            cause = cloudpickle.loads(failure.pickled_error)
        except Exception:
            cause = None
    if cause is None:
        cause = RuntimeError(f"{failure.error_type}: {failure.error_message}")
    cause.add_note("Traceback in the Spark worker:\n" + failure.remote_traceback.rstrip())
    error.__cause__ = cause
    return error
