"""``python -m flowspark.run IMPORT_STR``: run a flow on Spark (like ``bytewax.run``).

``IMPORT_STR`` is ``module``, ``module:attr``, ``module:factory(args)`` or a
file path with the same suffixes (``examples/wordcount.py:flow``); the
attribute defaults to ``flow``. A ``.yaml``/``.yml`` file is a Numaflow
Pipeline (see :mod:`flowspark.pipeline`), run with the same flags plus
``--udf VERTEX=udf.py``, ``--secret NAME/KEY=VALUE`` and the HTTP source's
``--http-host``/``--http-port``/``--http-cert``/``--http-key``.

Exit status: 0 when the run ended (or a source stopped it with ``AbortExecution``,
as bytewax's: one line on stderr says so); 1 when a step or a source failed, or Spark
stopped the query; 2 for a bad flow, spec or argument (found before Spark
starts: one line on stderr naming the file and line); 32 (``EPIPE``, as
``python -m json.tool``) when standard output was closed (``| head``), quietly;
130 on Ctrl-C. ``--verbose`` adds the whole traceback.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import os
import re
import socket
import sys
import traceback
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any, NoReturn

from flowspark.cli_scaling import add_bytewax_flags, check_bytewax_flags, scaled_run
from flowspark.cli_values import count_value, port_value, seconds_value
from flowspark.connectors.stdio import silence_stdout, stdout_closed
from flowspark.dataflow import Dataflow
from flowspark.runtime.errors import WORKER_TRACEBACK, StepError
from flowspark.runtime.user_traceback import (
    capture,
    error_line,
    render,
    shown_path,
    user_location,
)

__all__ = [
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_PIPE",
    "EXIT_USAGE",
    "LoadError",
    "OneLineParser",
    "describe_load_error",
    "load_flow",
    "locate_dataflow",
    "main",
    "parse_pairs",
]

PROG = "flowspark.run"
EXIT_FAILED = 1  # a step or a source failed, or Spark stopped the query
EXIT_USAGE = 2  # a bad flow, spec or argument, found before Spark starts
EXIT_PIPE = 32  # standard output was closed (EPIPE), as ``python -m json.tool`` exits
EXIT_INTERRUPTED = 130  # Ctrl-C
_VERBOSE_HINT = "(--verbose shows the whole traceback)"
_QUERY_IDS = re.compile(r" \[id = [^\]]*\]")  # Spark's query and run ids: noise here


class LoadError(SystemExit):
    """A flow, spec or argument that cannot be used, found before Spark starts.

    ``message`` is one line without the program's name; ``code`` (what an uncaught
    ``SystemExit`` prints) is ``flowspark.run: message``. :func:`main` prints it
    and exits 2; ``detail`` is the exception ``--verbose`` shows the traceback of.

    >>> str(LoadError("no such file: flow.py"))
    'flowspark.run: no such file: flow.py'
    """

    def __init__(self, message: str, detail: BaseException | None = None) -> None:
        super().__init__(f"{PROG}: {message}")
        self.message = message
        self.detail = detail


class OneLineParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line, ``NAME: problem (see PROG
    --help)``, exit 2, instead of a page of usage."""

    def __init__(self, *args: Any, name: str = PROG, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.name = name

    def error(self, message: str) -> NoReturn:
        """Print the problem on one line and exit 2."""
        self.exit(EXIT_USAGE, f"{self.name}: {message} (see {self.prog} --help)\n")


def _load_module(target: str) -> Any:
    if target.endswith(".py") or os.sep in target:
        path = Path(target).resolve()
        if not path.is_file():
            raise LoadError(f"no such file: {target}")
        sys.path.insert(0, str(path.parent))
        spec = importlib.util.spec_from_file_location(path.stem, path)
        if spec is None or spec.loader is None:
            raise LoadError(f"cannot import {target}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[path.stem] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(path.stem, None)  # half a module must not be found later
            raise
        return module
    sys.path.insert(0, os.getcwd())
    try:
        return importlib.import_module(target)
    except ModuleNotFoundError as exc:
        if exc.name == target or (exc.name and target.startswith(exc.name + ".")):
            raise LoadError(f"could not import module {target!r}") from None
        raise


def _a(noun: str) -> str:
    return f"an {noun}" if noun[:1].lower() in "aeiou" else f"a {noun}"


def locate_dataflow(import_str: str) -> Any:
    """Resolve ``module[:attr | :factory(args)]`` to a :class:`~flowspark.dataflow.Dataflow`.

    A target that cannot be used raises :class:`LoadError`; what the user's module or
    factory raises is raised as it is (:func:`describe_load_error` makes it one line).
    """
    target, _, attr = import_str.partition(":")
    # A Windows-free world: "path/to/file.py:flow" splits on the last colon only.
    module = _load_module(target)
    attr = attr or "flow"
    try:
        expr = ast.parse(attr, mode="eval").body
    except SyntaxError:
        raise LoadError(f"cannot parse {attr!r}: use NAME or NAME(literal args)") from None
    if isinstance(expr, ast.Name):
        if not hasattr(module, expr.id):
            raise LoadError(f"{target!r} has no attribute {expr.id!r}")
        flow = getattr(module, expr.id)
    elif isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name):
        factory = getattr(module, expr.func.id, None)
        if not callable(factory):
            raise LoadError(f"{target!r} has no function {expr.func.id!r}")
        try:
            args = [ast.literal_eval(a) for a in expr.args]
            kwargs = {k.arg: ast.literal_eval(k.value) for k in expr.keywords if k.arg}
        except ValueError:
            raise LoadError(
                f"factory arguments in {attr!r} must be literals (numbers, strings, "
                "lists, dicts, True/False/None)"
            ) from None
        flow = factory(*args, **kwargs)
    else:
        raise LoadError(f"cannot understand {attr!r}: use NAME or NAME(args)")
    if not isinstance(flow, Dataflow):
        raise LoadError(f"{import_str!r} is {_a(type(flow).__name__)}, not a Dataflow")
    return flow


def describe_load_error(exc: BaseException, prog: str = PROG) -> str:
    """The one line to print for what :func:`load_flow` raised: a :class:`LoadError`'s
    message, else (the user's module or factory raised) the file and line of the
    user's frame that raised it and ``Type: message``.

    >>> describe_load_error(LoadError("no such file: x.py"))
    'flowspark.run: no such file: x.py'
    >>> try:
    ...     compile("flow = (", "flow.py", "exec")
    ... except SyntaxError as exc:
    ...     describe_load_error(exc, "flowspark.visualize")
    "flowspark.visualize: flow.py:1: SyntaxError: '(' was never closed"
    """
    if isinstance(exc, LoadError):
        return f"{prog}: {exc.message}"
    where = user_location(exc)
    at = f"{shown_path(where[0])}:{where[1]}: " if where else ""
    return f"{prog}: {at}{error_line(exc)}"


def _parser() -> argparse.ArgumentParser:
    p = OneLineParser(
        prog="python -m flowspark.run",
        description="Run a flowspark Dataflow on Apache Spark. Exit status: 0 done, "
        "1 a step, a source or Spark failed, 2 a bad flow, spec or argument, 32 standard "
        "output closed, 130 Ctrl-C.",
    )
    p.add_argument(
        "import_str",
        metavar="IMPORT_STR",
        help="module[:flow] or module:factory(args) or path/file.py[:flow] or pipeline.yaml",
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
        type=seconds_value,
        default=None,
        metavar="SECONDS",
        help="start a micro-batch every SECONDS (default: as soon as the last one ends)",
    )
    p.add_argument(
        "-s",
        "--snapshot-interval",
        type=seconds_value,
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
        type=count_value,
        default=None,
        metavar="N",
        help="read at most N items per input into one micro-batch (default: all available)",
    )
    p.add_argument(
        "--parallelism",
        type=count_value,
        default=None,
        metavar="N",
        help="partitions per micro-batch (default: $FLOWSPARK_PARALLELISM, else the "
        "master's cores: local[N]'s N, a cluster's executor cores)",
    )
    p.add_argument(
        "--verbose",
        action="store_true",
        help="show Spark's own log on stderr, and the whole traceback of an error",
    )
    add_bytewax_flags(p)
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
        type=port_value,
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
    numaflow = add_pipeline_options(
        p,
        "Numaflow pipelines and MonoVertex (IMPORT_STR is a .yaml file)",
        udf_help=(
            "the pynumaflow UDF script that runs VERTEX's container (repeatable; in a "
            "MonoVertex VERTEX is the field: udsource, transformer, udf, udsink, "
            "fallback, onSuccess)"
        ),
        secret_help="a Kubernetes secret's value, e.g. an HTTP source's auth token (repeatable)",
    )
    numaflow.add_argument(
        "--http-host", default=None, help="HTTP sources' address (env FLOWSPARK_HTTP_HOST)"
    )
    numaflow.add_argument(
        "--http-port",
        type=port_value,
        default=None,
        help="HTTP sources' port (env FLOWSPARK_HTTP_PORT)",
    )
    numaflow.add_argument("--http-cert", default=None, help="TLS certificate file (PEM)")
    numaflow.add_argument("--http-key", default=None, help="TLS private key file (PEM)")
    return p


def add_pipeline_options(parser: Any, title: str, udf_help: str, secret_help: str) -> Any:
    """The group ``title`` of ``parser``'s options, holding ``--udf VERTEX=FILE`` and
    ``--secret NAME/KEY=VALUE`` (repeatable; see :func:`load_flow`), as every command
    that loads a Numaflow pipeline takes them; returns the group."""
    group = parser.add_argument_group(title)
    group.add_argument("--udf", action="append", default=[], metavar="VERTEX=FILE", help=udf_help)
    group.add_argument(
        "--secret", action="append", default=[], metavar="NAME/KEY=VALUE", help=secret_help
    )
    return group


def parse_pairs(values: Sequence[str], flag: str) -> dict[str, str]:
    """``NAME=VALUE`` flags (``--udf``, ``--secret``) as a dict; a malformed one raises
    :class:`LoadError` (a ``SystemExit``) with one line."""
    pairs = {}
    for value in values:
        name, sep, rest = value.partition("=")
        if not sep or not name or not rest:
            raise LoadError(f"{flag} takes NAME=VALUE; got {value!r}")
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
    that cannot be used raises :class:`LoadError` (a ``SystemExit``) with one line
    (``flowspark.run: ...``); what the user's code raises while it is imported is
    raised as it is.
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
        raise LoadError("--udf and --secret apply to pipeline YAML files")
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
        raise LoadError(f"no such file: {target}")
    state_dir = None
    if recovery_directory:
        from flowspark.engine.query import recovery_location  # noqa: PLC0415 engine: only to run a flow

        try:
            state_dir = recovery_location(recovery_directory).child("numaflow-http").uri
        except ValueError as exc:
            raise LoadError(f"--recovery-directory: {exc}") from None
    try:
        return load(
            target,
            udfs=parse_pairs(udfs, "--udf"),
            secrets=parse_pairs(secrets, "--secret"),
            state_dir=state_dir,
            **http,
        )
    except FileNotFoundError:
        raise LoadError(f"no such file: {target}") from None
    except PipelineSpecError as exc:
        raise LoadError(_spec_problem(target, exc), exc.__cause__) from None


def _spec_problem(target: str, exc: BaseException) -> str:
    """A pipeline's error as ``FILE: problem``, the file said once; a UDF script that
    failed on import gets the file and line of the user's frame that raised."""
    text = str(exc)
    if not any(text.startswith(f"{name}: ") for name in (target, str(Path(target)))):
        text = f"{target}: {text}"
    cause = exc.__cause__
    if cause is not None and not isinstance(cause, SyntaxError):  # its text has them
        where = user_location(cause)
        if where is not None:
            text += f" (at {shown_path(where[0])}:{where[1]})"
    return text


def _check_watching(args: argparse.Namespace) -> None:
    """Fail before Spark starts when ``--progress-json`` cannot be written or
    ``--metrics-port`` cannot be served."""
    if args.progress_json is not None:
        folder = Path(args.progress_json).absolute().parent
        if not folder.is_dir():
            raise LoadError(f"--progress-json: no such directory: {folder}")
    port = args.metrics_port
    if port is None:
        return
    try:
        import prometheus_client  # noqa: F401, PLC0415 optional: metrics extra
    except ImportError:
        raise LoadError(
            "--metrics-port needs prometheus_client (pip install prometheus_client)"
        ) from None
    try:  # the common failure (the port is taken), said in one line
        family, kind, proto, _, address = socket.getaddrinfo(
            args.metrics_host, port, type=socket.SOCK_STREAM
        )[0]
        with socket.socket(family, kind, proto) as probe:
            probe.bind(address)
    except OSError as exc:
        raise LoadError(
            f"--metrics-port: cannot listen on {args.metrics_host}:{port}: {exc.strerror or exc}"
        ) from None


def _check_parallelism(args: argparse.Namespace) -> None:
    """``--parallelism`` / ``$FLOWSPARK_PARALLELISM`` must be whole numbers >= 1."""
    from flowspark.engine.session import wanted_parallelism  # noqa: PLC0415 engine: only to run a flow

    try:
        wanted_parallelism(args.parallelism)
    except ValueError as exc:
        raise LoadError(f"--parallelism: {exc}") from None


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


def _innermost(shown: str) -> list[str]:
    """The last ``File "...", line N, in F`` line of a rendered traceback and its
    source line (none if it has no frame)."""
    lines = shown.splitlines()
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].startswith('  File "'):
            follows = lines[i + 1] if i + 1 < len(lines) else ""
            return [lines[i], follows] if follows.startswith("    ") else [lines[i]]
    return []


