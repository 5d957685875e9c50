"""Every private PySpark API flowspark relies on, fenced in one module.

Each function here reaches into PySpark internals that its public API does not
offer; they were written against :data:`PYSPARK_SERIES`. :func:`check_pyspark`
runs when flowspark starts a session: another major version fails with one
clear message, another 4.x series warns once. When upgrading PySpark, this is
the one file to review.

>>> check_pyspark("4.3.0")
>>> check_pyspark("3.5.1")
Traceback (most recent call last):
...
RuntimeError: flowspark needs PySpark 4.x (written against 4.3); found 3.5.1
"""

from __future__ import annotations

import threading
import warnings
from typing import Any

__all__ = [
    "PYSPARK_SERIES",
    "check_pyspark",
    "detach_accumulator_server",
    "executor_count",
    "is_connect",
    "local_files_without_checksums",
    "processor_init_on_driver",
    "py4j_callback_connections",
]

PYSPARK_SERIES = "4.3"
"""The PySpark release series the private hooks below were written against."""


def check_pyspark(version: str | None = None) -> None:
    """Fail on a PySpark major version other than 4; warn on another 4.x series."""
    if version is None:
        import pyspark  # noqa: PLC0415 pyspark: when Spark starts

        version = pyspark.__version__
    major, _, rest = version.partition(".")
    series = f"{major}.{rest.partition('.')[0]}"
    if major != PYSPARK_SERIES.partition(".")[0]:
        raise RuntimeError(
            f"flowspark needs PySpark 4.x (written against {PYSPARK_SERIES}); found {version}"
        )
    if series != PYSPARK_SERIES:
        warnings.warn(
            f"flowspark was written against PySpark {PYSPARK_SERIES}; found {version}: "
            "its private hooks (flowspark/engine/compat.py) may not fit",
            RuntimeWarning,
            stacklevel=2,
        )


def processor_init_on_driver(handle: Any) -> bool:
    """Whether a ``StatefulProcessor.init`` runs in the driver's schema-collecting pass
    (a fresh process on every query start, which needs nothing but the state
    declared), not in a task. PySpark tells it only by its API client's state."""
    from pyspark.sql.streaming.stateful_processor_api_client import (  # noqa: PLC0415 pyspark: when Spark starts
        StatefulProcessorHandleState,
    )

    client = getattr(handle, "stateful_processor_api_client", None)
    return getattr(client, "handle_state", None) == StatefulProcessorHandleState.PRE_INIT


def py4j_callback_connections(spark_session: Any) -> set[Any]:
    """The py4j connections the JVM opened to this process (one per JVM thread that
    called back into Python), from the session's private gateway."""
    gateway = getattr(getattr(spark_session, "sparkContext", None), "_gateway", None)
    server = getattr(gateway, "_callback_server", None)
    return set(getattr(server, "connections", ()))


def executor_count(spark_session: Any) -> int:
    """How many executors have registered with the session's cluster manager (the
    driver not counted), from the JVM's status tracker."""
    tracker = spark_session.sparkContext._jsc.sc().statusTracker()
    return len(tracker.getExecutorInfos()) - 1


def local_files_without_checksums(spark_session: Any) -> None:
    """Make the driver JVM's cached local Hadoop file system write no ``.crc`` files."""
    context = spark_session.sparkContext
    hadoop_conf = context._jsc.hadoopConfiguration()
    context._jvm.org.apache.hadoop.fs.FileSystem.getLocal(hadoop_conf).setWriteChecksum(False)


def detach_accumulator_server(spark_session: Any) -> None:
    """Let the session's accumulator server stop on its own, so that stopping the
    session does not wait for it.

    PySpark's ``SparkContext.stop`` waits for that server's loop, which sits in a
    handler polling its JVM connection once a second: 0.9 s of every session stop
    (and so of every ``python -m flowspark.run``'s exit), measured here. flowspark
    uses no accumulators. The server is told to stop here, and a daemon thread
    waits for it and closes its socket; ``stop`` then finds no server to wait for.
    """
    context = spark_session.sparkContext
    server = getattr(context, "_accumulatorServer", None)
    if server is None:
        return
    context._accumulatorServer = None
    threading.Thread(target=server.shutdown, name="accumulator-server-stop", daemon=True).start()


def is_connect(spark_session: Any) -> bool:
    """Whether ``spark_session`` is a Spark Connect client session (no JVM here)."""
    return type(spark_session).__module__.startswith("pyspark.sql.connect")
