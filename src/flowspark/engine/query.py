"""Compile a plan to ONE Structured Streaming query and run it.

    inputs (Python data sources, level 0 fused in)  ──union──▶
    [ repartition ▶ mapInArrow(level k program) ] per exchange level  ──▶
    foreachBatch(BatchDispatcher)

The query's checkpoint is the recovery directory; without one a temporary
directory is used and removed afterwards. A bounded run without one whose
inputs fit a single micro-batch runs the same plan as one batch job instead
(:mod:`flowspark.engine.bounded`).
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import json
import logging
import os
import pickle
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import cloudpickle

from flowspark.api.dataflow import Dataflow
from flowspark.api.inputs import SeekableInput
from flowspark.api.sources import AbortExecution
from flowspark.connectors.memory import TestingInput, TestingOutput
from flowspark.engine.compat import is_connect
from flowspark.engine.errors import FlowRunError, clean_spark_error, warn_late_items
from flowspark.engine.observe import ProgressHub, ProgressLog, ReportBuilder, RunListener, RunReport
from flowspark.engine.planning_workers import PlanningWorkersRelease
from flowspark.engine.progress import watch_run
from flowspark.engine.recovery_check import check_recovery_directory
from flowspark.engine.recovery_damage import name_damage
from flowspark.engine.recovery_lock import RecoveryLock, hold
from flowspark.engine.session import (
    callback_connections,
    close_callback_connections,
    get_session,
    remote_url,
    session_master,
    session_parallelism,
)
from flowspark.engine.shipping import is_installed, ship_user_modules
from flowspark.engine.sink import SINKS_DIR, BatchDispatcher
from flowspark.engine.vertex_marks import MARKS_FILE
from flowspark.plan.graph import Plan, build_plan
from flowspark.runtime import pickling
from flowspark.runtime.codec import ROW_SCHEMA, decode_items
from flowspark.runtime.compile import CompiledFlow, CompiledLevel, compile_flow, with_run_tokens
from flowspark.runtime.input_offsets import InputSpec, whole_input_splits
from flowspark.runtime.numaflow.handler_host import host_stats, start_hosts, stop_hosts
from flowspark.runtime.storage import Location, StorageError

__all__ = ["RunConfig", "RunReport", "LateItemsWarning", "run_flow"]

log = logging.getLogger(__name__)


@dataclass
class RunConfig:
    """How to run a flow.

    ``bounded=False`` (the default, as bytewax's ``run``): run until every input
    has ended, however its source paces itself; forever if one never ends.
    ``bounded=True``: stop at what is available now (each input's end offsets
    when the run starts; a bytewax-style source until it first has nothing at
    once). ``epoch_interval=timedelta(0)`` makes every source batch its own
    micro-batch (epoch), as in bytewax. ``trigger_interval``: the least time
    between two micro-batches' starts (default: as soon as data is there).
    ``max_batch_items``: the most items one micro-batch reads from each input
    (whole source batches; Spark's ``maxOffsetsPerTrigger``), so a backlog is
    worked off in several micro-batches. ``batch_job``: a run without a recovery
    directory whose inputs fit one micro-batch runs as one Spark batch job (same
    results, about 1 s less fixed cost, see ``engine/bounded.py``); ``False``
    streams it anyway. ``listeners``: :class:`~flowspark.engine.observe.RunListener` s
    told about every finished micro-batch (or the batch job). Watching a run
    (:mod:`flowspark.engine.progress`): ``progress`` a live display on stderr
    (``None``: when stderr is a terminal), ``progress_json`` a file of one JSON line
    per micro-batch, ``metrics_port`` a Prometheus endpoint on ``metrics_host``.
    ``parallelism``: partitions per micro-batch (default: the master's cores, see
    :func:`~flowspark.engine.session.get_session`). ``recovery_shared``: the
    recovery directory, a path, is on storage that the driver and every worker
    mount at that same path (required with a path on a non-local master).
    ``remote``: a Spark Connect server (``sc://host:port``; default
    ``$FLOWSPARK_REMOTE`` or ``$SPARK_REMOTE``) that runs the flow; outputs are
    still written here, in this process. ``release_planning_workers``: stop Spark's
    Python processes that planned a streamed run's query (260 MB), those that looked
    its sources up and created them once the query is built, the read planner after
    the first micro-batch (a later run in this process starts them again, 0.5 s; see
    :mod:`flowspark.engine.planning_workers`); the command line and ``run_main`` set it.
    """

    bounded: bool = False
    recovery_dir: str | None = None
    epoch_interval: timedelta | None = None
    trigger_interval: timedelta | None = None
    master: str | None = None
    verbose: bool | None = None
    max_batch_items: int | None = None
    batch_job: bool = True
    listeners: Sequence[RunListener] = ()
    progress: bool | None = None
    progress_json: str | None = None
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"
    parallelism: int | None = None
    recovery_shared: bool = False
    remote: str | None = None
    release_planning_workers: bool = False


def _register_user_modules(plan: Plan) -> None:
    """Pickle the user's own modules by value, so workers need not import them."""
    objects: list[Any] = []
    for step in plan.steps:
        objects.extend(step.fns.values())
        objects.extend(step.args.values())
    for obj in objects:
        name = getattr(obj, "__module__", None) or type(obj).__module__
        module = sys.modules.get(name or "")
        path = getattr(module, "__file__", None)
        if module is None or not path or name == "__main__" or name.startswith("flowspark"):
            continue
        if not is_installed(path):
            cloudpickle.register_pickle_by_value(module)


def _local(spark: Any) -> bool:
    """Whether executors share this machine's disk (a ``local`` master, not through
    Spark Connect: its server may be anywhere)."""
    return not is_connect(spark) and spark.sparkContext.master.startswith("local")


def _for_run(inp: Any, spill_dir: Path | None) -> Any:
    """An input as this run ships it to Spark (see ``SeekableInput.for_run``)."""
    if isinstance(inp, SeekableInput):
        return inp.for_run(str(spill_dir) if spill_dir is not None else None)
    return inp


def _tick_ms(config: RunConfig) -> int:
    """How often an idle unbounded stateful flow ticks its clock (timers need batches)."""
    interval = config.trigger_interval or timedelta(seconds=1)
    return max(100, int(interval.total_seconds() * 1000))


def _per_batch(config: RunConfig) -> bool:
    """Whether every source batch is its own micro-batch (``epoch_interval=0``)."""
    return config.epoch_interval is not None and config.epoch_interval <= timedelta(0)


def _check_connectors(plan: Plan) -> None:
    """Fail before Spark starts when an input cannot be read at all, or an output
    that can check itself (a broker's) cannot be written."""
    checks: list[tuple[str, int, Any]] = [
        ("input", i, plan.step(i).args["input"].list_parts)
        for i in plan.inputs
        if isinstance(plan.step(i).args["input"], SeekableInput)
    ]
    checks += [
        ("output", o, check)
        for o in plan.outputs
        if (check := getattr(plan.step(o).args["output"], "check", None)) is not None
    ]
    for kind, index, check in checks:
        try:
            check()
        except Exception as exc:
            raise type(exc)(f"{kind} {plan.step(index).step_id!r}: {exc}") from exc


def _stage_function(program_bytes: bytes, entries: frozenset[int], spread: int) -> Any:
    """The ``mapInArrow`` function of a level after a ``redistribute``."""

    def stage(batches: Iterator[Any]) -> Iterator[Any]:
        from flowspark.runtime.task import rows_to_batch, run_program, task_context, task_end  # noqa: PLC0415 pyarrow: tasks only

        program = pickle.loads(program_bytes)
        ctx = task_context()
        latest = 0
        for batch in batches:
            ports = batch.column(0).to_pylist()
            keys = batch.column(1).to_pylist()
            datas = batch.column(2).to_pylist()
            times = [t // 1000 for t in batch.column(3).cast("int64").to_pylist()]
            feeds = []
            passing: tuple[list, list, list, list] = ([], [], [], [])
            for port, key, data, t in zip(ports, keys, datas, times):
                if port in entries:
                    feeds.append((port, decode_items(data)))
                else:
                    for column, value in zip(passing, (port, key, data, t)):
                        column.append(value)
            if passing[0]:
                yield rows_to_batch(*passing)
            if feeds:
                at = max(times)
                latest = max(latest, at)
                yield from run_program(program, feeds, ctx, spread, at)
        yield from task_end(program, latest)

    return stage


def recovery_location(location: str) -> Location:
    """The recovery directory given as a local path or a filesystem URI.

    Spark writes the query's checkpoint there through its Hadoop filesystem;
    flowspark's own files (sink snapshots, run tokens) go through
    :mod:`flowspark.runtime.storage`, which opens the same URI with pyarrow.

    >>> recovery_location("file:///tmp/rec").path, recovery_location("s3a://b/ckpt").uri
    ('/tmp/rec', 's3a://b/ckpt')
    >>> try:
    ...     recovery_location("ftp://host/ckpt")
    ... except ValueError as exc:
    ...     print(str(exc).split(" (")[0])
    recovery directory 'ftp://host/ckpt': ftp://host/ckpt: no filesystem for ftp://
    """
    try:
        return Location.parse(location)
    except StorageError as exc:
        raise ValueError(f"recovery directory {location!r}: {exc}") from None


def check_recovery_storage(location: str, master: str | None, shared: bool = False) -> Location:
    """The recovery directory, if a run on ``master`` can use it.

    On a cluster each worker keeps a keyed step's state in the recovery directory:
    a plain path there names a folder on every worker's own disk unless the path is
    on storage they all mount, which only the user knows (``shared``). A URI of a
    filesystem that cannot be reached from here fails with one line.

    >>> check_recovery_storage("/tmp/rec", "local[2]").path
    '/tmp/rec'
    >>> check_recovery_storage("/mnt/nfs/rec", "spark://h:7077", shared=True).path
    '/mnt/nfs/rec'
    >>> try:
    ...     check_recovery_storage("/tmp/rec", "spark://h:7077")
    ... except ValueError as exc:
    ...     print(str(exc).split(":")[0])
    recovery directory '/tmp/rec' is a path on this machine, but the run goes to spark
    """
    where = recovery_location(location)
    master = master or os.environ.get("FLOWSPARK_MASTER") or "local[*]"
    if where.is_local:
        if not (shared or master.startswith("local")):
            raise ValueError(
                f"recovery directory {location!r} is a path on this machine, but the run "
                f"goes to {master}, whose workers would keep state on their own disks: put "
                "it on storage that every worker mounts at the same path and say so with "
                "--shared-recovery (RunConfig(recovery_shared=True)), or give a URI "
                "(hdfs://, s3a://, ...)"
            )
        return where
    try:
        if where.is_file():
            raise StorageError(f"{where.shown}: a file is there, not a directory")
        bucket = where.bucket()
        if bucket is not None and not bucket.is_dir():
            raise StorageError(
                f"{where.shown}: bucket {bucket.path!r} does not exist (or these "
                "credentials cannot see it)"
            )
    except StorageError as exc:
        raise ValueError(f"recovery directory: {exc}") from None
    return where


def check_spark_filesystem(spark: Any, where: Location) -> None:
    """Fail in one line, before the query starts, when Spark's JVM has no Hadoop
    filesystem for ``where``'s scheme (``s3a://`` needs ``hadoop-aws`` on the
    classpath); a Spark Connect session checks on the server when the query starts."""
    if where.is_local:
        return
    jvm = getattr(spark, "_jvm", None)
    jsc = getattr(spark, "_jsc", None)
    if jvm is None or jsc is None:
        return
    try:
        jvm.org.apache.hadoop.fs.FileSystem.getFileSystemClass(
            where.scheme, jsc.hadoopConfiguration()
        )
    except Exception as exc:
        java = getattr(exc, "java_exception", None)
        reason = str(java.getMessage()) if java is not None else str(exc)
        reason = reason.strip().splitlines()[0] if reason.strip() else type(exc).__name__
        hint = (
            " (add org.apache.hadoop:hadoop-aws, of Spark's Hadoop version, to spark.jars.packages)"
            if where.scheme.startswith("s3")
            else ""
        )
        raise ValueError(
            f"recovery directory {where.shown!r}: Spark cannot write its checkpoint "
            f"there: {reason}{hint}"
        ) from None


@contextlib.contextmanager
def _run_directory(config: RunConfig) -> Iterator[tuple[Path, Location]]:
    scratch = Path(tempfile.mkdtemp(prefix="flowspark-"))
    try:
        if config.recovery_dir:
            checkpoint = recovery_location(config.recovery_dir)
            try:
                checkpoint.make_dirs()
            except StorageError as exc:
                raise ValueError(f"recovery directory: {exc}") from None
        else:
            checkpoint = Location.parse(scratch / "checkpoint")
        yield scratch, checkpoint
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def run_flow(flow: Dataflow, config: RunConfig | None = None) -> RunReport:
    """Validate ``flow``, start Spark if needed, run the query; raise the user's error.

    A recovery directory is held for the run (a second run on it fails at once) and
    refused when its files do not add up, both before Spark starts, with a
    :class:`~flowspark.engine.errors.RecoveryDirectoryError`.

    Late items of a window step whose ``.late`` stream leads nowhere are reported
    with a warning (they are counted, never dropped unseen).
    """
    config = config or RunConfig()
    directory: Location | None = None
    if config.recovery_dir:  # a directory it cannot use fails before Spark starts
        master = session_master() or remote_url(config.remote) or config.master
        directory = check_recovery_storage(config.recovery_dir, master, config.recovery_shared)
    plan = build_plan(flow)
    if directory is None:
        return _run_planned(flow, plan, config)
    # One run per recovery directory, and only one whose files add up (see
    # engine/recovery_lock.py and engine/recovery_check.py): before Spark starts.
    with hold(directory) as lock:
        committed = check_recovery_directory(directory, plan)
        return _run_planned(flow, plan, config, lock, resuming=committed is not None)


def _run_planned(
    flow: Dataflow,
    plan: Plan,
    config: RunConfig,
    lock: RecoveryLock | None = None,
    resuming: bool = False,
) -> RunReport:
    """:func:`run_flow` once the flow is planned (and its recovery directory held)."""
    _check_connectors(plan)
    _register_user_modules(plan)
    spark = get_session(
        config.master, config.verbose, parallelism=config.parallelism, remote=config.remote
    )
    if config.recovery_dir:
        check_spark_filesystem(spark, recovery_location(config.recovery_dir))
    if not _local(spark):  # executors do not share the driver's sys.path
        ship_user_modules(spark, Path(tempfile.mkdtemp(prefix="flowspark-ship-")))
    parallelism = session_parallelism()
    compiled = compile_flow(plan, int(spark.conf.get("spark.sql.shuffle.partitions")))
    if not config.bounded and _local(spark) and _always_streams(compiled, config):
        _warm_keyed_path(spark, compiled, parallelism)  # before a service (HTTP) listens
    with contextlib.ExitStack() as services:  # e.g. an HTTP source's server
        for service in flow.services:
            services.enter_context(service)
        watchers = services.enter_context(
            watch_run(
                plan,
                title=flow.flow_id,
                progress=config.progress,
                progress_json=config.progress_json,
                metrics_port=config.metrics_port,
                metrics_host=config.metrics_host,
            )
        )
        config = dataclasses.replace(config, listeners=[*watchers, *config.listeners])
        report = _execute(spark, compiled, config, parallelism, flow.services, lock, resuming)
    _warn_unrouted_late(plan, report)
    return report


def _execute(
    spark: Any,
    compiled: CompiledFlow,
    config: RunConfig,
    parallelism: int,
    services: Sequence[Any] = (),
    lock: RecoveryLock | None = None,
    resuming: bool = False,
    warming: bool = False,
) -> RunReport:
    """Map the compiled levels onto Spark (a stream, or one batch job) and run them.

    ``lock``: this run's hold on the recovery directory, checked before each batch
    is written; ``resuming``: Spark has committed batches there; ``warming``: this is
    :func:`_warm_keyed_path`'s run (no progress log)."""
    with _run_directory(config) as (scratch, checkpoint):
        marks_at = checkpoint.child(MARKS_FILE) if compiled.vertex_marks else None
        spill_dir = scratch if _local(spark) else None
        dispatcher = BatchDispatcher(
            compiled.plan,
            checkpoint.child(SINKS_DIR),
            guard=lock.check if lock is not None else None,
            resuming=resuming,
            marks_at=marks_at,
        )
        try:
            # Outputs written on the executors name their writes by the run's tokens.
            compiled = with_run_tokens(compiled, dispatcher.run_tokens)
            whole = _batch_job_reads(compiled, config, spill_dir, parallelism)
            hosts: dict[str, list[Any]] = {}  # the handler hosts this driver started, by run
            try:
                if whole is None and not config.bounded and _local(spark):  # a live run
                    hosts = _start_handler_hosts(compiled)
                where = _RunPlaces(scratch, checkpoint, spill_dir)
                return _run_levels(
                    spark,
                    compiled,
                    config,
                    parallelism,
                    services,
                    dispatcher,
                    where,
                    whole,
                    warming,
                )
            finally:
                if _local(spark):
                    _stop_handler_hosts(compiled, hosts)
        finally:
            dispatcher.close()


@dataclass(frozen=True)
class _RunPlaces:
    """Where a run keeps things: its ``scratch`` directory, its ``checkpoint`` (the
    recovery directory) and where inputs may spill (``None``: nowhere)."""

    scratch: Path
    checkpoint: Location
    spill_dir: Path | None


def _run_levels(
    spark: Any,
    compiled: CompiledFlow,
    config: RunConfig,
    parallelism: int,
    services: Sequence[Any],
    dispatcher: BatchDispatcher,
    where: _RunPlaces,
    whole: tuple[dict[int, bytes], list[tuple[int, bytes]]] | None,
    warming: bool,
) -> RunReport:
    """Build the query of ``compiled``'s levels (one batch job when ``whole`` gives its
    reads) and run it through ``dispatcher``."""
    from flowspark.engine import bounded  # noqa: PLC0415 pyspark: when Spark starts

    streamed = whole is None
    scratch, checkpoint, spill_dir = where.scratch, where.checkpoint, where.spill_dir
    marks_at = dispatcher.marks_at
    if whole is not None:  # one batch job (see engine/bounded.py)
        df = bounded.read_frame(spark, *whole, parallelism)
        wall_ms = time.time_ns() // 1_000_000  # the system time keyed steps see

        def apply_keyed(df: Any, processor: Any, first: bool) -> Any:
            return bounded.bounded_keyed_level(df, processor, compiled.key_partitions, wall_ms)

    else:
        df = _stream_frame(spark, compiled, config, scratch, spill_dir, parallelism, marks_at)
        apply_keyed = _keyed_stream_level
    df = _apply_levels(df, compiled.levels, apply_keyed, parallelism)

    builder = ReportBuilder(streamed)
    listeners: list[RunListener] = [builder, *config.listeners]
    # A flow's services that watch the run (an HTTP source's /health).
    listeners += [s for s in services if isinstance(s, RunListener)]
    if os.environ.get("FLOWSPARK_PROGRESS_LOG") and not warming:
        listeners.append(ProgressLog(os.environ["FLOWSPARK_PROGRESS_LOG"]))
    if streamed and config.release_planning_workers and not is_connect(spark):
        listeners.append(PlanningWorkersRelease(spark))
    figures = _handler_figures(compiled) if _local(spark) else None
    hub = ProgressHub(listeners, streamed, figures)
    dispatcher.hub = hub
    connections = callback_connections()
    try:
        with _ctrl_c_flag() as interrupted:
            if whole is not None:
                bounded.run_job(df, dispatcher, interrupted)
                hub.job_done()
            else:
                _run_stream(df, dispatcher, config, checkpoint, interrupted, hub)
    except KeyboardInterrupt:
        raise
    except Exception as exc:
        error = dispatcher.error or clean_spark_error(exc)
        if isinstance(error, AbortExecution):  # an input stopped the run: it ends
            _aborted(compiled, error, builder.report)
            return builder.report
        if isinstance(error, FlowRunError):  # not the user's: a damaged directory?
            error = name_damage(f"{exc}\n{error}", checkpoint) or error
        error.__suppress_context__ = True  # keep __cause__ (the user's error), drop Spark's
        raise error  # noqa: B904 - the cause is set deliberately above
    finally:
        close_callback_connections(connections)
    if dispatcher.error is not None:
        raise dispatcher.error
    return builder.report


def _aborted(compiled: CompiledFlow, error: BaseException, report: RunReport) -> None:
    """An input raised ``AbortExecution``: the run ends here, as bytewax's does. Its
    input hears of it (``aborted(error)``: a ``TestingSource`` goes past that
    ``ABORT`` the next time)."""
    step_id = getattr(error, "step_id", None)
    report.aborted = step_id
    log.info("input %r aborted the run (%s); it stops here", step_id, error)
    for inp in compiled.inputs:
        hook = getattr(inp.input, "aborted", None)
        if inp.step_id == step_id and hook is not None:
            hook(error)


_KEYED_PATH_WARM = False


def _warm_keyed_path(spark: Any, compiled: CompiledFlow, parallelism: int) -> None:
    """Before a session's first live (unbounded, streamed) run with a keyed step,
    stream two items through a keyed step once, so that the run's first micro-batch
    does not pay for Spark's first transformWithState work (its classes, the state
    server, RocksDB's first open).

    Measured here (an accumulator fed 2 000 events/s): the first micro-batch 3.0 s
    cold, 1.0-1.1 s after this ~2.7 s warm-up, which runs before the run's inputs
    start and its services (an HTTP source's server) listen, so a live source's events
    do not wait on it. A bounded run would only take longer in all, so it starts none.
    """
    global _KEYED_PATH_WARM
    if _KEYED_PATH_WARM or not any(level.keyed for level in compiled.levels):
        return
    _KEYED_PATH_WARM = True
    flow = Dataflow("flowspark-warm-up")
    flow.input("items", TestingInput([("a", 1), ("b", 2)]))
    flow.stateful_map("sum", int, _add)
    flow.output("out", TestingOutput([]))
    compiled = compile_flow(build_plan(flow), parallelism)
    _execute(spark, compiled, RunConfig(batch_job=False), parallelism, warming=True)


def _add(total: int, value: int) -> tuple[int, int]:
    return total + value, total + value


def _handler_figures(compiled: CompiledFlow) -> Any:
    """A function giving, per Numaflow keyed step, its handler hosts' figures summed
    (hosts on this machine; ``None`` when the flow has no such step)."""
    runs = [run_id for level in compiled.levels for run_id in level.host_runs]
    if not runs:
        return None

    def figures() -> dict[str, dict[str, int]]:
        total: dict[str, dict[str, int]] = {}
        for run_id in runs:
            for host in host_stats(run_id, compiled.key_partitions):
                for step_id, figure in host.items():
                    step = total.setdefault(step_id, {"handler_hosts": 0})
                    step["handler_hosts"] += 1
                    for name in ("open_handlers", "rebuilds", "wal_datums"):
                        step[name] = step.get(name, 0) + figure[name]
                    mark = figure["outbound_watermark_ms"]
                    if mark >= 0:
                        seen = step.get("outbound_watermark_ms")
                        step["outbound_watermark_ms"] = mark if seen is None else min(seen, mark)
        return total

    return figures


def _start_handler_hosts(compiled: CompiledFlow) -> dict[str, list[Any]]:
    """Start the resident handler hosts of the run's Numaflow steps ahead of its tasks
    (else each task that needs one starts it, 0.3-0.6 s into its micro-batch)."""
    return {
        run_id: start_hosts(run_id, compiled.key_partitions)
        for level in compiled.levels
        for run_id in level.host_runs
    }


def _stop_handler_hosts(compiled: CompiledFlow, started: dict[str, list[Any]]) -> None:
    """Stop the resident handler hosts of the run's Numaflow steps on this machine, and
    reap those this driver ``started``."""
    for level in compiled.levels:
        for run_id in level.host_runs:
            stop_hosts(run_id, compiled.key_partitions, started.get(run_id, ()))


def _keyed_stream_level(df: Any, processor: Any, first: bool) -> Any:
    from flowspark.engine.stateful import streaming_keyed_level  # noqa: PLC0415 pyspark: when Spark starts

    return streaming_keyed_level(df, processor, first)


def _apply_levels(df: Any, levels: list[CompiledLevel], apply_keyed: Any, parallelism: int) -> Any:
    """Each level after the inputs' on ``df``: a keyed level's processor (through
    ``apply_keyed``), or a repartitioned ``mapInArrow`` after a ``redistribute``."""
    from flowspark.engine.stateful import LevelProcessor  # noqa: PLC0415 pyspark: when Spark starts

    first_keyed = True
    for level in levels:
        if level.keyed:
            assert level.logics is not None
            processor = LevelProcessor(level.program, level.logics, parallelism, level.uses_wal)
            df = apply_keyed(df, processor, first_keyed)
            first_keyed = False
        else:
            fn = _stage_function(level.program, level.entries, parallelism)
            df = df.repartition(parallelism).mapInArrow(fn, ROW_SCHEMA)
    return df


def _always_streams(compiled: CompiledFlow, config: RunConfig) -> bool:
    """Whether the run streams whatever its inputs hold (else :func:`_batch_job_reads`
    decides). Inputs read in the planning process always stream: this says so before
    any data is spilled."""
    return (
        not config.batch_job
        or bool(config.recovery_dir)
        or _per_batch(config)
        or not all(isinstance(i.input, SeekableInput) for i in compiled.inputs)
    )


def _batch_job_reads(
    compiled: CompiledFlow, config: RunConfig, spill_dir: Path | None, parallelism: int
) -> tuple[dict[int, bytes], list[tuple[int, bytes]]] | None:
    """For a run that can be one batch job: the level-0 programs by input and the
    read tasks ``(input, pickled split)``. It can when it is bounded, has nothing
    to recover, and a fresh run's first micro-batch would hold every input whole
    (such inputs end there, so "until they end" and "what is available now" agree)."""
    if _always_streams(compiled, config):
        return None
    programs: dict[int, bytes] = {}
    reads: list[tuple[int, bytes]] = []
    for compiled_input in compiled.inputs:
        # As the stream's planning process would see it (TestingInput spills its data).
        spilled = pickle.loads(pickling.dumps(_for_run(compiled_input.input, spill_dir)))
        splits = whole_input_splits(
            spilled, parallelism, config.max_batch_items, until_end=not config.bounded
        )
        if splits is None:
            return None
        programs[compiled_input.entry] = compiled_input.program
        reads.extend((compiled_input.entry, pickling.dumps(split)) for split in splits)
    return programs, reads


def _stream_frame(
    spark: Any,
    compiled: CompiledFlow,
    config: RunConfig,
    scratch: Path,
    spill_dir: Path | None,
    parallelism: int,
    marks_at: Location | None = None,
) -> Any:
    """The flow's inputs as one streaming DataFrame: ONE Python data source reads
    them all, so the flow's clock ends only when every input has ended.

    ``marks_at``: the file of the vertex watermark (engine/vertex_marks.py)."""
    from flowspark.engine.source import SourceSpec  # noqa: PLC0415 pyspark: when Spark starts

    inputs = [
        InputSpec(
            input=_for_run(i.input, spill_dir),
            entry=i.entry,
            step_id=i.step_id,
            program=i.program,
        )
        for i in compiled.inputs
    ]
    trigger = config.trigger_interval
    stateful = compiled.stateful
    spec = SourceSpec(
        inputs=inputs,
        per_batch_epochs=_per_batch(config),
        parallelism=parallelism,
        spread=parallelism,
        stateful=stateful,
        until_end=not config.bounded,
        pause_live=config.bounded and bool(config.recovery_dir),
        tick_ms=_tick_ms(config) if stateful and not config.bounded else None,
        trigger_ms=int(trigger.total_seconds() * 1000) if trigger else 0,
        max_batch_items=config.max_batch_items,
        event_time=compiled.event_time,
        vertex_marks=marks_at.spec if marks_at is not None else None,
    )
    if is_connect(spark):  # the server plans the query: the spec travels in the plan
        inline = base64.b64encode(pickling.dumps(spec)).decode("ascii")
        return spark.readStream.format("flowspark").option("spec_b64", inline).load()
    path = scratch / "inputs.spec"
    path.write_bytes(pickling.dumps(spec))
    return spark.readStream.format("flowspark").option("spec", str(path)).load()


def _run_stream(
    df: Any,
    dispatcher: Any,
    config: RunConfig,
    checkpoint: Location,
    interrupted: threading.Event,
    hub: ProgressHub,
) -> None:
    """Start the streaming query writing through ``dispatcher`` and wait for its end.

    The trigger is always ``availableNow``: the source decides when the run ends
    (every input ended, or nothing more available now with ``bounded``) and
    paces batches itself (``trigger_interval``), see ``engine/source.py``.
    """
    with contextlib.ExitStack() as stack:
        function: Any = dispatcher
        if is_connect(df.sparkSession):  # foreachBatch runs on the server
            from flowspark.engine.delivery import DeliveryServer, client_address  # noqa: PLC0415 pyarrow: Spark Connect only

            address = client_address(str(session_master()))
            server = stack.enter_context(DeliveryServer(dispatcher.deliver, address))
            function = server.forwarder(address)
        writer = df.writeStream.foreachBatch(function).option(
            "checkpointLocation", checkpoint.for_spark()
        )
        failures = 0
        while True:
            query = writer.trigger(availableNow=True).start()
            try:
                _await(query, interrupted, hub)
                return
            except Exception as exc:
                if query.lastProgress is not None:
                    failures = 0  # it ran micro-batches: a new failure, not the same one
                failures += 1
                cause = dispatcher.error or exc  # a failure inside foreachBatch, or Spark's
                if failures == START_ATTEMPTS or not worker_slow_to_start(cause):
                    raise
                dispatcher.error = None
                print(
                    "flowspark: a Spark Python worker was slow to start (a busy machine?); "
                    "resuming the query from its checkpoint",
                    file=sys.stderr,
                )


# How often in a row a query is resumed after Spark gave up waiting for one of its
# Python workers to connect back (Spark waits 10 s; a machine busy enough makes a
# worker's start take longer). The query resumes from its checkpoint as after a crash:
# the driver's sinks wrote nothing of the failed micro-batch (its rows are collected
# before they write), so it is run again and they lose and repeat nothing; outputs
# written on the executors may have written part of it and write it again under the
# same names (runtime/executor_writes.py), as after a crash.
START_ATTEMPTS = 3


def worker_slow_to_start(error: BaseException) -> bool:
    """Whether ``error`` ended a query because a Python worker did not connect back to
    Spark in time (while the query started, or later, when Spark started another).

    >>> worker_slow_to_start(RuntimeError("Python worker failed to connect back."))
    True
    >>> worker_slow_to_start(RuntimeError("Python worker exited unexpectedly (crashed)"))
    False
    """
    return "Python worker failed to connect back" in str(error)


def _warn_unrouted_late(plan: Plan, report: RunReport) -> None:
    routed = {
        plan.step(i).step_id
        for i in range(len(plan.steps))
        if any(slot == 1 for _, slot in plan.children[i])
    }
    for step_id, count in report.late_counts.items():
        if count and step_id not in routed:
            warn_late_items(plan.steps, step_id, count, LateItemsWarning)


class LateItemsWarning(UserWarning):
    """A window step had late items that no step consumed."""


@contextlib.contextmanager
def _ctrl_c_flag() -> Iterator[threading.Event]:
    """Turn SIGINT into a flag while a query runs.

    PySpark's own handler calls into the JVM from inside the signal handler,
    which breaks the py4j call the main thread is in (pages of py4j errors).
    A flag checked between short waits stops the query cleanly instead.
    """
    flag = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield flag
        return
    previous = signal.signal(signal.SIGINT, lambda signum, frame: flag.set())
    try:
        yield flag
    finally:
        signal.signal(signal.SIGINT, previous)


def _await(query: Any, interrupted: threading.Event, hub: ProgressHub) -> None:
    """Wait for the query in short slices; stop it and raise KeyboardInterrupt on Ctrl-C.

    Each finished micro-batch's Spark progress goes to ``hub`` (its listeners; with
    ``$FLOWSPARK_PROGRESS_LOG`` one appends it to that file as JSON lines).
    """
    progress = _NewProgress(query)
    while query.isActive:
        if interrupted.is_set():
            query.stop()
            raise KeyboardInterrupt
        query.awaitTermination(0.2)
        progress.hand_to(hub)
    progress.hand_to(hub)
    hub.finish()
    # Surface a failure that ended the query between two polls.
    query.awaitTermination()


class _NewProgress:
    """A query's progress reports not handed on yet.

    Each poll reads only the query's last report (one JSON document from the
    JVM). Spark's ``recentProgress`` turns every retained report (up to 100) into
    JSON and back at each call; polled five times a second, that cost a loaded
    run's driver more CPU than its micro-batches' bookkeeping. The retained list
    is read only when reports were missed between two polls.
    """

    def __init__(self, query: Any) -> None:
        self.query = query
        self.last_batch = -1

    def hand_to(self, hub: ProgressHub) -> None:
        last = self.query.lastProgress
        if last is None or last.batchId <= self.last_batch:
            return
        if last.batchId == self.last_batch + 1:
            fresh = [last]
        else:
            fresh = [p for p in self.query.recentProgress if p.batchId > self.last_batch]
        for progress in fresh:
            hub.spark_progress(json.loads(progress.json))
        if fresh:
            self.last_batch = fresh[-1].batchId
