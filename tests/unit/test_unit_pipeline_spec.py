"""Numaflow Pipeline specs: durations, quantities, Numaflow's validation rules with their
exact texts, unknown/ignored/unsupported fields, defaults, and Numaflow's examples."""

from __future__ import annotations

import copy
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from flowspark.pipeline.durations import parse_duration, parse_quantity
from flowspark.pipeline.errors import PipelineSpecError
from flowspark.pipeline.model import (
    ContainerSpec,
    Edge,
    GeneratorSpec,
    Limits,
    RetryStrategy,
    SecretRef,
    SinkSpec,
    WindowSpec,
)
from flowspark.pipeline.spec import load_spec, parse_spec

DATA = Path(__file__).resolve().parents[1] / "data" / "numaflow"
API = "numaflow.numaproj.io/v1alpha1"
DNS = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or "
    "'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
)

SRC = {"name": "in", "source": {"generator": {"rpu": 5, "duration": "1s"}}}
MAP = {"name": "cat", "udf": {"container": {"image": "cat:1"}}}
OUT = {"name": "out", "sink": {"log": {}}}
STORAGE = {"emptyDir": {}}
FIXED = {"fixed": {"length": "60s"}}


def s(value: float) -> timedelta:
    return timedelta(seconds=value)


def pipeline(
    vertices: list[dict[str, Any]] | None = None,
    edges: list[Any] | None = None,
    name: str = "p",
    **spec: Any,
) -> dict[str, Any]:
    """A valid in → cat → out pipeline unless told otherwise; edges may be (from, to)."""
    vertices = [SRC, MAP, OUT] if vertices is None else vertices
    edges = [("in", "cat"), ("cat", "out")] if edges is None else edges
    return {
        "apiVersion": API,
        "kind": "Pipeline",
        "metadata": {"name": name},
        "spec": {
            "vertices": copy.deepcopy(vertices),
            "edges": [{"from": e[0], "to": e[1]} if isinstance(e, tuple) else e for e in edges],
            **copy.deepcopy(spec),
        },
    }


def vertex(index: int, update: dict[str, Any], obj: dict[str, Any] | None = None) -> dict:
    """``obj`` (default: :func:`pipeline`) with vertex ``index`` updated."""
    obj = pipeline() if obj is None else obj
    obj["spec"]["vertices"][index].update(copy.deepcopy(update))
    return obj


def reduce_pipeline(udf: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    """in → cat → sum (a keyed fixed-window reduce, or ``udf``) → out."""
    udf = udf or {
        "container": {"image": "sum:1"},
        "groupBy": {"window": FIXED, "keyed": True, "storage": STORAGE},
    }
    reduce = {"name": "sum", "udf": udf, **fields}
    return pipeline([SRC, MAP, reduce, OUT], [("in", "cat"), ("cat", "sum"), ("sum", "out")])


def group_by(**fields: Any) -> dict[str, Any]:
    return {"container": {"image": "sum:1"}, "groupBy": fields}


def error(obj: Any) -> str:
    """The one-line message ``parse_spec(obj)`` fails with."""
    with pytest.raises(PipelineSpecError) as info:
        parse_spec(obj)
    message = str(info.value)
    assert "\n" not in message
    return message


# ---------------------------------------------------------------------------------------
# Durations and quantities
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("300ms", timedelta(milliseconds=300)),
        ("1.5h", timedelta(minutes=90)),
        ("2h45m", timedelta(hours=2, minutes=45)),
        ("0", timedelta(0)),
        ("-0", timedelta(0)),
        (0, timedelta(0)),
        ("-1s", s(-1)),
        ("+5s", s(5)),
        ("1.s", s(1)),
        (".5s", s(0.5)),
        ("1h2m3s4ms5us6ns", timedelta(hours=1, minutes=2, seconds=3, microseconds=4005)),
        ("1us", timedelta(microseconds=1)),
        ("1\u00b5s", timedelta(microseconds=1)),
        ("1\u03bcs", timedelta(microseconds=1)),
        ("1500ns", timedelta(microseconds=1)),
        ("-1500ns", timedelta(microseconds=-1)),
        ("0s", timedelta(0)),
        ("60s", s(60)),
        ("2562047h", timedelta(hours=2562047)),
    ],
)
def test_go_durations_parse(text, expected):
    assert parse_duration(text, "f") == expected


@pytest.mark.parametrize(
    "text",
    ["1d", "", "5", 5, 1.5, "0.0", "s", ".s", "-", "1 s", "1s ", " 1s", "--1s", "1.5", "1sec",
     "1S", "9999999999h", True, None, [], "1h-1m"],
)  # fmt: skip
def test_bad_go_durations_fail_with_the_path(text):
    with pytest.raises(PipelineSpecError) as info:
        parse_duration(text, "spec.watermark.maxDelay")
    assert str(info.value) == (
        f"spec.watermark.maxDelay: invalid duration {text!r}, expected Go duration like "
        "'300ms', '1.5h' or '2h45m'"
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("10Gi", 10 * 2**30),
        ("1Ki", 1024.0),
        ("1.5Ki", 1536.0),
        ("500M", 5e8),
        ("1e3", 1000.0),
        ("1E3", 1000.0),
        ("2e-3", 0.002),
        ("1E", 1e18),
        ("250m", 0.25),
        ("+1k", 1000.0),
        (".5", 0.5),
        ("3", 3.0),
        (2, 2.0),
        (1.5, 1.5),
    ],
)
def test_kubernetes_quantities_parse(value, expected):
    assert parse_quantity(value, "f") == pytest.approx(expected)


@pytest.mark.parametrize("value", ["10GB", "", "Gi", "1e", "abc", "1 Gi", "1ki", True, None])
def test_bad_quantities_fail_with_the_path(value):
    with pytest.raises(PipelineSpecError, match=r"^f: invalid quantity .*, expected a Kube"):
        parse_quantity(value, "f")


# ---------------------------------------------------------------------------------------
# Numaflow's validation rules, with its texts
# ---------------------------------------------------------------------------------------


def test_a_valid_pipeline_parses():
    spec = parse_spec(pipeline())
    assert [v.name for v in spec.vertices] == ["in", "cat", "out"]


@pytest.mark.parametrize(
    ("name", "errors"),
    [
        ("My_Pipe", f"[{DNS}]"),
        ("", f"[{DNS}]"),
        ("a" * 64, "[must be no more than 63 characters]"),
        ("A" * 64, f"[must be no more than 63 characters {DNS}]"),
    ],
)
def test_rule_1_pipeline_name(name, errors):
    assert error(pipeline(name=name)) == f'invalid pipeline name "{name}", {errors}'


def test_rule_1_pipeline_name_missing():
    obj = pipeline()
    del obj["metadata"]
    assert error(obj) == f'invalid pipeline name "", [{DNS}]'


def test_rule_2_vertices_and_edges():
    assert error(pipeline(vertices=[])) == "empty vertices"
    assert error(pipeline(edges=[])) == "no edges defined"
    obj = pipeline()
    del obj["spec"]
    assert error(obj) == "empty vertices"


def test_rule_3_duplicate_names():
    obj = pipeline([SRC, MAP, MAP, OUT])
    assert error(obj) == 'duplicate vertex name "cat"'


def test_rule_4_one_role():
    assert error(vertex(1, {"udf": None})) == (
        'invalid vertex "cat", it could only be either a source, or a sink, or a UDF'
    )
    assert error(vertex(1, {"sink": {"log": {}}})) == (
        "invalid vertex \"cat\", only one of 'source', 'sink' and 'udf' can be specified"
    )


