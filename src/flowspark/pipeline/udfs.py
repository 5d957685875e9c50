"""Python handlers in place of a vertex's container image.

A vertex names its handler with the CLI flag ``--udf VERTEX=path/to/udf.py`` or
the pipeline annotation ``flowspark.io/udf.VERTEX: path/to/udf.py`` (relative to
the YAML file), so the YAML stays valid for Numaflow. The file is a pynumaflow
UDF script as written for Numaflow, with ``pynumaflow`` renamed to
``flowspark``: it builds a server (``MapStreamAsyncServer(handler)``,
``AccumulatorAsyncServer(StreamSorter)``, ``SinkServer(sinker)`` …) and calls
``.start()`` under ``if __name__ == "__main__":``. flowspark runs the file with
``start()`` recording the server instead of serving, and the vertex runs that
server's handler.
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path
from typing import Any

from flowspark.api.udf.servers import capturing_servers
from flowspark.pipeline.errors import PipelineSpecError

__all__ = ["ANNOTATION_PREFIX", "server_from_script", "server_kind"]

ANNOTATION_PREFIX = "flowspark.io/udf."


def server_kind(server: Any) -> str | None:
    """The UDF kind of a server object (``map_stream``, ``reduce``, ``sink`` …), if it is one."""
    kind = getattr(server, "kind", None) or getattr(server, "udf_kind", None)
    return kind if isinstance(kind, str) else None


def server_from_script(path: str | Path, vertex: str) -> Any:
    """Run the UDF script at ``path`` and return the one server it starts."""
    script = Path(path)
    if not script.is_file():
        raise PipelineSpecError(f'vertex "{vertex}": UDF file {str(script)!r} does not exist')
    sys.path.insert(0, str(script.parent.resolve()))
    try:
        with capturing_servers() as started:
            namespace = runpy.run_path(str(script), run_name="__main__")
    except PipelineSpecError:
        raise
    except Exception as exc:
        raise PipelineSpecError(
            f'vertex "{vertex}": UDF file {str(script)!r} failed: {type(exc).__name__}: {exc}'
        ) from exc
    if not started:  # no start() call: a server built at module level will do
        started = [v for v in namespace.values() if server_kind(v) and not isinstance(v, type)]
    if len(started) != 1:
        what = "starts no server" if not started else f"starts {len(started)} servers"
        raise PipelineSpecError(
            f'vertex "{vertex}": UDF file {str(script)!r} {what}; expected one, e.g. '
            "MapStreamAsyncServer(handler).start() under if __name__ == '__main__'"
        )
    return started[0]
