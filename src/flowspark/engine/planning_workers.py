"""Spark's Python data-source planning processes, stopped once a long run no longer needs them.

A streaming query over flowspark's Python data source starts three pools of
Python processes on the driver, one daemon and one worker each, to look the
source up, create it and plan its read (``pyspark.sql.worker.lookup_data_sources``,
``create_data_source``, ``plan_data_source_read``). They work once, when the query
starts; afterwards the query's micro-batches go through the streaming source's
runner. Spark keeps the daemons for as long as the session lives (it stops idle
workers after a minute, never the daemons): 260 MB of a small live run's 1.4 GB,
measured (``bench/README.md``, footprint).

:class:`PlanningWorkersRelease` stops the first two as soon as the run's query is
built (its sources were looked up and created then), before the query starts and
its first micro-batch starts the Python workers, so the run's peak holds less; and
the third, which the query's start still uses, after the first micro-batch. Spark
starts them again when a later query of the same session needs them, which costs
that query about 0.5 s (measured: a 100-item streamed flow 0.45 s with them
running, 0.95 s after they were stopped). So a run stops them only when asked
(``RunConfig.release_planning_workers``): the command line and ``run_main`` do,
as a process that runs one flow; tests and notebooks that run many do not.

Spark keeps its worker pools in a private map of ``SparkEnv``; this reads it by
reflection and stops each pool with the pool's own ``stop()``, after which Spark
starts a new daemon on demand. Anything unexpected (a Spark whose internals differ)
leaves the pools as they are.
"""

from __future__ import annotations

import logging
from typing import Any

__all__ = ["PLANNING_MODULES", "SOURCE_MODULES", "stop_planning_workers", "PlanningWorkersRelease"]

log = logging.getLogger(__name__)

SOURCE_MODULES = frozenset(
    {"pyspark.sql.worker.lookup_data_sources", "pyspark.sql.worker.create_data_source"}
)
"""Spark's worker modules that look a Python data source up and create it (when a
query's data frame is built)."""
PLANNING_MODULES = SOURCE_MODULES | {"pyspark.sql.worker.plan_data_source_read"}
"""Spark's worker modules that plan a Python data source's query."""


def stop_planning_workers(spark: Any, modules: frozenset[str] = PLANNING_MODULES) -> list[str]:
    """Stop the driver's worker pools of these planning ``modules`` (see the module
    doc); the modules of the pools stopped."""
    try:
        jvm = spark.sparkContext._jvm
        env = spark.sparkContext._jsc.sc().env()
        # Through java.lang.Class, not a method of SparkEnv's: Py4J's lookup of a method
        # on SparkEnv loads every type its methods name, and one is not on the classpath.
        field = jvm.java.lang.Class.forName("org.apache.spark.SparkEnv").getDeclaredField(
            "pythonWorkers"
        )
        field.setAccessible(True)
        pools = jvm.scala.jdk.javaapi.CollectionConverters.asJava(field.get(env))
        stopped = []
        for entry in list(pools.entrySet().toArray()):
            module = str(entry.getKey().workerModule())
            if module in modules:
                entry.getValue().stop()
                stopped.append(module)
        return sorted(stopped)
    except Exception as exc:  # Spark internals not as expected: leave them running
        log.debug("planning workers left running: %s", exc)
        return []


class PlanningWorkersRelease:
    """A run listener made once the query is built: it stops the source lookup and
    creation pools then, the read planning pool after the first micro-batch."""

    def __init__(self, spark: Any) -> None:
        self.spark = spark
        self.done = False
        stop_planning_workers(spark, SOURCE_MODULES)

    def on_batch(self, progress: Any) -> None:
        if not self.done:
            self.done = True
            stop_planning_workers(self.spark, PLANNING_MODULES - SOURCE_MODULES)
