"""The driver side of every micro-batch: Spark's ``foreachBatch`` hands us the batch.

The dispatcher collects the batch's rows (Arrow), prints captured worker
output, and writes each output's items through its sink, in row order. Outputs
written on the executors are written by Spark's tasks (runtime/executor_writes.py);
only their counts reach the driver.

Partitioned outputs are exactly-once: after a batch is written and flushed,
the parts' snapshots are saved (atomically, keeping the previous generation) in
the checkpoint directory. If Spark replays that batch after a crash, the parts
are rebuilt from the snapshots taken *before* it, so nothing is written twice.
A part is only ever rebuilt from the snapshot of the batch just before the one
being written (or fresh for batch 0): a snapshot that is missing, unreadable or of
another batch stops the run with one line naming the file, and the output is left
as it is (see :mod:`flowspark.engine.recovery_check`).
"""

from __future__ import annotations

import contextlib
import gc
import os
import pickle
import sys
from collections.abc import Callable, Iterator
from typing import Any

from flowspark.api.outputs import (
    DynamicOutput,
    Output,
    PartitionedOutput,
    parts_on_executors,
    writes_on_executors,
)
from flowspark.engine.errors import (
    RECOVERY_CHOICES,
    FlowRunError,
    RecoveryDirectoryError,
    clean_spark_error,
)
from flowspark.engine.vertex_marks import VertexMarks
from flowspark.plan.graph import Plan
from flowspark.runtime.codec import (
    EVENT_TIME_PORT,
    HANDLED_COUNT_PORT,
    LATE_COUNT_PORT,
    MARKER_PORT,
    READ_COUNT_PORT,
    STDOUT_PORT,
    WRITTEN_COUNT_PORT,
    decode_count,
    decode_event_times,
    decode_items,
)
from flowspark.runtime.errors import StepError, user_error
from flowspark.runtime.storage import Location, read_bytes, write_bytes_atomic

__all__ = ["SINKS_DIR", "BatchDispatcher", "FlowFailed", "executors_mark", "load_generations"]

# The folder of the recovery directory that holds the sinks' snapshots and tokens.
SINKS_DIR = "flowspark-sinks"
# ``{"prev": (batch id, part states) | None, "last": ...}``: an output's snapshots.
Generations = dict[str, tuple[int, list[Any]] | None]


class FlowFailed(Exception):
    """Raised inside ``foreachBatch`` to stop the query; the real error is kept aside."""


def load_generations(location: Location) -> Generations | None:
    """An output's snapshots kept at ``location`` (None: no file); ``ValueError``
    saying why when the file is not such snapshots."""
    saved = read_bytes(location)
    if saved is None:
        return None
    try:
        generations = pickle.loads(saved)
    except Exception as exc:
        raise ValueError(f"{type(exc).__name__}: {exc}") from None
    ok = isinstance(generations, dict) and set(generations) == {"prev", "last"}
    for generation in generations.values() if ok else ():
        ok = ok and (
            generation is None
            or (isinstance(generation, tuple) and len(generation) == 2)
            and isinstance(generation[0], int)
        )
    if not ok:
        raise ValueError("not a flowspark sink snapshot")
    return generations


def executors_mark(step_id: str) -> str:
    """The name (in :data:`SINKS_DIR`) of the mark that output ``step_id``'s parts are
    written on the executors."""
    return f"{step_id}.executors"


def _refused(what: str) -> RecoveryDirectoryError:
    return RecoveryDirectoryError(
        f"the recovery directory does not add up: {what}; nothing was written. "
        f"{RECOVERY_CHOICES[0].upper()}{RECOVERY_CHOICES[1:]}"
    )


class _DynamicWriter:
    """A ``DynamicOutput``'s one sink in the driver; for an output written on the
    executors (runtime/executor_writes.py) only its run token: no sink here."""

    def __init__(
        self,
        output: DynamicOutput,
        token_path: Location | os.PathLike[str],
        resuming: bool = False,
    ) -> None:
        self.output = output
        self.on_executors = writes_on_executors(output)
        self.sink = None if self.on_executors else output.build(0, 1)
        self.begin_batch = getattr(self.sink, "begin_batch", None)
        try:
            needs_token = self.on_executors or self.begin_batch is not None
            self.token = _run_token(Location.parse(token_path), resuming) if needs_token else ""
        except BaseException:
            self.close()
            raise

    def begin(self, batch_id: int) -> None:
        if self.begin_batch is not None:
            self.begin_batch(batch_id, self.token)

    def write(self, items: list[Any]) -> None:
        if self.sink is None:
            raise RuntimeError("internal: the items of an output written on the executors")
        self.sink.write_batch(items)

    def commit(self, batch_id: int) -> None:
        pass

    def close(self) -> None:
        if self.sink is not None:
            self.sink.close()


