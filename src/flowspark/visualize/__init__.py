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

    {"batch": 3, "duration_ms": 120, "watermark_lag_ms": 50, "state_keys": 5,
     "steps": {"count": {"in": 10, "out": 8, "late": 0}}}

``in``/``out``/``late`` and ``duration_ms`` are summed over the lines,
``state_keys`` and ``watermark_lag_ms`` are the last value: the lines
``python -m flowspark.run --progress-json FILE`` writes (see
:func:`read_progress`).

The modules: :mod:`~flowspark.visualize.graph` (a flow as nodes and edges),
:mod:`~flowspark.visualize.figures` (a progress file summed),
:mod:`~flowspark.visualize.style` (labels, colours), one per format
(:mod:`~flowspark.visualize.mermaid`, :mod:`~flowspark.visualize.svg` with
:mod:`~flowspark.visualize.layout`, :mod:`~flowspark.visualize.html`) and
:mod:`~flowspark.visualize.command` (the command line).

Exit status, as ``python -m flowspark.run``'s: 0 when the picture was written, 2
when the target, the progress file or a flag cannot be used (one line on stderr
naming the file and line; ``--verbose`` adds the traceback), 1 when the output file
cannot be written, 32 (quietly) when standard output was closed (``| head``).

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

from flowspark.visualize.command import load_target, main, render
from flowspark.visualize.figures import Figures, read_progress
from flowspark.visualize.graph import Edge, FlowGraph, Node, flow_graph
from flowspark.visualize.html import to_html
from flowspark.visualize.mermaid import to_mermaid
from flowspark.visualize.svg import to_svg

__all__ = [
    "Edge",
    "Figures",
    "FlowGraph",
    "Node",
    "flow_graph",
    "load_target",
    "main",
    "read_progress",
    "render",
    "to_html",
    "to_mermaid",
    "to_svg",
]
