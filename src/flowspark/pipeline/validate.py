"""Pass 2 of loading a Pipeline: Numaflow's validation rules, in the controller's order.

The rules of ``pkg/reconciler/validator/pipeline_validate.go`` (``_RULES``), run
on the decoded document, each returning Numaflow's exact error text; the first
one raised is the :class:`~flowspark.pipeline.errors.PipelineSpecError`.

>>> validate({"metadata": {"name": "Bad_Name"}, "spec": {}})
Traceback (most recent call last):
...
flowspark.pipeline.errors.PipelineSpecError: invalid pipeline name "Bad_Name", [a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')]
"""  # noqa: E501

from __future__ import annotations

import re
import zoneinfo
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from flowspark.pipeline.errors import PipelineSpecError

__all__ = [
    "DEFAULT_BACKOFF_INTERVAL",
    "dig",
    "go_quote",
    "image_of",
    "is_ordered",
    "validate",
    "validate_mono_vertex",
]


_DNS1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_DNS1035_MESSAGE = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with "
    "an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or "
    "'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
)
_DEFAULT_MAX_REPLICAS = 50
DEFAULT_BACKOFF_INTERVAL = timedelta(milliseconds=1)  # a backoff's interval when absent
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


def go_quote(text: str) -> str:
    """Go's ``%q``: a double-quoted string with Go escapes.

    >>> print(go_quote('a"b'), go_quote("tab\\t"))
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


def dig(obj: Any, *keys: str) -> Any:
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
            name=dig(doc, "metadata", "name") or "",
            labels=dig(doc, "metadata", "labels") or {},
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
    return f"invalid pipeline name {go_quote(doc.name)}, {errors}" if errors else None


def _rule_not_empty(doc: _Doc) -> str | None:
    if not doc.vertices:
        return "empty vertices"
    return None if doc.edges else "no edges defined"


def _rule_vertex_roles(doc: _Doc) -> str | None:
    names: set[str] = set()
    for v in doc.vertices:
        name = v.get("name", "")
        q = go_quote(name)
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
                    f"builtin 'serve' sink used in {go_quote(v.get('name', ''))} vertex is only "
                    "allowed with ServingPipeline"
                )
    serving = next((v for v in doc.vertices if "serving" in v.get("source", {})), None)
    if serving is not None:
        for v in doc.vertices:
            if _is_reduce(v):
                return (
                    f"pipeline has a Serving source {go_quote(serving.get('name', ''))} and a "
                    f"reduce vertex {go_quote(v.get('name', ''))}. Reduce is not supported with "
                    "Serving source"
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
                return f"invalid edge: no vertex named {go_quote(name)}"
        if (source, target) in seen:
            return (
                f"cannot define multiple edges from vertex {go_quote(source)} to vertex "
                f"{go_quote(target)}"
            )
        seen.add((source, target))
        if "conditions" in e and not dig(e, "conditions", "tags", "values"):
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
                f"{go_quote(name)}"
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
    q = go_quote(name)
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
    message = _max_unavailable_error(dig(v, "updateStrategy", "rollingUpdate", "maxUnavailable"))
    if message is not None:
        return f"vertex {q}: invalid maxUnavailable: {message}"
    if message := _reserved_name_error(v.get("initContainers", []), "init container"):
        return f"vertex {q}: {message}"
    if v.get("sidecars") and "source" in v:
        return f'vertex {q}: "sidecars" are not supported for source vertices'
    if message := _reserved_name_error(v.get("sidecars", []), "sidecar container"):
        return f"vertex {q}: {message}"
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
            return f"invalid timezone {go_quote(timezone)}: unknown time zone {timezone}"
    schedules = cron.get("schedules", [])
    if not schedules:
        return "at least one schedule is required"
    for i, schedule in enumerate(schedules):
        fields = {}
        for end in ("start", "end"):
            text = schedule.get(end, "")
            fields[end] = text.split()
            invalid = f"schedules[{i}].{end} {go_quote(text)} is not a valid cron expression: "
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


def _reserved_name_error(containers: list[dict[str, Any]], what: str) -> str | None:
    """The first of ``containers`` (init containers or sidecars) with a name Numaflow keeps
    for its own containers."""
    for container in containers:
        if container.get("name", "") in _RESERVED_CONTAINERS:
            name = go_quote(container["name"])
            return f"{what} name {name} is reserved for containers created by numaflow"
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
        atoi = f"strconv.Atoi: parsing {go_quote(number)}: invalid syntax"
        return prefix + f"invalid value {go_quote(value)}: {atoi}"
    return None


def image_of(spec: dict[str, Any] | None) -> str:
    return dig(spec, "container", "image") or ""


def _source_error(source: dict[str, Any]) -> str | None:
    """``validateSource``; a transformer may also be a pre-1.6 builtin (flowspark)."""
    transformer = source.get("transformer")
    if transformer is not None:
        if not image_of(transformer) and "builtin" not in transformer:
            return "invalid source transformer, specify a customized image"
        if image_of(transformer) and "builtin" in transformer:
            return (
                "invalid source transformer, can not specify both builtin transformer, and a "
                "customized image"
            )
        if "retryStrategy" in transformer:
            message = _non_sink_retry_error(transformer["retryStrategy"])
            if message is not None:
                return message
    if "udsource" in source:
        if not image_of(source["udsource"]):
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
        if "builtin" not in udf and not image_of(udf):
            return "invalid udf spec, a customized image is required"
        if "builtin" in udf and image_of(udf):
            return "invalid udf, can not specify both builtin function, and a customized image"
        if "retryStrategy" in udf:
            return _non_sink_retry_error(udf["retryStrategy"])
        return None
    if "builtin" in udf:
        return "invalid udf, there's no buildin function support in reduce vertices"
    if "container" in udf and not image_of(udf):
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
    if "cap" in backoff and "interval" not in backoff and backoff["cap"] < DEFAULT_BACKOFF_INTERVAL:
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
            return f"side input {go_quote(name)} is defined more than once"
        defined.add(name)
        if "container" not in side_input:
            return f"side input {go_quote(name)}: container is missing"
        if not image_of(side_input):
            return f"side input {go_quote(name)}: image is missing"
        if "trigger" not in side_input:
            return f"side input {go_quote(name)}: trigger is missing"
        if not side_input["trigger"].get("schedule"):
            return f"side input {go_quote(name)}: schedule is required"
    for v in doc.vertices:
        used: set[str] = set()
        for name in v.get("sideInputs", []):
            if name not in defined:
                return f"vertex {go_quote(v['name'])}: side input {go_quote(name)} is not defined"
            if name in used:
                return (
                    f"vertex {go_quote(v['name'])}: side input {go_quote(name)} is defined more "
                    "than once"
                )
            used.add(name)
    return None


def _rule_idle_source(doc: _Doc) -> str | None:
    idle = dig(doc.spec, "watermark", "idleSource")
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
        if "source" in v or _is_reduce(v) or not is_ordered(v, doc.spec):
            continue
        if "min" in v.get("scale", {}) or "max" in v.get("scale", {}):
            return (
                f"vertex {go_quote(v['name'])}: scale (min/max) should not be set when ordered "
                "processing is enabled. Replicas will be fixed to partition count"
            )
    return None


def is_ordered(vertex: dict[str, Any], spec: dict[str, Any]) -> bool:
    """A vertex's ``ordered.enabled``, else the pipeline's."""
    if "ordered" in vertex:
        return bool(vertex["ordered"].get("enabled", False))
    return bool(dig(spec, "ordered", "enabled"))


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


def validate(doc: dict[str, Any]) -> None:
    """Raise the first of Numaflow's errors for the decoded pipeline ``doc``, if any."""
    checked = _Doc.of(doc)
    for rule in _RULES:
        message = rule(checked)
        if message is not None:
            raise PipelineSpecError(message)