class _PartsOnExecutors:
    """A partitioned output whose parts Spark's tasks write (runtime/parts.py): its
    snapshots are its keys' state in Spark's checkpoint; nothing is written here but
    a mark (``mark``) that says so to a later run's check (engine/recovery_check.py)."""

    def __init__(self, mark: Location) -> None:
        if read_bytes(mark) is None:
            write_bytes_atomic(mark, b"parts written on the executors\n")

    def begin(self, batch_id: int) -> None:
        pass

    def write(self, items: list[Any]) -> None:
        raise RuntimeError("internal: the items of an output written on the executors")

    def commit(self, batch_id: int) -> None:
        pass

    def close(self) -> None:
        pass


class _PartitionedWriter:
    def __init__(self, output: PartitionedOutput, state_path: Location | os.PathLike[str]) -> None:
        self.output = output
        self.part_names = list(output.list_parts())
        if not self.part_names:
            raise ValueError(f"{type(output).__name__}.list_parts() returned no parts")
        self.state_path = state_path = Location.parse(state_path)
        self.parts: list[Any] | None = None
        self.generations: Generations = {"prev": None, "last": None}
        try:
            saved = load_generations(state_path)
        except ValueError as exc:
            raise _refused(f"the sink snapshot {state_path.shown} cannot be read ({exc})") from None
        if saved is not None:
            self.generations = saved

    def _open(self, states: list[Any] | None) -> None:
        if self.parts is not None:
            for part in self.parts:
                part.close()
        states = states or [None] * len(self.part_names)
        self.parts = [
            self.output.build_part(name, state) for name, state in zip(self.part_names, states)
        ]

    def begin(self, batch_id: int) -> None:
        last, prev = self.generations["last"], self.generations["prev"]
        replay = last is not None and last[0] >= batch_id
        if not replay and self.parts is not None:
            return  # the next batch of this run
        # The parts are (re)built from the state after batch ``batch_id - 1``, and
        # only from that: another one would cut the output back to the wrong place.
        resume = prev if replay else last
        before = resume[0] if resume is not None else -1
        if before != batch_id - 1:
            kept = [str(g[0]) for g in (prev, last) if g is not None]
            held = f"micro-batches {' and '.join(kept)}" if kept else "no micro-batch"
            what = (
                f"the sink snapshot {self.state_path.shown} holds {held}, not the state "
                f"after micro-batch {batch_id - 1} that Spark resumes from"
            )
            if self.parts is None:
                raise _refused(what)
            raise FlowRunError(f"{what}: {RECOVERY_CHOICES}")
        if replay:
            self.generations = {"prev": None, "last": prev}
        self._open(resume[1] if resume is not None else None)

    def write(self, items: list[Any]) -> None:
        assert self.parts is not None
        count = len(self.parts)
        routed: dict[int, list[Any]] = {}
        for item in items:
            if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str):
                key, value = item
            else:
                key, value = str(item), item
            routed.setdefault(self.output.part_fn(key) % count, []).append(value)
        for index, values in routed.items():
            self.parts[index].write_batch(values)

    def commit(self, batch_id: int) -> None:
        assert self.parts is not None
        snapshot = (batch_id, [part.snapshot() for part in self.parts])
        self.generations = {"prev": self.generations["last"], "last": snapshot}
        write_bytes_atomic(self.state_path, pickle.dumps(self.generations))

    def close(self) -> None:
        for part in self.parts or []:
            part.close()
        self.parts = None


def _run_token(location: Location, resuming: bool = False) -> str:
    """A random token made once per recovery directory (kept at ``location``): a sink
    that names what it writes by it, the batch id and a position names a replayed
    batch's items as the first attempt did, and another run's items differently.
    ``resuming`` (Spark has committed batches) needs the token made before: a new
    one would name a replayed batch's items anew."""
    saved = read_bytes(location)
    if saved is not None:
        return saved.decode().strip()
    if resuming:
        raise _refused(
            f"the run token {location.shown} is missing but Spark has committed "
            "micro-batches, so a replayed batch's writes would not be known as repeats"
        )
    token = os.urandom(6).hex()
    write_bytes_atomic(location, token.encode())
    return token


