"""A bounded run with nothing to recover, whose input fits one micro-batch: ONE batch job.

    spark.range(read tasks) ─mapInArrow(read a split, run level 0)─▶
    [ repartition ▶ mapInArrow(level k program) ] per exchange level ─▶ toArrow ▶ sinks

This is the job the streaming query would run as its only micro-batch (see
:mod:`flowspark.engine.query`): the same splits, the same level programs, the
same partitioning by key, and rows at ``WHOLE_INPUT_MS``, so keyed steps handle
each key's values at the run's time and close everything at once (see
:meth:`~flowspark.engine.stateful.LevelProcessor.whole_input`). What only a
stream needs is left out: the source's planning process, transformWithState's
schema pass and state store, and the checkpoint's offset and commit logs, about
1 s of a short run. A run with a recovery directory always streams, so a
restart finds its checkpoint.
"""

from __future__ import annotations

import pickle
import threading
import uuid
from collections.abc import Iterator
from typing import Any

from pyspark import InheritableThread
from pyspark.sql import Row

from flowspark.engine.compat import is_connect
from flowspark.engine.stateful import LevelProcessor
from flowspark.runtime.codec import KEY_SEPARATOR, ROW_SCHEMA, WHOLE_INPUT_MS
from flowspark.runtime.task import RowBuffer, run_program, task_context, task_end

__all__ = ["read_frame", "bounded_keyed_level", "run_job"]


def read_frame(
    spark: Any, programs: dict[int, bytes], reads: list[tuple[int, bytes]], spread: int
) -> Any:
    """One partition per read task ``(input's plan index, pickled split)``, each
    running the input's level-0 program (``programs`` by input) over its split."""

    def read(batches: Iterator[Any]) -> Iterator[Any]:
        program = None
        for batch in batches:
            for index in batch.column(0).to_pylist():
                entry, split = reads[index]
                program = pickle.loads(programs[entry])
                feeds = ((entry, items) for items in pickle.loads(split).read())
                yield from run_program(program, feeds, task_context(), spread, WHOLE_INPUT_MS)
        if program is not None:
            yield from task_end(program, WHOLE_INPUT_MS)

    tasks = max(1, len(reads))
    return spark.range(0, len(reads), 1, tasks).mapInArrow(read, ROW_SCHEMA)


def bounded_keyed_level(
    df: Any, processor: LevelProcessor, key_partitions: int, wall_ms: int
) -> Any:
    """A level with keyed steps: rows partitioned by key as transformWithState would
    get them, then each partition's keys handled at ``wall_ms`` and closed."""

    def level(batches: Iterator[Any]) -> Iterator[Any]:
        processor.load()
        unkeyed: list[Any] = []
        buckets: dict[str, list[bytes]] = {}
        for batch in batches:
            columns = batch.to_pydict()
            for port, key, data, ts in zip(
                columns["port"], columns["key"], columns["data"], columns["ts"]
            ):
                if key is None:
                    unkeyed.append(Row(port=port, key=None, data=data, ts=ts))
                elif KEY_SEPARATOR not in key:  # a partition's keys (see KeyedBuffer)
                    buckets.setdefault(key, []).append(data)
                else:
                    raise RuntimeError(f"internal: a per-key row {key!r} in a whole-input job")
        rows = RowBuffer()
        # Keys in the order transformWithState hands them over: null first, then sorted.
        parts = [processor.pass_through(unkeyed, WHOLE_INPUT_MS)] if unkeyed else []
        parts += [processor.whole_input(key, buckets.pop(key), wall_ms) for key in sorted(buckets)]
        for part in parts:
            for row in part:
                rows.add(row.port, row.key, row.data)
                if rows.ready():
                    yield rows.take(WHOLE_INPUT_MS)
        if rows:
            yield rows.take(WHOLE_INPUT_MS)
        yield from task_end(processor.program, WHOLE_INPUT_MS)

    return df.repartition(key_partitions, "key").mapInArrow(level, ROW_SCHEMA)


def run_job(df: Any, dispatcher: Any, interrupted: threading.Event) -> None:
    """Run the job: ``dispatcher`` collects ``df`` as batch 0 and writes the sinks.

    The job runs in a thread of its own so that Ctrl-C (``interrupted``) can
    cancel it from here; its error, if any, is raised here.
    """
    session = df.sparkSession
    group = f"flowspark-{uuid.uuid4().hex}"
    failure: list[BaseException] = []

    def cancel() -> None:
        if is_connect(session):
            session.interruptTag(group)
        else:
            session.sparkContext.cancelJobGroup(group)

    def job() -> None:
        if is_connect(session):
            session.addTag(group)
        else:
            session.sparkContext.setJobGroup(group, "flowspark bounded run", interruptOnCancel=True)
        try:
            dispatcher(df, 0)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            failure.append(exc)

    extra = {"session": session} if is_connect(session) else {}
    thread = InheritableThread(target=job, daemon=True, **extra)
    thread.start()
    while thread.is_alive():
        if interrupted.is_set():
            cancel()
            thread.join()
            raise KeyboardInterrupt
        thread.join(0.2)
    if failure:
        raise failure[0]
