"""``python -m flowspark.testing FLOW -p N [run's flags]``: bytewax.testing's entry
point. It starts N processes of ``python -m flowspark.run FLOW -i I -a ADDRESSES``
on this machine, which make one Spark standalone cluster and run the flow together
(see :mod:`flowspark.cli_scaling`), and waits for all of them. With ``-p 1`` (the
default) it is ``python -m flowspark.run FLOW``. Every flag but ``-p`` goes to
``flowspark.run``, wherever it stands.

The exit status is that of the first process to fail (0 when all succeed): the
others are then stopped as Ctrl-C stops them, so each stops its Spark processes.
Ctrl-C stops them all (130).
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import time

from flowspark import cli
from flowspark.cli_values import count_value
from flowspark.engine.cluster import free_port

__all__ = ["main"]

_STOP_SECONDS = 60.0
RUN_COMMAND = [sys.executable, "-m", "flowspark.run"]
"""What each process runs (its flags follow)."""


def _stop(procs: list[subprocess.Popen], interrupt: bool) -> None:
    """Let the processes still running stop as on Ctrl-C (``interrupt``: send them
    SIGINT; else they had it from the terminal) and wait; kill any that take longer
    than a minute."""
    if interrupt:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
    deadline = time.monotonic() + _STOP_SECONDS
    for proc in procs:
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m flowspark.testing",
        usage="python -m flowspark.testing IMPORT_STR [-p N] [python -m flowspark.run's flags]",
        description="Run a flow in N processes on this machine, as bytewax.testing does.",
    )
    parser.add_argument(
        "-p", "--processes", type=count_value, default=1, help="processes to run (default 1)"
    )
    args, rest = parser.parse_known_args(argv)
    if args.processes == 1:
        return cli.main(rest)
    addresses = ";".join(f"127.0.0.1:{free_port()}" for _ in range(args.processes))
    procs = [
        subprocess.Popen([*RUN_COMMAND, *rest, "-i", str(i), "-a", addresses])
        for i in range(args.processes)
    ]
    failed: tuple[int, int] | None = None  # (process, exit status) of the first to fail
    try:
        while failed is None:
            states = [proc.poll() for proc in procs]
            failed = next(((i, rc) for i, rc in enumerate(states) if rc not in (None, 0)), None)
            if failed is None and None not in states:
                return 0
            time.sleep(0.2)
    except KeyboardInterrupt:
        _stop(procs, interrupt=False)
        print("flowspark.testing: stopped (Ctrl-C)", file=sys.stderr)
        return cli.EXIT_INTERRUPTED
    _stop(procs, interrupt=True)
    print(f"flowspark.testing: process {failed[0]} exited with {failed[1]}", file=sys.stderr)
    return failed[1]
