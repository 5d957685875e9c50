"""The typed Numaflow Pipeline: frozen dataclasses, Numaflow's defaults applied.

:func:`flowspark.pipeline.spec.load_spec` returns a :class:`PipelineSpec`; the
builder (:mod:`flowspark.pipeline.build`) reads only these classes. A field
added to the schema (:mod:`flowspark.pipeline.schema`) gets its attribute here
and its default in :mod:`flowspark.pipeline.typed`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Literal

from flowspark.api.udf.checks import tags_match
from flowspark.connectors.numaflow.sqs import SqsConfig
from flowspark.shared.retry import RetryFields

__all__ = [
    "BuiltinSpec",
    "Bypass",
    "ContainerSpec",
    "Edge",
    "GeneratorSpec",
    "GroupBySpec",
    "HttpSourceSpec",
    "IdleSourceSpec",
    "JetStreamSourceSpec",
    "Limits",
    "PipelineSpec",
    "RetryStrategy",
    "SecretRef",
    "SideInputSpec",
    "SinkSpec",
    "SourceSpec",
    "TagCondition",
    "TransformerSpec",
    "UdfSpec",
    "Vertex",
    "WatermarkSpec",
    "WindowSpec",
]


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
    """A source vertex: ``kind`` says which of ``http``/``generator``/``jetstream``/
    ``udsource``/``sqs`` is set (``udsource``: the container of a user-defined source)."""

    kind: Literal["http", "generator", "jetstream", "udsource", "sqs"]
    http: HttpSourceSpec | None = None
    generator: GeneratorSpec | None = None
    jetstream: JetStreamSourceSpec | None = None
    transformer: TransformerSpec | None = None
    udsource: ContainerSpec | None = None
    sqs: SqsConfig | None = None


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
class RetryStrategy(RetryFields):
    """A sink's ``retryStrategy``, as the spec gives it (see :class:`RetryFields`)."""


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
class TagCondition:
    """A forwarding condition on a message's tags: ``operator`` ``or`` (any of ``tags``),
    ``and`` (all of them) or ``not`` (none of them)."""

    tags: tuple[str, ...]
    operator: str = "or"
    _wanted: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_wanted", frozenset(self.tags))

    def holds(self, tags: Sequence[str]) -> bool:
        """Whether a message with ``tags`` meets the condition (no ``tags`` in the
        condition: every message does, as in Numaflow).

        >>> cond = TagCondition(("a", "b"), "not")
        >>> cond.holds(["c"]), cond.holds(["b"]), TagCondition(()).holds([])
        (True, False, True)
        """
        return tags_match(self._wanted, self.operator, tags)


@dataclass(frozen=True)
class Bypass:
    """A MonoVertex's ``bypass``: which messages of its map UDF go straight to its sink,
    its fallback sink or its onSuccess sink (the first condition that holds, in that
    order; ``None``: no such condition)."""

    sink: TagCondition | None = None
    fallback: TagCondition | None = None
    on_success: TagCondition | None = None

    def destination(self, tags: Sequence[str]) -> str:
        """Where a message with ``tags`` goes: ``sink``, ``fallback`` or ``onSuccess``
        (``sink`` as well when no condition holds: after the map comes the sink).

        >>> Bypass(fallback=TagCondition(("bad",))).destination(["bad"])
        'fallback'
        """
        for name, condition in (
            ("sink", self.sink),
            ("fallback", self.fallback),
            ("onSuccess", self.on_success),
        ):
            if condition is not None and condition.holds(tags):
                return name
        return "sink"


@dataclass(frozen=True)
class SideInputSpec:
    """A side input (``spec.sideInputs[]``): its retrieval's container and schedule
    (cron text, or ``every_s`` for ``@every <duration>``), in ``timezone``."""

    name: str
    container: ContainerSpec
    schedule: str
    timezone: str | None = None
    every_s: float | None = None


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
    side_inputs: tuple[str, ...] = ()


@dataclass(frozen=True)
class PipelineSpec:
    """A validated Numaflow Pipeline. ``ignored`` lists the dotted paths of the fields
    that only mean something on Kubernetes; ``annotations`` are ``metadata.annotations``.
    ``kind`` is the document's: a ``MonoVertex`` is held as the pipeline it amounts to
    (source -> optional map UDF -> sink, see :mod:`flowspark.pipeline.mono_vertex`),
    with its ``bypass``."""

    name: str
    vertices: tuple[Vertex, ...]
    edges: tuple[Edge, ...]
    limits: Limits = field(default_factory=Limits)
    watermark: WatermarkSpec = field(default_factory=WatermarkSpec)
    ignored: tuple[str, ...] = ()
    annotations: dict[str, str] = field(default_factory=dict)
    kind: Literal["Pipeline", "MonoVertex"] = "Pipeline"
    bypass: Bypass | None = None
    side_inputs: tuple[SideInputSpec, ...] = ()

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
