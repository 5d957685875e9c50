"""``python -m flowspark.visualize TARGET``: a picture of a flow (like ``bytewax.visualize``).

``TARGET`` is what ``python -m flowspark.run`` takes: ``module[:flow]``,
``module:factory(args)``, ``path/to/file.py[:flow]``, or a Numaflow Pipeline
``.yaml``/``.yml`` (with ``--udf VERTEX=FILE`` and ``--secret NAME/KEY=VALUE``
as for ``run``; a pipeline whose handlers cannot be loaded is drawn vertex by
vertex from its spec, with a note on stderr). Building the picture never starts
Spark.

Formats (``--format``, else from ``-o``'s suffix, else ``mermaid``):

* ``mermaid``: a Mermaid ``flowchart`` (paste it into Markdown or mermaid.live);
* ``svg``: a standalone SVG drawn here (no script, no network);
* ``html``: one self-contained page with that SVG, a table of the steps and the
  Mermaid text.

Written to ``-o FILE``, or to stdout. Edges into keyed steps (a shuffle by key)
are thick and labelled ``by key``; ``redistribute``'s are dashed ``round robin``.

``--from PROGRESS`` adds a run's figures to the steps' labels (``in 1,000 · out
980``). The file has one JSON object per micro-batch (JSON lines), every key
optional::

    {"batch": 3, "duration_ms": 120, "watermark_lag_ms": 50,
     "steps": {"count": {"in": 10, "out": 8, "late": 0, "state_keys": 5}}}

``in``/``out``/``late`` and ``duration_ms`` are summed over the lines,
``state_keys`` and ``watermark_lag_ms`` are the last value. Lines shaped like
the engine's ``BatchProgress`` (``items_read``/``items_written``/``late_items``
per step, top-level ``state_keys``) are read too; see
:func:`flowspark.plan.render.read_progress`.

Exit status: 0 when the picture was written, 1 when the target, the progress
file or the output file could not be used (one line on stderr), 2 for bad
arguments.

>>> from flowspark.dataflow import Dataflow
>>> from flowspark.testing import TestingInput, TestingOutput
>>> flow = Dataflow("doc")
>>> _ = flow.input("inp", TestingInput([1])).output("out", TestingOutput([]))
>>> print(render(flow).split("flowchart TD")[1])
<BLANKLINE>
    s_inp(["inp<br/>input · TestingInput"])
    s_out(["out<br/>output · TestingOutput"])
    s_inp --> s_out
    classDef input fill:#e6f4ea,stroke:#2f7d43,color:#111
    classDef output fill:#e7f0fb,stroke:#2f5fa8,color:#111
    class s_inp input
    class s_out output
<BLANKLINE>
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

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
    numaflow.add_argument(
        "--udf",
        action="append",
        default=[],
        metavar="VERTEX=FILE",
        help="the pynumaflow UDF script of VERTEX, as for flowspark.run (repeatable)",
    )
    numaflow.add_argument(
        "--secret",
        action="append",
        default=[],
        metavar="NAME/KEY=VALUE",
        help="a secret's value, as for flowspark.run (repeatable)",
    )
    return p


def _fail(message: str) -> SystemExit:
    """``flowspark.run``'s resolution errors, reworded as ours: one line."""
    text = str(message).replace("flowspark.run:", f"{PROG}:", 1)
    if not text.startswith(f"{PROG}:"):
        text = f"{PROG}: {text}"
    return SystemExit(" ".join(text.split("\n")))


def load_target(target: str, udfs: Sequence[str] = (), secrets: Sequence[str] = ()) -> Any:
    """The Dataflow ``target`` names (resolved as ``flowspark.run`` resolves it), or a
    pipeline's spec when its handlers cannot be loaded; raises ``SystemExit`` with one line.
    """
    from flowspark import cli

    if target.endswith((".yaml", ".yml")):
        return _load_pipeline(target, list(udfs), list(secrets))
    if udfs or secrets:
        raise _fail("--udf and --secret apply to pipeline YAML files")
    try:
        return cli.locate_dataflow(target)
    except SystemExit as exc:
        if isinstance(exc.code, str):
            raise _fail(exc.code) from None
        raise _fail(f"{target!r} exited while being imported (status {exc.code})") from None
    except Exception as exc:  # the user's module failed while being imported
        raise _fail(f"cannot load {target!r}: {type(exc).__name__}: {exc}") from None


def _load_pipeline(target: str, udfs: list[str], secrets: list[str]) -> Any:
    from flowspark import cli
    from flowspark.pipeline import PipelineSpecError, load_spec

    if not Path(target).is_file():
        raise _fail(f"no such file: {target}")
    try:  # a malformed flag is an error, not a reason to draw the spec only
        cli._pairs(udfs, "--udf")
        cli._pairs(secrets, "--secret")
    except SystemExit as exc:
        raise _fail(str(exc.code)) from None
    with tempfile.TemporaryDirectory(prefix="flowspark-visualize-") as scratch:
        # The flow is only drawn: an HTTP source's journal goes to a scratch directory.
        args = argparse.Namespace(
            import_str=target,
            udf=udfs,
            secret=secrets,
            recovery_directory=scratch,
            http_host=None,
            http_port=None,
            http_cert=None,
            http_key=None,
        )
        quiet = logging.getLogger("flowspark.pipeline")
        level = quiet.level
        quiet.setLevel(logging.ERROR)  # "fields that only matter on Kubernetes": not here
        try:
            return cli._load_pipeline(args)
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
    """``flow`` (a Dataflow or pipeline spec) as ``mermaid``, ``svg`` or ``html`` text."""
    from flowspark.plan import render as r

    functions = {"mermaid": r.to_mermaid, "svg": r.to_svg, "html": r.to_html}
    text = functions[fmt](flow, figures)
    return text if text.endswith("\n") else text + "\n"


def _figures(path: str, flow: Any) -> Any:
    from flowspark.plan.render import flow_graph, read_progress

    try:
        with open(path, encoding="utf-8") as f:
            figures = read_progress(f)
    except OSError as exc:
        raise _fail(f"cannot read {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise _fail(f"{path}: {exc}") from None
    known = {node.step_id for node in flow_graph(flow).nodes}
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
    from flowspark.plan.render import flow_graph

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


if __name__ == "__main__":
    sys.exit(main())
