"""flowspark: bytewax-style and Numaflow-style streaming dataflows on Apache Spark.

Build a :class:`~flowspark.dataflow.Dataflow`, run it with
:func:`flowspark.testing.run_main` or ``python -m flowspark.run module:flow``.
"""

__version__ = "0.1.0"

# pynumaflow's root names (``from pynumaflow import setup_logging`` carries over).
import logging as _logging
import sys as _sys


class StdoutFilter(_logging.Filter):
    """pynumaflow's filter: records below ``ERROR`` go to stdout (the rest to stderr)."""

    def filter(self, record: _logging.LogRecord) -> bool:
        return record.levelno < _logging.ERROR


def setup_logging(name: str | None) -> _logging.Logger:
    """pynumaflow's ``setup_logging``: the logger ``name`` with two more handlers
    (each call adds them again, as in pynumaflow): INFO to WARNING records to stdout,
    ERROR and above to stderr, both as ``%(asctime)s %(levelname)-8s %(message)s``.

    The logger's own level is left as it is (``logging.WARNING`` is inherited by
    default, so call ``setLevel(logging.INFO)`` to see info records).
    """
    formatter = _logging.Formatter(
        fmt="%(asctime)s %(levelname)-8s %(message)s", datefmt="%Y-%m-%d %H:%M:%S"
    )
    logger = _logging.getLogger(name)
    stdout_handler = _logging.StreamHandler(_sys.stdout)
    stdout_handler.setFormatter(formatter)
    stdout_handler.addFilter(StdoutFilter())
    stdout_handler.setLevel(_logging.INFO)
    logger.addHandler(stdout_handler)
    stderr_handler = _logging.StreamHandler(_sys.stderr)
    stderr_handler.setFormatter(formatter)
    stderr_handler.setLevel(_logging.ERROR)
    logger.addHandler(stderr_handler)
    return logger
