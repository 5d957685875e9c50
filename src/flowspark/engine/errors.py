"""Turn Spark's failures into short Python errors (no JVM stack pages), and say what
a run noticed at the user's own code."""

from __future__ import annotations

import sys
import warnings
from collections.abc import Iterable
from types import FrameType
from typing import Any

from flowspark.engine.shipping import missing_module_hint
from flowspark.runtime.errors import find_step_error
from flowspark.runtime.user_traceback import code_location, is_internal

__all__ = [
    "FlowRunError",
    "RECOVERY_CHOICES",
    "RecoveryDirectoryError",
    "clean_spark_error",
    "late_items_message",
    "warn_late_items",
]

_MAX_LINES = 12
# What a user can do about a recovery directory whose files do not add up.
RECOVERY_CHOICES = (
    "restore the whole directory from a copy, or start over with a new recovery directory"
)


class FlowRunError(RuntimeError):
    """Spark stopped the flow for a reason that is not a user function's error."""


class RecoveryDirectoryError(ValueError):
    """The recovery directory cannot be used as it is (another run holds it, or its
    files do not add up), found before the run wrote anything; the CLI exits 2."""


def clean_spark_error(exc: BaseException) -> BaseException:
    """The user's error if one is embedded (a :class:`~flowspark.runtime.errors.StepError`
    that is also an instance of the user's exception class, see
    :func:`~flowspark.runtime.errors.find_step_error`), else a :class:`FlowRunError`
    with the first lines of Spark's message."""
    text = str(exc)
    step_error = find_step_error(text)
    if step_error is not None:
        return step_error
    hint = missing_module_hint(text)
    if hint is not None:
        return FlowRunError(f"Spark stopped the flow: {hint}")
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("\tat ")]
    summary = "\n".join(lines[:_MAX_LINES])
    return FlowRunError(
        f"Spark stopped the flow: {summary}\n(run with --verbose or FLOWSPARK_VERBOSE=1 "
        "for Spark's log)"
    )


def late_items_message(step_id: str, count: int) -> str:
    """What a window step that dropped ``count`` late items says.

    >>> late_items_message("win", 2)
    "window step 'win' dropped 2 late item(s); route them with the `.late` stream of its WindowStream to keep them"
    """  # noqa: E501
    return (
        f"window step {step_id!r} dropped {count} late item(s); route them with the "
        "`.late` stream of its WindowStream to keep them"
    )


def _step_location(step: Any) -> tuple[str, int] | None:
    """Where the user wrote what decides ``step``'s items' times: its clock's
    ``dt_getter``, else its own functions or handler (see
    :func:`~flowspark.runtime.user_traceback.code_location`)."""
    args = getattr(step, "args", {}) or {}
    clock = args.get("clock_config") or args.get("clock")  # bytewax 0.17's, or 0.21's
    getter = getattr(clock, "dt_getter", None) or getattr(clock, "ts_getter", None)
    candidates = [
        getattr(getter, "__wrapped__", getter),
        *(getattr(step, "fns", {}) or {}).values(),
    ]
    candidates += [args.get("factory"), args.get("handler")]
    for fn in candidates:
        where = None if fn is None else code_location(fn)
        if where is not None:
            return where
    return None


def _caller_location() -> tuple[str, int] | None:
    """The innermost frame on the stack that is the user's (e.g. ``run_main(flow)``)."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not is_internal(filename) and not filename.startswith("<frozen "):
            return filename, frame.f_lineno
        frame = frame.f_back
    return None


def warn_late_items(
    steps: Iterable[Any], step_id: str, count: int, category: type[Warning]
) -> None:
    """Warn (``category``) that window step ``step_id`` (one of ``steps``, a plan's)
    dropped ``count`` late items that no step consumes, at the user's file and line:
    the function that gives the step's items their times, else the user's call that
    ran the flow, else ``flowspark`` (as Python says ``sys`` where no frame is)."""
    step = next((s for s in steps if getattr(s, "step_id", None) == step_id), None)
    where = (_step_location(step) if step is not None else None) or _caller_location()
    filename, lineno = where or ("flowspark", 0)
    warnings.warn_explicit(late_items_message(step_id, count), category, filename, lineno)