def _writer(output: Output, step_id: str, state_dir: Location, resuming: bool = False) -> Any:
    if parts_on_executors(output):
        return _PartsOnExecutors(state_dir.child(executors_mark(step_id)))
    if isinstance(output, PartitionedOutput):
        return _PartitionedWriter(output, state_dir.child(f"{step_id}.pickle"))
    if isinstance(output, DynamicOutput):
        return _DynamicWriter(output, state_dir.child(f"{step_id}.token"), resuming)
    raise TypeError(
        f"output {step_id!r}: {type(output).__name__} must subclass PartitionedOutput "
        "or DynamicOutput"
    )


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """No cyclic garbage collection for a moment: decoding a chunk builds many tuples
    and no cycles, and the user's process may hold millions of objects that every
    collection would walk again (100 k window results: 0.25 s, 0.09 s paused)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


class BatchDispatcher:
    """``foreachBatch`` function: route a micro-batch's rows to the flow's sinks.

    What each batch read, wrote and found late goes to ``hub`` (see engine/observe.py).
    ``guard`` is called before each batch is written and raises to stop the run (this
    run no longer holds the recovery directory, see engine/recovery_lock.py);
    ``resuming``: Spark has committed batches in the recovery directory.
    Outputs written on the executors (runtime/executor_writes.py) get their run
    token here (:attr:`run_tokens`); their items reach no sink here, only their counts.
    """

    def __init__(
        self,
        plan: Plan,
        state_dir: Location | str,
        hub: Any = None,
        guard: Callable[[], None] | None = None,
        resuming: bool = False,
        marks_at: Location | None = None,
    ) -> None:
        self.hub = hub
        # The vertex watermark's file, kept per batch (engine/vertex_marks.py).
        self.marks_at = marks_at
        self.marks = VertexMarks.load(marks_at) if marks_at is not None else None
        self.plan = plan
        self.guard = guard
        self.state_dir = state_dir = Location.parse(state_dir)
        self.writers: dict[int, Any] = {}
        self.step_ids: dict[int, str] = {}
        try:
            for o in plan.outputs:
                step = plan.step(o)
                self.step_ids[plan.sink_ports[o]] = step.step_id
                self.writers[plan.sink_ports[o]] = _writer(
                    step.args["output"], step.step_id, state_dir, resuming
                )
        except BaseException:
            self.close()
            raise
        # The run tokens of the outputs that Spark's tasks write, by sink port.
        self.run_tokens = {
            port: writer.token
            for port, writer in self.writers.items()
            if isinstance(writer, _DynamicWriter) and writer.on_executors
        }
        self.error: BaseException | None = None
        self.batches = 0

    def __call__(self, df: Any, batch_id: int) -> None:
        try:
            table = df.toArrow()
        except Exception as exc:  # a worker failed: keep the clean error, stop the query
            self.error = clean_spark_error(exc)  # the user's error, or a short one
            raise FlowFailed(str(self.error)) from None
        self.deliver(table, batch_id)

    def deliver(self, table: Any, batch_id: int) -> None:
        """Write a collected micro-batch (Arrow ``table``) through the sinks (on
        Spark Connect, the table comes from the server, see ``engine/delivery.py``)."""
        try:
            self._dispatch(table, batch_id)
        except StepError as exc:
            self.error = exc
            raise FlowFailed(str(exc)) from None
        except Exception as exc:
            self.error = exc
            raise FlowFailed(f"{type(exc).__name__}: {exc}") from None
        self.batches += 1

    def _dispatch(self, table: Any, batch_id: int) -> None:
        if self.guard is not None:
            self.guard()
        writers = self.writers
        read: dict[str, int] = {}
        written: dict[str, int] = {}
        written_there: dict[str, int] = {}  # by Spark's tasks
        late: dict[str, int] = {}
        handled: dict[str, int] = {}
        counts_of = {
            LATE_COUNT_PORT: late,
            READ_COUNT_PORT: read,
            HANDLED_COUNT_PORT: handled,
            WRITTEN_COUNT_PORT: written_there,
        }
        for writer in writers.values():
            writer.begin(batch_id)
        ports = table.column("port").to_pylist()
        datas = table.column("data").to_pylist()
        for port, data in zip(ports, datas):
            if port == STDOUT_PORT:
                sys.stdout.write(data.decode("utf-8"))
                continue
            if port == MARKER_PORT:
                continue
            if port == EVENT_TIME_PORT:
                if self.marks is not None:
                    self.marks.add(*decode_event_times(data))
                continue
            if port in counts_of:
                step_id, count = decode_count(data)
                counts = counts_of[port]
                counts[step_id] = counts.get(step_id, 0) + count
                continue
            writer = writers.get(port)
            if writer is None:
                raise RuntimeError(f"internal: a row for unknown port {port} reached the sinks")
            with _gc_paused():
                items = decode_items(data)
            items = items if isinstance(items, list) else list(items)
            step_id = self.step_ids[port]
            written[step_id] = written.get(step_id, 0) + len(items)
            try:
                writer.write(items)
            except Exception as exc:  # the user's sink: its error keeps its type
                error = user_error(step_id, "write_batch", items[:3], exc)
                raise error from error.__cause__
        sys.stdout.flush()
        for writer in writers.values():
            writer.commit(batch_id)
        if self.marks is not None and self.marks.end_batch():
            assert self.marks_at is not None
            self.marks.save(self.marks_at)  # before Spark commits the batch
        if self.hub is not None:
            where = dict.fromkeys(written, "driver") | dict.fromkeys(written_there, "executors")
            for step_id, count in written_there.items():
                written[step_id] = written.get(step_id, 0) + count
            self.hub.batch_written(batch_id, read, written, late, handled, where)

    def close(self) -> None:
        """Close every sink."""
        for writer in self.writers.values():
            writer.close()
