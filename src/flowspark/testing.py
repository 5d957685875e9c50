"""Helpers for tests and examples: in-memory input/output and ``run_main``.

bytewax 0.17's ``TestingInput``/``TestingOutput`` and bytewax 0.21's
``TestingSource``/``TestingSink`` (see :mod:`flowspark.connectors.testing_sources`);
``run_main`` runs a flow built with either API, ``cluster_main`` one process of a
cluster of them (``python -m flowspark.testing FLOW -p N`` starts N such processes:
:mod:`flowspark.testing_cli`). bytewax 0.21's helpers for unit tests of parts:
``TimeTestingGetter``, ``ffwd_iter`` and ``poll_next_batch``.

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

import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import islice
from typing import Any

from flowspark.api.dataflow import Dataflow
from flowspark.api.recovery import RecoveryConfig
from flowspark.connectors.memory import TestingInput, TestingOutput
from flowspark.connectors.testing_sources import TestingSink, TestingSource

__all__ = [
    "TestingInput",
    "TestingOutput",
    "TestingSink",
    "TestingSource",
    "TimeTestingGetter",
    "cluster_main",
    "ffwd_iter",
    "poll_next_batch",
    "run_main",
]


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
    _run(flow, epoch_interval, recovery_config, master=master)


def _run(
    flow: Dataflow,
    epoch_interval: timedelta | None,
    recovery_config: RecoveryConfig | None,
    master: str | None = None,
    parallelism: int | None = None,
    recovery_shared: bool = False,
) -> None:
    """Run ``flow`` until every input has ended: what :func:`run_main` and
    :func:`cluster_main` share."""
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
            parallelism=parallelism,
            recovery_shared=recovery_shared,
            release_planning_workers=True,
        ),
    )


def cluster_main(
    flow: Dataflow,
    addresses: list[str],
    proc_id: int,
    *,
    epoch_interval: timedelta | None = None,
    recovery_config: RecoveryConfig | None = None,
    worker_count_per_proc: int = 1,
) -> None:
    """bytewax's ``cluster_main``: this process's part of a cluster of
    ``len(addresses)`` processes (``"host:port"`` each) running ``flow`` together;
    returns in every process when the run is over.

    On Spark the processes make a standalone cluster: process 0 starts its master on
    ``addresses[0]`` and a worker with ``worker_count_per_proc`` cores, waits for the
    others, runs the flow as its driver (on ``worker_count_per_proc`` times the
    processes' count of partitions) and stops the cluster at the end; process ``i``
    starts a worker with as many cores on ``addresses[i]`` and serves until then. So
    the flow's outputs are written from process 0, and a failure is raised there.
    The machines share the inputs' and the recovery directory's paths, as for any
    Spark cluster. No address, or only this one: the flow runs as with
    :func:`run_main`, on ``worker_count_per_proc`` partitions.

    >>> try:
    ...     cluster_main(Dataflow("two"), ["a:1", "b"], 0)
    ... except ValueError as error:
    ...     print(error)
    cluster_main: an address is host:port; got 'b'
    """
    from flowspark.engine import cluster  # noqa: PLC0415 engine: only to run a flow

    if not isinstance(worker_count_per_proc, int) or worker_count_per_proc < 1:
        raise ValueError(
            "cluster_main: worker_count_per_proc must be an int >= 1; "
            f"got {worker_count_per_proc!r}"
        )
    if not isinstance(proc_id, int) or not 0 <= proc_id < max(1, len(addresses)):
        raise ValueError(
            f"cluster_main: proc_id must be in 0..{max(1, len(addresses)) - 1} for "
            f"{len(addresses)} address(es); got {proc_id!r}"
        )
    for address in addresses:
        try:
            cluster.host_port(address)
        except ValueError as error:
            raise ValueError(f"cluster_main: {error}") from None
    if len(addresses) <= 1:
        _run(flow, epoch_interval, recovery_config, parallelism=worker_count_per_proc)
    elif proc_id > 0:
        cluster.serve_cluster_process(addresses, proc_id, worker_count_per_proc)
    else:
        with cluster.cluster_of_processes(addresses, worker_count_per_proc) as master:
            parallelism = worker_count_per_proc * len(addresses)
            _run(flow, epoch_interval, recovery_config, master, parallelism, recovery_shared=True)


@dataclass
class TimeTestingGetter:
    """A system clock set by hand, for unit tests of clocks, caches and logics.

    It lives in the process that holds it: a flow's steps run in Spark's Python
    workers, each with the copy pickled when the run began, so ``advance`` in the test
    does not reach them. Give ``get`` to what the test itself calls.

    >>> from datetime import UTC
    >>> clock = TimeTestingGetter(datetime(2024, 1, 1, tzinfo=UTC))
    >>> clock.advance(timedelta(minutes=2))
    >>> clock.get().isoformat()
    '2024-01-01T00:02:00+00:00'
    """

    now: datetime

    def advance(self, td: timedelta) -> None:
        """Move the time on by ``td``."""
        self.now += td

    def get(self) -> datetime:
        """The time now."""
        return self.now


def ffwd_iter(it: Iterator[Any], n: int) -> None:
    """Skip ``n`` items of the iterator ``it`` (fewer if it ends first).

    >>> it = iter("abcd")
    >>> ffwd_iter(it, 2)
    >>> next(it)
    'c'
    """
    deque(islice(it, n), maxlen=0)


def poll_next_batch(part: Any, timeout: timedelta = timedelta(seconds=5)) -> list[Any]:
    """Call ``part.next_batch()`` until it returns a non-empty batch, for unit tests of
    partitions whose reads are not deterministic; ``TimeoutError`` after ``timeout``.

    >>> class Part:
    ...     calls = 0
    ...     def next_batch(self):
    ...         self.calls += 1
    ...         return [self.calls] if self.calls == 3 else []
    >>> poll_next_batch(Part())
    [3]
    """
    deadline = time.monotonic() + timeout.total_seconds()
    while True:
        batch = list(part.next_batch())
        if batch:
            return batch
        if time.monotonic() > deadline:
            raise TimeoutError(f"no batch within {timeout}")


if __name__ == "__main__":  # python -m flowspark.testing FLOW -p N: see testing_cli
    import sys

    from flowspark.testing_cli import main

    sys.exit(main())
