"""Pass 4 of loading a Pipeline: the decoded, validated document as the typed model.

Numaflow's defaults are applied here (a vertex's limits over the pipeline's,
one partition for a source, …) and the values Numaflow checks only when a
vertex starts are checked (positive durations, builtins' required kwargs,
base64 blobs), each error naming its field's path.
"""

from __future__ import annotations

import base64
import binascii
from datetime import timedelta
from typing import Any, Literal

from flowspark.connectors.numaflow.sqs import SqsConfig
from flowspark.pipeline.durations import parse_duration
from flowspark.pipeline.errors import PipelineSpecError
from flowspark.pipeline.model import (
    BuiltinSpec,
    ContainerSpec,
    Edge,
    GeneratorSpec,
    GroupBySpec,
    HttpSourceSpec,
    IdleSourceSpec,
    JetStreamSourceSpec,
    Limits,
    PipelineSpec,
    RetryStrategy,
    SecretRef,
    SideInputSpec,
    SinkSpec,
    SourceSpec,
    TransformerSpec,
    UdfSpec,
    Vertex,
    WatermarkSpec,
    WindowSpec,
)
from flowspark.pipeline.schema import SINK_KINDS, SOURCE_KINDS
from flowspark.pipeline.validate import (
    DEFAULT_BACKOFF_INTERVAL,
    dig,
    go_quote,
    image_of,
    is_ordered,
)
from flowspark.runtime.numaflow.side_inputs import Schedule

__all__ = ["typed_spec"]


# Required kwargs of the pre-1.6 builtins (nf@6de4709^ pkg/udf/builtin, nf@045e930^
# pkg/sources/transformer/builtin).
_MAP_BUILTINS = {"cat": (), "filter": ("expression",)}
_ONE_MICROSECOND = timedelta(microseconds=1)  # the least positive duration
_TRANSFORMER_BUILTINS = {
    "filter": ("expression",),
    "eventTimeExtractor": ("expression",),
    "timeExtractionFilter": ("filterExpr", "eventTimeExpr"),
}


def typed_spec(doc: dict[str, Any], ignored: tuple[str, ...]) -> PipelineSpec:
    """The decoded, validated pipeline ``doc`` as a :class:`PipelineSpec`; ``ignored``:
    the paths of the fields decoding accepted unread."""
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
        side_inputs=tuple(
            _side_input(raw, f"spec.sideInputs[{i}]")
            for i, raw in enumerate(spec.get("sideInputs", []))
        ),
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
    tags = dig(raw, "conditions", "tags")
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
    ordered = kind != "source" and reduce_keyed is None and is_ordered(raw, spec)
    return Vertex(
        name=raw["name"],
        kind=kind,
        source=source,
        udf=udf,
        sink=sink,
        limits=_limits(raw.get("limits", {}), limits, f"{path}.limits"),
        partitions=partitions,
        ordered=ordered,
        side_inputs=tuple(raw.get("sideInputs", ())),
    )


def _side_input(raw: dict[str, Any], path: str) -> SideInputSpec:
    """A side input, its schedule checked (``@every <duration>``, or cron)."""
    trigger = raw["trigger"]
    text, timezone = trigger["schedule"].strip(), trigger.get("timezone")
    every_s = None
    if text.startswith("@every "):
        every = parse_duration(text.removeprefix("@every ").strip(), f"{path}.trigger.schedule")
        every_s = every.total_seconds()
    try:
        if every_s is not None:
            Schedule.every(every_s)
            Schedule.parse("@hourly", timezone)  # checks the time zone
        else:
            Schedule.parse(text, timezone)
    except ValueError as exc:
        raise PipelineSpecError(f"{path}.trigger: {exc}") from None
    return SideInputSpec(
        name=raw["name"],
        container=_container(raw["container"]),
        schedule=text,
        timezone=timezone,
        every_s=every_s,
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
    kind = _one_kind(raw, SOURCE_KINDS, path, "source")
    http = generator = transformer = jetstream = udsource = sqs = None
    if kind == "sqs":
        sqs = _sqs(raw["sqs"], f"{path}.sqs")
    elif kind == "udsource":
        udsource = _container(raw["udsource"]["container"])
    elif kind == "jetstream":
        jetstream = _jetstream(raw["jetstream"], f"{path}.jetstream")
    elif kind == "http":
        token = dig(raw, "http", "auth", "token")
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
            container=_container(t["container"]) if image_of(t) else None,
            builtin=_builtin(t, f"{path}.transformer", _TRANSFORMER_BUILTINS, "transformer"),
        )
    return SourceSpec(
        kind=kind,
        http=http,
        generator=generator,
        jetstream=jetstream,
        transformer=transformer,
        udsource=udsource,
        sqs=sqs,
    )


# Numaflow's bounds of an SQS source's integers (numaflow-core's config), inclusive.
_SQS_BOUNDS = {
    "visibilityTimeout": (0, 43200),
    "waitTimeSeconds": (0, 20),
    "maxNumberOfMessages": (1, 10),
}


def _sqs(raw: dict[str, Any], path: str) -> SqsConfig:
    for required in ("awsRegion", "queueName", "queueOwnerAWSAccountID"):
        if not raw.get(required):
            raise PipelineSpecError(f"{path}.{required}: required")
    for name, (low, high) in _SQS_BOUNDS.items():
        value = raw.get(name)
        if value is not None and not low <= value <= high:
            raise PipelineSpecError(f"{path}.{name}: must be between {low} and {high}, got {value}")
    return SqsConfig(
        queue_name=raw["queueName"],
        region=raw["awsRegion"],
        account_id=raw["queueOwnerAWSAccountID"],
        visibility_timeout=raw.get("visibilityTimeout", 30),
        max_messages=raw.get("maxNumberOfMessages", 10),
        wait_time_s=raw.get("waitTimeSeconds", 0),
        endpoint_url=raw.get("endpointUrl"),
        attribute_names=tuple(raw.get("attributeNames", ())),
        message_attribute_names=tuple(raw.get("messageAttributeNames", ())),
    )


def _jetstream(raw: dict[str, Any], path: str) -> JetStreamSourceSpec:
    for required in ("url", "stream"):
        if not raw.get(required):
            raise PipelineSpecError(f"{path}.{required}: required")
    policy = str(raw.get("deliver_policy", "all")).lower().replace("deliverpolicy", "")
    if policy not in ("all", "new"):
        raise PipelineSpecError(
            f"{path}.deliver_policy: {go_quote(raw['deliver_policy'])} is not supported by "
            "flowspark (supported: all, new)"
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
        raise PipelineSpecError(f"{path}.builtin.name: unrecognized {what} {go_quote(name)}")
    for required in known[name]:
        if required not in kwargs:
            raise PipelineSpecError(f'{path}.builtin.kwargs: missing "{required}"')
    return BuiltinSpec(name=name, args=tuple(builtin.get("args", ())), kwargs=dict(kwargs))


def _udf(raw: dict[str, Any], path: str) -> UdfSpec:
    group_by = None
    if "groupBy" in raw:
        group_by = _group_by(raw["groupBy"], f"{path}.groupBy")
    return UdfSpec(
        container=_container(raw["container"]) if image_of(raw) else None,
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
    kind = _one_kind(raw, SINK_KINDS, path, "sink")
    container = None
    if kind == "udsink":
        if not image_of(raw["udsink"]):
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
    interval = backoff.get("interval", DEFAULT_BACKOFF_INTERVAL)
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
