"""``python -m flowspark.testing FLOW -p N [-w W] [run's flags]``: bytewax.testing's entry
point. It starts N processes of ``python -m flowspark.run FLOW -i I -a ADDRESSES``
on this machine, which make one Spark standalone cluster and run the flow together
(see :mod:`flowspark.cli_scaling`), and waits for all of them. With ``-p 1`` (the
default) it is ``python -m flowspark.run FLOW``.

The exit status is the first failing process's (0 when all succeed); Ctrl-C stops
them all (130).
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import time

from flowspark import cli
from flowspark.cli_values import count_value

__all__ = ["main"]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m flowspark.testing",
        description="Run a flow in N processes on this machine, as bytewax.testing does; "
        "other flags go to python -m flowspark.run.",
    )
    parser.add_argument(
        "import_str", metavar="IMPORT_STR", help="the flow, as flowspark.run takes it"
    )
    parser.add_argument(
        "-p", "--processes", type=count_value, default=1, help="processes to run (default 1)"
    )
    args, rest = parser.parse_known_args(argv)
    if args.processes == 1:
        return cli.main([args.import_str, *rest])
    addresses = ";".join(f"127.0.0.1:{_free_port()}" for _ in range(args.processes))
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "flowspark.run",
                args.import_str,
                "-i",
                str(i),
                "-a",
                addresses,
                *rest,
            ]
        )  # fmt: skip
        for i in range(args.processes)
    ]
    try:
        while any(proc.poll() is None for proc in procs):
            failed = [p for p in procs if p.returncode not in (None, 0)]
            if failed:  # one failed: the others would wait for it in vain
                break
            time.sleep(0.2)
    except KeyboardInterrupt:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait()
        print("flowspark.testing: stopped (Ctrl-C)", file=sys.stderr)
        return cli.EXIT_INTERRUPTED
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
        proc.wait()
    for i, proc in enumerate(procs):
        if proc.returncode != 0:
            print(f"flowspark.testing: process {i} exited with {proc.returncode}", file=sys.stderr)
            return proc.returncode
    return 0
