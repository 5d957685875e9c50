"""Helpers for tests and examples: in-memory input/output and ``run_main``.

bytewax 0.17's ``TestingInput``/``TestingOutput`` and bytewax 0.21's
``TestingSource``/``TestingSink`` (see :mod:`flowspark.connectors.testing_sources`);
``run_main`` runs a flow built with either API.

>>> from flowspark.dataflow import Dataflow
>>> from flowspark.testing import TestingInput, TestingOutput, run_main
>>> flow = Dataflow()
>>> _ = flow.input("inp", TestingInput(range(3)))
>>> flow.map(lambda x: x + 10)
>>> out = []
>>> flow.output("out", TestingOutput(out))
>>> run_main(flow)
>>> out
[10, 11, 12]
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from flowspark.api.dataflow import Dataflow
from flowspark.api.recovery import RecoveryConfig
from flowspark.connectors.memory import TestingInput, TestingOutput
from flowspark.connectors.testing_sources import TestingSink, TestingSource

__all__ = ["TestingInput", "TestingOutput", "TestingSink", "TestingSource", "run_main"]


def run_main(
    flow: Dataflow,
    *,
    epoch_interval: timedelta | None = None,
    recovery_config: RecoveryConfig | None = None,
    master: str | None = None,
) -> None:
    """Run ``flow`` on the embedded Spark session until every input has ended.

    As bytewax's ``run_main``: a live source is read as its ``next_awake()``
    paces it until it raises ``StopIteration``; nothing is dropped.

    ``epoch_interval=timedelta(0)`` gives every source batch its own epoch
    (micro-batch); ``recovery_config`` keeps the checkpoint so a rerun resumes.
    Reusable: later calls in the same process reuse the running session.
    """
    from flowspark.engine.query import RunConfig, run_flow  # noqa: PLC0415 engine: only to run a flow

    if epoch_interval is not None and not isinstance(epoch_interval, timedelta):
        raise TypeError(f"epoch_interval must be a timedelta; got {epoch_interval!r}")
    recovery_dir: Any = recovery_config.db_dir if recovery_config else None
    run_flow(
        flow,
        RunConfig(
            recovery_dir=str(recovery_dir) if recovery_dir else None,
            epoch_interval=epoch_interval,
            master=master,
            release_planning_workers=True,
        ),
    )