def test_rule_5_a_source_is_never_a_to():
    obj = pipeline(edges=[("in", "cat"), ("cat", "out"), ("cat", "in")])
    assert error(obj) == (
        'invalid vertex "in", source must have 0 from edges and at least 1 to edge'
    )


def test_rule_6_a_sink_is_never_a_from():
    obj = pipeline(edges=[("in", "cat"), ("cat", "out"), ("out", "cat")])
    assert error(obj) == 'invalid vertex "out", sink must have 0 to edges and at least 1 from edge'


def test_rule_7_a_udf_has_in_and_out_edges():
    obj = pipeline(edges=[("in", "cat"), ("in", "out")])
    assert error(obj) == 'invalid vertex "cat", UDF must have to and from edges'


def test_rule_8_source_and_sink_needed():
    b = {"name": "b", "udf": {"container": {"image": "b"}}}
    cat = dict(MAP, name="a")
    no_source = pipeline([cat, b, OUT], [("a", "b"), ("b", "a"), ("b", "out")])
    assert error(no_source) == (
        "pipeline has no source, at least one vertex with 'source' defined is required"
    )
    no_sink = pipeline([SRC, cat, b], [("in", "a"), ("a", "b"), ("b", "a")])
    assert error(no_sink) == (
        "pipeline has no sink, at least one vertex with 'sink' defined is required"
    )


def test_rule_9_serving():
    serve = vertex(2, {"sink": {"serve": {}}})
    assert error(serve) == (
        "builtin 'serve' sink used in \"out\" vertex is only allowed with ServingPipeline"
    )
    serve["metadata"]["labels"] = {"numaflow.numaproj.io/serving-pipeline-name": "sp"}
    assert error(serve) == (
        "spec.vertices[2].sink.serve: sink kind 'serve' is not supported by flowspark "
        "(supported: log, blackhole, udsink)"
    )
    serving = vertex(0, {"source": {"serving": {}}}, reduce_pipeline())
    assert error(serving) == (
        'pipeline has a Serving source "in" and a reduce vertex "sum". Reduce is not supported '
        "with Serving source"
    )


def test_rule_10_edge_endpoints():
    obj = pipeline(edges=[("in", "cat"), ("cat", "out"), {"from": "cat"}])
    assert error(obj) == "invalid edge: both from and to need to be specified"
    obj = pipeline(edges=[("in", "cat"), ("cat", "out"), ("cat", "nope")])
    assert error(obj) == 'invalid edge: no vertex named "nope"'


def test_rule_11_duplicate_edges():
    obj = pipeline(edges=[("in", "cat"), ("cat", "out"), ("in", "cat")])
    assert error(obj) == 'cannot define multiple edges from vertex "in" to vertex "cat"'


@pytest.mark.parametrize(
    "conditions", [{"tags": {"values": []}}, {"tags": {"operator": "and"}}, {}]
)
def test_rule_12_conditions_need_tag_values(conditions):
    obj = pipeline(edges=[("in", "cat"), {"from": "cat", "to": "out", "conditions": conditions}])
    assert error(obj) == "invalid edge: conditional forwarding requires at least one tag value"


def test_rule_14_disjoint_graph():
    src2, out2 = dict(SRC, name="in2"), dict(OUT, name="out2")
    obj = pipeline([SRC, MAP, OUT, src2, out2], [("in", "cat"), ("cat", "out"), ("in2", "out2")])
    assert error(obj) == "invalid pipeline, cannot be disjointed"


def test_rule_15_no_reduce_at_or_after_a_cycle():
    obj = reduce_pipeline()
    obj["spec"]["edges"].append(
        {"from": "cat", "to": "cat", "conditions": {"tags": {"values": ["retry"]}}}
    )
    assert error(obj) == (
        'there\'s a Reduce Vertex at or to the right of a Cycle occurring at Vertex "cat"'
    )


def test_rule_15_cycles_are_allowed_for_map_only_pipelines():
    retry = {"name": "retry", "udf": {"container": {"image": "retry"}}}
    retry_tag = {"tags": {"values": ["retry"]}}
    obj = pipeline(
        [SRC, MAP, retry, OUT],
        [
            ("in", "cat"),
            ("cat", "retry"),
            {"from": "retry", "to": "cat", "conditions": retry_tag},
            {
                "from": "retry",
                "to": "out",
                "conditions": {"tags": {"operator": "not", "values": ["retry"]}},
            },
        ],
    )
    spec = parse_spec(obj)
    assert spec.in_edges("cat") == (
        Edge("in", "cat"),
        Edge("retry", "cat", tags=("retry",)),
    )
    assert spec.out_edges("retry")[1] == Edge("retry", "out", ("retry",), "not")


def test_rule_15_a_reduce_before_a_cycle_is_allowed():
    obj = reduce_pipeline()
    obj["spec"]["vertices"].insert(3, {"name": "retry", "udf": {"container": {"image": "r"}}})
    obj["spec"]["edges"][2:] = [
        {"from": "sum", "to": "retry"},
        {"from": "retry", "to": "retry", "conditions": {"tags": {"values": ["again"]}}},
        {"from": "retry", "to": "out"},
    ]
    assert parse_spec(obj).vertex("sum").udf.is_reduce


def test_rule_16_vertex_names():
    bad = pipeline([SRC, dict(MAP, name="Cat"), OUT], [("in", "Cat"), ("Cat", "out")])
    assert error(bad) == f'invalid vertex name "Cat", [{DNS}]'
    long_name = "v" * 30
    obj = pipeline(
        [SRC, dict(MAP, name=long_name), OUT],
        [("in", long_name), (long_name, "out")],
        name="p" * 24,
    )
    assert error(obj) == (
        "the length of the pipeline name plus the vertex name is over the max limit. "
        f"({'p' * 24}-{long_name}), [must be no more than 63 characters]"
    )


@pytest.mark.parametrize(
    ("scale", "message"),
    [
        ({"min": -1}, "min number of replicas should not be smaller than 0"),
        ({"min": 5, "max": 2}, "max number of replicas should be greater than or equal to min"),
        ({"min": 51}, "max number of replicas should be greater than or equal to min"),
        (
            {"cron": {"schedules": []}},
            "cron autoscaling is only supported for source vertices",
        ),
    ],
)
def test_rule_17_scale(scale, message):
    assert error(vertex(1, {"scale": scale})) == f'vertex "cat": {message}'


@pytest.mark.parametrize(
    ("cron", "scale", "message"),
    [
        (
            {"schedules": []},
            {"disabled": True},
            "cron must not be configured when autoscaling is disabled",
        ),  # noqa: E501
        ({"schedules": []}, {}, "at least one schedule is required"),
        (
            {"timezone": "Mars/Base", "schedules": []},
            {},
            'invalid timezone "Mars/Base": unknown time zone Mars/Base',
        ),  # noqa: E501
        (
            {"schedules": [{"start": "0 0 8 * *", "end": "0 0 18 * * *", "min": 1, "max": 2}]},
            {},
            'schedules[0].start "0 0 8 * *" is not a valid cron expression: expected exactly 6 '
            "fields, found 5: [0 0 8 * *]",
        ),
        (
            {"schedules": [{"start": "0 0 8 * * *", "end": "0 0 18 * * *", "min": 3, "max": 2}]},
            {},
            "schedules[0]: min (3) must not be greater than max (2)",
        ),
        (
            {"schedules": [{"start": "0 0 8 * * *", "end": "0 0 18 * * 1", "min": 1, "max": 2}]},
            {},
            "schedules[0]: start and end day-of-month, month, and day-of-week must match",
        ),
    ],
)
def test_rule_17_cron_scaling(cron, scale, message):
    obj = vertex(0, {"scale": {**scale, "cron": cron}})
    assert error(obj) == f'vertex "in": invalid scale.cron: {message}'


