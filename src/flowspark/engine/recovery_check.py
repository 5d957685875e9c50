"""A recovery directory that does not add up is an error, not a fresh start.

Spark's checkpoint keeps one file per committed micro-batch in ``commits/``;
flowspark keeps, per exactly-once output, the state of its parts after the last two
micro-batches it wrote in ``flowspark-sinks/<output>.pickle`` (see
:mod:`flowspark.engine.sink`). A batch's snapshot is written before Spark commits the
batch, so in a whole directory with last committed batch ``C`` an output's latest
snapshot is of batch ``C``, or of ``C + 1`` (written, not committed, when the run
stopped) with the one before it of ``C``. Anything else means files were deleted,
lost or copied in part, and resuming would cut the output back to the wrong place
or start it over: :func:`check_recovery_directory` refuses such a directory before
anything is written, naming the file. Only a directory without commits starts fresh.
Spark's own ``metadata`` and offsets log are checked as far as the commits need
them (present); what is in Spark's files is Spark's to read.

The run token of an output that names its writes by it (``<output>.token``) is
checked when the sinks are built (:func:`flowspark.engine.sink._run_token`), which is
also before anything is written.
"""

from __future__ import annotations

from flowspark.api.outputs import PartitionedOutput, parts_on_executors
from flowspark.engine.errors import RECOVERY_CHOICES, RecoveryDirectoryError
from flowspark.engine.recovery_files import numbered_files
from flowspark.engine.sink import SINKS_DIR, executors_mark, load_generations
from flowspark.plan.graph import Plan
from flowspark.runtime.storage import Location, StorageError

__all__ = ["check_recovery_directory", "damaged", "last_committed_batch"]


def damaged(directory: Location, what: str) -> RecoveryDirectoryError:
    """The one-line error for a recovery directory whose files do not add up."""
    return RecoveryDirectoryError(
        f"recovery directory {directory.shown} does not add up: {what}; nothing was "
        f"written. {RECOVERY_CHOICES[0].upper()}{RECOVERY_CHOICES[1:]}"
    )


def _last_batch(log: Location) -> int | None:
    """The highest batch id of a Spark log folder (``commits/``, ``offsets/``)."""
    try:
        names = log.files("*")
    except StorageError as exc:
        raise RecoveryDirectoryError(f"recovery directory: {exc}") from None
    return max((batch for batch, _ in numbered_files(names)), default=None)


def last_committed_batch(directory: Location) -> int | None:
    """The id of the last micro-batch Spark committed in ``directory`` (None: none)."""
    return _last_batch(directory.child("commits"))


def _checkpoint_problem(directory: Location, committed: int | None) -> str | None:
    """What is missing from Spark's own files, if anything: the query's ``metadata``
    once a batch is planned, an offsets entry for the last committed batch."""
    planned = _last_batch(directory.child("offsets"))
    if committed is None and planned is None:
        return None
    metadata = directory.child("metadata")
    try:
        has_metadata = metadata.is_file()
    except StorageError as exc:
        raise RecoveryDirectoryError(f"recovery directory: {exc}") from None
    if not has_metadata:
        return f"Spark's query metadata {metadata.shown} is missing, but its logs hold batches"
    if committed is not None and (planned is None or planned < committed):
        return (
            f"Spark's offsets log {directory.child('offsets').shown} has no entry for "
            f"micro-batch {committed}, which its commit log says is committed"
        )
    return None


def check_recovery_directory(directory: Location, plan: Plan) -> int | None:
    """Raise :class:`~flowspark.engine.errors.RecoveryDirectoryError` if Spark's
    checkpoint in ``directory`` misses a file its commits need, or the sink snapshots
    of ``plan``'s exactly-once outputs do not match its commits; return the last
    committed batch (None: a fresh start)."""
    committed = last_committed_batch(directory)
    problem = _checkpoint_problem(directory, committed)
    if problem is not None:
        raise damaged(directory, problem)
    for index in plan.outputs:
        step = plan.step(index)
        output = step.args["output"]
        if not isinstance(output, PartitionedOutput):
            continue
        where = directory.child(SINKS_DIR, f"{step.step_id}.pickle")
        if parts_on_executors(output):  # its snapshots are in Spark's state store
            problem = _writes_on_changed(where, step.step_id, committed, "executors")
        else:
            mark = directory.child(SINKS_DIR, executors_mark(step.step_id))
            problem = _writes_on_changed(mark, step.step_id, committed, "driver")
            problem = problem or _snapshot_problem(where, step.step_id, committed)
        if problem is not None:
            raise damaged(directory, problem)
    return committed


def _writes_on_changed(
    evidence: Location, step_id: str, committed: int | None, now: str
) -> str | None:
    """Output ``step_id``'s parts are written on the ``now`` side (``"driver"`` or
    ``"executors"``), but this directory's committed batches wrote them on the other:
    ``evidence`` is there (the driver's snapshots, or the executors' mark). The
    snapshots the run would resume from are then not where it looks."""
    try:
        changed = committed is not None and evidence.is_file()
    except StorageError as exc:
        raise RecoveryDirectoryError(f"recovery directory: {exc}") from None
    if not changed:
        return None
    before = "driver" if now == "executors" else "executors"
    return (
        f"output {step_id!r} writes its parts on the {now}, but the micro-batches "
        f"committed here wrote them on the {before} ({evidence.shown}); writes_on "
        "cannot change over a recovery directory's life"
    )


def _snapshot_problem(where: Location, step_id: str, committed: int | None) -> str | None:
    """What is wrong with output ``step_id``'s snapshot file ``where``, if anything."""
    name = f"the snapshot of output {step_id!r}, {where.shown},"
    try:
        generations = load_generations(where)
    except ValueError as exc:
        return f"{name} cannot be read ({exc})"
    done = -1 if committed is None else committed
    said = (
        f"micro-batches up to {committed} are committed"
        if committed is not None
        else "no micro-batch is committed (commits/ is empty or missing)"
    )
    if generations is None:
        return None if committed is None else f"{name} is missing, but {said}"
    last, prev = generations["last"], generations["prev"]
    if last is None:
        return None if committed is None else f"{name} holds no micro-batch, but {said}"
    if last[0] == done:
        return None
    if last[0] != done + 1:
        return f"{name} is of micro-batch {last[0]}, but {said}"
    before = prev[0] if prev is not None else -1
    if before != done:  # batch done + 1 was written, not committed: done's is needed
        held = f"micro-batch {before}" if prev is not None else "nothing"
        return f"{name} holds micro-batch {last[0]} after {held}, but {said}"
    return None
