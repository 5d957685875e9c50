"""Numaflow ``MonoVertex``: one source, an optional map UDF and one sink in one vertex.

A MonoVertex is held as the Pipeline it amounts to: a source vertex named after the
MonoVertex (its HTTP source answers at ``/vertices/<name>``, as Numaflow's does),
a map vertex ``udf`` when ``spec.udf`` is given, and a sink vertex ``sink`` with the
sink's fallback and onSuccess sinks, joined by plain edges. Its ``limits`` are the
pipeline's. ``bypass`` sends the map UDF's messages whose tags match straight to
the sink, the fallback sink or the onSuccess sink, as Numaflow's mapper does.

Handlers replace the containers by the name of the field they stand in
(:func:`udf_names`): ``--udf udsource=source.py --udf udf=map.py --udf udsink=sink.py``.

>>> from flowspark.pipeline.spec import load_spec
>>> spec = load_spec('''
... apiVersion: numaflow.numaproj.io/v1alpha1
... kind: MonoVertex
... metadata: {name: mv}
... spec:
...   limits: {readBatchSize: 10}
...   source: {generator: {rpu: 5, duration: 1s}}
...   udf: {container: {image: my-map}}
...   sink: {log: {}}
... ''')
>>> spec.kind, [(v.name, v.kind, v.limits.read_batch_size) for v in spec.vertices]
('MonoVertex', [('mv', 'source', 10), ('udf', 'udf', 10), ('sink', 'sink', 10)])
>>> [(e.source, e.target) for e in spec.edges]
[('mv', 'udf'), ('udf', 'sink')]
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from flowspark.pipeline.errors import PipelineSpecError
from flowspark.pipeline.model import Bypass, PipelineSpec, TagCondition
from flowspark.pipeline.typed import typed_spec
from flowspark.pipeline.validate import dig

__all__ = [
    "MAP_VERTEX",
    "SINK_VERTEX",
    "BypassTo",
    "source_vertex",
    "typed_mono_vertex",
    "udf_names",
]

MAP_VERTEX = "udf"
SINK_VERTEX = "sink"
_OPERATORS = ("or", "and", "not")


def source_vertex(name: str) -> str:
    """The source vertex's name: the MonoVertex's own, unless another vertex has it."""
    return f"{name}-source" if name in (MAP_VERTEX, SINK_VERTEX) else name


def udf_names(name: str) -> dict[str, str]:
    """What ``--udf FIELD=…`` (or the annotation ``flowspark.io/udf.FIELD``) names in a
    MonoVertex called ``name``: the field whose container it replaces, mapped to the
    name the pipeline it amounts to gives that handler."""
    source = source_vertex(name)
    return {
        "udsource": source,
        "transformer": f"{source}.transformer",
        "udf": MAP_VERTEX,
        "udsink": SINK_VERTEX,
        "fallback": f"{SINK_VERTEX}.fb",
        "onSuccess": f"{SINK_VERTEX}.ons",
    }


def typed_mono_vertex(doc: dict[str, Any], ignored: tuple[str, ...]) -> PipelineSpec:
    """The decoded, validated MonoVertex ``doc`` as the :class:`PipelineSpec` it amounts to."""
    spec = doc.get("spec", {})
    metadata = doc.get("metadata", {})
    name = metadata.get("name", "")
    source = source_vertex(name)
    vertices: list[dict[str, Any]] = [{"name": source, "source": spec["source"]}]
    if "udf" in spec:
        vertices.append({"name": MAP_VERTEX, "udf": spec["udf"]})
    vertices.append({"name": SINK_VERTEX, "sink": spec["sink"]})
    edges = [{"from": a["name"], "to": b["name"]} for a, b in zip(vertices, vertices[1:])]
    pipeline = {
        "metadata": metadata,
        "spec": {"limits": spec.get("limits", {}), "vertices": vertices, "edges": edges},
    }
    typed = typed_spec(pipeline, ignored)
    bypass = _bypass(spec.get("bypass"), spec) if "udf" in spec else None
    return dataclasses.replace(typed, kind="MonoVertex", bypass=bypass)


def _bypass(raw: dict[str, Any] | None, spec: dict[str, Any]) -> Bypass | None:
    """``spec.bypass`` typed; a destination sink the MonoVertex lacks is an error."""
    if not raw:
        return None
    conditions: dict[str, TagCondition | None] = {}
    for field in ("sink", "fallback", "onSuccess"):
        if field not in raw:
            conditions[field] = None
            continue
        path = f"spec.bypass.{field}"
        if field != "sink" and dig(spec, "sink", field) is None:
            raise PipelineSpecError(f"{path}: bypasses to spec.sink.{field}, which is not given")
        tags = dig(raw, field, "tags") or {}
        operator = tags.get("operator", "or")
        if operator not in _OPERATORS:
            raise PipelineSpecError(
                f"{path}.tags.operator: expected one of or, and, not; got {operator!r}"
            )
        conditions[field] = TagCondition(tuple(tags.get("values", [])), operator)
    return Bypass(conditions["sink"], conditions["fallback"], conditions["onSuccess"])


@dataclass(frozen=True)
class BypassTo:
    """The filter of the datums ``bypass`` sends to ``destination`` (``sink``,
    ``fallback`` or ``onSuccess``).

    >>> from types import SimpleNamespace as Msg
    >>> to_fallback = BypassTo("fallback", Bypass(fallback=TagCondition(("bad",))))
    >>> to_fallback(Msg(tags=["bad"])), to_fallback(Msg(tags=[]))
    (True, False)
    """

    destination: str
    bypass: Bypass

    def __call__(self, datum: Any) -> bool:
        return self.bypass.destination(getattr(datum, "tags", None) or ()) == self.destination
