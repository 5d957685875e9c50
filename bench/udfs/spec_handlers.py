"""The spec pages' handlers that the benchmark runs on flowspark and on pynumaflow, written once.

Each builder takes the module the page's code imports from (``flowspark.accumulator``
or ``pynumaflow.accumulator`` …: the import prefix is all that differs) and returns
the page's code bound to it, so both systems run the same user code (the batch-map
and the accumulator examples' are read from their files under ``examples/``). The
handlers are built when called, so that importing this module imports neither system.
"""

from __future__ import annotations
import __future__

import ast
from collections.abc import AsyncIterable, Callable
from datetime import datetime
from pathlib import Path
from types import ModuleType
from typing import Any

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
BATCHMAP_EXAMPLE = EXAMPLES / "numaflow" / "udfs" / "batchmap_flatmap.py"
JOIN_SORT_EXAMPLE = EXAMPLES / "numaflow_join_sort.py"


def stream_sorter(accumulator: ModuleType) -> type:
    """The accumulator page's ``StreamSorter`` (pynumaflow accumulator example) on
    ``accumulator``: the class of ``examples/numaflow_join_sort.py``, which holds the
    page's code with its bug fixed (the loop reads ``async for datum in datums``; the
    page's ``async for _`` leaves ``datum`` unbound) and everything left flushed after
    the loop (the page's second version): a key's stream ends at its ``CLOSE`` on
    pynumaflow, at the end of the input on flowspark. Only the class is compiled, with
    ``accumulator``'s ``Accumulator``, ``Datum`` and ``Message``: the example's flow is
    not built."""
    names = ("Accumulator", "Datum", "Message")
    return _example_class(JOIN_SORT_EXAMPLE, "StreamSorter", accumulator, names, datetime=datetime)


def map_stream_handler(mapstreamer: ModuleType) -> Callable[..., AsyncIterable[Any]]:
    """The spec's ``map_stream_handler`` (pynumaflow map-streamer example) on
    ``mapstreamer``: split the value on commas, one message per part."""
    Datum, Message = mapstreamer.Datum, mapstreamer.Message

    async def map_stream_handler(_: list[str], datum: Datum) -> AsyncIterable[Message]:
        val = datum.value
        _ = datum.event_time
        _ = datum.watermark
        strs = val.decode("utf-8").split(",")

        if len(strs) == 0:
            yield Message.to_drop()
            return
        for s in strs:
            yield Message(str.encode(s))

    return map_stream_handler


def batch_flatmap(batchmapper: ModuleType) -> type:
    """pynumaflow's batch-map example ``Flatmap`` (``examples/batchmap/flatmap``) on
    ``batchmapper``: per datum of the batch, a ``BatchResponse`` for its id holding one
    message per comma-separated part. The class is flowspark's copy of the example
    (``examples/numaflow/udfs/batchmap_flatmap.py``), with ``batchmapper``'s names."""
    names = ("BatchMapper", "BatchResponses", "BatchResponse", "Message", "Datum")
    return _example_class(BATCHMAP_EXAMPLE, "Flatmap", batchmapper, names)


def _example_class(
    path: Path, name: str, module: ModuleType, names: tuple[str, ...], **more: Any
) -> type:
    """Class ``name`` of the example file ``path``, compiled alone (its annotations left
    unevaluated) with ``module``'s ``names`` (what the file imports from flowspark's
    module of that name) and ``more`` as its globals: the example's code on either
    system, without running the rest of the file."""
    tree = ast.parse(path.read_text(), str(path))
    [node] = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name]
    code = compile(
        ast.Module(body=[node], type_ignores=[]),
        str(path),
        "exec",
        flags=__future__.annotations.compiler_flag,
        dont_inherit=True,
    )
    namespace: dict[str, Any] = {imported: getattr(module, imported) for imported in names}
    namespace.update(__name__=path.stem, **more)
    exec(code, namespace)
    return namespace[name]
