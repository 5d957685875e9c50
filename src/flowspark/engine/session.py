"""The SparkSession flowspark runs on: embedded ``local[*]`` unless told otherwise.

One session per process, created on first use and reused by every run (a cold
start costs seconds). Defaults are tuned for small machines: no UI, shuffle
partitions = cores, quiet logs, RocksDB state store with changelog
checkpointing (transformWithState needs it).

Per-micro-batch costs, measured on this 2-core machine with a live keyed flow
(``bench/run.py latency --shape keyed``, Spark's ``triggerExecution`` median):
329 ms with Spark's defaults, 251 ms with the three settings below.

- **No generated code** (:data:`NO_CODEGEN`): the watermark is a literal in the
  predicates Spark generates for a stateful step, so every micro-batch compiled
  new classes (Janino, then the JIT, ~5 classes a batch, metaspace growing for as
  long as the run lasts). flowspark's rows are packed chunks (tens per batch), so
  interpreted expressions cost nothing measurable: 10 M-item streamed wordcount
  and window_count run at the same speed, batch jobs 1-20 % faster.
- **C1 only** (:data:`JVM_FLAGS`): with C2 the JIT compiler threads took 65 % of
  a core 30 s into a run (Spark's planner code, run every batch); C1 compiles it
  cheaply. The same throughput figures hold. C1 alone gets a 48 MB code cache,
  which a live run filled in 2 minutes ("CodeCache is full. Compiler has been
  disabled", a p99 of 1.1 s in that minute): it gets 256 MB, committed as used.
- **No ``.crc`` files** beside checkpoint files (:func:`_write_no_checksums`):
  without Hadoop's native library every file Hadoop's local file system creates
  costs a ``chmod`` process (3.5 ms), a ``.crc`` a second one; offset + commit
  log per batch 20 -> 10 ms.

And one setting against stalls rather than per-batch cost: **state-store
maintenance every 10 s** instead of Spark's 60 s. A maintenance pass uploads the
latest RocksDB snapshot and deletes the versions beyond the 100 kept; at 60 s
one pass lists and deletes a minute's worth of changelog files (~130 per
partition at 4 batches/s), in threads that share the 2 cores with the running
micro-batch, which then took 400-490 ms instead of ~230 (seen 60 s after the
first batch in every keyed 50 k/s run: the p99 of that 10 s slice rose by
100-150 ms). Every 10 s the same work comes in passes of ~40 files, and the
slowest batch of a slice stays near the others (p50 unchanged within noise).

And two against a driver that grows for as long as a run lasts (``bench/run.py
soak``, 2,000 events/s into an accumulator): its live heap after a full GC was
100 MB, yet G1 committed 630 -> 788 MB in 5 minutes and the process grew in
~125 MB steps every 3-4 minutes, 2.1 -> 3.1 GB over 30. Each micro-batch plans
anew and allocates ~1 MB task buffers, which G1's default 2 MB regions treat as
humongous (contiguous, old-generation); it expanded the heap to find room.
**4 MB regions** and **free-ratio bounds** (:data:`JVM_FLAGS`) and a **short
status-store history** when no UI reads it (:data:`UI_RETENTION`) hold the
heap at its first size: committed heap 688 MB from minute 1 to 10, process tree
2.00-2.02 GB. ``$FLOWSPARK_JAVA_OPTS`` adds flags of your own to both JVMs.

And two for a small footprint: **a 64 MB initial heap** (G1 starts at 1/64 of the
machine's memory, 384 MB here, and the free-ratio bounds keep what it committed)
and **``GCTimeRatio=4``** (G1 grows the heap once collections take more than 20 % of
the time, against its default of about 8 %). Measured with ``bench/run.py latency
--rate 5000 --duration 30`` (process tree's peak RSS): stateless 1,637 -> 1,372 MB,
keyed 1,703 -> 1,646 MB, latency unchanged (p99 213 vs 195 ms, 614 vs 592 ms); the
10 M-item ``window_count`` batch job 20.1 -> 18.8 s, 3,886 -> 3,608 MB (those with
``GCTimeRatio=9``). From 9 to 4, with ``--duration 60``: the JVM's RSS in the
stateless run's steady state 744-773 -> 526-583 MB, the keyed run's peak 1,427 ->
1,322 MB; the 10 M ``window_count`` streamed 17.4/18.4 s -> 17.3/17.4 s.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import socket
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from typing import Any

from flowspark.engine import class_archive
from flowspark.engine.compat import (
    check_pyspark,
    detach_accumulator_server,
    executor_count,
    is_connect,
    local_files_without_checksums,
    py4j_callback_connections,
)
from flowspark.engine.errors import FlowRunError
from flowspark.engine.java import find_java_home
from flowspark.engine.jvm_flags import JVM_FLAGS
from flowspark.engine.jvm_output import filtered_jvm_output

__all__ = [
    "JVM_FLAGS",
    "get_session",
    "session_master",
    "session_parallelism",
    "stop_session",
    "wanted_parallelism",
]

_LOCK = threading.Lock()
_SESSION: Any = None
_REMOTE: str | None = None
_PARALLELISM = 2


def local_cores(master: str) -> int | None:
    """Cores of an embedded ``local[...]`` master; ``None`` for a cluster (its
    executors tell, once they have registered).

    >>> local_cores("local[3]"), local_cores("local[1, 4]"), local_cores("spark://h:7077")
    (3, 1, None)
    """
    match = re.fullmatch(r"local\[(\d+)(?:,\s*\d+)?\]", master)
    if match:
        return max(1, int(match.group(1)))
    if master.startswith("local"):
        return os.cpu_count() or 2
    return None


def wanted_parallelism(parallelism: int | None) -> int | None:
    """``parallelism`` or ``$FLOWSPARK_PARALLELISM`` (``None``: follow the master).

    >>> wanted_parallelism(4)
    4
    >>> wanted_parallelism(0)
    Traceback (most recent call last):
    ...
    ValueError: the parallelism must be at least 1; got 0
    """
    if parallelism is None:
        text = os.environ.get("FLOWSPARK_PARALLELISM", "").strip()
        if not text:
            return None
        if not text.isdigit():
            raise ValueError(f"FLOWSPARK_PARALLELISM must be a whole number; got {text!r}")
        parallelism = int(text)
    if parallelism < 1:
        raise ValueError(f"the parallelism must be at least 1; got {parallelism}")
    return parallelism


def _cluster_parallelism(session: Any, master: str, wait_s: float) -> int:
    """The cores of the cluster's executors: waits until at least one has registered
    and their number has held for a second (workers register one after another),
    at most ``wait_s`` seconds; none by then fails with one line."""
    deadline = time.monotonic() + wait_s
    seen, steady_since = 0, time.monotonic()
    while True:
        executors = executor_count(session)
        now = time.monotonic()
        if executors != seen:
            seen, steady_since = executors, now
        if seen > 0 and now - steady_since >= 1.0:
            return int(session.sparkContext.defaultParallelism)
        if now >= deadline:
            if seen > 0:
                return int(session.sparkContext.defaultParallelism)
            raise FlowRunError(
                f"no Spark executor registered with {master} in {wait_s:g} s: are workers "
                "running there, with the cores and memory this application asks for?"
            )
        time.sleep(0.1)


NO_CODEGEN = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}
"""Spark settings that make it interpret expressions instead of generating code."""

UI_RETENTION = {
    "spark.sql.ui.retainedExecutions": "20",
    "spark.ui.retainedJobs": "50",
    "spark.ui.retainedStages": "50",
    "spark.ui.retainedTasks": "1000",
}
"""How much of the run's history Spark's status store keeps when no UI reads it:
its default of 1,000 SQL executions is ~95 k metric objects on the driver's heap
after 8 minutes of 2 micro-batches a second."""


def _log_config(verbose: bool) -> str:
    name = "log4j2-verbose.properties" if verbose else "log4j2-quiet.properties"
    return str(resources.files("flowspark.engine").joinpath(name))


def _prepare_environment() -> None:
    os.environ["JAVA_HOME"] = find_java_home()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # Workers import user modules by reference: give them the driver's path, after
    # the folder whose sitecustomize makes them import pyspark from its installed
    # copy rather than recompiling Spark's pyspark.zip in every new process.
    worker_site = str(resources.files("flowspark.engine").joinpath("worker_site"))
    paths = [worker_site] + [p for p in sys.path if p and os.path.isdir(p)]
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(paths + ([old] if old else []))


def remote_url(remote: str | None = None) -> str | None:
    """The Spark Connect server a run goes to: ``remote``, else ``$FLOWSPARK_REMOTE``,
    else ``$SPARK_REMOTE`` (``sc://host:port``); ``None`` for a classic session.

    >>> remote_url("sc://h:15002")
    'sc://h:15002'
    """
    url = remote or os.environ.get("FLOWSPARK_REMOTE") or os.environ.get("SPARK_REMOTE")
    if url and not url.startswith("sc://"):
        raise ValueError(f"a Spark Connect address looks like sc://HOST:PORT; got {url!r}")
    return url or None


def engine_settings(master: str, cores: int | None, java_opts: str) -> dict[str, str]:
    """The Spark settings flowspark's engine runs with on ``master`` (an embedded
    session's, and a Connect server's that flowspark starts); ``cores`` sets the
    partitions per micro-batch, ``java_opts`` the JVMs' flags."""
    settings = {
        "spark.driver.extraJavaOptions": java_opts,
        "spark.executor.extraJavaOptions": java_opts,
        "spark.driver.maxResultSize": "4g",
        **SESSION_SQL_SETTINGS,
        "spark.python.worker.reuse": "true",
        # Spark keeps one pool of Python workers (one daemon) per set of environment
        # variables. Its Arrow UDFs (mapInArrow) set SPARK_SIMPLIFIED_TRACEBACK=1 and
        # transformWithState does not, so keyed steps had a second daemon whose
        # workers started cold (pandas, pyarrow, flowspark imported again) while the
        # warmed ones idled: measured on a keyed live run, 2 daemons and 4 workers,
        # 310 MB more, against 1 and 2. The variable set for every worker makes one.
        "spark.executorEnv.SPARK_SIMPLIFIED_TRACEBACK": "1",
        # Small state-store maintenance passes, often (see the module's docstring).
        "spark.sql.streaming.stateStore.maintenanceInterval": "10s",
        # A task carries its input part's items when they were read on the driver
        # (in-memory and bytewax-style inputs): 10 M short lines are ~160 MB, more
        # than Spark's 128 MB default for one message to an executor.
        "spark.rpc.message.maxSize": "1024",
    }
    if cores is not None:
        settings["spark.sql.shuffle.partitions"] = str(cores)
        settings["spark.default.parallelism"] = str(cores)
    if master.startswith("local"):
        # Checkpoint logs and state-store changelogs on the local disk: write them
        # through Hadoop's FileSystem (an atomic POSIX rename) instead of its
        # FileContext. Measured here per micro-batch: offset + commit log 89 -> 32 ms,
        # a keyed step's state commit 151 -> 11 ms. (Hadoop's raw local FS, without
        # .crc files, would save more but RocksDB's state store refuses it.)
        settings["spark.sql.streaming.checkpointFileManagerClass"] = (
            "org.apache.spark.sql.execution.streaming.checkpointing."
            "FileSystemBasedCheckpointFileManager"
        )
    return settings