def test_rule_17_valid_cron_scaling_is_ignored():
    cron = {"schedules": [{"start": "0 0 8 * * *", "end": "0 0 18 * * *", "min": 1, "max": 2}]}
    spec = parse_spec(vertex(0, {"scale": {"cron": cron}}))
    assert spec.ignored == ("spec.vertices[0].scale",)


def test_rule_18_partitions():
    assert error(vertex(0, {"partitions": 2})) == (
        'vertex "in": partitions should not > 1 for source vertices'
    )
    assert error(vertex(1, {"partitions": -1})) == (
        'vertex "cat": number of partitions should not be smaller than 0'
    )
    non_keyed = reduce_pipeline(group_by(window=FIXED, storage=STORAGE), partitions=2)
    assert error(non_keyed) == (
        'vertex "sum": partitions should not > 1 for non-keyed reduce vertices'
    )


def test_rule_19_containers():
    assert error(vertex(0, {"sidecars": [{"name": "helper", "image": "x"}]})) == (
        'vertex "in": "sidecars" are not supported for source vertices'
    )
    assert error(vertex(1, {"sidecars": [{"name": "udf"}]})) == (
        'vertex "cat": sidecar container name "udf" is reserved for containers created by numaflow'
    )
    assert error(vertex(1, {"initContainers": [{"name": "numa"}]})) == (
        'vertex "cat": init container name "numa" is reserved for containers created by numaflow'
    )
    ok = parse_spec(vertex(1, {"sidecars": [{"name": "helper", "image": "x"}]}))
    assert ok.ignored == ("spec.vertices[1].sidecars",)


def test_update_strategy_max_unavailable():
    bad = vertex(1, {"updateStrategy": {"rollingUpdate": {"maxUnavailable": "3"}}})
    assert error(bad) == (
        'vertex "cat": invalid maxUnavailable: invalid value for IntOrString: invalid type: '
        "string is not a percentage"
    )
    bad = vertex(1, {"updateStrategy": {"rollingUpdate": {"maxUnavailable": "x%"}}})
    assert error(bad) == (
        'vertex "cat": invalid maxUnavailable: invalid value for IntOrString: invalid value '
        '"x%": strconv.Atoi: parsing "x": invalid syntax'
    )
    assert parse_spec(vertex(1, {"updateStrategy": {"rollingUpdate": {"maxUnavailable": "50%"}}}))


def test_rule_20_transformer_and_udsource():
    assert error(vertex(0, {"source": {"generator": {}, "transformer": {}}})) == (
        'invalid vertex "in": invalid source transformer, specify a customized image'
    )
    both = {"container": {"image": "t"}, "builtin": {"name": "filter"}}
    assert error(vertex(0, {"source": {"http": {}, "transformer": both}})) == (
        'invalid vertex "in": invalid source transformer, can not specify both builtin '
        "transformer, and a customized image"
    )
    fallback = {"container": {"image": "t"}, "retryStrategy": {"onFailure": "fallback"}}
    assert error(vertex(0, {"source": {"http": {}, "transformer": fallback}})) == (
        'invalid vertex "in": given fallback OnFailure strategy is not currently supported'
    )
    assert error(vertex(0, {"source": {"udsource": {"container": {}}}})) == (
        'invalid vertex "in": invalid user-defined source spec, a customized image is required'
    )
    assert error(vertex(0, {"source": {"http": {}, "udsource": {"container": {"image": "u"}}}}))
    assert error(
        vertex(0, {"source": {"udsource": {"container": {"image": "u"}}, "http": {}}})
    ) == (
        "invalid vertex \"in\": invalid user-defined source spec, only one of 'http', 'kafka', "
        "'nats', 'generator' and 'udSource' can be specified"
    )


def test_rule_21_map_udf_needs_an_image_or_a_builtin():
    for udf in ({"container": {}}, {"container": {"image": ""}}, {}):
        assert error(vertex(1, {"udf": udf})) == (
            'invalid vertex "cat": invalid udf spec, a customized image is required'
        )
    both = {"container": {"image": "x"}, "builtin": {"name": "cat"}}
    assert error(vertex(1, {"udf": both})) == (
        'invalid vertex "cat": invalid udf, can not specify both builtin function, and a '
        "customized image"
    )
    fallback = {"container": {"image": "x"}, "retryStrategy": {"onFailure": "fallback"}}
    assert error(vertex(1, {"udf": fallback})) == (
        'invalid vertex "cat": given fallback OnFailure strategy is not currently supported'
    )


def test_builtin_udfs_are_an_extension():
    spec = parse_spec(vertex(1, {"udf": {"builtin": {"name": "cat", "args": ["ignored"]}}}))
    builtin = spec.vertex("cat").udf.builtin
    assert (builtin.name, builtin.args, builtin.kwargs) == ("cat", ("ignored",), {})
    assert spec.vertex("cat").udf.container is None
    expression = "int(json(payload).id) < 100"
    spec = parse_spec(
        vertex(1, {"udf": {"builtin": {"name": "filter", "kwargs": {"expression": expression}}}})
    )
    assert spec.vertex("cat").udf.builtin.kwargs == {"expression": expression}
    assert error(vertex(1, {"udf": {"builtin": {"name": "upper"}}})) == (
        'spec.vertices[1].udf.builtin.name: unrecognized function "upper"'
    )
    assert error(vertex(1, {"udf": {"builtin": {"name": "filter"}}})) == (
        'spec.vertices[1].udf.builtin.kwargs: missing "expression"'
    )


@pytest.mark.parametrize(
    ("builtin", "message"),
    [
        ({"name": "filter"}, 'kwargs: missing "expression"'),
        ({"name": "eventTimeExtractor", "kwargs": {"format": "x"}}, 'kwargs: missing "expression"'),
        (
            {"name": "timeExtractionFilter", "kwargs": {"eventTimeExpr": "x"}},
            'kwargs: missing "filterExpr"',
        ),  # noqa: E501
        (
            {"name": "timeExtractionFilter", "kwargs": {"filterExpr": "x"}},
            'kwargs: missing "eventTimeExpr"',
        ),  # noqa: E501
        ({"name": "cat"}, 'name: unrecognized transformer "cat"'),
        (
            {"name": "eventTimeExtractor", "kwargs": {"expression": "x"}},
            None,
        ),
    ],
)
def test_transformer_builtins(builtin, message):
    obj = vertex(0, {"source": {"http": {}, "transformer": {"builtin": builtin}}})
    if message is None:
        transformer = parse_spec(obj).vertex("in").source.transformer
        assert transformer.builtin.name == "eventTimeExtractor"
        assert transformer.container is None
    else:
        assert error(obj) == f"spec.vertices[0].source.transformer.builtin.{message}"


