"""Numaflow ``Pipeline`` (and ``MonoVertex``) specs: parsed, checked and typed, without Spark.

:func:`load_spec` reads a Pipeline YAML (a file or the text itself) and
:func:`parse_spec` a decoded object. Both return a :class:`PipelineSpec` or raise
one :class:`PipelineSpecError` whose message is one line. They run four passes,
one module each:

1. **decode** (:mod:`~flowspark.pipeline.schema`), as the Kubernetes API server
   would: every field against Numaflow's CRD (an unknown field fails with its
   path), every value against its type; fields that only mean something on
   Kubernetes are accepted and listed in :attr:`PipelineSpec.ignored`;
2. **validate** (:mod:`~flowspark.pipeline.validate`), as Numaflow's controller
   does: the rules of ``pkg/reconciler/validator/pipeline_validate.go`` in its
   order, with its exact error texts;
3. **unsupported**: Numaflow features flowspark does not run (Kafka and NATS
   sources, JetStream TLS and auth, rate limits …), noted while decoding, fail
   now, naming the field;
4. **type** (:mod:`~flowspark.pipeline.typed`): the frozen dataclasses of
   :mod:`~flowspark.pipeline.model`, with Numaflow's defaults applied.

>>> spec = load_spec('''
... apiVersion: numaflow.numaproj.io/v1alpha1
... kind: Pipeline
... metadata: {name: simple}
... spec:
...   limits: {readBatchSize: 100}
...   vertices:
...     - name: in
...       source: {generator: {rpu: 5, duration: 1s}}
...     - name: cat
...       scale: {min: 1}
...       limits: {readTimeout: 2s}
...       udf: {builtin: {name: cat}}
...     - {name: out, sink: {log: {}}}
...   edges:
...     - {from: in, to: cat}
...     - {from: cat, to: out}
... ''')
>>> [(v.name, v.kind) for v in spec.vertices]
[('in', 'source'), ('cat', 'udf'), ('out', 'sink')]
>>> spec.vertex("cat").limits
Limits(read_batch_size=100, read_timeout=datetime.timedelta(seconds=2), buffer_max_length=30000, buffer_usage_limit=80)
>>> spec.ignored
('spec.vertices[1].scale',)
"""  # noqa: E501

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from flowspark.pipeline.errors import PipelineSpecError
from flowspark.pipeline.model import PipelineSpec
from flowspark.pipeline.mono_vertex import typed_mono_vertex
from flowspark.pipeline.schema import MONO_VERTEX, PIPELINE, Decoder, kind_of
from flowspark.pipeline.typed import typed_spec
from flowspark.pipeline.validate import validate, validate_mono_vertex

__all__ = ["API_VERSION", "load_spec", "parse_spec"]

API_VERSION = "numaflow.numaproj.io/v1alpha1"


def load_spec(source: str | os.PathLike[str]) -> PipelineSpec:
    """Load a Pipeline from ``source``: YAML text when it is a string with a newline,
    else the path of a YAML file. See :func:`parse_spec`."""
    if isinstance(source, str) and "\n" in source:
        text, origin = source, "pipeline"
    else:
        path = Path(source)
        origin = str(path)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = getattr(exc, "strerror", None) or str(exc)
            raise PipelineSpecError(f"{origin}: cannot read the pipeline file: {reason}") from None
    try:
        obj = yaml.load(text, Loader=_StrictLoader)  # a SafeLoader
    except yaml.YAMLError as exc:
        raise PipelineSpecError(f"{origin}: invalid YAML: {_yaml_problem(exc)}") from None
    return parse_spec(obj, origin)


def parse_spec(obj: dict[str, Any], origin: str = "pipeline") -> PipelineSpec:
    """A decoded Pipeline object (``apiVersion``, ``kind``, ``metadata``, ``spec``) as a
    :class:`PipelineSpec`: decoded, validated with Numaflow's rules, checked against what
    flowspark supports. ``origin`` (a file name) prefixes errors about the whole document.

    >>> parse_spec({"apiVersion": API_VERSION, "kind": "Vertex"}, "v.yaml")
    Traceback (most recent call last):
    ...
    flowspark.pipeline.errors.PipelineSpecError: v.yaml: kind 'Vertex' is not supported: flowspark loads kinds Pipeline and MonoVertex (apiVersion numaflow.numaproj.io/v1alpha1)
    """  # noqa: E501
    if not isinstance(obj, dict):
        raise PipelineSpecError(
            f"{origin}: expected a YAML mapping (a Numaflow Pipeline), got {kind_of(obj)}"
        )
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if api_version != API_VERSION:
        raise PipelineSpecError(
            f"{origin}: apiVersion {api_version!r} is not supported: flowspark loads "
            f"Numaflow Pipelines ({API_VERSION})"
        )
    if kind not in ("Pipeline", "MonoVertex"):
        raise PipelineSpecError(
            f"{origin}: kind {kind!r} is not supported: flowspark loads kinds Pipeline and "
            f"MonoVertex (apiVersion {API_VERSION})"
        )
    decoder = Decoder(origin)
    if kind == "MonoVertex":
        doc = decoder.decode(obj, MONO_VERTEX, "")
        validate_mono_vertex(doc)
    else:
        doc = decoder.decode(obj, PIPELINE, "")
        validate(doc)
    if decoder.unsupported:
        raise PipelineSpecError(decoder.unsupported[0])
    if kind == "MonoVertex":
        return typed_mono_vertex(doc, tuple(decoder.ignored))
    return typed_spec(doc, tuple(decoder.ignored))


class _StrictLoader(yaml.SafeLoader):
    """``yaml.safe_load``'s loader, refusing a key written twice in one mapping (PyYAML
    keeps the last silently; Kubernetes' strict decoding refuses it)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # ``<<:`` keys may be overridden
                continue
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, (str, int, float, bool)) and key in seen:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping",
                    node.start_mark,
                    f"found duplicate key {key!r}",
                    key_node.start_mark,
                )
            if isinstance(key, (str, int, float, bool)):
                seen.add(key)
        return super().construct_mapping(node, deep)


def _yaml_problem(exc: yaml.YAMLError) -> str:
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        mark = exc.problem_mark
        return f"{exc.problem} (line {mark.line + 1}, column {mark.column + 1})"
    return " ".join(str(exc).split())