SESSION_SQL_SETTINGS = {
    "spark.sql.streaming.stateStore.providerClass": (
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
    ),
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.session.timeZone": "UTC",
    **NO_CODEGEN,
}
"""SQL settings a run needs, which a Spark Connect client sets on its own session."""


def _connect_session(url: str, parallelism: int | None) -> Any:
    """A Spark Connect session to ``url`` with flowspark's SQL settings; its
    parallelism is the server's ``spark.default.parallelism`` unless given."""
    from pyspark.sql import SparkSession  # noqa: PLC0415 pyspark: when Spark starts

    from flowspark.engine.source import FlowsparkSource  # noqa: PLC0415 pyspark: when Spark starts

    check_pyspark()
    try:
        session = SparkSession.builder.remote(url).getOrCreate()
        for key, value in SESSION_SQL_SETTINGS.items():
            session.conf.set(key, value)
        cores = wanted_parallelism(parallelism)
        if cores is None:
            server = session.conf.get("spark.default.parallelism", None)
            cores = int(server) if server else 2
        session.conf.set("spark.sql.shuffle.partitions", str(cores))
        session.dataSource.register(FlowsparkSource)
    except ImportError as exc:
        raise ImportError(
            f"Spark Connect needs pyspark's client dependencies: pip install "
            f"'flowspark[connect]' ({exc})"
        ) from None
    return session, cores