def test_rule_22_reduce_udf():
    assert error(reduce_pipeline({**group_by(window=FIXED, storage=STORAGE), "builtin": {}})) == (
        'invalid vertex "sum": invalid udf, there\'s no buildin function support in reduce vertices'
    )
    assert error(reduce_pipeline({"container": {}, "groupBy": {}})) == (
        'invalid vertex "sum": invalid udf spec, a customized image is required'
    )
    retry = {**group_by(window=FIXED, storage=STORAGE), "retryStrategy": {}}
    assert error(reduce_pipeline(retry)) == (
        'invalid vertex "sum": invalid udf spec, retryStrategy not supported for reduce udf'
    )
    assert error(reduce_pipeline(group_by(storage=STORAGE))) == (
        'invalid vertex "sum": invalid "groupBy.window", no windowing strategy specified'
    )


@pytest.mark.parametrize(
    ("window", "pair"),
    [
        ({"fixed": {}, "sliding": {}}, "fixed or sliding"),
        ({"fixed": {}, "session": {}}, "fixed or session"),
        ({"sliding": {}, "session": {}}, "sliding or session"),
        ({"fixed": {}, "sliding": {}, "session": {}}, "fixed or sliding"),
    ],
)
def test_rule_22_window_pairs(window, pair):
    assert error(reduce_pipeline(group_by(window=window, storage=STORAGE))) == (
        f'invalid vertex "sum": invalid "groupBy.window", either {pair} is allowed, not both'
    )


def test_rule_22_accumulator_pairs_pass_numaflow_but_not_flowspark():
    window = {"fixed": {"length": "1s"}, "accumulator": {"timeout": "1s"}}
    assert error(reduce_pipeline(group_by(window=window, storage=STORAGE))) == (
        "spec.vertices[2].udf.groupBy.window: only one window kind may be given, found fixed "
        "and accumulator"
    )


@pytest.mark.parametrize(
    ("window", "kind", "field"),
    [
        ({"fixed": {"streaming": True}}, "fixed", "length"),
        ({"sliding": {"slide": "10s"}}, "sliding", "length"),
        ({"sliding": {"length": "60s"}}, "sliding", "slide"),
        ({"session": {}}, "session", "timeout"),
        ({"accumulator": {}}, "accumulator", "timeout"),
    ],
)
def test_rule_23_window_fields(window, kind, field):
    assert error(reduce_pipeline(group_by(window=window, storage=STORAGE))) == (
        f'invalid vertex "sum": invalid "groupBy.window.{kind}", "{field}" is missing'
    )


@pytest.mark.parametrize(
    ("storage", "message"),
    [
        (None, 'invalid "groupBy", "storage" is missing'),
        ({}, 'invalid "groupBy.storage", type of storage to use is missing'),
        (
            {"persistentVolumeClaim": {}, "emptyDir": {}},
            'invalid "groupBy.storage", either emptyDir or persistentVolumeClaim is allowed, not '
            "both",
        ),
        (
            {"persistentVolumeClaim": {}, "no_store": {}},
            'invalid "groupBy.storage", either none or persistentVolumeClaim is allowed, not both',
        ),
        (
            {"emptyDir": {}, "no_store": {}},
            'invalid "groupBy.storage", either none or emptyDir is allowed, not both',
        ),
    ],
)
def test_rule_24_storage(storage, message):
    assert error(reduce_pipeline(group_by(window=FIXED, storage=storage))) == (
        f'invalid vertex "sum": {message}'
    )


def test_rule_24_storage_is_validated_then_ignored():
    pvc = {"persistentVolumeClaim": {"volumeSize": "10GB"}}
    assert error(reduce_pipeline(group_by(window=FIXED, storage=pvc))) == (
        "spec.vertices[2].udf.groupBy.storage.persistentVolumeClaim.volumeSize: invalid "
        "quantity '10GB', expected a Kubernetes quantity like '10Gi', '500M' or '1e3'"
    )
    pvc = {"persistentVolumeClaim": {"volumeSize": "10Gi", "accessMode": "ReadWriteOncePod"}}
    spec = parse_spec(reduce_pipeline(group_by(window=FIXED, storage=pvc)))
    assert spec.ignored == ("spec.vertices[2].udf.groupBy.storage",)


@pytest.mark.parametrize(
    ("retry", "message"),
    [
        (
            {"onFailure": "fallback"},
            "given OnFailure strategy is fallback but fallback sink is not provided",
        ),  # noqa: E501
        ({"backoff": {"steps": 0}}, "steps in backoff strategy cannot be 0"),
        ({"backoff": {"factor": 0.5}}, "factor in backoff strategy cannot be less than 1"),
        (
            {"backoff": {"interval": "1s", "cap": "500ms"}},
            "cap in backoff strategy cannot be less than interval",
        ),  # noqa: E501
        (
            {"backoff": {"cap": "500us"}},
            "cap in backoff strategy cannot be less than default interval value, if interval is "
            "not provided",
        ),
        ({"backoff": {"jitter": 1.0}}, "jitter in backoff strategy should be between 0 and 1"),
        ({"backoff": {"jitter": -0.1}}, "jitter in backoff strategy should be between 0 and 1"),
    ],
)
def test_rule_25_sink_retry(retry, message):
    sink = {"udsink": {"container": {"image": "s"}}, "retryStrategy": retry}
    assert error(vertex(2, {"sink": sink})) == f'invalid vertex "out": {message}'


def test_rule_25_fallback_needs_a_sink_kind():
    sink = {"log": {}, "fallback": {}, "retryStrategy": {"onFailure": "fallback"}}
    assert error(vertex(2, {"sink": sink})) == (
        'invalid vertex "out": given OnFailure strategy is fallback but fallback sink is not '
        "provided"
    )


SIDE_INPUT = {"name": "s", "container": {"image": "si"}, "trigger": {"schedule": "@every 1m"}}


@pytest.mark.parametrize(
    ("side_inputs", "used", "message"),
    [
        ([{"container": {"image": "x"}}], [], "side input name is missing"),
        ([SIDE_INPUT, SIDE_INPUT], [], 'side input "s" is defined more than once'),
        ([{"name": "s"}], [], 'side input "s": container is missing'),
        ([{"name": "s", "container": {}}], [], 'side input "s": image is missing'),
        ([{"name": "s", "container": {"image": "x"}}], [], 'side input "s": trigger is missing'),
        (
            [{"name": "s", "container": {"image": "x"}, "trigger": {}}],
            [],
            'side input "s": schedule is required',
        ),
        ([SIDE_INPUT], ["t"], 'vertex "cat": side input "t" is not defined'),
        ([SIDE_INPUT], ["s", "s"], 'vertex "cat": side input "s" is defined more than once'),
        (
            [{**SIDE_INPUT, "trigger": {"schedule": "*/61 * *"}}],
            [],
            "spec.sideInputs[0].trigger: '*/61 * *' is not a cron schedule",
        ),
        (
            [{**SIDE_INPUT, "trigger": {"schedule": "@hourly", "timezone": "Mars/Olympus"}}],
            [],
            "spec.sideInputs[0].trigger: 'Mars/Olympus' is not a known time zone",
        ),
        ([], ["s"], 'vertex "cat": side input "s" is not defined'),
    ],
)
def test_rule_26_side_inputs(side_inputs, used, message):
    obj = vertex(1, {"sideInputs": used}, pipeline(sideInputs=side_inputs))
    assert error(obj) == message


def test_empty_side_inputs_ask_for_nothing():
    assert parse_spec(vertex(1, {"sideInputs": []}, pipeline(sideInputs=[])))


