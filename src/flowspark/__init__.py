"""flowspark: bytewax-style and Numaflow-style streaming dataflows on Apache Spark.

Build a :class:`~flowspark.dataflow.Dataflow`, run it with
:func:`flowspark.testing.run_main` or ``python -m flowspark.run module:flow``.
"""

__version__ = "0.1.0"
