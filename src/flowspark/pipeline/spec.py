"""Numaflow ``Pipeline`` specs: parsed, checked and typed, without Spark.

:func:`load_spec` reads a Pipeline YAML (a file or the text itself) and
:func:`parse_spec` a decoded object. Both return a :class:`PipelineSpec` or raise
one :class:`PipelineSpecError` whose message is one line. They work in four passes:

1. **decode**, as the Kubernetes API server would: every mapping is checked
   against the fields Numaflow's CRD has (an unknown field fails with its path),
   every value against its type, durations with Go's format, quantities with
   Kubernetes'. Fields that only mean something on Kubernetes (pod templates,
   ``scale``, ``storage``, ``lifecycle`` …) are accepted and listed in
   :attr:`PipelineSpec.ignored`;
2. **validate**, as Numaflow's controller does: the rules of
   ``pkg/reconciler/validator/pipeline_validate.go`` in its order, with its exact
   error texts (``_RULES``);
3. **unsupported**: Numaflow features flowspark does not run (Kafka, NATS,
   JetStream, user-defined sources, side inputs, rate limits …) fail, naming the field;
4. **build** the frozen dataclasses below, with Numaflow's defaults applied.

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

import base64
import binascii
import os
import re
import zoneinfo
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal

import yaml

from flowspark.pipeline.durations import parse_duration, parse_quantity
from flowspark.pipeline.errors import PipelineSpecError

__all__ = [
    "BuiltinSpec",
    "ContainerSpec",
    "Edge",
    "GeneratorSpec",
    "GroupBySpec",
    "HttpSourceSpec",
    "IdleSourceSpec",
    "Limits",
    "PipelineSpec",
    "PipelineSpecError",
    "RetryStrategy",
    "SecretRef",
    "SinkSpec",
    "SourceSpec",
    "TransformerSpec",
    "UdfSpec",
    "Vertex",
    "WatermarkSpec",
    "WindowSpec",
    "load_spec",
    "parse_spec",
]

API_VERSION = "numaflow.numaproj.io/v1alpha1"

# ---------------------------------------------------------------------------------------
# The typed spec
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Limits:
    """A vertex's read and buffer limits (``spec.limits``, overridden field by field by
    the vertex's ``limits``). ``buffer_usage_limit`` is a percentage."""

    read_batch_size: int = 500
    read_timeout: timedelta = timedelta(seconds=1)
    buffer_max_length: int = 30000
    buffer_usage_limit: int = 80


@dataclass(frozen=True)
class IdleSourceSpec:
    """``spec.watermark.idleSource``: when a source partition counts as idle and how its
    watermark then advances. ``step_interval`` is 100 ms when absent (Numaflow's Rust
    default); ``init_source_delay`` ``None`` keeps the watermark at -1 until data arrives."""

    threshold: timedelta
    step_interval: timedelta
    increment_by: timedelta
    init_source_delay: timedelta | None = None


@dataclass(frozen=True)
class WatermarkSpec:
    """``spec.watermark``: ``max_delay`` is subtracted from the source watermark."""

    disabled: bool = False
    max_delay: timedelta = timedelta(0)
    idle_source: IdleSourceSpec | None = None


@dataclass(frozen=True)
class SecretRef:
    """A Kubernetes secret key (``{name, key}``), e.g. an HTTP source's bearer token."""

    name: str
    key: str


@dataclass(frozen=True)
class HttpSourceSpec:
    """An ``http`` source: ``auth_token`` names the secret holding its bearer token;
    ``service`` asks Numaflow for a ClusterIP Service."""

    auth_token: SecretRef | None = None
    service: bool = False


@dataclass(frozen=True)
class JetStreamSourceSpec:
    """A ``jetstream`` source: ``url`` (comma-separated servers), ``stream``, the
    ``filter_subjects`` to read, and where a fresh run starts (``deliver_policy``:
    ``all`` or ``new``). Offsets are stream sequences in the recovery directory,
    so ``consumer`` is not used."""

    url: str
    stream: str
    filter_subjects: tuple[str, ...] = ()
    deliver_policy: Literal["all", "new"] = "all"


@dataclass(frozen=True)
class GeneratorSpec:
    """A ``generator`` source: up to ``rpu`` messages per ``duration`` tick.
    ``value_blob`` is the decoded ``valueBlob`` (then ``value``/``msg_size`` are unused)."""

    rpu: int = 5
    duration: timedelta = timedelta(seconds=1)
    msg_size: int = 8
    key_count: int = 0
    value: int | None = None
    jitter: timedelta = timedelta(0)
    value_blob: bytes | None = None


@dataclass(frozen=True)
class ContainerSpec:
    """A UDF/sink container: flowspark runs a Python handler in its place; ``image``
    names it. ``env`` holds the plain ``name``/``value`` variables."""

    image: str
    command: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class BuiltinSpec:
    """A pre-1.6 Numaflow builtin: ``cat``/``filter`` UDFs, ``filter``/
    ``eventTimeExtractor``/``timeExtractionFilter`` transformers."""

    name: str
    args: tuple[str, ...] = ()
    kwargs: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class TransformerSpec:
    """A source transformer: a container or a builtin (exactly one)."""

    container: ContainerSpec | None = None
    builtin: BuiltinSpec | None = None


@dataclass(frozen=True)
class SourceSpec:
    """A source vertex: ``kind`` says which of ``http``/``generator``/``jetstream``
    is set."""

    kind: Literal["http", "generator", "jetstream"]
    http: HttpSourceSpec | None = None
    generator: GeneratorSpec | None = None
    jetstream: JetStreamSourceSpec | None = None
    transformer: TransformerSpec | None = None


@dataclass(frozen=True)
class WindowSpec:
    """``groupBy.window``: ``length`` for fixed and sliding, ``slide`` for sliding,
    ``timeout`` for session and accumulator; ``streaming`` selects reduce-stream."""

    kind: Literal["fixed", "sliding", "session", "accumulator"]
    length: timedelta | None = None
    slide: timedelta | None = None
    timeout: timedelta | None = None
    streaming: bool = False


@dataclass(frozen=True)
class GroupBySpec:
    """A reduce vertex's ``groupBy`` (its ``storage`` is validated, then ignored)."""

    window: WindowSpec
    keyed: bool = False
    allowed_lateness: timedelta = timedelta(0)


@dataclass(frozen=True)
class UdfSpec:
    """A UDF vertex: map without ``group_by``, reduce with it. A map UDF has a
    container or a builtin; a reduce UDF a container or nothing."""

    container: ContainerSpec | None = None
    builtin: BuiltinSpec | None = None
    group_by: GroupBySpec | None = None

    @property
    def is_reduce(self) -> bool:
        """Whether this is a reduce UDF (it has ``groupBy``)."""
        return self.group_by is not None


@dataclass(frozen=True)
class RetryStrategy:
    """A sink's ``retryStrategy``: ``on_failure`` is ``retry``, ``fallback`` or ``drop``;
    ``steps`` ``None`` and ``cap`` ``None`` mean unbounded."""

    on_failure: str = "retry"
    interval: timedelta = timedelta(milliseconds=1)
    steps: int | None = None
    factor: float = 1.0
    cap: timedelta | None = None
    jitter: float = 0.0


@dataclass(frozen=True)
class SinkSpec:
    """A sink: ``log``, ``blackhole`` or ``udsink`` (with its ``container``). Only a
    vertex's own sink has ``fallback``, ``on_success`` and ``retry``."""

    kind: Literal["log", "blackhole", "udsink"]
    container: ContainerSpec | None = None
    fallback: SinkSpec | None = None
    on_success: SinkSpec | None = None
    retry: RetryStrategy | None = None