def get_session(
    master: str | None = None,
    verbose: bool | None = None,
    conf: dict[str, str] | None = None,
    parallelism: int | None = None,
    remote: str | None = None,
) -> Any:
    """Return the process's SparkSession, creating it on first call.

    ``master`` defaults to ``$FLOWSPARK_MASTER`` or ``local[*]``. Later calls
    return the same session whatever they ask for. ``remote`` (or
    ``$FLOWSPARK_REMOTE``/``$SPARK_REMOTE``, ``sc://host:port``) makes it a Spark
    Connect session instead: no JVM here, the server runs everything.

    ``parallelism`` (default ``$FLOWSPARK_PARALLELISM``) is how many partitions a
    micro-batch's keyed and shuffled work is cut into (Spark's shuffle partitions
    and default parallelism). Unset, it follows the master: the ``N`` of
    ``local[N]`` (``local[*]``: this machine's cores), or on a cluster the cores of
    its executors once they have registered (waiting up to
    ``$FLOWSPARK_EXECUTOR_WAIT`` seconds, default 60). A recovery directory keeps
    the number its run started with.
    """
    global _SESSION, _PARALLELISM, _REMOTE
    with _LOCK:
        if _SESSION is not None:
            return _SESSION
        url = remote_url(remote)
        if url is not None:
            _SESSION, _PARALLELISM = _connect_session(url, parallelism)
            _REMOTE = url
            _warm_up(_SESSION, _PARALLELISM)
            atexit.register(stop_session)
            return _SESSION
        if verbose is None:
            verbose = os.environ.get("FLOWSPARK_VERBOSE", "") not in ("", "0")
        master = master or os.environ.get("FLOWSPARK_MASTER") or "local[*]"
        _prepare_environment()
        from pyspark.sql import SparkSession  # noqa: PLC0415 pyspark: when Spark starts

        check_pyspark()

        wanted = wanted_parallelism(parallelism)
        cores = wanted or local_cores(master)
        log_config = f"-Dlog4j2.configurationFile=file:{_log_config(verbose)}"
        extra = os.environ.get("FLOWSPARK_JAVA_OPTS", "")
        java_opts = " ".join((log_config, *JVM_FLAGS, extra))
        settings = engine_settings(master, cores, java_opts)
        # The driver alone maps the class archive (it is made for this classpath); the
        # user's flags stay last, so they still win.
        settings["spark.driver.extraJavaOptions"] = " ".join((*_archive_flags(), java_opts))
        settings["spark.ui.enabled"] = os.environ.get("FLOWSPARK_UI", "false")
        settings["spark.ui.showConsoleProgress"] = "false"
        if settings["spark.ui.enabled"] == "false":
            settings.update(UI_RETENTION)
        # The driver's JVM (also on a cluster: flowspark's driver runs here, client
        # mode) holds a micro-batch's in-memory input parts and what the sinks collect.
        settings["spark.driver.memory"] = os.environ.get("FLOWSPARK_DRIVER_MEMORY", "4g")
        if "FLOWSPARK_EXECUTOR_MEMORY" in os.environ:
            settings["spark.executor.memory"] = os.environ["FLOWSPARK_EXECUTOR_MEMORY"]
        settings.update(conf or {})
        builder = SparkSession.builder.master(master).appName("flowspark")
        for key, value in settings.items():
            builder = builder.config(key, value)
        with contextlib.nullcontext() if verbose else filtered_jvm_output():
            session = builder.getOrCreate()
        session.sparkContext.setLogLevel("WARN" if verbose else "OFF")
        from flowspark.engine.source import FlowsparkSource  # noqa: PLC0415 pyspark: when Spark starts

        with ThreadPoolExecutor(1, thread_name_prefix="flowspark-warm-up") as beside:
            # A local session's warm-up job starts while the data source registers
            # (Spark then starts its lookup_data_sources process): 0.38 s of a start.
            # A local master always knows its cores (local_cores); a cluster's
            # session is not warmed up.
            warming = None
            if cores is not None and master.startswith("local"):
                warming = beside.submit(_warm_up, session, cores)
            session.dataSource.register(FlowsparkSource)
            _write_no_checksums(session)
            if cores is None:
                wait_s = float(os.environ.get("FLOWSPARK_EXECUTOR_WAIT", "60"))
                try:
                    cores = _cluster_parallelism(session, master, wait_s)
                except BaseException:
                    session.stop()
                    raise
                session.conf.set("spark.sql.shuffle.partitions", str(cores))
            if warming is not None:
                warming.result()
        _PARALLELISM = cores
        _SESSION = session
        atexit.register(stop_session)
        return session


