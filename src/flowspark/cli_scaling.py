"""bytewax run's scaling and recovery flags on ``python -m flowspark.run``, so a
bytewax command line runs with only the module's name changed.

- ``-w/--workers-per-process N``: N partitions per micro-batch (as ``--parallelism``);
  with ``-a``, N cores per process.
- ``-a/--addresses "HOST:PORT;HOST:PORT"`` with ``-i/--process-id I``: this process is
  process I of a cluster, as with :func:`flowspark.testing.cluster_main`. Process 0
  runs the flow as the driver of the Spark standalone cluster the processes make;
  the others serve a worker until the run is over. The processes share the recovery
  directory's path (one machine, or storage every machine mounts there), as with
  ``--shared-recovery``.
- ``-b/--backup-interval SECONDS``: accepted and not needed (Spark's checkpoint keeps
  what a restart needs); one line on stderr says so.

>>> import argparse
>>> p = argparse.ArgumentParser()
>>> _ = p.add_argument("--parallelism", type=int)
>>> add_bytewax_flags(p)
>>> args = p.parse_args(["-w", "3"])
>>> check_bytewax_flags(args)
>>> args.parallelism
3
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator
from typing import Any

from flowspark.cli_values import count_value, seconds_value

__all__ = ["add_bytewax_flags", "check_bytewax_flags", "scaled_run"]


def add_bytewax_flags(parser: argparse.ArgumentParser) -> None:
    """Add bytewax run's ``-w``, ``-i``, ``-a`` and ``-b`` to ``parser`` (which has
    ``--parallelism``)."""
    group = parser.add_argument_group("bytewax run's flags")
    group.add_argument(
        "-w",
        "--workers-per-process",
        type=count_value,
        default=None,
        metavar="N",
        help="N partitions per micro-batch (as --parallelism); with -a, N cores per process",
    )
    group.add_argument(
        "-i",
        "--process-id",
        type=int,
        default=None,
        metavar="I",
        help="with -a: this process is process I of the cluster (bytewax's cluster_main)",
    )
    group.add_argument(
        "-a",
        "--addresses",
        default=None,
        metavar="HOST:PORT;...",
        help="the cluster's processes: process 0 runs the flow as the driver of the Spark "
        "standalone cluster they make, the others serve a worker until the run is over",
    )
    group.add_argument(
        "-b",
        "--backup-interval",
        type=seconds_value,
        default=None,
        metavar="SECONDS",
        help="accepted, not needed: Spark's checkpoint keeps what a restart needs",
    )


def check_bytewax_flags(args: argparse.Namespace) -> None:
    """Refuse a combination Spark cannot run (``ValueError``, one line) before
    anything starts; ``-w`` becomes the parallelism when ``-a`` is not given."""
    from flowspark.engine.cluster import host_port  # noqa: PLC0415 engine: only to run a flow

    if args.backup_interval is not None:
        print(
            "flowspark: -b/--backup-interval is not needed (Spark's checkpoint keeps what a "
            "restart needs); ignored",
            file=sys.stderr,
        )
    if args.addresses is None:
        if args.process_id is not None:
            raise ValueError("-i/--process-id needs -a/--addresses, as bytewax's run does")
        if args.workers_per_process is not None:
            if args.parallelism not in (None, args.workers_per_process):
                raise ValueError("-w and --parallelism say different things: give one")
            args.parallelism = args.workers_per_process
        return
    addresses = [a.strip() for a in args.addresses.split(";") if a.strip()]
    for address in addresses:
        host_port(address)  # its ValueError says what is wrong
    if args.process_id is None or not 0 <= args.process_id < len(addresses):
        raise ValueError(
            f"-a/--addresses names {len(addresses)} processes: -i/--process-id must be "
            f"in 0..{len(addresses) - 1}; got {args.process_id}"
        )
    if getattr(args, "master", None) not in (None, "local[*]") or getattr(args, "remote", None):
        raise ValueError("-a/--addresses makes its own cluster: give no --master or --remote")
    if args.parallelism is not None:
        raise ValueError("with -a/--addresses, -w sets the parallelism (per process)")
    args.addresses = addresses


@contextlib.contextmanager
def scaled_run(args: argparse.Namespace) -> Iterator[bool]:
    """Where this process stands: yields whether it runs the flow. Without ``-a``, or
    with one address: it does, as it is (as ``cluster_main`` of one process). Process
    0 of ``-a``: it does, as the driver of the cluster (``args.master`` and
    ``args.parallelism`` set), which stops when the block ends. Another process: it
    serves its worker until the run is over, then yields ``False``."""
    from flowspark.engine import cluster  # noqa: PLC0415 engine: only to run a flow

    addresses: Any = args.addresses
    cores = args.workers_per_process or 1
    if addresses is None or len(addresses) == 1:  # one process: a plain run
        if addresses is not None:
            args.parallelism = cores
        yield True
        return
    if args.process_id > 0:
        cluster.serve_cluster_process(addresses, args.process_id, cores)
        yield False
        return
    with cluster.cluster_of_processes(addresses, cores) as master:
        args.master, args.parallelism = master, cores * len(addresses)
        args.shared_recovery = True  # the processes share its path (see the module doc)
        yield True