@dataclass(frozen=True)
class Edge:
    """An edge ``source`` → ``target`` (YAML ``from``/``to``). ``tags`` ``None``: no
    conditions, every message goes. ``operator`` is ``or``, ``and``, ``not``, or any other
    value as written (Numaflow's Rust data plane then forwards nothing). ``on_full`` is
    ``retryUntilSuccess`` or ``discardLatest``."""

    source: str
    target: str
    tags: tuple[str, ...] | None = None
    operator: str = "or"
    on_full: str = "retryUntilSuccess"


@dataclass(frozen=True)
class Vertex:
    """A vertex; exactly one of ``source``/``udf``/``sink`` is set, as ``kind`` says.
    ``limits`` are the effective ones; ``partitions`` the effective count (1 for sources
    and non-keyed reduce); ``ordered`` the effective ``ordered.enabled`` (false for
    sources and reduce, which ignore it)."""

    name: str
    kind: Literal["source", "udf", "sink"]
    source: SourceSpec | None = None
    udf: UdfSpec | None = None
    sink: SinkSpec | None = None
    limits: Limits = field(default_factory=Limits)
    partitions: int = 1
    ordered: bool = False


@dataclass(frozen=True)
class PipelineSpec:
    """A validated Numaflow Pipeline. ``ignored`` lists the dotted paths of the fields
    that only mean something on Kubernetes; ``annotations`` are ``metadata.annotations``."""

    name: str
    vertices: tuple[Vertex, ...]
    edges: tuple[Edge, ...]
    limits: Limits = field(default_factory=Limits)
    watermark: WatermarkSpec = field(default_factory=WatermarkSpec)
    ignored: tuple[str, ...] = ()
    annotations: dict[str, str] = field(default_factory=dict)

    def vertex(self, name: str) -> Vertex:
        """The vertex named ``name`` (``KeyError`` if there is none)."""
        for vertex in self.vertices:
            if vertex.name == name:
                return vertex
        raise KeyError(f"pipeline {self.name!r} has no vertex named {name!r}")

    @property
    def sources(self) -> tuple[Vertex, ...]:
        """The source vertices, in spec order."""
        return tuple(v for v in self.vertices if v.kind == "source")

    @property
    def sinks(self) -> tuple[Vertex, ...]:
        """The sink vertices, in spec order."""
        return tuple(v for v in self.vertices if v.kind == "sink")

    def in_edges(self, name: str) -> tuple[Edge, ...]:
        """The edges into vertex ``name``, in spec order."""
        return tuple(e for e in self.edges if e.target == name)

    def out_edges(self, name: str) -> tuple[Edge, ...]:
        """The edges out of vertex ``name``, in spec order."""
        return tuple(e for e in self.edges if e.source == name)


