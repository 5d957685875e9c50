"""The command line of ``python -m flowspark.visualize`` (see :mod:`flowspark.visualize`).

Exit status, as ``python -m flowspark.run``'s: 0 when the picture was written, 2 when
the target, the progress file or a flag cannot be used (one line on stderr naming the
file and line), 1 when the output file cannot be written, 32 (quietly) when standard
output was closed (``| head``). ``--verbose`` adds the traceback of a target that
raised while it was imported.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
import tempfile
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from flowspark import cli
from flowspark.connectors.stdio import silence_stdout
from flowspark.pipeline import PipelineSpecError, load_spec
from flowspark.visualize.figures import Figures, read_progress
from flowspark.visualize.graph import FlowGraph, flow_graph
from flowspark.visualize.html import to_html
from flowspark.visualize.mermaid import to_mermaid
from flowspark.visualize.svg import to_svg

__all__ = ["main", "load_target", "render"]

PROG = "flowspark.visualize"
FORMATS = ("mermaid", "svg", "html")
_SUFFIXES = {".mmd": "mermaid", ".mermaid": "mermaid", ".md": "mermaid", ".svg": "svg"}
_SUFFIXES |= {".html": "html", ".htm": "html"}


def _parser() -> argparse.ArgumentParser:
    p = cli.OneLineParser(
        name=PROG,
        prog="python -m flowspark.visualize",
        description="Draw a flowspark Dataflow or a Numaflow pipeline (never starts Spark).",
    )
    p.add_argument(
        "target",
        help="module[:flow], module:factory(args), path/file.py[:flow] or pipeline.yaml",
    )
    p.add_argument(
        "-f",
        "--format",
        choices=FORMATS,
        default=None,
        help="mermaid (default), svg or html (default: from -o's suffix)",
    )
    p.add_argument("-o", "--output", metavar="FILE", help="write here (default: stdout)")
    p.add_argument(
        "--from",
        dest="progress",
        metavar="PROGRESS",
        help="a progress file (JSON lines, one object per micro-batch): figures in labels",
    )
    p.add_argument(
        "--verbose",
        action="store_true",
        help="show the whole traceback when the target raises while it is imported",
    )
    cli.add_pipeline_options(
        p,
        "Numaflow pipelines (TARGET is a .yaml file)",
        udf_help="the pynumaflow UDF script of VERTEX, as for flowspark.run (repeatable)",
        secret_help="a secret's value, as for flowspark.run (repeatable)",
    )
    return p


class _Failure(SystemExit):
    """One line for stderr (``code``) and the exit status; ``detail`` is the exception
    ``--verbose`` shows the traceback of."""

    def __init__(self, line: str, status: int, detail: BaseException | None = None) -> None:
        super().__init__(line)
        self.status = status
        self.detail = detail


def _fail(message: str, status: int = cli.EXIT_USAGE) -> _Failure:
    """``message`` (one line) as ours: ``flowspark.visualize: message``."""
    return _Failure(f"{PROG}: {' '.join(str(message).split())}", status)


def _load_failure(exc: BaseException) -> _Failure:
    """What loading the target raised, as ``flowspark.run`` says it (file and line)."""
    detail = exc.detail if isinstance(exc, cli.LoadError) else exc
    return _Failure(cli.describe_load_error(exc, PROG), cli.EXIT_USAGE, detail)


def load_target(target: str, udfs: Sequence[str] = (), secrets: Sequence[str] = ()) -> Any:
    """The Dataflow ``target`` names (loaded as ``flowspark.run`` loads it), or a
    pipeline's spec when its handlers cannot be loaded; raises ``SystemExit`` with one
    line (its ``status`` the exit status).
    """
    if target.endswith((".yaml", ".yml")):
        return _load_pipeline(target, udfs, secrets)
    try:
        return cli.load_flow(target, udfs, secrets)
    except cli.LoadError as exc:
        raise _load_failure(exc) from None
    except SystemExit as exc:  # the user's module called sys.exit()
        raise _fail(f"{target!r} exited while being imported (status {exc.code})") from None
    except Exception as exc:  # the user's module failed while being imported
        raise _load_failure(exc) from None


def _load_pipeline(target: str, udfs: Sequence[str], secrets: Sequence[str]) -> Any:
    if not Path(target).is_file():
        raise _fail(f"no such file: {target}")
    try:  # a malformed flag is an error, not a reason to draw the spec only
        cli.parse_pairs(udfs, "--udf")
        cli.parse_pairs(secrets, "--secret")
    except cli.LoadError as exc:
        raise _load_failure(exc) from None
    with tempfile.TemporaryDirectory(prefix="flowspark-visualize-") as scratch:
        # The flow is only drawn: an HTTP source's journal goes to a scratch directory.
        quiet = logging.getLogger("flowspark.pipeline")
        level = quiet.level
        quiet.setLevel(logging.ERROR)  # "fields that only matter on Kubernetes": not here
        try:
            return cli.load_flow(target, udfs, secrets, recovery_directory=scratch)
        except (cli.LoadError, Exception) as exc:  # a UDF script that fails on import, …
            problem = _load_failure(exc)
        finally:
            quiet.setLevel(level)
    try:
        spec = load_spec(target)
    except (PipelineSpecError, OSError):
        raise problem from None
    reason = str(problem.code).replace(f"{PROG}: ", "", 1)
    print(f"{PROG}: drawing the pipeline's vertices only ({reason})", file=sys.stderr)
    return spec


def render(flow: Any, fmt: str = "mermaid", figures: Any = None) -> str:
    """``flow`` (a Dataflow, a :class:`~flowspark.pipeline.PipelineSpec` or a
    :class:`~flowspark.visualize.graph.FlowGraph`) as ``mermaid``, ``svg`` or ``html``
    text."""
    functions = {"mermaid": to_mermaid, "svg": to_svg, "html": to_html}
    text = functions[fmt](flow, figures)
    return text if text.endswith("\n") else text + "\n"


def _figures(path: str, graph: FlowGraph) -> Figures:
    try:
        with open(path, encoding="utf-8") as f:
            figures = read_progress(f)
    except OSError as exc:
        raise _fail(f"cannot read {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise _fail(f"{path}: {exc}") from None
    known = {node.step_id for node in graph.nodes}
    unknown = sorted(set(figures.steps) - known)
    if unknown:
        print(
            f"{PROG}: {path} has figures for steps not in the flow: {', '.join(unknown)}",
            file=sys.stderr,
        )
    return figures


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status (see the module doc)."""
    args = _parser().parse_args(argv)  # bad flags: one line, exit 2
    try:
        return _draw(args)
    except _Failure as exc:
        if args.verbose and exc.detail is not None:
            traceback.print_exception(exc.detail)
        print(exc.code, file=sys.stderr)
        return exc.status
    except BrokenPipeError:  # | head has read what it wanted
        silence_stdout()
        return cli.EXIT_PIPE


def _draw(args: argparse.Namespace) -> int:
    fmt = args.format
    if fmt is None:
        suffix = Path(args.output).suffix.lower() if args.output else ""
        fmt = _SUFFIXES.get(suffix, "mermaid")
    graph = flow_graph(load_target(args.target, args.udf, args.secret))
    if graph.name == "flow":  # Dataflow()'s default id: the target says more
        graph = dataclasses.replace(graph, name=args.target)
    figures = _figures(args.progress, graph) if args.progress else None
    text = render(graph, fmt, figures)
    if args.output:
        try:
            Path(args.output).write_text(text, encoding="utf-8")
        except OSError as exc:
            raise _fail(f"cannot write {args.output}: {exc.strerror or exc}", 1) from None
    else:
        sys.stdout.write(text)
        sys.stdout.flush()  # a closed pipe fails here, not at exit
    return 0