def _step_message(exc: BaseException) -> str:
    """The one line naming the step: ``str()`` of a :class:`StepError`, else the note
    flowspark put on an error it could not wrap (see :mod:`flowspark.runtime.errors`)."""
    if isinstance(exc, StepError):
        return str(exc)
    for note in getattr(exc, "__notes__", None) or []:
        if isinstance(note, str) and not note.startswith(WORKER_TRACEBACK):
            return note
    return f"step {getattr(exc, 'step_id', '?')!r} failed: {error_line(exc)}"


def _report_step_error(exc: BaseException, verbose: bool) -> None:
    """A failing step: the user's innermost frame (``--verbose``: the user's whole
    traceback), then one line naming the step, the item and the error."""
    origin = exc.__cause__ if isinstance(exc, StepError) and exc.__cause__ else exc
    if shown := _user_traceback(origin):
        lines = shown.splitlines() if verbose else _innermost(shown)
        if lines:
            print("\n".join(lines), file=sys.stderr)
    print(f"flowspark: {_step_message(exc)}", file=sys.stderr)


def _load(args: argparse.Namespace) -> Any:
    _check_watching(args)
    try:
        check_bytewax_flags(args)
    except ValueError as exc:
        raise LoadError(str(exc)) from None
    _check_parallelism(args)
    return load_flow(
        args.import_str,
        args.udf,
        args.secret,
        recovery_directory=args.recovery_directory,
        http_host=args.http_host,
        http_port=args.http_port,
        http_cert=args.http_cert,
        http_key=args.http_key,
    )