def _mono_vertex_error(doc: dict[str, Any]) -> str | None:
    """``ValidateMonoVertex`` (``pkg/reconciler/validator/mvtx_validate.go``), in its order."""
    name = dig(doc, "metadata", "name") or ""
    errors = _dns1035(name)
    if errors:
        return f"invalid mvtx name {go_quote(name)}, {errors}"
    spec = doc.get("spec", {})
    source, sink, udf = spec.get("source"), spec.get("sink"), spec.get("udf")
    if source is None:
        return "source is not defined"
    if "serving" in source:
        return "serving source is not supported with Monovertex yet"
    if message := _source_error(source):
        return f"invalid source: {message}"
    if sink is None:
        return "sink is not defined"
    if message := _sink_error(sink):
        return f"invalid sink: {message}"
    if message := _reserved_mono_error(spec.get("initContainers", []), "init container"):
        return message
    if udf is not None:
        if "groupBy" in udf:
            return "invalid udf: groupBy/reduce is not supported in monovertex"
        if message := _udf_error(udf):
            return f"invalid udf: {message}"
    if message := _reserved_mono_error(spec.get("sidecars", []), "sidecar container"):
        return message
    if message := _max_unavailable_error(
        dig(spec, "updateStrategy", "rollingUpdate", "maxUnavailable")
    ):
        return f"invalid maxUnavailable: {message}"
    if message := _cron_scaling_error(spec.get("scale", {})):
        return f"invalid scale.cron: {message}"
    return None


def _reserved_mono_error(containers: list[dict[str, Any]], what: str) -> str | None:
    """A MonoVertex's init container or sidecar named as one of Numaflow's own."""
    for container in containers:
        if container.get("name", "") in _RESERVED_CONTAINERS:
            quoted = go_quote(container["name"])
            return f"invalid {what} name: {quoted} is reserved for containers created by numaflow"
    return None


def validate_mono_vertex(doc: dict[str, Any]) -> None:
    """Raise Numaflow's error for the decoded MonoVertex ``doc``, if it has one.

    >>> validate_mono_vertex({"metadata": {"name": "mv"}, "spec": {"source": {}}})
    Traceback (most recent call last):
    ...
    flowspark.pipeline.errors.PipelineSpecError: sink is not defined
    """
    message = _mono_vertex_error(doc)
    if message is not None:
        raise PipelineSpecError(message)
