"""Pass 1 of loading a Pipeline: decoding against the fields of Numaflow's CRD.

As the Kubernetes API server would: every mapping is checked against the fields
Numaflow's CRD has (an unknown field fails with its path), every value against
its type, durations with Go's format, quantities with Kubernetes'. Fields that
only mean something on Kubernetes (pod templates, ``scale``, ``storage``,
``lifecycle`` …) are accepted and listed (``PipelineSpec.ignored``); Numaflow
features flowspark does not run are noted, to fail after validation. A new YAML
field starts in the tables below (``PIPELINE`` is the whole document).

>>> decoder = Decoder("p.yaml")
>>> decoder.decode({"readBatchSize": 10, "concurrency": 2}, _LIMITS, "spec.limits")
{'readBatchSize': 10, 'concurrency': 2}
>>> decoder.ignored
['spec.limits.concurrency']
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from flowspark.pipeline.durations import parse_duration, parse_quantity
from flowspark.pipeline.errors import PipelineSpecError

__all__ = ["MONO_VERTEX", "PIPELINE", "SINK_KINDS", "SOURCE_KINDS", "Decoder", "kind_of"]


@dataclass(frozen=True)
class _Scalar:
    expected: str
    accepts: tuple[type[Any], ...]
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
SOURCE_KINDS = ("http", "generator", "jetstream", "udsource", "sqs")
SINK_KINDS = ("log", "blackhole", "udsink")


def _no_source(kind: str, schema: Any = None) -> _Unsupported:
    return _Unsupported(
        f"source kind {kind!r} is not supported by flowspark (supported: http, generator, "
        "jetstream, udsource, sqs)",
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
        "udsource": _Obj({"container": _CONTAINER}),
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
        "sqs": _Obj(
            {
                "awsRegion": _STR,
                "queueName": _STR,
                "queueOwnerAWSAccountID": _STR,
                "visibilityTimeout": _INT,
                "maxNumberOfMessages": _INT,
                "waitTimeSeconds": _INT,
                "endpointUrl": _STR,
                "attributeNames": _List(_STR),
                "messageAttributeNames": _List(_STR),
                "assumeRole": _Unsupported(
                    "source.sqs.assumeRole is not supported by flowspark yet (boto3's own "
                    "credentials are used: environment, profile, instance role)"
                ),
            }
        ),
        **{kind: _no_source(kind) for kind in ("kafka", "nats", "pulsar")},
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
_UPDATE_STRATEGY = _Ignored(
    _Obj({"type": _STR, "rollingUpdate": _Obj({"maxUnavailable": _INT_OR_STR})})
)
_CONDITIONS = _Obj({"tags": _Obj({"operator": _STR, "values": _List(_STR)})})
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
        "updateStrategy": _UPDATE_STRATEGY,
        "sideInputs": _List(_STR),
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
        "conditions": _CONDITIONS,
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
        "sideInputs": _List(_SIDE_INPUT),
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
PIPELINE = _Obj(
    {"apiVersion": _STR, "kind": _STR, "metadata": _METADATA, "spec": _SPEC, "status": _K8S}
)
# A MonoVertex's spec (``MonoVertexSpec``): one source, an optional map UDF, one sink.
_MONO_SPEC = _Obj(
    {
        "replicas": _Ignored(_INT),
        "source": _SOURCE,
        "sink": _SINK,
        "udf": _UDF,
        "limits": _Obj(
            {
                "readBatchSize": _UINT,
                "readTimeout": _DURATION,
                "rateLimit": _Unsupported("rate limiting is not supported by flowspark"),
                "concurrency": _Ignored(_UINT),
            }
        ),
        "scale": _Ignored(_SCALE),
        "initContainers": _NAMED_CONTAINERS,
        "sidecars": _NAMED_CONTAINERS,
        "updateStrategy": _UPDATE_STRATEGY,
        "bypass": _Obj(dict.fromkeys(("sink", "fallback", "onSuccess"), _CONDITIONS)),
        "streaming": _Ignored(_BOOL),
        "containerTemplate": _K8S,
        "volumes": _K8S,
        "daemonTemplate": _K8S,
        "lifecycle": _K8S,
        **_POD_TEMPLATE,
    }
)
MONO_VERTEX = _Obj(
    {"apiVersion": _STR, "kind": _STR, "metadata": _METADATA, "spec": _MONO_SPEC, "status": _K8S}
)


def kind_of(value: Any) -> str:
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


class Decoder:
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
                raise self.fail(path, f"expected a list, got {kind_of(value)} {_show(value)}")
            return [self.decode(item, schema.item, f"{path}[{i}]") for i, item in enumerate(value)]
        if not isinstance(value, dict):
            raise self.fail(path, f"expected a mapping, got {kind_of(value)} {_show(value)}")
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
                path, f"expected {schema.expected}, got {kind_of(value)} {_show(value)}"
            )
        if schema.minimum is not None and value < schema.minimum:
            raise self.fail(path, f"expected {schema.expected}, got {value!r}")
        return schema.convert(value, path) if schema.convert else value
