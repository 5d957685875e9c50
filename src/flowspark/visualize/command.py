"""The command line of ``python -m flowspark.visualize`` (see :mod:`flowspark.visualize`)."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from flowspark import cli
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
    p = argparse.ArgumentParser(
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
    numaflow = p.add_argument_group("Numaflow pipelines (TARGET is a .yaml file)")
    cli.add_pipeline_options(
        numaflow,
        udf_help="the pynumaflow UDF script of VERTEX, as for flowspark.run (repeatable)",
        secret_help="a secret's value, as for flowspark.run (repeatable)",
    )
    return p


def _fail(message: str) -> SystemExit:
    """``flowspark.run``'s resolution errors, reworded as ours: one line."""
    text = str(message).replace("flowspark.run:", f"{PROG}:", 1)
    if not text.startswith(f"{PROG}:"):
        text = f"{PROG}: {text}"
    return SystemExit(" ".join(text.split("\n")))


def load_target(target: str, udfs: Sequence[str] = (), secrets: Sequence[str] = ()) -> Any:
    """The Dataflow ``target`` names (loaded as ``flowspark.run`` loads it), or a
    pipeline's spec when its handlers cannot be loaded; raises ``SystemExit`` with one line.
    """
    if target.endswith((".yaml", ".yml")):
        return _load_pipeline(target, udfs, secrets)
    try:
        return cli.load_flow(target, udfs, secrets)
    except SystemExit as exc:
        if isinstance(exc.code, str):
            raise _fail(exc.code) from None
        raise _fail(f"{target!r} exited while being imported (status {exc.code})") from None
    except Exception as exc:  # the user's module failed while being imported
        raise _fail(f"cannot load {target!r}: {type(exc).__name__}: {exc}") from None


def _load_pipeline(target: str, udfs: Sequence[str], secrets: Sequence[str]) -> Any:
    if not Path(target).is_file():
        raise _fail(f"no such file: {target}")
    try:  # a malformed flag is an error, not a reason to draw the spec only
        cli.parse_pairs(udfs, "--udf")
        cli.parse_pairs(secrets, "--secret")
    except SystemExit as exc:
        raise _fail(str(exc.code)) from None
    with tempfile.TemporaryDirectory(prefix="flowspark-visualize-") as scratch:
        # The flow is only drawn: an HTTP source's journal goes to a scratch directory.
        quiet = logging.getLogger("flowspark.pipeline")
        level = quiet.level
        quiet.setLevel(logging.ERROR)  # "fields that only matter on Kubernetes": not here
        try:
            return cli.load_flow(target, udfs, secrets, recovery_directory=scratch)
        except SystemExit as exc:
            problem = exc.code
        except Exception as exc:  # a UDF script that fails on import, …
            problem = f"{type(exc).__name__}: {exc}"
        finally:
            quiet.setLevel(level)
    try:
        spec = load_spec(target)
    except (PipelineSpecError, OSError):
        raise _fail(str(problem)) from None
    reason = str(problem).replace("flowspark.run: ", "", 1)
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
    """Entry point; returns the exit status (1 with one line on stderr when it fails)."""
    args = _parser().parse_args(argv)
    try:
        return _draw(args)
    except SystemExit as exc:
        if not isinstance(exc.code, str):
            raise
        print(exc.code, file=sys.stderr)
        return 1


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
            raise _fail(f"cannot write {args.output}: {exc.strerror or exc}") from None
    else:
        sys.stdout.write(text)
    return 0