ARCHIVE_AT_EXIT: str | None = None
"""Set (to a file) by :func:`flowspark.engine.class_archive.build`'s child process:
its driver writes the classes it loaded there as it exits."""


def _archive_flags() -> list[str]:
    """The driver JVM's class-archive flags: write one at exit, or map the one built."""
    if ARCHIVE_AT_EXIT is not None:
        return [f"-XX:ArchiveClassesAtExit={ARCHIVE_AT_EXIT}", *class_archive.QUIET]
    return class_archive.driver_flags(os.environ["JAVA_HOME"], JVM_FLAGS)


def _write_no_checksums(session: Any) -> None:
    """Make the driver's local Hadoop file system write no ``.crc`` beside the files
    it creates (checkpoint offsets and commits; in local mode, state changelogs too).

    Files that have one are still verified when read; a rename over such a file
    removes its stale ``.crc``.
    """
    local_files_without_checksums(session)


def _identity(batches: Iterator[Any]) -> Iterator[Any]:
    yield from batches


def _warm_up(session: Any, tasks: int) -> None:
    """Run one tiny Arrow job so that the first micro-batch with data does not pay for
    starting the Python workers and loading the JVM's Arrow path. Measured here: the
    first ``mapInArrow`` + ``toArrow`` of a session 0.68 s, the next ones 0.07 s; an
    HTTP pipeline's first micro-batch with data 1.3 s against 0.15 s for later ones."""
    session.range(0, tasks, 1, tasks).mapInArrow(_identity, "id long").toArrow()