@pytest.mark.parametrize(
    ("trigger", "every_s"),
    [
        ({"schedule": "@every 1m30s"}, 90.0),
        ({"schedule": "0 */2 * * * *"}, None),
        ({"schedule": "*/5 * * * *", "timezone": "America/Los_Angeles"}, None),
        ({"schedule": "@daily"}, None),
    ],
)
def test_side_inputs_load_with_the_vertices_that_list_them(trigger, every_s):
    side_input = {**SIDE_INPUT, "trigger": trigger}
    spec = parse_spec(vertex(1, {"sideInputs": ["s"]}, pipeline(sideInputs=[side_input])))
    (loaded,) = spec.side_inputs
    assert (loaded.name, loaded.container.image) == ("s", "si")
    assert (loaded.schedule, loaded.timezone) == (trigger["schedule"], trigger.get("timezone"))
    assert loaded.every_s == every_s
    assert spec.vertex("cat").side_inputs == ("s",)


@pytest.mark.parametrize(
    ("idle", "message"),
    [
        ({}, "threshold is missing"),
        ({"threshold": "0s"}, "threshold should be greater than 0"),
        ({"threshold": "-1s"}, "threshold should be greater than 0"),
        ({"threshold": "5s"}, "incrementBy is missing"),
        ({"threshold": "5s", "incrementBy": "0"}, "incrementBy should be greater than 0"),
        (
            {"threshold": "5s", "incrementBy": "6s"},
            "threshold should be greater than or equal to incrementBy",
        ),
        (
            {"threshold": "5s", "incrementBy": "1s", "initSourceDelay": "0s"},
            "initSourceDelay should be greater than 0",
        ),
        (
            {"threshold": "5s", "incrementBy": "1s", "initSourceDelay": "4s"},
            "initSourceDelay should be greater than or equal to threshold",
        ),
    ],
)
def test_rule_27_idle_source(idle, message):
    obj = pipeline(watermark={"idleSource": idle})
    assert error(obj) == f"invalid idle source watermark config, {message}"


def test_rule_28_ordered_vertices_have_no_scale():
    obj = vertex(1, {"scale": {"min": 1}}, pipeline(ordered={"enabled": True}))
    assert error(obj) == (
        'vertex "cat": scale (min/max) should not be set when ordered processing is enabled. '
        "Replicas will be fixed to partition count"
    )
    obj = vertex(1, {"scale": {"min": 1}, "ordered": {"enabled": False}}, obj)
    assert parse_spec(obj).vertex("cat").ordered is False
    obj = vertex(0, {"scale": {"min": 1}}, pipeline(ordered={"enabled": True}))
    assert parse_spec(obj).vertex("in").ordered is False  # sources ignore it


def test_rules_run_in_the_controllers_order():
    obj = pipeline(name="Bad", vertices=[])
    assert error(obj).startswith('invalid pipeline name "Bad"')
    # an unknown edge target is found after the vertex roles
    obj = pipeline(edges=[("in", "cat"), ("cat", "nope")])
    assert error(obj) == 'invalid vertex "out", sink must have 0 to edges and at least 1 from edge'
    # Numaflow's rules come before what flowspark does not support
    obj = vertex(0, {"source": {"kafka": {"topic": "t"}}}, pipeline(edges=[("in", "cat")]))
    assert error(obj) == 'invalid vertex "cat", UDF must have to and from edges'


# ---------------------------------------------------------------------------------------
# Document, fields, types, unsupported features
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["ServingPipeline", "InterStepBufferService", "Vertex"])
def test_only_kinds_pipeline_and_mono_vertex_load(kind):
    obj = dict(pipeline(), kind=kind)
    assert error(obj) == (
        f"pipeline: kind '{kind}' is not supported: flowspark loads kinds Pipeline and "
        "MonoVertex (apiVersion numaflow.numaproj.io/v1alpha1)"
    )


def test_api_version_and_document_shape():
    assert error(dict(pipeline(), apiVersion="apps/v1")) == (
        "pipeline: apiVersion 'apps/v1' is not supported: flowspark loads Numaflow Pipelines "
        "(numaflow.numaproj.io/v1alpha1)"
    )
    assert error([1]) == "pipeline: expected a YAML mapping (a Numaflow Pipeline), got a list"


def test_unknown_fields_name_their_path():
    message = error(vertex(0, {"sourse": {}}))
    assert message.startswith("spec.vertices[0]: unknown field 'sourse'; expected one of: ")
    assert "source" in message and "udf" in message
    assert error(vertex(0, {"source": {"generator": {"rate": 5}}})) == (
        "spec.vertices[0].source.generator: unknown field 'rate'; expected one of: duration, "
        "jitter, keyCount, msgSize, rpu, value, valueBlob"
    )
    assert error(dict(pipeline(), extra=1)).startswith("pipeline: unknown field 'extra'")
    assert error(vertex(2, {"sink": {"log": {"level": "info"}}})) == (
        "spec.vertices[2].sink.log: unknown field 'level'; expected one of: (none: write {})"
    )


@pytest.mark.parametrize(
    ("update", "message"),
    [
        (
            (0, {"source": {"generator": {"rpu": "5"}}}),
            "spec.vertices[0].source.generator.rpu: expected an integer, got a string '5'",
        ),
        (
            (0, {"source": {"generator": {"rpu": True}}}),
            "spec.vertices[0].source.generator.rpu: expected an integer, got a boolean True",
        ),
        (
            (0, {"source": {"generator": {"value": -1}}}),
            "spec.vertices[0].source.generator.value: expected a non-negative integer, got -1",
        ),
        (
            (1, {"partitions": 1.5}),
            "spec.vertices[1].partitions: expected an integer, got a number 1.5",
        ),
        (
            (1, {"udf": {"container": {"image": 7}}}),
            "spec.vertices[1].udf.container.image: expected a string, got an integer 7",
        ),
        ((1, {"udf": "cat"}), "spec.vertices[1].udf: expected a mapping, got a string 'cat'"),
        (
            (1, {"udf": {"container": {"image": "x", "args": "a b"}}}),
            "spec.vertices[1].udf.container.args: expected a list, got a string 'a b'",
        ),
        (
            (0, {"source": {"http": {"service": "yes"}}}),
            "spec.vertices[0].source.http.service: expected a boolean (true or false), got a "
            "string 'yes'",
        ),
    ],
)
def test_wrong_types_name_the_path_and_the_expected_type(update, message):
    assert error(vertex(*update)) == message


def test_wrong_types_elsewhere():
    assert error(pipeline(vertices={"a": 1})) == (
        "spec.vertices: expected a list, got a mapping {'a': 1}"
    )
    obj = pipeline(edges=[("in", "cat"), {"from": "cat", "to": "out", "conditions": {
        "tags": {"values": [1]}}}])  # fmt: skip
    assert error(obj) == (
        "spec.edges[1].conditions.tags.values[0]: expected a string, got an integer 1"
    )
    obj = pipeline()
    obj["metadata"]["annotations"] = {"a": 1}
    assert error(obj) == "metadata.annotations['a']: expected a string, got an integer 1"