# ---------------------------------------------------------------------------------------
# Entry points
# ---------------------------------------------------------------------------------------


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

    >>> parse_spec({"apiVersion": API_VERSION, "kind": "MonoVertex"}, "mvtx.yaml")
    Traceback (most recent call last):
    ...
    flowspark.pipeline.errors.PipelineSpecError: mvtx.yaml: kind 'MonoVertex' is not supported: flowspark loads only kind Pipeline (apiVersion numaflow.numaproj.io/v1alpha1)
    """  # noqa: E501
    if not isinstance(obj, dict):
        raise PipelineSpecError(
            f"{origin}: expected a YAML mapping (a Numaflow Pipeline), got {_kind_of(obj)}"
        )
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if api_version != API_VERSION:
        raise PipelineSpecError(
            f"{origin}: apiVersion {api_version!r} is not supported: flowspark loads "
            f"Numaflow Pipelines ({API_VERSION})"
        )
    if kind != "Pipeline":
        raise PipelineSpecError(
            f"{origin}: kind {kind!r} is not supported: flowspark loads only kind Pipeline "
            f"(apiVersion {API_VERSION})"
        )
    decoder = _Decoder(origin)
    doc = decoder.decode(obj, _PIPELINE, "")
    _validate(_Doc.of(doc))
    if decoder.unsupported:
        raise PipelineSpecError(decoder.unsupported[0])
    return _build(doc, tuple(decoder.ignored))


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


# ---------------------------------------------------------------------------------------
# Pass 1: decoding against the CRD's fields
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Scalar:
    expected: str
    accepts: tuple[type, ...]
    convert: Callable[[Any, str], Any] | None = None
    minimum: int | None = None


@dataclass(frozen=True)
class _List:
    item: Any


@dataclass(frozen=True)
class _Map:
    """A mapping of free string keys (labels, annotations, kwargs)."""

    value: Any


@dataclass(frozen=True)
class _Obj:
    """A mapping with known fields; ``open``: other fields are accepted unread."""

    fields: Mapping[str, Any]
    open: bool = False


@dataclass(frozen=True)
class _Ignored:
    """Accepted (and decoded as ``schema``), listed in ``PipelineSpec.ignored``."""

    schema: Any = None


@dataclass(frozen=True)
class _Unsupported:
    """A Numaflow feature flowspark does not run: fails after validation with ``why``."""

    why: str
    schema: Any = None


_STR = _Scalar("a string", (str,))
_BOOL = _Scalar("a boolean (true or false)", (bool,))
_INT = _Scalar("an integer", (int,))
_UINT = _Scalar("a non-negative integer", (int,), minimum=0)
_FLOAT = _Scalar("a number", (int, float))
_INT_OR_STR = _Scalar("an integer or a string", (int, str))
_DURATION = _Scalar("a Go duration like '300ms'", (str, int, float), parse_duration)
_QUANTITY = _Scalar("a Kubernetes quantity like '10Gi'", (str, int, float), parse_quantity)
_K8S = _Ignored()  # Kubernetes plumbing: accepted and listed, never read


def _same(names: str, schema: Any) -> dict[str, Any]:
    """The space-separated field ``names``, all with ``schema``."""
    return dict.fromkeys(names.split(), schema)


_CONTAINER = _Obj(
    {
        "image": _STR,
        "command": _List(_STR),
        "args": _List(_STR),
        "env": _List(_Obj({"name": _STR, "value": _STR, "valueFrom": _K8S})),
        **_same(
            "envFrom volumeMounts resources securityContext imagePullPolicy "
            "readinessProbe livenessProbe ports",
            _K8S,
        ),
    }
)
_BUILTIN = _Obj({"name": _STR, "args": _List(_STR), "kwargs": _Map(_STR)})
_RETRY = _Obj(
    {
        "backoff": _Obj(
            {
                "interval": _DURATION,
                "steps": _UINT,
                "factor": _FLOAT,
                "cap": _DURATION,
                "jitter": _FLOAT,
            }
        ),
        "onFailure": _STR,
    }
)
_SOURCE_KINDS = ("http", "generator", "jetstream")
_SINK_KINDS = ("log", "blackhole", "udsink")


def _no_source(kind: str, schema: Any = None) -> _Unsupported:
    return _Unsupported(
        f"source kind {kind!r} is not supported by flowspark (supported: http, generator, "
        "jetstream)",
        schema,
    )


def _no_sink(kind: str) -> _Unsupported:
    return _Unsupported(
        f"sink kind {kind!r} is not supported by flowspark (supported: log, blackhole, udsink)"
    )


_SOURCE = _Obj(
    {
        "generator": _Obj(
            {
                "rpu": _INT,
                "duration": _DURATION,
                "msgSize": _INT,
                "keyCount": _INT,
                "value": _UINT,
                "jitter": _DURATION,
                "valueBlob": _STR,
            }
        ),
        "http": _Obj(
            {
                "auth": _Obj(
                    {"token": _Obj({"name": _STR, "key": _STR, "optional": _Ignored(_BOOL)})}
                ),
                "service": _BOOL,
                "ports": _Ignored(_Obj({"https": _INT, "http": _INT})),
            }
        ),
        "transformer": _Obj(
            {
                "container": _CONTAINER,
                "builtin": _BUILTIN,
                "retryStrategy": _Unsupported(
                    "a transformer retryStrategy is not supported by flowspark (a failing "
                    "transformer fails the run)",
                    _RETRY,
                ),
            }
        ),
        "udsource": _no_source("udsource", _Obj({"container": _CONTAINER})),
        "jetstream": _Obj(
            {
                "url": _STR,
                "stream": _STR,
                "consumer": _Ignored(_STR),
                "deliver_policy": _STR,
                "filter_subjects": _List(_STR),
                "tls": _Unsupported("source.jetstream.tls is not supported by flowspark yet"),
                "auth": _Unsupported("source.jetstream.auth is not supported by flowspark yet"),
            }
        ),
        **{kind: _no_source(kind) for kind in ("kafka", "nats", "pulsar", "sqs")},
        "serving": _no_source("serving"),
    }
)
_ABSTRACT_SINK_FIELDS: dict[str, Any] = {
    "log": _Obj({}),
    "blackhole": _Obj({}),
    "udsink": _Obj({"container": _CONTAINER}),
    **{kind: _no_sink(kind) for kind in ("kafka", "sqs", "pulsar", "serve")},
}
_SINK = _Obj(
    {
        **_ABSTRACT_SINK_FIELDS,
        "fallback": _Obj(_ABSTRACT_SINK_FIELDS),
        "onSuccess": _Obj(_ABSTRACT_SINK_FIELDS),
        "retryStrategy": _RETRY,
    }
)
_UDF = _Obj(
    {
        "container": _CONTAINER,
        "builtin": _BUILTIN,
        "groupBy": _Obj(
            {
                "window": _Obj(
                    {
                        "fixed": _Obj({"length": _DURATION, "streaming": _BOOL}),
                        "sliding": _Obj(
                            {"length": _DURATION, "slide": _DURATION, "streaming": _BOOL}
                        ),
                        "session": _Obj({"timeout": _DURATION}),
                        "accumulator": _Obj({"timeout": _DURATION}),
                    }
                ),
                "keyed": _BOOL,
                "allowedLateness": _DURATION,
                "storage": _Ignored(
                    _Obj(
                        {
                            "persistentVolumeClaim": _Obj(
                                {
                                    "storageClassName": _STR,
                                    "accessMode": _STR,
                                    "volumeSize": _QUANTITY,
                                }
                            ),
                            "emptyDir": _Obj({"medium": _STR, "sizeLimit": _QUANTITY}),
                            "no_store": _Obj({}),
                        }
                    )
                ),
            }
        ),
        "retryStrategy": _Unsupported(
            "a UDF retryStrategy is not supported by flowspark (a failing UDF fails the run)",
            _RETRY,
        ),
    }
)
_LIMITS = _Obj(
    {
        "readBatchSize": _UINT,
        "bufferMaxLength": _UINT,
        "bufferUsageLimit": _UINT,
        "readTimeout": _DURATION,
        "rateLimit": _Unsupported("rate limiting is not supported by flowspark"),
        "concurrency": _Ignored(_UINT),
    }
)
_SCALE = _Obj(
    {
        "disabled": _BOOL,
        "min": _INT,
        "max": _INT,
        **_same(
            "lookbackSeconds zeroReplicaSleepSeconds targetProcessingSeconds "
            "targetBufferAvailability replicasPerScale scaleUpCooldownSeconds "
            "scaleDownCooldownSeconds replicasPerScaleUp replicasPerScaleDown",
            _UINT,
        ),
        "cron": _Obj(
            {
                "timezone": _STR,
                "schedules": _List(_Obj({"start": _STR, "end": _STR, "min": _INT, "max": _INT})),
            }
        ),
    }
)
_NAMED_CONTAINERS = _Ignored(_List(_Obj({"name": _STR}, open=True)))
_POD_TEMPLATE = _same(
    "metadata nodeSelector tolerations securityContext imagePullSecrets "
    "priorityClassName priority affinity serviceAccountName "
    "runtimeClassName automountServiceAccountToken dnsPolicy dnsConfig "
    "resourceClaims",
    _K8S,
)
_ORDERED = _Obj({"enabled": _BOOL})
_VERTEX = _Obj(
    {
        "name": _STR,
        "source": _SOURCE,
        "sink": _SINK,
        "udf": _UDF,
        "limits": _LIMITS,
        "partitions": _INT,
        "ordered": _ORDERED,
        "scale": _Ignored(_SCALE),
        "initContainers": _NAMED_CONTAINERS,
        "sidecars": _NAMED_CONTAINERS,
        "updateStrategy": _Ignored(
            _Obj({"type": _STR, "rollingUpdate": _Obj({"maxUnavailable": _INT_OR_STR})})
        ),
        "sideInputs": _Unsupported("side inputs are not supported by flowspark", _List(_STR)),
        "containerTemplate": _K8S,
        "initContainerTemplate": _K8S,
        "sideInputsContainerTemplate": _K8S,
        "volumes": _K8S,
        **_POD_TEMPLATE,
    }
)
_EDGE = _Obj(
    {
        "from": _STR,
        "to": _STR,
        "conditions": _Obj({"tags": _Obj({"operator": _STR, "values": _List(_STR)})}),
        "onFull": _STR,
    }
)
_SIDE_INPUT = _Obj(
    {
        "name": _STR,
        "container": _CONTAINER,
        "volumes": _K8S,
        "trigger": _Obj({"schedule": _STR, "timezone": _STR}),
    }
)
_SPEC = _Obj(
    {
        "vertices": _List(_VERTEX),
        "edges": _List(_EDGE),
        "limits": _LIMITS,
        "watermark": _Obj(
            {
                "disabled": _BOOL,
                "maxDelay": _DURATION,
                "idleSource": _Obj(
                    dict.fromkeys(
                        ("threshold", "stepInterval", "incrementBy", "initSourceDelay"),
                        _DURATION,
                    )
                ),
            }
        ),
        "ordered": _ORDERED,
        "sideInputs": _Unsupported(
            "side inputs are not supported by flowspark", _List(_SIDE_INPUT)
        ),
        "interStepBufferServiceName": _K8S,
        "interStepBuffer": _K8S,
        "lifecycle": _K8S,
        "templates": _K8S,
    }
)
_METADATA = _Obj(
    {
        "name": _STR,
        "labels": _Ignored(_Map(_STR)),
        "annotations": _Ignored(_Map(_STR)),
        **_same(
            "namespace generateName uid resourceVersion generation "
            "creationTimestamp deletionTimestamp deletionGracePeriodSeconds "
            "finalizers ownerReferences managedFields selfLink",
            _K8S,
        ),
    }
)
_PIPELINE = _Obj(
    {"apiVersion": _STR, "kind": _STR, "metadata": _METADATA, "spec": _SPEC, "status": _K8S}
)


def _kind_of(value: Any) -> str:
    """``value``'s YAML type, for errors."""
    if value is None:
        return "null"
    for kind, name in (
        (bool, "a boolean"),
        (int, "an integer"),
        (float, "a number"),
        (str, "a string"),
        (list, "a list"),
        (dict, "a mapping"),
    ):
        if isinstance(value, kind):
            return name
    return f"a {type(value).__name__}"


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class _Decoder:
    """Decodes a raw YAML tree against a schema: drops nulls (Go reads them as absent),
    converts durations, and collects ignored paths and unsupported features."""

    def __init__(self, origin: str) -> None:
        self.origin = origin
        self.ignored: list[str] = []
        self.unsupported: list[str] = []

    def fail(self, path: str, message: str) -> PipelineSpecError:
        return PipelineSpecError(f"{path or self.origin}: {message}")

    def decode(self, value: Any, schema: Any, path: str) -> Any:
        if isinstance(schema, _Ignored):
            self.ignored.append(path)
            return value if schema.schema is None else self.decode(value, schema.schema, path)
        if isinstance(schema, _Unsupported):
            if value != []:  # an empty list asks for nothing
                self.unsupported.append(f"{path}: {schema.why}")
            return value if schema.schema is None else self.decode(value, schema.schema, path)
        if isinstance(schema, _Scalar):
            return self._scalar(value, schema, path)
        if isinstance(schema, _List):
            if not isinstance(value, list):
                raise self.fail(path, f"expected a list, got {_kind_of(value)} {_show(value)}")
            return [self.decode(item, schema.item, f"{path}[{i}]") for i, item in enumerate(value)]
        if not isinstance(value, dict):
            raise self.fail(path, f"expected a mapping, got {_kind_of(value)} {_show(value)}")
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise self.fail(path, f"field names must be strings, got {_show(key)}")
            if isinstance(schema, _Map):
                out[key] = self.decode(item, schema.value, f"{path}[{key!r}]")
                continue
            sub = f"{path}.{key}" if path else key
            if key not in schema.fields:
                if schema.open:
                    continue
                known = ", ".join(sorted(schema.fields)) or "(none: write {})"
                raise self.fail(path, f"unknown field {key!r}; expected one of: {known}")
            if item is not None:  # as in Go's JSON decoding, null is the same as absent
                out[key] = self.decode(item, schema.fields[key], sub)
        return out

    def _scalar(self, value: Any, schema: _Scalar, path: str) -> Any:
        wrong_bool = isinstance(value, bool) and bool not in schema.accepts
        if wrong_bool or not isinstance(value, schema.accepts):
            raise self.fail(
                path, f"expected {schema.expected}, got {_kind_of(value)} {_show(value)}"
            )
        if schema.minimum is not None and value < schema.minimum:
            raise self.fail(path, f"expected {schema.expected}, got {value!r}")
        return schema.convert(value, path) if schema.convert else value


