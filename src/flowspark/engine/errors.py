"""Turn Spark's failures into short Python errors (no JVM stack pages)."""

from __future__ import annotations

from flowspark.engine.shipping import missing_module_hint
from flowspark.runtime.errors import find_step_error

__all__ = ["FlowRunError", "RECOVERY_CHOICES", "RecoveryDirectoryError", "clean_spark_error"]

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