@pytest.mark.parametrize(
    ("update", "path", "text"),
    [
        ({"limits": {"readTimeout": "1d"}}, "spec.vertices[1].limits.readTimeout", "'1d'"),
        (
            {"udf": group_by(window={"fixed": {"length": 60}}, storage=STORAGE)},
            "spec.vertices[1].udf.groupBy.window.fixed.length",
            "60",
        ),
        (
            {"udf": group_by(window=FIXED, storage=STORAGE, allowedLateness="5")},
            "spec.vertices[1].udf.groupBy.allowedLateness",
            "'5'",
        ),
    ],
)
def test_bad_durations_name_their_field(update, path, text):
    assert error(vertex(1, update)) == (
        f"{path}: invalid duration {text}, expected Go duration like '300ms', '1.5h' or '2h45m'"
    )
    assert error(pipeline(watermark={"maxDelay": ""})) == (
        "spec.watermark.maxDelay: invalid duration '', expected Go duration like '300ms', '1.5h' "
        "or '2h45m'"
    )


@pytest.mark.parametrize("kind", ["kafka", "nats", "pulsar", "serving"])
def test_unsupported_sources(kind):
    assert error(vertex(0, {"source": {kind: {"x": 1}}})) == (
        f"spec.vertices[0].source.{kind}: source kind '{kind}' is not supported by flowspark "
        "(supported: http, generator, jetstream, udsource, sqs)"
    )


SQS = {"awsRegion": "us-west-2", "queueName": "q", "queueOwnerAWSAccountID": "123456789012"}


def test_an_sqs_source_takes_numaflows_defaults():
    spec = parse_spec(vertex(0, {"source": {"sqs": SQS}}))
    sqs = spec.vertices[0].source.sqs
    assert spec.vertices[0].source.kind == "sqs"
    assert (sqs.queue_name, sqs.region, sqs.account_id) == ("q", "us-west-2", "123456789012")
    # numaflow-core's defaults: 10 messages a call, no wait, 30 s visibility timeout.
    assert (sqs.max_messages, sqs.wait_time_s, sqs.visibility_timeout) == (10, 0, 30)
    assert (sqs.endpoint_url, sqs.attribute_names) == (None, ())


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("queueName", "", "queueName: required"),
        ("maxNumberOfMessages", 11, "maxNumberOfMessages: must be between 1 and 10, got 11"),
        ("waitTimeSeconds", 21, "waitTimeSeconds: must be between 0 and 20, got 21"),
        ("visibilityTimeout", -1, "visibilityTimeout: must be between 0 and 43200, got -1"),
        ("assumeRole", {"roleArn": "r"}, "assumeRole is not supported by flowspark yet"),
    ],
)
def test_an_sqs_sources_checks(field, value, message):
    assert message in error(vertex(0, {"source": {"sqs": {**SQS, field: value}}}))


def test_a_udsource_takes_its_container():
    spec = parse_spec(vertex(0, {"source": {"udsource": {"container": {"image": "u"}}}}))
    source = spec.vertices[0].source
    assert source.kind == "udsource" and source.udsource.image == "u"


def test_a_jetstream_source_and_its_checks():
    source = {
        "jetstream": {
            "url": "nats://a:4222,nats://b:4222",
            "stream": "orders",
            "consumer": "numaflow-consumer",
            "deliver_policy": "New",
            "filter_subjects": ["orders.eu", "orders.us"],
        }
    }
    spec = parse_spec(vertex(0, {"source": source}))
    js = spec.vertices[0].source.jetstream
    assert (js.url, js.stream, js.filter_subjects, js.deliver_policy) == (
        "nats://a:4222,nats://b:4222",
        "orders",
        ("orders.eu", "orders.us"),
        "new",
    )
    assert "spec.vertices[0].source.jetstream.consumer" in spec.ignored
    assert error(vertex(0, {"source": {"jetstream": {"url": "nats://a"}}})) == (
        "spec.vertices[0].source.jetstream.stream: required"
    )
    assert error(
        vertex(0, {"source": {"jetstream": {"url": "u", "stream": "s", "deliver_policy": "last"}}})
    ) == (
        'spec.vertices[0].source.jetstream.deliver_policy: "last" is not supported by flowspark '
        "(supported: all, new)"
    )
    assert "tls is not supported" in error(
        vertex(0, {"source": {"jetstream": {"url": "u", "stream": "s", "tls": {}}}})
    )


@pytest.mark.parametrize("kind", ["kafka", "sqs", "pulsar"])
def test_unsupported_sinks(kind):
    assert error(vertex(2, {"sink": {kind: {}}})) == (
        f"spec.vertices[2].sink.{kind}: sink kind '{kind}' is not supported by flowspark "
        "(supported: log, blackhole, udsink)"
    )
    assert error(vertex(2, {"sink": {"log": {}, "fallback": {kind: {}}}})) == (
        f"spec.vertices[2].sink.fallback.{kind}: sink kind '{kind}' is not supported by "
        "flowspark (supported: log, blackhole, udsink)"
    )


def test_other_unsupported_features():
    assert error(pipeline(limits={"rateLimit": {"max": 10}})) == (
        "spec.limits.rateLimit: rate limiting is not supported by flowspark"
    )
    retry = {"container": {"image": "x"}, "retryStrategy": {"onFailure": "drop"}}
    assert error(vertex(1, {"udf": retry})) == (
        "spec.vertices[1].udf.retryStrategy: a UDF retryStrategy is not supported by flowspark "
        "(a failing UDF fails the run)"
    )


def test_kinds_must_be_one_and_known():
    assert error(vertex(0, {"source": {"http": {}, "generator": {}}})) == (
        "spec.vertices[0].source: only one source kind may be given, found http and generator"
    )
    assert error(vertex(2, {"sink": {"log": None}})) == (
        "spec.vertices[2].sink: no sink kind given; flowspark supports log, blackhole, udsink "
        "(write e.g. 'log: {}': a kind with no value is null, which counts as absent)"
    )
    assert error(vertex(2, {"sink": {"udsink": {}}})) == (
        "spec.vertices[2].sink.udsink.container.image: a udsink needs a container image "
        "(flowspark runs a Python handler in its place)"
    )


def test_value_checks_after_validation():
    assert error(pipeline(edges=[("in", "cat"), {"from": "cat", "to": "out", "onFull": "drop"}]))
    assert error(vertex(0, {"source": {"generator": {"valueBlob": "not base64!"}}})).startswith(
        "spec.vertices[0].source.generator.valueBlob: invalid base64: "
    )
    assert error(pipeline(limits={"readBatchSize": 0})) == (
        "spec.limits.readBatchSize: must be at least 1, got 0"
    )
    assert error(pipeline(limits={"bufferUsageLimit": 120})) == (
        "spec.limits.bufferUsageLimit: expected a percentage from 1 to 100, got 120"
    )
    window = {"fixed": {"length": "-1s"}}
    assert error(reduce_pipeline(group_by(window=window, storage=STORAGE))) == (
        "spec.vertices[2].udf.groupBy.window.fixed.length: must be positive, got -1s"
    )
    assert error(vertex(2, {"sink": {"log": {}, "retryStrategy": {"onFailure": "panic"}}})) == (
        "spec.vertices[2].sink.retryStrategy.onFailure: unsupported value 'panic'; expected "
        "retry, fallback or drop"
    )