# ---------------------------------------------------------------------------------------
# Pass 2: Numaflow's validation rules (pipeline_validate.go), in the controller's order
# ---------------------------------------------------------------------------------------

_DNS1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_DNS1035_MESSAGE = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with "
    "an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or "
    "'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
)
_DEFAULT_MAX_REPLICAS = 50
_DEFAULT_INTERVAL = timedelta(milliseconds=1)  # a backoff's interval when absent
# The sink kinds that make a fallback sink "specified" (AbstractSink.IsAnySinkSpecified).
_FALLBACK_KINDS = ("log", "kafka", "blackhole", "udsink", "sqs", "pulsar")
_SERVING_LABEL = "numaflow.numaproj.io/serving-pipeline-name"
_RESERVED_CONTAINERS = frozenset(
    (
        "init",
        "numa",
        "udf",
        "udsink",
        "transformer",
        "udsource",
        "udsi",
        "init-side-inputs",
        "side-inputs-synchronizer",
        "fb-udsink",
        "ons-udsink",
    )
)
_GO_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_GO_ESCAPES |= {"\v": "\\v", '"': '\\"', "\\": "\\\\"}


def _q(text: str) -> str:
    """Go's ``%q``: a double-quoted string with Go escapes.

    >>> print(_q('a"b'), _q("tab\\t"))
    "a\\"b" "tab\\t"
    """
    out = []
    for ch in text:
        if ch in _GO_ESCAPES:
            out.append(_GO_ESCAPES[ch])
        elif ch.isprintable():
            out.append(ch)
        elif ord(ch) < 0x80:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) < 0x10000:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    return '"' + "".join(out) + '"'


def _dns1035(value: str) -> str | None:
    """Kubernetes' ``IsDNS1035Label`` errors as Go's ``%v`` prints them; ``None`` if valid."""
    errors = []
    if len(value.encode()) > 63:
        errors.append("must be no more than 63 characters")
    if not _DNS1035.fullmatch(value):
        errors.append(_DNS1035_MESSAGE)
    return "[" + " ".join(errors) + "]" if errors else None


