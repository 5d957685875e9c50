"""``python -m flowspark.run IMPORT_STR``: run a flow on Spark (like ``bytewax.run``).

``IMPORT_STR`` is ``module``, ``module:attr``, ``module:factory(args)`` or a
file path with the same suffixes (``examples/wordcount.py:flow``); the
attribute defaults to ``flow``. A ``.yaml``/``.yml`` file is a Numaflow
Pipeline (see :mod:`flowspark.pipeline`), run with the same flags plus
``--udf VERTEX=udf.py``, ``--secret NAME/KEY=VALUE`` and the HTTP source's
``--http-host``/``--http-port``/``--http-cert``/``--http-key``.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import os
import socket
import sys
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from flowspark.dataflow import Dataflow
from flowspark.runtime.errors import WORKER_TRACEBACK, StepError
from flowspark.runtime.user_traceback import capture, render

__all__ = ["main", "load_flow", "locate_dataflow", "parse_pairs"]


def _load_module(target: str) -> Any:
    if target.endswith(".py") or os.sep in target:
        path = Path(target).resolve()
        if not path.exists():
            raise SystemExit(f"flowspark.run: no such file: {target}")
        sys.path.insert(0, str(path.parent))
        spec = importlib.util.spec_from_file_location(path.stem, path)
        if spec is None or spec.loader is None:
            raise SystemExit(f"flowspark.run: cannot import {target}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[path.stem] = module
        spec.loader.exec_module(module)
        return module
    sys.path.insert(0, os.getcwd())
    try:
        return importlib.import_module(target)
    except ModuleNotFoundError as exc:
        if exc.name == target or (exc.name and target.startswith(exc.name + ".")):
            raise SystemExit(f"flowspark.run: could not import module {target!r}") from None
        raise


def locate_dataflow(import_str: str) -> Any:
    """Resolve ``module[:attr | :factory(args)]`` to a :class:`~flowspark.dataflow.Dataflow`."""
    target, _, attr = import_str.partition(":")
    # A Windows-free world: "path/to/file.py:flow" splits on the last colon only.
    module = _load_module(target)
    attr = attr or "flow"
    try:
        expr = ast.parse(attr, mode="eval").body
    except SyntaxError:
        raise SystemExit(
            f"flowspark.run: cannot parse {attr!r}: use NAME or NAME(literal args)"
        ) from None
    if isinstance(expr, ast.Name):
        if not hasattr(module, expr.id):
            raise SystemExit(f"flowspark.run: {target!r} has no attribute {expr.id!r}")
        flow = getattr(module, expr.id)
    elif isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name):
        factory = getattr(module, expr.func.id, None)
        if not callable(factory):
            raise SystemExit(f"flowspark.run: {target!r} has no function {expr.func.id!r}")
        try:
            args = [ast.literal_eval(a) for a in expr.args]
            kwargs = {k.arg: ast.literal_eval(k.value) for k in expr.keywords if k.arg}
        except ValueError:
            raise SystemExit(
                f"flowspark.run: factory arguments in {attr!r} must be literals"
            ) from None
        flow = factory(*args, **kwargs)
    else:
        raise SystemExit(f"flowspark.run: cannot understand {attr!r}: use NAME or NAME(args)")
    if not isinstance(flow, Dataflow):
        raise SystemExit(
            f"flowspark.run: {import_str!r} is a {type(flow).__name__}, not a Dataflow"
        )
    return flow


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m flowspark.run",
        description="Run a flowspark Dataflow on Apache Spark.",
    )
    p.add_argument(
        "import_str", help="module[:flow] or module:factory(args) or path/file.py[:flow]"
    )
    p.add_argument(
        "--master",
        default=os.environ.get("FLOWSPARK_MASTER", "local[*]"),
        help="Spark master URL (default: local[*], embedded Spark)",
    )
    p.add_argument(
        "--remote",
        default=None,
        metavar="sc://HOST:PORT",
        help="run on this Spark Connect server (default: $FLOWSPARK_REMOTE or "
        "$SPARK_REMOTE); outputs are still written here",
    )
    p.add_argument(
        "-r",
        "--recovery-directory",
        default=os.environ.get("FLOWSPARK_RECOVERY_DIRECTORY"),
        help="checkpoint directory: a rerun resumes where the last run stopped (one run "
        "at a time per directory)",
    )
    p.add_argument(
        "--shared-recovery",
        action="store_true",
        default=os.environ.get("FLOWSPARK_RECOVERY_SHARED", "") not in ("", "0"),
        help="the recovery directory is on storage that the driver and every worker "
        "mount at the same path (needed on a cluster)",
    )
    p.add_argument(
        "--trigger-interval",
        type=float,
        default=None,
        metavar="SECONDS",
        help="start a micro-batch every SECONDS (default: as soon as the last one ends)",
    )
    p.add_argument(
        "-s",
        "--snapshot-interval",
        type=float,
        default=None,
        metavar="SECONDS",
        help="bytewax's epoch interval; 0 makes every source batch its own micro-batch",
    )
    p.add_argument(
        "--bounded",
        action="store_true",
        help="stop at what the inputs have available now (default: run until every "
        "input has ended, as bytewax's run does; Ctrl-C stops it)",
    )
    p.add_argument(
        "--max-batch-items",
        type=int,
        default=None,
        metavar="N",
        help="read at most N items per input into one micro-batch (default: all available)",
    )
    p.add_argument(
        "--parallelism",
        type=int,
        default=None,
        metavar="N",
        help="partitions per micro-batch (default: $FLOWSPARK_PARALLELISM, else the "
        "master's cores: local[N]'s N, a cluster's executor cores)",
    )
    p.add_argument("--verbose", action="store_true", help="show Spark's own log on stderr")
    watch = p.add_argument_group("watching a run (all on stderr or the network, never stdout)")
    watch.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="a live table of the steps' figures per micro-batch on stderr (needs rich; "
        "default: on when stderr is a terminal, unless --verbose fills it with Spark's log)",
    )
    watch.add_argument(
        "--progress-json",
        metavar="FILE",
        default=None,
        help="write one JSON line per micro-batch to FILE (started afresh; "
        "python -m flowspark.visualize FLOW --from FILE draws it)",
    )
    watch.add_argument(
        "--metrics-port",
        type=int,
        default=None,
        metavar="PORT",
        help="serve Prometheus metrics at http://HOST:PORT/metrics during the run "
        "(needs prometheus_client; 0 picks a free port)",
    )
    watch.add_argument(
        "--metrics-host",
        default="127.0.0.1",
        metavar="HOST",
        help="the metrics endpoint's address (default: 127.0.0.1)",
    )
    watch.add_argument(
        "--ui",
        action="store_true",
        help="enable Spark's web UI and print its address on stderr at start",
    )
    numaflow = p.add_argument_group("Numaflow pipelines (IMPORT_STR is a .yaml file)")
    add_pipeline_options(
        numaflow,
        udf_help="the pynumaflow UDF script that runs VERTEX's container (repeatable)",
        secret_help="a Kubernetes secret's value, e.g. an HTTP source's auth token (repeatable)",
    )
    numaflow.add_argument(
        "--http-host", default=None, help="HTTP sources' address (env FLOWSPARK_HTTP_HOST)"
    )
    numaflow.add_argument(
        "--http-port", type=int, default=None, help="HTTP sources' port (env FLOWSPARK_HTTP_PORT)"
    )
    numaflow.add_argument("--http-cert", default=None, help="TLS certificate file (PEM)")
    numaflow.add_argument("--http-key", default=None, help="TLS private key file (PEM)")
    return p


def add_pipeline_options(group: Any, udf_help: str, secret_help: str) -> None:
    """``--udf VERTEX=FILE`` and ``--secret NAME/KEY=VALUE`` (repeatable; see
    :func:`load_flow`), as every command that loads a Numaflow pipeline takes them."""
    group.add_argument("--udf", action="append", default=[], metavar="VERTEX=FILE", help=udf_help)
    group.add_argument(
        "--secret", action="append", default=[], metavar="NAME/KEY=VALUE", help=secret_help
    )


def parse_pairs(values: Sequence[str], flag: str) -> dict[str, str]:
    """``NAME=VALUE`` flags (``--udf``, ``--secret``) as a dict; a malformed one raises
    ``SystemExit`` with one line."""
    pairs = {}
    for value in values:
        name, sep, rest = value.partition("=")
        if not sep or not name or not rest:
            raise SystemExit(f"flowspark.run: {flag} takes NAME=VALUE; got {value!r}")
        pairs[name] = rest
    return pairs


def load_flow(
    target: str,
    udfs: Sequence[str] = (),
    secrets: Sequence[str] = (),
    *,
    recovery_directory: str | None = None,
    http_host: str | None = None,
    http_port: int | None = None,
    http_cert: str | None = None,
    http_key: str | None = None,
) -> Any:
    """The :class:`~flowspark.dataflow.Dataflow` a ``flowspark.run`` target names: a
    ``.yaml``/``.yml`` Numaflow Pipeline (its ``udfs``/``secrets`` as ``--udf``/
    ``--secret`` give them, the HTTP source's journal under ``recovery_directory``,
    its address and TLS files), else what :func:`locate_dataflow` resolves. A target
    that cannot be used raises ``SystemExit`` with one line (``flowspark.run: ...``).
    """
    if target.endswith((".yaml", ".yml")):
        return _load_pipeline(
            target,
            udfs,
            secrets,
            recovery_directory,
            http_host=http_host,
            http_port=http_port,
            certfile=http_cert,
            keyfile=http_key,
        )
    if udfs or secrets:
        raise SystemExit("flowspark.run: --udf and --secret apply to pipeline YAML files")
    return locate_dataflow(target)


def _load_pipeline(
    target: str,
    udfs: Sequence[str],
    secrets: Sequence[str],
    recovery_directory: str | None,
    **http: Any,
) -> Any:
    from flowspark.pipeline import PipelineSpecError, load  # noqa: PLC0415 pipeline (PyYAML): YAML files only

    if not Path(target).is_file():
        raise SystemExit(f"flowspark.run: no such file: {target}")
    state_dir = None
    if recovery_directory:
        from flowspark.engine.query import recovery_location  # noqa: PLC0415 engine: only to run a flow

        try:
            state_dir = recovery_location(recovery_directory).child("numaflow-http").uri
        except ValueError as exc:
            raise SystemExit(f"flowspark.run: {exc}") from None
    try:
        return load(
            target,
            udfs=parse_pairs(udfs, "--udf"),
            secrets=parse_pairs(secrets, "--secret"),
            state_dir=state_dir,
            **http,
        )
    except FileNotFoundError:
        raise SystemExit(f"flowspark.run: no such file: {target}") from None
    except PipelineSpecError as exc:
        raise SystemExit(f"flowspark.run: {target}: {exc}") from None


def _check_watching(args: argparse.Namespace) -> None:
    """Fail before Spark starts when ``--progress-json`` cannot be written or
    ``--metrics-port`` cannot be served."""
    if args.progress_json is not None:
        folder = Path(args.progress_json).absolute().parent
        if not folder.is_dir():
            raise SystemExit(f"flowspark.run: --progress-json: no such directory: {folder}")
    port = args.metrics_port
    if port is None:
        return
    if not 0 <= port <= 65535:
        raise SystemExit(f"flowspark.run: --metrics-port must be 0..65535; got {port}")
    try:
        import prometheus_client  # noqa: F401, PLC0415 optional: metrics extra
    except ImportError:
        raise SystemExit(
            "flowspark.run: --metrics-port needs prometheus_client (pip install prometheus_client)"
        ) from None
    try:  # the common failure (the port is taken), said in one line
        family, kind, proto, _, address = socket.getaddrinfo(
            args.metrics_host, port, type=socket.SOCK_STREAM
        )[0]
        with socket.socket(family, kind, proto) as probe:
            probe.bind(address)
    except OSError as exc:
        raise SystemExit(
            f"flowspark.run: --metrics-port: cannot listen on {args.metrics_host}:{port}: "
            f"{exc.strerror or exc}"
        ) from None


def _check_parallelism(args: argparse.Namespace) -> None:
    """``--parallelism`` / ``$FLOWSPARK_PARALLELISM`` must be whole numbers >= 1."""
    from flowspark.engine.session import wanted_parallelism  # noqa: PLC0415 engine: only to run a flow

    try:
        wanted_parallelism(args.parallelism)
    except ValueError as exc:
        raise SystemExit(f"flowspark.run: --parallelism: {exc}") from None


def _show_ui(args: argparse.Namespace) -> None:
    """Start the session with Spark's UI (unless ``$FLOWSPARK_UI`` says otherwise) and
    say where it is, on stderr. A recovery directory another run holds fails first
    (the run takes it for good once the session is up)."""
    from flowspark.engine.progress import spark_ui_line  # noqa: PLC0415 engine: only to run a flow
    from flowspark.engine.session import get_session  # noqa: PLC0415 engine: only to run a flow

    if args.recovery_directory:
        from flowspark.engine.query import recovery_location  # noqa: PLC0415 engine: only to run a flow
        from flowspark.engine.recovery_lock import acquire  # noqa: PLC0415 engine: only to run a flow

        acquire(recovery_location(args.recovery_directory)).release()
    os.environ.setdefault("FLOWSPARK_UI", "true")
    spark = get_session(args.master, args.verbose, parallelism=args.parallelism)
    print(spark_ui_line(spark), file=sys.stderr, flush=True)


def _user_traceback(error: BaseException) -> str:
    """The failing step's traceback, the user's frames only: the worker's (a note on
    the error) or, for a step that ran in this process, its own."""
    for note in getattr(error, "__notes__", None) or []:
        if isinstance(note, str) and note.startswith(WORKER_TRACEBACK):
            return note[len(WORKER_TRACEBACK) :]
    parts = capture(error)
    # Without a frame of the user's, it would only repeat the error's own line.
    return render(parts) if any(part.frames for part in parts) else ""


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the process exit code."""
    args = _parser().parse_args(argv)
    flow = load_flow(
        args.import_str,
        args.udf,
        args.secret,
        recovery_directory=args.recovery_directory,
        http_host=args.http_host,
        http_port=args.http_port,
        http_cert=args.http_cert,
        http_key=args.http_key,
    )
    from flowspark.engine.errors import FlowRunError, RecoveryDirectoryError  # noqa: PLC0415 engine: only to run a flow
    from flowspark.engine.query import RunConfig, run_flow  # noqa: PLC0415 engine: only to run a flow

    def seconds(value: float | None) -> timedelta | None:
        return None if value is None else timedelta(seconds=value)

    config = RunConfig(
        bounded=args.bounded,
        recovery_dir=args.recovery_directory,
        epoch_interval=seconds(args.snapshot_interval),
        trigger_interval=seconds(args.trigger_interval),
        master=args.master,
        remote=args.remote,
        verbose=args.verbose,
        max_batch_items=args.max_batch_items,
        progress=False if args.progress is None and args.verbose else args.progress,
        progress_json=args.progress_json,
        metrics_port=args.metrics_port,
        metrics_host=args.metrics_host,
        parallelism=args.parallelism,
        recovery_shared=args.shared_recovery,
    )
    _check_watching(args)
    _check_parallelism(args)
    try:
        if args.ui:
            _show_ui(args)
        run_flow(flow, config)
    except KeyboardInterrupt:
        print("flowspark: stopped (Ctrl-C)", file=sys.stderr)
        return 130
    except RecoveryDirectoryError as exc:  # held by another run, or does not add up
        print(f"flowspark: {exc}", file=sys.stderr)
        return 2
    except StepError as exc:
        if shown := _user_traceback(exc.__cause__ or exc):
            print(shown, file=sys.stderr)
        print(f"flowspark: {exc}", file=sys.stderr)
        return 1
    except (ValueError, TypeError) as exc:
        if getattr(exc, "step_id", None) is not None:  # a step's error, kept as is
            if shown := _user_traceback(exc):
                print(shown, file=sys.stderr)
            for note in getattr(exc, "__notes__", None) or []:
                if isinstance(note, str) and not note.startswith(WORKER_TRACEBACK):
                    print(f"flowspark: {note}", file=sys.stderr)
            return 1
        print(f"flowspark: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    except FlowRunError as exc:
        print(f"flowspark: {exc}", file=sys.stderr)
        return 1
    except (OSError, LookupError) as exc:  # an input or output that cannot be reached
        print(f"flowspark: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0