def test_ignored_fields_are_listed_by_path():
    obj = pipeline(
        interStepBufferServiceName="default",
        interStepBuffer={"compression": {"type": "gzip"}},
        templates={"daemon": {}},
        lifecycle={"desiredPhase": "Paused"},
        limits={"concurrency": 10},
    )
    obj["metadata"].update(
        namespace="ns", labels={"app": "a"}, annotations={"flowspark.io/udf.cat": "cat.py"}
    )
    obj["status"] = {"phase": "Running"}
    vertex(0, {"scale": {"min": 1}, "containerTemplate": {"env": []}}, obj)
    vertex(1, {"udf": {"container": {"image": "c", "imagePullPolicy": "Always"}}}, obj)
    vertex(2, {"tolerations": [], "volumes": [], "sidecars": [{"name": "s"}]}, obj)
    spec = parse_spec(obj)
    assert spec.ignored == (
        "metadata.namespace",
        "metadata.labels",
        "metadata.annotations",
        "spec.vertices[0].scale",
        "spec.vertices[0].containerTemplate",
        "spec.vertices[1].udf.container.imagePullPolicy",
        "spec.vertices[2].tolerations",
        "spec.vertices[2].volumes",
        "spec.vertices[2].sidecars",
        "spec.interStepBufferServiceName",
        "spec.interStepBuffer",
        "spec.templates",
        "spec.lifecycle",
        "spec.limits.concurrency",
        "status",
    )
    assert spec.annotations == {"flowspark.io/udf.cat": "cat.py"}


# ---------------------------------------------------------------------------------------
# Defaults and the typed spec
# ---------------------------------------------------------------------------------------


def test_defaults():
    spec = parse_spec(pipeline())
    assert spec.limits == Limits(500, s(1), 30000, 80)
    assert spec.watermark.disabled is False and spec.watermark.max_delay == timedelta(0)
    assert spec.watermark.idle_source is None
    assert spec.edges == (Edge("in", "cat", None, "or", "retryUntilSuccess"), Edge("cat", "out"))
    src = spec.vertex("in")
    assert src.source.generator == GeneratorSpec(5, s(1), 8, 0, None, timedelta(0), None)
    assert src.source.transformer is None and src.source.http is None
    assert spec.vertex("cat").udf.container == ContainerSpec("cat:1", (), (), {})
    assert spec.vertex("out").sink == SinkSpec("log")
    assert [(v.partitions, v.ordered) for v in spec.vertices] == [(1, False)] * 3
    assert spec.annotations == {} and spec.ignored == ()


def test_limits_override_field_by_field():
    obj = pipeline(limits={"readBatchSize": 100, "bufferUsageLimit": 70})
    vertex(1, {"limits": {"readTimeout": "2s", "bufferMaxLength": 10}}, obj)
    spec = parse_spec(obj)
    assert spec.limits == Limits(100, s(1), 30000, 70)
    assert spec.vertex("cat").limits == Limits(100, s(2), 10, 70)
    assert spec.vertex("in").limits == spec.limits


def test_effective_partitions():
    obj = reduce_pipeline(partitions=4)
    vertex(1, {"partitions": 3}, obj)
    vertex(3, {"partitions": 0}, obj)
    spec = parse_spec(obj)
    assert [v.partitions for v in spec.vertices] == [1, 3, 4, 1]
    non_keyed = parse_spec(reduce_pipeline(group_by(window=FIXED, storage=STORAGE), partitions=1))
    assert non_keyed.vertex("sum").partitions == 1
    assert non_keyed.vertex("sum").udf.group_by.keyed is False


def test_ordered_follows_the_pipeline_unless_the_vertex_says():
    obj = reduce_pipeline()
    obj["spec"]["ordered"] = {"enabled": True}
    vertex(3, {"ordered": {"enabled": False}}, obj)
    spec = parse_spec(obj)
    assert [v.ordered for v in spec.vertices] == [False, True, False, False]


def test_edges():
    edges = [
        ("in", "cat"),
        {"from": "cat", "to": "out", "conditions": {"tags": {"operator": "xor", "values": ["a"]}},
         "onFull": "discardLatest"},
    ]  # fmt: skip
    spec = parse_spec(pipeline(edges=edges))
    assert spec.edges[1] == Edge("cat", "out", ("a",), "xor", "discardLatest")


def test_watermark():
    idle = {"threshold": "5s", "incrementBy": "1s"}
    spec = parse_spec(pipeline(watermark={"maxDelay": "30s", "idleSource": idle}))
    assert spec.watermark.max_delay == s(30)
    idle_source = spec.watermark.idle_source
    assert (idle_source.threshold, idle_source.increment_by) == (s(5), s(1))
    assert idle_source.step_interval == timedelta(milliseconds=100)
    assert idle_source.init_source_delay is None
    idle = {**idle, "stepInterval": "0s", "initSourceDelay": "10s"}
    spec = parse_spec(pipeline(watermark={"idleSource": idle, "disabled": True}))
    assert spec.watermark.idle_source.step_interval == timedelta(0)
    assert spec.watermark.idle_source.init_source_delay == s(10)
    assert spec.watermark.disabled is True


def test_sources():
    token = {"token": {"name": "my-secret", "key": "my-key"}}
    spec = parse_spec(vertex(0, {"source": {"http": {"auth": token, "service": True}}}))
    http = spec.vertex("in").source.http
    assert spec.vertex("in").source.kind == "http"
    assert (http.auth_token, http.service) == (SecretRef("my-secret", "my-key"), True)
    generator = {"rpu": 10, "duration": "500ms", "msgSize": 16, "keyCount": 2, "value": 7,
                 "jitter": "2s", "valueBlob": "aGVsbG8="}  # fmt: skip
    spec = parse_spec(vertex(0, {"source": {"generator": generator}}))
    assert spec.vertex("in").source.generator == GeneratorSpec(
        10, timedelta(milliseconds=500), 16, 2, 7, s(2), b"hello"
    )
    transformer = {"container": {"image": "t", "env": [{"name": "A", "value": "1"}, {"name": "B"}]}}
    spec = parse_spec(vertex(0, {"source": {"http": {}, "transformer": transformer}}))
    assert spec.vertex("in").source.transformer.container == ContainerSpec(
        "t", env={"A": "1", "B": ""}
    )


def test_sinks():
    sink = {
        "udsink": {"container": {"image": "s", "args": ["-v"]}},
        "fallback": {"log": {}},
        "onSuccess": {"blackhole": {}},
        "retryStrategy": {
            "onFailure": "fallback",
            "backoff": {"interval": "10ms", "steps": 3, "factor": 2, "cap": "1s", "jitter": 0.1},
        },
    }
    out = parse_spec(vertex(2, {"sink": sink})).vertex("out").sink
    assert out == SinkSpec(
        "udsink",
        ContainerSpec("s", args=("-v",)),
        fallback=SinkSpec("log"),
        on_success=SinkSpec("blackhole"),
        retry=RetryStrategy("fallback", timedelta(milliseconds=10), 3, 2.0, s(1), 0.1),
    )
    out = parse_spec(vertex(2, {"sink": {"log": {}, "retryStrategy": {}}})).vertex("out").sink
    assert out.retry == RetryStrategy("retry", timedelta(milliseconds=1), None, 1.0, None, 0.0)


def test_spec_helpers():
    spec = parse_spec(reduce_pipeline())
    assert [v.name for v in spec.sources] == ["in"]
    assert [v.name for v in spec.sinks] == ["out"]
    assert spec.out_edges("cat") == (Edge("cat", "sum"),)
    assert spec.in_edges("in") == ()
    with pytest.raises(KeyError, match="no vertex named 'nope'"):
        spec.vertex("nope")
    assert spec.vertex("sum").udf.is_reduce and not spec.vertex("cat").udf.is_reduce