def _dig(obj: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(obj, dict) or key not in obj:
            return None
        obj = obj[key]
    return obj


def _is_reduce(vertex: dict[str, Any]) -> bool:
    return "groupBy" in vertex.get("udf", {})


@dataclass(frozen=True)
class _Doc:
    """The decoded pipeline, as the rules read it."""

    name: str
    labels: dict[str, str]
    spec: dict[str, Any]
    vertices: list[dict[str, Any]]
    edges: list[dict[str, Any]]

    @classmethod
    def of(cls, doc: dict[str, Any]) -> _Doc:
        spec = doc.get("spec", {})
        return cls(
            name=_dig(doc, "metadata", "name") or "",
            labels=_dig(doc, "metadata", "labels") or {},
            spec=spec,
            vertices=spec.get("vertices", []),
            edges=spec.get("edges", []),
        )

    def outgoing(self, name: str) -> int:
        return sum(1 for e in self.edges if e.get("from", "") == name)

    def incoming(self, name: str) -> int:
        return sum(1 for e in self.edges if e.get("to", "") == name)

    def targets(self) -> dict[str, list[str]]:
        """``from`` → the ``to`` of each of its edges, in edge order."""
        targets: dict[str, list[str]] = {}
        for e in self.edges:
            targets.setdefault(e["from"], []).append(e["to"])
        return targets


_Rule = Callable[[_Doc], "str | None"]


def _rule_pipeline_name(doc: _Doc) -> str | None:
    errors = _dns1035(doc.name)
    return f"invalid pipeline name {_q(doc.name)}, {errors}" if errors else None


def _rule_not_empty(doc: _Doc) -> str | None:
    if not doc.vertices:
        return "empty vertices"
    return None if doc.edges else "no edges defined"


def _rule_vertex_roles(doc: _Doc) -> str | None:
    names: set[str] = set()
    for v in doc.vertices:
        name = v.get("name", "")
        q = _q(name)
        if name in names:
            return f"duplicate vertex name {q}"
        names.add(name)
        roles = [role for role in ("source", "sink", "udf") if role in v]
        if not roles:
            return f"invalid vertex {q}, it could only be either a source, or a sink, or a UDF"
        if len(roles) > 1:
            return f"invalid vertex {q}, only one of 'source', 'sink' and 'udf' can be specified"
        outgoing, incoming = doc.outgoing(name), doc.incoming(name)
        if roles == ["source"] and (outgoing == 0 or incoming > 0):
            return f"invalid vertex {q}, source must have 0 from edges and at least 1 to edge"
        if roles == ["sink"] and (incoming == 0 or outgoing > 0):
            return f"invalid vertex {q}, sink must have 0 to edges and at least 1 from edge"
        if roles == ["udf"] and (outgoing == 0 or incoming == 0):
            return f"invalid vertex {q}, UDF must have to and from edges"
    return None


def _rule_sources_and_sinks(doc: _Doc) -> str | None:
    if not any("source" in v for v in doc.vertices):
        return "pipeline has no source, at least one vertex with 'source' defined is required"
    if not any("sink" in v for v in doc.vertices):
        return "pipeline has no sink, at least one vertex with 'sink' defined is required"
    return None


def _rule_serving(doc: _Doc) -> str | None:
    if _SERVING_LABEL not in doc.labels:
        for v in doc.vertices:
            if "serve" in v.get("sink", {}):
                return (
                    f"builtin 'serve' sink used in {_q(v.get('name', ''))} vertex is only "
                    "allowed with ServingPipeline"
                )
    serving = next((v for v in doc.vertices if "serving" in v.get("source", {})), None)
    if serving is not None:
        for v in doc.vertices:
            if _is_reduce(v):
                return (
                    f"pipeline has a Serving source {_q(serving.get('name', ''))} and a reduce "
                    f"vertex {_q(v.get('name', ''))}. Reduce is not supported with Serving source"
                )
    return None


def _rule_edges(doc: _Doc) -> str | None:
    names = {v.get("name", "") for v in doc.vertices}
    seen: set[tuple[str, str]] = set()
    for e in doc.edges:
        source, target = e.get("from", ""), e.get("to", "")
        if not source or not target:
            return "invalid edge: both from and to need to be specified"
        for name in (source, target):
            if name not in names:
                return f"invalid edge: no vertex named {_q(name)}"
        if (source, target) in seen:
            return f"cannot define multiple edges from vertex {_q(source)} to vertex {_q(target)}"
        seen.add((source, target))
        if "conditions" in e and not _dig(e, "conditions", "tags", "values"):
            return "invalid edge: conditional forwarding requires at least one tag value"
    return None


def _rule_all_in_edges(doc: _Doc) -> str | None:
    in_edges = {e[end] for e in doc.edges for end in ("from", "to")}
    if any(v.get("name", "") not in in_edges for v in doc.vertices):
        return "not all the vertex names are defined in edges"
    return None


def _rule_connected(doc: _Doc) -> str | None:
    neighbours: dict[str, set[str]] = {}
    for e in doc.edges:
        neighbours.setdefault(e["from"], set()).add(e["to"])
        neighbours.setdefault(e["to"], set()).add(e["from"])
    seen: set[str] = set()
    stack = [doc.vertices[0]["name"]]
    while stack:
        name = stack.pop()
        if name not in seen:
            seen.add(name)
            stack.extend(neighbours.get(name, set()) - seen)
    return None if len(seen) == len(doc.vertices) else "invalid pipeline, cannot be disjointed"


def _rule_cycles(doc: _Doc) -> str | None:
    """Cycles are allowed, unless a reduce vertex is at or downstream of one. A cycle is
    found, as Numaflow does, by a depth-first walk of every path from each source; its
    vertex is the one a path comes back to."""
    targets = doc.targets()
    reduces = {v["name"] for v in doc.vertices if _is_reduce(v)}

    def cycles_from(name: str, path: set[str]) -> list[str]:
        if name not in targets:
            return []
        if name in path:
            return [name]
        path.add(name)
        found = [c for target in targets[name] for c in cycles_from(target, path)]
        path.discard(name)
        return found

    def reaches_reduce(name: str, path: set[str]) -> bool:
        if name in reduces:
            return True
        if name not in targets or name in path:
            return False
        path.add(name)
        found = any(reaches_reduce(target, path) for target in targets[name])
        path.discard(name)
        return found

    cycles: dict[str, None] = {}
    for v in doc.vertices:
        if "source" in v:
            cycles.update(dict.fromkeys(cycles_from(v["name"], set())))
    for name in cycles:
        if reaches_reduce(name, set()):
            return (
                "there's a Reduce Vertex at or to the right of a Cycle occurring at Vertex "
                f"{_q(name)}"
            )
    return None


def _rule_vertices(doc: _Doc) -> str | None:
    for v in doc.vertices:
        message = _vertex_error(v)
        if message is not None:
            return message
        errors = _dns1035(f"{doc.name}-{v['name']}-headless")
        if errors:
            return (
                "the length of the pipeline name plus the vertex name is over the max limit. "
                f"({doc.name}-{v['name']}), {errors}"
            )
    return None


def _vertex_error(v: dict[str, Any]) -> str | None:
    """``validateVertex``: name, scale, partitions, containers, then the role's spec."""
    name = v["name"]
    q = _q(name)
    errors = _dns1035(name)
    if errors:
        return f"invalid vertex name {q}, {errors}"
    scale = v.get("scale", {})
    if "cron" in scale and "source" not in v:
        return f"vertex {q}: cron autoscaling is only supported for source vertices"
    message = _cron_scaling_error(scale)
    if message is not None:
        return f"vertex {q}: invalid scale.cron: {message}"
    low, high = scale.get("min", 0), scale.get("max", _DEFAULT_MAX_REPLICAS)
    if low < 0:
        return f"vertex {q}: min number of replicas should not be smaller than 0"
    if low > high:
        return f"vertex {q}: max number of replicas should be greater than or equal to min"
    if "partitions" in v:
        partitions = v["partitions"]
        if partitions < 0:
            return f"vertex {q}: number of partitions should not be smaller than 0"
        if partitions > 1 and _is_reduce(v) and not v["udf"]["groupBy"].get("keyed", False):
            return f"vertex {q}: partitions should not > 1 for non-keyed reduce vertices"
        if partitions > 1 and "source" in v:
            return f"vertex {q}: partitions should not > 1 for source vertices"
    message = _max_unavailable_error(_dig(v, "updateStrategy", "rollingUpdate", "maxUnavailable"))
    if message is not None:
        return f"vertex {q}: invalid maxUnavailable: {message}"
    for container in v.get("initContainers", []):
        if container.get("name", "") in _RESERVED_CONTAINERS:
            return (
                f"vertex {q}: init container name {_q(container['name'])} is reserved for "
                "containers created by numaflow"
            )
    if v.get("sidecars") and "source" in v:
        return f'vertex {q}: "sidecars" are not supported for source vertices'
    for container in v.get("sidecars", []):
        if container.get("name", "") in _RESERVED_CONTAINERS:
            return (
                f"vertex {q}: sidecar container name {_q(container['name'])} is reserved for "
                "containers created by numaflow"
            )
    for role, check in (("source", _source_error), ("udf", _udf_error), ("sink", _sink_error)):
        if role in v:
            message = check(v[role])
            return None if message is None else f"invalid vertex {q}: {message}"
    return None


def _cron_scaling_error(scale: dict[str, Any]) -> str | None:
    """``validateCronScaling``. Cron expressions are checked for their six fields only
    (Numaflow parses them with robfig/cron)."""
    cron = scale.get("cron")
    if cron is None:
        return None
    if scale.get("disabled", False):
        return "cron must not be configured when autoscaling is disabled"
    if scale.get("min", 0) < 0:
        return "scale.min must not be negative"
    if scale.get("max", 0) < 0:
        return "scale.max must not be negative"
    if scale.get("min", 0) > scale.get("max", _DEFAULT_MAX_REPLICAS):
        return "scale.min must not be greater than scale.max"
    timezone = cron.get("timezone") or "UTC"
    if timezone not in ("UTC", "Local"):
        try:
            zoneinfo.ZoneInfo(timezone)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            return f"invalid timezone {_q(timezone)}: unknown time zone {timezone}"
    schedules = cron.get("schedules", [])
    if not schedules:
        return "at least one schedule is required"
    for i, schedule in enumerate(schedules):
        fields = {}
        for end in ("start", "end"):
            text = schedule.get(end, "")
            fields[end] = text.split()
            invalid = f"schedules[{i}].{end} {_q(text)} is not a valid cron expression: "
            if not fields[end]:
                return invalid + "empty spec string"
            if len(fields[end]) != 6:
                found = len(fields[end])
                return invalid + f"expected exactly 6 fields, found {found}: [{text.strip()}]"
        if fields["start"] == fields["end"]:
            return f"schedules[{i}]: start and end must not be identical"
        if fields["start"][3:] != fields["end"][3:]:
            return f"schedules[{i}]: start and end day-of-month, month, and day-of-week must match"
        for bound in ("min", "max"):
            if bound not in schedule:
                return f"schedules[{i}]: {bound} is required"
        for bound in ("min", "max"):
            if schedule[bound] < 0:
                return f"schedules[{i}]: {bound} must not be negative"
        if schedule["min"] > schedule["max"]:
            return (
                f"schedules[{i}]: min ({schedule['min']}) must not be greater than max "
                f"({schedule['max']})"
            )
    return None


def _max_unavailable_error(value: int | str | None) -> str | None:
    """``intstr.GetScaledValueFromIntOrPercent``'s errors (an int, or a percentage)."""
    if not isinstance(value, str):
        return None
    prefix = "invalid value for IntOrString: "
    if not value.endswith("%"):
        return prefix + "invalid type: string is not a percentage"
    number = value[:-1]
    if not re.fullmatch(r"[+-]?[0-9]+", number):
        atoi = f"strconv.Atoi: parsing {_q(number)}: invalid syntax"
        return prefix + f"invalid value {_q(value)}: {atoi}"
    return None


def _image(spec: dict[str, Any] | None) -> str:
    return _dig(spec, "container", "image") or ""


def _source_error(source: dict[str, Any]) -> str | None:
    """``validateSource``; a transformer may also be a pre-1.6 builtin (flowspark)."""
    transformer = source.get("transformer")
    if transformer is not None:
        if not _image(transformer) and "builtin" not in transformer:
            return "invalid source transformer, specify a customized image"
        if _image(transformer) and "builtin" in transformer:
            return (
                "invalid source transformer, can not specify both builtin transformer, and a "
                "customized image"
            )
        if "retryStrategy" in transformer:
            message = _non_sink_retry_error(transformer["retryStrategy"])
            if message is not None:
                return message
    if "udsource" in source:
        if not _image(source["udsource"]):
            return "invalid user-defined source spec, a customized image is required"
        if any(kind in source for kind in ("http", "kafka", "nats", "generator")):
            return (
                "invalid user-defined source spec, only one of 'http', 'kafka', 'nats', "
                "'generator' and 'udSource' can be specified"
            )
    return None


def _udf_error(udf: dict[str, Any]) -> str | None:
    """``validateMapUDF`` / ``validateReduceUDF``; a map UDF may also be a pre-1.6
    builtin (flowspark), with the texts Numaflow had for builtins then."""
    if "groupBy" not in udf:
        if "builtin" not in udf and not _image(udf):
            return "invalid udf spec, a customized image is required"
        if "builtin" in udf and _image(udf):
            return "invalid udf, can not specify both builtin function, and a customized image"
        if "retryStrategy" in udf:
            return _non_sink_retry_error(udf["retryStrategy"])
        return None
    if "builtin" in udf:
        return "invalid udf, there's no buildin function support in reduce vertices"
    if "container" in udf and not _image(udf):
        return "invalid udf spec, a customized image is required"
    if "retryStrategy" in udf:
        return "invalid udf spec, retryStrategy not supported for reduce udf"
    window = udf["groupBy"].get("window", {})
    if not window:
        return 'invalid "groupBy.window", no windowing strategy specified'
    for a, b in (("fixed", "sliding"), ("fixed", "session"), ("sliding", "session")):
        if a in window and b in window:
            return f'invalid "groupBy.window", either {a} or {b} is allowed, not both'
    for kind, required in (
        ("fixed", "length"),
        ("sliding", "length"),
        ("sliding", "slide"),
        ("session", "timeout"),
        ("accumulator", "timeout"),
    ):
        if kind in window and required not in window[kind]:
            return f'invalid "groupBy.window.{kind}", "{required}" is missing'
    storage = udf["groupBy"].get("storage")
    if storage is None:
        return 'invalid "groupBy", "storage" is missing'
    if not storage:
        return 'invalid "groupBy.storage", type of storage to use is missing'
    for a, b, a_name, b_name in (
        ("persistentVolumeClaim", "emptyDir", "emptyDir", "persistentVolumeClaim"),
        ("persistentVolumeClaim", "no_store", "none", "persistentVolumeClaim"),
        ("emptyDir", "no_store", "none", "emptyDir"),
    ):
        if a in storage and b in storage:
            return f'invalid "groupBy.storage", either {a_name} or {b_name} is allowed, not both'
    return None


def _sink_error(sink: dict[str, Any]) -> str | None:
    """``hasValidSinkRetryStrategy``."""
    retry = sink.get("retryStrategy", {})
    fallback = sink.get("fallback", {})
    has_fallback = any(kind in fallback for kind in _FALLBACK_KINDS)
    if retry.get("onFailure") == "fallback" and not has_fallback:
        return "given OnFailure strategy is fallback but fallback sink is not provided"
    return _backoff_error(retry.get("backoff"))


def _non_sink_retry_error(retry: dict[str, Any]) -> str | None:
    if retry.get("onFailure") == "fallback":
        return "given fallback OnFailure strategy is not currently supported"
    return _backoff_error(retry.get("backoff"))


def _backoff_error(backoff: dict[str, Any] | None) -> str | None:
    if backoff is None:
        return None
    if backoff.get("steps") == 0:
        return "steps in backoff strategy cannot be 0"
    if "factor" in backoff and backoff["factor"] < 1:
        return "factor in backoff strategy cannot be less than 1"
    if "cap" in backoff and "interval" in backoff and backoff["cap"] < backoff["interval"]:
        return "cap in backoff strategy cannot be less than interval"
    if "cap" in backoff and "interval" not in backoff and backoff["cap"] < _DEFAULT_INTERVAL:
        return (
            "cap in backoff strategy cannot be less than default interval value, if interval "
            "is not provided"
        )
    if "jitter" in backoff and not 0 <= backoff["jitter"] < 1:
        return "jitter in backoff strategy should be between 0 and 1"
    return None


def _rule_side_inputs(doc: _Doc) -> str | None:
    defined: set[str] = set()
    for side_input in doc.spec.get("sideInputs", []):
        name = side_input.get("name", "")
        if not name:
            return "side input name is missing"
        if name in defined:
            return f"side input {_q(name)} is defined more than once"
        defined.add(name)
        if "container" not in side_input:
            return f"side input {_q(name)}: container is missing"
        if not _image(side_input):
            return f"side input {_q(name)}: image is missing"
        if "trigger" not in side_input:
            return f"side input {_q(name)}: trigger is missing"
        if not side_input["trigger"].get("schedule"):
            return f"side input {_q(name)}: schedule is required"
    for v in doc.vertices:
        used: set[str] = set()
        for name in v.get("sideInputs", []):
            if name not in defined:
                return f"vertex {_q(v['name'])}: side input {_q(name)} is not defined"
            if name in used:
                return f"vertex {_q(v['name'])}: side input {_q(name)} is defined more than once"
            used.add(name)
    return None


def _rule_idle_source(doc: _Doc) -> str | None:
    idle = _dig(doc.spec, "watermark", "idleSource")
    if idle is None:
        return None
    prefix = "invalid idle source watermark config, "
    zero = timedelta(0)
    if "threshold" not in idle:
        return prefix + "threshold is missing"
    if idle["threshold"] <= zero:
        return prefix + "threshold should be greater than 0"
    if "incrementBy" not in idle:
        return prefix + "incrementBy is missing"
    if idle["incrementBy"] <= zero:
        return prefix + "incrementBy should be greater than 0"
    if idle["threshold"] < idle["incrementBy"]:
        return prefix + "threshold should be greater than or equal to incrementBy"
    if "initSourceDelay" in idle:
        if idle["initSourceDelay"] <= zero:
            return prefix + "initSourceDelay should be greater than 0"
        if idle["initSourceDelay"] < idle["threshold"]:
            return prefix + "initSourceDelay should be greater than or equal to threshold"
    return None


def _rule_ordered(doc: _Doc) -> str | None:
    for v in doc.vertices:
        if "source" in v or _is_reduce(v) or not _ordered(v, doc.spec):
            continue
        if "min" in v.get("scale", {}) or "max" in v.get("scale", {}):
            return (
                f"vertex {_q(v['name'])}: scale (min/max) should not be set when ordered "
                "processing is enabled. Replicas will be fixed to partition count"
            )
    return None


def _ordered(vertex: dict[str, Any], spec: dict[str, Any]) -> bool:
    """A vertex's ``ordered.enabled``, else the pipeline's."""
    if "ordered" in vertex:
        return bool(vertex["ordered"].get("enabled", False))
    return bool(_dig(spec, "ordered", "enabled"))


# Numaflow's ValidatePipeline, step by step; each rule returns the first error text.
_RULES: tuple[_Rule, ...] = (
    _rule_pipeline_name,  # 1: DNS-1035 pipeline name
    _rule_not_empty,  # 2: vertices and edges
    _rule_vertex_roles,  # 3-7: unique names, one role, edge counts per role
    _rule_sources_and_sinks,  # 8
    _rule_serving,  # 9: serve sink / Serving source with reduce
    _rule_edges,  # 10-12: endpoints, duplicates, tag values
    _rule_all_in_edges,  # 13
    _rule_connected,  # 14
    _rule_cycles,  # 15: no reduce at or after a cycle
    _rule_vertices,  # 16-25: per vertex: name, scale, partitions, containers, role spec
    _rule_side_inputs,  # 26
    _rule_idle_source,  # 27
    _rule_ordered,  # 28
)


def _validate(doc: _Doc) -> None:
    for rule in _RULES:
        message = rule(doc)
        if message is not None:
            raise PipelineSpecError(message)


# ---------------------------------------------------------------------------------------
# Pass 4: the typed spec, with defaults
# ---------------------------------------------------------------------------------------

# Required kwargs of the pre-1.6 builtins (nf@6de4709^ pkg/udf/builtin, nf@045e930^
# pkg/sources/transformer/builtin).
_MAP_BUILTINS = {"cat": (), "filter": ("expression",)}
_ONE_MICROSECOND = timedelta(microseconds=1)  # the least positive duration
_TRANSFORMER_BUILTINS = {
    "filter": ("expression",),
    "eventTimeExtractor": ("expression",),
    "timeExtractionFilter": ("filterExpr", "eventTimeExpr"),
}


def _build(doc: dict[str, Any], ignored: tuple[str, ...]) -> PipelineSpec:
    spec = doc.get("spec", {})
    limits = _limits(spec.get("limits", {}), Limits(), "spec.limits")
    metadata = doc.get("metadata", {})
    return PipelineSpec(
        name=metadata.get("name", ""),
        vertices=tuple(
            _vertex(v, f"spec.vertices[{i}]", limits, spec)
            for i, v in enumerate(spec.get("vertices", []))
        ),
        edges=tuple(_edge(e, f"spec.edges[{i}]") for i, e in enumerate(spec.get("edges", []))),
        limits=limits,
        watermark=_watermark(spec.get("watermark", {}), "spec.watermark"),
        ignored=ignored,
        annotations=dict(metadata.get("annotations", {})),
    )


def _at_least(value: Any, minimum: Any, path: str, what: str) -> Any:
    if value < minimum:
        raise PipelineSpecError(f"{path}: {what}, got {_show_value(value)}")
    return value


def _show_value(value: Any) -> str:
    if isinstance(value, timedelta):
        return f"{value.total_seconds():g}s"
    return repr(value)


def _limits(raw: dict[str, Any], base: Limits, path: str) -> Limits:
    zero = timedelta(0)
    read_batch_size = raw.get("readBatchSize", base.read_batch_size)
    buffer_max_length = raw.get("bufferMaxLength", base.buffer_max_length)
    usage = raw.get("bufferUsageLimit", base.buffer_usage_limit)
    if not 1 <= usage <= 100:
        raise PipelineSpecError(
            f"{path}.bufferUsageLimit: expected a percentage from 1 to 100, got {usage!r}"
        )
    return Limits(
        read_batch_size=_at_least(
            read_batch_size, 1, f"{path}.readBatchSize", "must be at least 1"
        ),
        read_timeout=_at_least(
            raw.get("readTimeout", base.read_timeout),
            zero,
            f"{path}.readTimeout",
            "must not be negative",
        ),
        buffer_max_length=_at_least(
            buffer_max_length, 1, f"{path}.bufferMaxLength", "must be at least 1"
        ),
        buffer_usage_limit=usage,
    )


def _watermark(raw: dict[str, Any], path: str) -> WatermarkSpec:
    zero = timedelta(0)
    idle = raw.get("idleSource")
    idle_source = None
    if idle is not None:  # threshold and incrementBy were checked by _rule_idle_source
        step = idle.get("stepInterval", timedelta(milliseconds=100))
        idle_source = IdleSourceSpec(
            threshold=idle["threshold"],
            step_interval=_at_least(
                step, zero, f"{path}.idleSource.stepInterval", "must not be negative"
            ),
            increment_by=idle["incrementBy"],
            init_source_delay=idle.get("initSourceDelay"),
        )
    return WatermarkSpec(
        disabled=raw.get("disabled", False),
        max_delay=_at_least(
            raw.get("maxDelay", zero), zero, f"{path}.maxDelay", "must not be negative"
        ),
        idle_source=idle_source,
    )


def _edge(raw: dict[str, Any], path: str) -> Edge:
    on_full = raw.get("onFull", "retryUntilSuccess")
    if on_full not in ("retryUntilSuccess", "discardLatest"):
        raise PipelineSpecError(
            f"{path}.onFull: unsupported value {on_full!r}; expected retryUntilSuccess or "
            "discardLatest"
        )
    tags = _dig(raw, "conditions", "tags")
    return Edge(
        source=raw["from"],
        target=raw["to"],
        tags=None if tags is None else tuple(tags["values"]),
        operator="or" if tags is None else tags.get("operator", "or"),
        on_full=on_full,
    )


def _vertex(raw: dict[str, Any], path: str, limits: Limits, spec: dict[str, Any]) -> Vertex:
    source = udf = sink = None
    reduce_keyed = None
    if "source" in raw:
        kind: Literal["source", "udf", "sink"] = "source"
        source = _source(raw["source"], f"{path}.source")
    elif "udf" in raw:
        kind = "udf"
        udf = _udf(raw["udf"], f"{path}.udf")
        if udf.group_by is not None:
            reduce_keyed = udf.group_by.keyed
    else:
        kind = "sink"
        sink = _sink(raw["sink"], f"{path}.sink", top=True)
    partitions = max(raw.get("partitions", 1), 1)
    if kind == "source" or reduce_keyed is False:
        partitions = 1
    ordered = kind != "source" and reduce_keyed is None and _ordered(raw, spec)
    return Vertex(
        name=raw["name"],
        kind=kind,
        source=source,
        udf=udf,
        sink=sink,
        limits=_limits(raw.get("limits", {}), limits, f"{path}.limits"),
        partitions=partitions,
        ordered=ordered,
    )


def _one_kind(raw: dict[str, Any], kinds: tuple[str, ...], path: str, what: str) -> Any:
    """The one kind of ``kinds`` that ``raw`` sets (unsupported kinds failed already)."""
    found = [kind for kind in kinds if kind in raw]
    if len(found) > 1:
        raise PipelineSpecError(
            f"{path}: only one {what} kind may be given, found {' and '.join(found)}"
        )
    if not found:
        raise PipelineSpecError(
            f"{path}: no {what} kind given; flowspark supports {', '.join(kinds)} (write e.g. "
            f"'{kinds[0]}: {{}}': a kind with no value is null, which counts as absent)"
        )
    return found[0]


def _source(raw: dict[str, Any], path: str) -> SourceSpec:
    kind = _one_kind(raw, _SOURCE_KINDS, path, "source")
    http = generator = transformer = jetstream = None
    if kind == "jetstream":
        jetstream = _jetstream(raw["jetstream"], f"{path}.jetstream")
    elif kind == "http":
        token = _dig(raw, "http", "auth", "token")
        auth_token = None
        if token is not None:
            if not token.get("name") or not token.get("key"):
                raise PipelineSpecError(
                    f"{path}.http.auth.token: a secret 'name' and 'key' are required"
                )
            auth_token = SecretRef(token["name"], token["key"])
        http = HttpSourceSpec(auth_token=auth_token, service=raw["http"].get("service", False))
    else:
        generator = _generator(raw["generator"], f"{path}.generator")
    if "transformer" in raw:
        t = raw["transformer"]
        transformer = TransformerSpec(
            container=_container(t["container"]) if _image(t) else None,
            builtin=_builtin(t, f"{path}.transformer", _TRANSFORMER_BUILTINS, "transformer"),
        )
    return SourceSpec(
        kind=kind, http=http, generator=generator, jetstream=jetstream, transformer=transformer
    )


def _jetstream(raw: dict[str, Any], path: str) -> JetStreamSourceSpec:
    for required in ("url", "stream"):
        if not raw.get(required):
            raise PipelineSpecError(f"{path}.{required}: required")
    policy = str(raw.get("deliver_policy", "all")).lower().replace("deliverpolicy", "")
    if policy not in ("all", "new"):
        raise PipelineSpecError(
            f"{path}.deliver_policy: {_q(raw['deliver_policy'])} is not supported by flowspark "
            "(supported: all, new)"
        )
    return JetStreamSourceSpec(
        url=raw["url"],
        stream=raw["stream"],
        filter_subjects=tuple(raw.get("filter_subjects", ())),
        deliver_policy=policy,  # type: ignore[arg-type]
    )


def _generator(raw: dict[str, Any], path: str) -> GeneratorSpec:
    zero = timedelta(0)
    blob = raw.get("valueBlob")
    value_blob = None
    if blob is not None:
        try:
            value_blob = base64.b64decode(blob, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise PipelineSpecError(f"{path}.valueBlob: invalid base64: {exc}") from None
    return GeneratorSpec(
        rpu=_at_least(raw.get("rpu", 5), 1, f"{path}.rpu", "must be at least 1"),
        duration=_at_least(
            raw.get("duration", timedelta(seconds=1)),
            _ONE_MICROSECOND,
            f"{path}.duration",
            "must be positive",
        ),
        msg_size=_at_least(raw.get("msgSize", 8), 0, f"{path}.msgSize", "must not be negative"),
        key_count=_at_least(raw.get("keyCount", 0), 0, f"{path}.keyCount", "must not be negative"),
        value=raw.get("value"),
        jitter=_at_least(raw.get("jitter", zero), zero, f"{path}.jitter", "must not be negative"),
        value_blob=value_blob,
    )


def _container(raw: dict[str, Any]) -> ContainerSpec:
    return ContainerSpec(
        image=raw.get("image", ""),
        command=tuple(raw.get("command", ())),
        args=tuple(raw.get("args", ())),
        env={e.get("name", ""): e.get("value", "") for e in raw.get("env", [])},
    )


def _builtin(
    raw: dict[str, Any], path: str, known: dict[str, tuple[str, ...]], what: str
) -> BuiltinSpec | None:
    """``raw['builtin']`` checked as Numaflow did when the builtin started."""
    builtin = raw.get("builtin")
    if builtin is None:
        return None
    name, kwargs = builtin.get("name", ""), builtin.get("kwargs", {})
    if name not in known:
        raise PipelineSpecError(f"{path}.builtin.name: unrecognized {what} {_q(name)}")
    for required in known[name]:
        if required not in kwargs:
            raise PipelineSpecError(f'{path}.builtin.kwargs: missing "{required}"')
    return BuiltinSpec(name=name, args=tuple(builtin.get("args", ())), kwargs=dict(kwargs))


def _udf(raw: dict[str, Any], path: str) -> UdfSpec:
    group_by = None
    if "groupBy" in raw:
        group_by = _group_by(raw["groupBy"], f"{path}.groupBy")
    return UdfSpec(
        container=_container(raw["container"]) if _image(raw) else None,
        builtin=_builtin(raw, path, _MAP_BUILTINS, "function"),
        group_by=group_by,
    )


def _group_by(raw: dict[str, Any], path: str) -> GroupBySpec:
    window = raw["window"]
    kinds = [k for k in ("fixed", "sliding", "session", "accumulator") if k in window]
    if len(kinds) > 1:  # Numaflow's validator lets accumulator pair with another kind
        raise PipelineSpecError(
            f"{path}.window: only one window kind may be given, found {' and '.join(kinds)}"
        )
    kind: Any = kinds[0]
    w = window[kind]
    for name in ("length", "slide", "timeout"):
        if name in w:
            _at_least(w[name], _ONE_MICROSECOND, f"{path}.window.{kind}.{name}", "must be positive")
    zero = timedelta(0)
    return GroupBySpec(
        window=WindowSpec(
            kind=kind,
            length=w.get("length"),
            slide=w.get("slide"),
            timeout=w.get("timeout"),
            streaming=w.get("streaming", False),
        ),
        keyed=raw.get("keyed", False),
        allowed_lateness=_at_least(
            raw.get("allowedLateness", zero),
            zero,
            f"{path}.allowedLateness",
            "must not be negative",
        ),
    )


def _sink(raw: dict[str, Any], path: str, top: bool) -> SinkSpec:
    kind = _one_kind(raw, _SINK_KINDS, path, "sink")
    container = None
    if kind == "udsink":
        if not _image(raw["udsink"]):
            raise PipelineSpecError(
                f"{path}.udsink.container.image: a udsink needs a container image (flowspark "
                "runs a Python handler in its place)"
            )
        container = _container(raw["udsink"]["container"])
    if not top:
        return SinkSpec(kind=kind, container=container)
    return SinkSpec(
        kind=kind,
        container=container,
        fallback=_sink(raw["fallback"], f"{path}.fallback", False) if "fallback" in raw else None,
        on_success=(
            _sink(raw["onSuccess"], f"{path}.onSuccess", False) if "onSuccess" in raw else None
        ),
        retry=_retry(raw["retryStrategy"], f"{path}.retryStrategy")
        if "retryStrategy" in raw
        else None,
    )


def _retry(raw: dict[str, Any], path: str) -> RetryStrategy:
    on_failure = raw.get("onFailure", "retry")
    if on_failure not in ("retry", "fallback", "drop"):
        raise PipelineSpecError(
            f"{path}.onFailure: unsupported value {on_failure!r}; expected retry, fallback or drop"
        )
    backoff = raw.get("backoff", {})
    interval = backoff.get("interval", _DEFAULT_INTERVAL)
    return RetryStrategy(
        on_failure=on_failure,
        interval=_at_least(
            interval, timedelta(0), f"{path}.backoff.interval", "must not be negative"
        ),
        steps=backoff.get("steps"),
        factor=float(backoff.get("factor", 1.0)),
        cap=backoff.get("cap"),
        jitter=float(backoff.get("jitter", 0.0)),
    )