def session_master() -> str | None:
    """The master of the process's running session (``None`` before one starts): a
    run joins it whatever master it asks for."""
    with _LOCK:
        if _SESSION is None:
            return None
        if is_connect(_SESSION):  # its recovery files are written on the server
            return str(_REMOTE)
        return str(_SESSION.sparkContext.master)


def session_parallelism() -> int:
    """How many tasks the session runs at once (partitions per micro-batch)."""
    return _PARALLELISM


def stop_session(wait_for_jvm: bool = False) -> None:
    """Stop the process's session (the next :func:`get_session` starts a new one).
    ``wait_for_jvm``: also end the driver's JVM and wait until it has exited (it
    writes a class archive as it exits, see :mod:`flowspark.engine.class_archive`)."""
    global _SESSION
    with _LOCK:
        if _SESSION is not None:
            jvm = getattr(_SESSION.sparkContext._gateway, "proc", None) if wait_for_jvm else None
            try:
                if not is_connect(_SESSION):
                    detach_accumulator_server(_SESSION)
                _SESSION.stop()
            finally:
                _SESSION = None
            if jvm is not None and jvm.stdin is not None:
                jvm.stdin.close()  # the JVM exits when its stdin closes (pyspark's rule)
                jvm.wait(timeout=120)


def callback_connections() -> set[Any]:
    """The py4j connections the JVM opened to this process (one per JVM thread)."""
    return py4j_callback_connections(_SESSION)


def close_callback_connections(keep: set[Any]) -> None:
    """Close connections opened since ``keep`` was taken.

    py4j pins one Python thread to every JVM thread that calls back into
    Python; a finished query's thread is gone but its Python side would wait
    forever. Closing it ends that thread, so repeated runs leak nothing.
    """
    closing = []
    for connection in callback_connections() - keep:
        sock = getattr(connection, "socket", None)
        if sock is None:
            continue
        # Its reader thread sees end-of-stream and closes the connection itself.
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
            closing.append(sock)
    # Give those threads a moment to finish, so a run returns without them.
    deadline = time.monotonic() + 1.0
    while any(sock.fileno() != -1 for sock in closing) and time.monotonic() < deadline:
        time.sleep(0.005)