def _report_load_error(exc: BaseException, verbose: bool) -> int:
    """One line naming the file and line (``--verbose``: the traceback first); exit 2."""
    detail = exc.detail if isinstance(exc, LoadError) else exc
    if verbose and detail is not None:
        traceback.print_exception(detail)
    print(describe_load_error(exc), file=sys.stderr)
    return EXIT_USAGE


def _run_config(args: argparse.Namespace) -> Any:
    from flowspark.engine.query import RunConfig  # noqa: PLC0415 engine: only to run a flow

    def seconds(value: float | None) -> timedelta | None:
        return None if value is None else timedelta(seconds=value)

    return RunConfig(
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
        release_planning_workers=True,  # one flow per process
    )


def _report_run_error(exc: Exception, verbose: bool) -> int:
    """What a failed run prints, and its exit status (see the module doc)."""
    from flowspark.engine.errors import FlowRunError, RecoveryDirectoryError  # noqa: PLC0415 engine: only to run a flow

    if stdout_closed():  # | head has read what it wanted (a socket's EPIPE is an error)
        silence_stdout()
        return EXIT_PIPE
    if isinstance(exc, RecoveryDirectoryError):  # held by another run, or does not add up
        print(f"flowspark: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if isinstance(exc, StepError) or getattr(exc, "step_id", None) is not None:
        _report_step_error(exc, verbose)
        return EXIT_FAILED
    if isinstance(exc, (ValueError, TypeError)):  # the flow, refused before it ran
        if verbose:
            traceback.print_exception(exc)
        print(f"flowspark: {error_line(exc)}", file=sys.stderr)
        return EXIT_USAGE
    if isinstance(exc, FlowRunError):
        lines = str(exc).splitlines() or [type(exc).__name__]
        if not verbose and len(lines) > 3:  # Spark's summary: its first line says it
            first = _QUERY_IDS.sub("", lines[0]).rstrip()
            lines = [first, "(--verbose shows all of Spark's message and its log)"]
        lines[0] = f"flowspark: {lines[0]}"
        print("\n".join(lines), file=sys.stderr)
        return EXIT_FAILED
    if verbose:
        traceback.print_exception(exc)
    print(f"flowspark: {error_line(exc)}", file=sys.stderr)
    if not verbose and not isinstance(exc, (OSError, LookupError)):
        print(_VERBOSE_HINT, file=sys.stderr)
    return EXIT_FAILED


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the process exit status: 0 done, 1 a step, a source or
    Spark failed, 2 a bad flow, spec or argument, 32 standard output closed, 130
    Ctrl-C (see the module doc)."""
    args = _parser().parse_args(argv)  # bad flags: one line, exit 2
    try:
        flow = _load(args)
    except KeyboardInterrupt:
        print("flowspark: stopped (Ctrl-C)", file=sys.stderr)
        return EXIT_INTERRUPTED
    except (LoadError, Exception) as exc:  # the user's module or factory raised
        return _report_load_error(exc, args.verbose)
    from flowspark.engine.query import run_flow  # noqa: PLC0415 engine: only to run a flow

    try:
        with scaled_run(args) as runs_here:  # -a: this process's part of a cluster
            if not runs_here:
                return 0
            if args.ui:
                _show_ui(args)
            report = run_flow(flow, _run_config(args))
    except KeyboardInterrupt:
        print("flowspark: stopped (Ctrl-C)", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:
        return _report_run_error(exc, args.verbose)
    if report.aborted is not None:  # as bytewax's: a clean stop, exit 0
        print(
            f"flowspark: input {report.aborted!r} aborted the run (AbortExecution); "
            "a rerun on the same recovery directory resumes after its last committed batch",
            file=sys.stderr,
        )
    try:
        sys.stdout.flush()  # a closed pipe fails here, quietly, not at exit
    except BrokenPipeError:
        silence_stdout()
        return EXIT_PIPE
    return 0
