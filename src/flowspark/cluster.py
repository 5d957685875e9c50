"""``python -m flowspark.cluster start|stop|status``: a local Spark standalone cluster;
``connect-start|connect-stop``: a Spark Connect server.

See :mod:`flowspark.engine.cluster`. ``start`` prints the master's URL, to give
``python -m flowspark.run FLOW --master URL``; ``connect-start`` the server's
``sc://`` URL, to give ``--remote URL``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from flowspark.engine.cluster import (
    cluster_status,
    default_dir,
    start_cluster,
    start_connect_server,
    stop_cluster,
    stop_connect_server,
)


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the process exit code."""
    p = argparse.ArgumentParser(
        prog="python -m flowspark.cluster", description=__doc__.split("\n")[0]
    )
    sub = p.add_subparsers(dest="command", required=True)
    start = sub.add_parser("start", help="start a master and its workers on this machine")
    start.add_argument("--workers", type=int, default=1, help="workers to start (default 1)")
    start.add_argument("--cores", type=int, default=1, help="cores per worker (default 1)")
    start.add_argument("--memory", default="1g", help="memory per worker (default 1g)")
    start.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    start.add_argument("--port", type=int, default=7077, help="the master's port (default 7077)")
    start.add_argument("--ui-port", type=int, default=8080, help="the master's web UI port")
    connect = sub.add_parser("connect-start", help="start a Spark Connect server")
    connect.add_argument("--port", type=int, default=15002, help="its port (default 15002)")
    connect.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    connect.add_argument(
        "--master", default="local[*]", help="where it runs flows (default local[*]; or spark://…)"
    )
    connect.add_argument("--memory", default="4g", help="the server's memory (default 4g)")
    for command in (start, sub.add_parser("stop", help="stop what start started"),
                    sub.add_parser("status", help="the master and its workers"), connect,
                    sub.add_parser("connect-stop", help="stop the Connect server")):  # fmt: skip
        command.add_argument(
            "--dir", type=Path, default=None, help=f"state and logs (default {default_dir()})"
        )
    args = p.parse_args(argv)
    try:
        if args.command == "start":
            info = start_cluster(
                args.workers, args.cores, args.memory, args.host, args.port, args.ui_port, args.dir
            )
            print(info.master_url)
            print(f"flowspark: cluster up: web UI {info.ui_url}, logs in {info.directory}",
                  file=sys.stderr)  # fmt: skip
        elif args.command == "connect-start":
            server = start_connect_server(args.port, args.master, args.host, args.memory, args.dir)
            print(server.url)
            print(f"flowspark: Spark Connect server up on {server.master}, log in "
                  f"{server.directory}/connect.log", file=sys.stderr)  # fmt: skip
        elif args.command == "connect-stop":
            gone = stop_connect_server(args.dir)
            print("flowspark: " + (f"stopped {gone.url}" if gone else "no Connect server"),
                  file=sys.stderr)  # fmt: skip
        elif args.command == "stop":
            stopped = stop_cluster(args.dir)
            print("flowspark: " + (f"stopped {stopped.master_url}" if stopped else "no cluster"),
                  file=sys.stderr)  # fmt: skip
        else:
            status = cluster_status(args.dir)
            print(json.dumps(status) if status else "no cluster")
    except RuntimeError as exc:
        print(f"flowspark.cluster: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