# ---------------------------------------------------------------------------------------
# Loading files and text
# ---------------------------------------------------------------------------------------


def test_load_spec_reads_a_path_or_text(tmp_path):
    path = DATA / "1-simple-pipeline.yaml"
    assert load_spec(path) == load_spec(str(path)) == load_spec(path.read_text())
    with pytest.raises(PipelineSpecError, match=r"nope\.yaml: cannot read the pipeline file"):
        load_spec(tmp_path / "nope.yaml")
    with pytest.raises(PipelineSpecError) as info:
        load_spec("kind: Pipeline\nspec: [\n")
    assert str(info.value).startswith("pipeline: invalid YAML: ")
    assert "\n" not in str(info.value)
    with pytest.raises(PipelineSpecError) as info:
        load_spec("a: 1\nb:\n  c: 2\n  c: 3\n")
    assert str(info.value) == "pipeline: invalid YAML: found duplicate key 'c' (line 4, column 3)"
    merged = load_spec(
        "apiVersion: numaflow.numaproj.io/v1alpha1\nkind: Pipeline\nmetadata: {name: p}\n"
        "spec:\n"
        "  vertices:\n"
        "    - {name: in, source: {generator: {}}}\n"
        "    - &cat {name: cat, udf: {container: {image: c}}}\n"
        "    - {<<: *cat, name: cat2}\n"
        "    - {name: out, sink: {log: {}}}\n"
        "  edges: [{from: in, to: cat}, {from: cat, to: cat2}, {from: cat2, to: out}]\n"
    )  # a key given by a merge (<<) may be overridden
    assert merged.vertex("cat2").udf == merged.vertex("cat").udf
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: numaflow.numaproj.io/v1alpha1\nkind: ServingPipeline\n")
    with pytest.raises(PipelineSpecError, match=rf"^{bad}: kind 'ServingPipeline' is not"):
        load_spec(bad)


# ---------------------------------------------------------------------------------------
# Numaflow's example pipelines
# ---------------------------------------------------------------------------------------


def example(name: str):
    return load_spec(DATA / f"{name}.yaml")


def test_example_1_simple_pipeline():
    spec = example("1-simple-pipeline")
    assert spec.name == "simple-pipeline"
    assert spec.vertex("in").source.generator == GeneratorSpec(rpu=5, duration=s(1))
    image = "quay.io/numaio/numaflow-go/map-cat:stable"
    assert spec.vertex("cat").udf.container == ContainerSpec(image)
    assert spec.vertex("out").sink == SinkSpec("log")
    assert spec.edges == (Edge("in", "cat"), Edge("cat", "out"))
    assert "spec.vertices[1].scale" in spec.ignored


def test_example_1_keys_and_wm_disabled():
    generator = example("1-simple-pipeline-keys").vertex("in").source.generator
    assert (generator.key_count, generator.value) == (5, 5)
    assert example("1-simple-pipeline-wm-disabled").watermark.disabled is True


def test_example_2_http_and_3_filter():
    http = example("2-http-pipeline").vertex("in").source
    assert (http.kind, http.http.service, http.http.auth_token) == ("http", True, None)
    spec = example("3-pipeline-filter")
    assert spec.vertex("in").source.http.auth_token == SecretRef("my-secret", "my-key")
    image = spec.vertex("filter").udf.container.image
    assert image == "quay.io/numaio/numaflow-go/map-filter-id:stable"


def test_example_2_even_odd():
    spec = example("2-even-odd-pipeline")
    assert [e.tags for e in spec.out_edges("even-or-odd")] == [
        ("even-tag",),
        ("odd-tag",),
        ("odd-tag", "even-tag"),
    ]
    assert {e.operator for e in spec.out_edges("even-or-odd")} == {"or"}
    assert [v.name for v in spec.sinks] == ["even-sink", "odd-sink", "number-sink"]


def test_example_5_auto_scaling_and_9_partitions():
    assert {"spec.vertices[1].scale", "spec.vertices[2].scale"} <= set(
        example("5-auto-scaling").ignored
    )
    assert [v.partitions for v in example("9-multi-partition-pipeline").vertices] == [1, 3, 3]


def test_example_6_and_7_reduce_windows():
    spec = example("6-reduce-fixed-window")
    reduce = spec.vertex("compute-sum")
    assert reduce.udf.group_by.window == WindowSpec("fixed", length=s(60))
    assert reduce.udf.group_by.keyed and reduce.partitions == 2
    assert "spec.vertices[2].udf.groupBy.storage" in spec.ignored
    spec = example("7-reduce-sliding-window")
    sliding = spec.vertex("reduce-sliding")
    assert sliding.udf.group_by.window == WindowSpec("sliding", length=s(60), slide=s(10))
    assert {v.limits.read_batch_size for v in spec.vertices} == {50}
    assert "spec.vertices[0].containerTemplate" in spec.ignored


def test_example_13_accumulator_and_streaming_reduce():
    spec = example("13-accumulator-window")
    assert spec.limits.read_batch_size == 1
    accum = spec.vertex("accum").udf.group_by
    assert (accum.window, accum.keyed) == (WindowSpec("accumulator", timeout=s(10)), True)
    assert [e.source for e in spec.in_edges("accum")] == ["http-one", "http-two"]
    spec = example("13-streaming-reduce-pipeline")
    window = spec.vertex("compute-sum").udf.group_by.window
    assert window == WindowSpec("fixed", length=s(600), streaming=True)
    assert spec.watermark.max_delay == s(30)


def test_example_10_cycle_to_self():
    spec = example("10-cycle-to-self")
    assert spec.out_edges("retry") == (
        Edge("retry", "retry", ("retry",), "or"),
        Edge("retry", "out", ("retry",), "not"),
    )


def test_example_40_stream_sorter():
    spec = example("40-stream-sorter")
    assert [v.source.generator for v in spec.sources] == [GeneratorSpec(rpu=10, key_count=1)] * 2
    assert spec.vertex("accum").udf.group_by.window == WindowSpec("accumulator", timeout=s(30))


def test_the_accumulator_pages_example():
    spec = example("accumulator-page")
    assert spec.name == "simple-accumulator"
    accum = spec.vertex("accum").udf
    assert accum.container.image == "quay.io/numaio/numaflow-go/stream-sorter:stable"
    assert accum.group_by.window == WindowSpec("accumulator", timeout=s(10))
    assert "spec.vertices[2].udf.groupBy.storage" in spec.ignored


@pytest.mark.parametrize("path", sorted(DATA.glob("*.yaml")), ids=lambda p: p.name)
def test_every_example_parses(path):
    spec = load_spec(path)
    assert spec.sources and spec.sinks


def test_group_by_storage_is_not_reported_as_ignored_when_the_pipeline_is_built(caplog):
    """Numaflow requires ``groupBy.storage``; flowspark checks it and keeps keyed state
    in Spark's state store instead: no warning calls the required field ignored."""
    import logging

    from flowspark.pipeline.build import build

    spec = example("accumulator-page")
    # Fields are reported before the vertices are built (its UDF is not given here).
    with caplog.at_level(logging.INFO, logger="flowspark"), pytest.raises(PipelineSpecError):
        build(spec, udfs={}, base_dir=DATA)
    warned = " ".join(r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING)
    said = " ".join(r.getMessage() for r in caplog.records)
    assert "groupBy.storage" not in warned
    assert "groupBy.storage" in said and "state store" in said
