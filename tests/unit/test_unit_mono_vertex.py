"""MonoVertex specs: decoded, checked with Numaflow's rules and held as the pipeline they
amount to; handlers named by the field they replace; bypass conditions (no Spark)."""

from __future__ import annotations

from pathlib import Path

import pytest

from flowspark.pipeline import PipelineSpecError, load
from flowspark.pipeline.model import Bypass, TagCondition
from flowspark.pipeline.spec import load_spec, parse_spec

ROOT = Path(__file__).resolve().parents[2]
MONO = ROOT / "examples" / "numaflow" / "monovertex"
UDFS = ROOT / "examples" / "numaflow" / "udfs"


def _mono(spec: dict, name: str = "mv") -> dict:
    return {
        "apiVersion": "numaflow.numaproj.io/v1alpha1",
        "kind": "MonoVertex",
        "metadata": {"name": name},
        "spec": spec,
    }


GENERATOR = {"generator": {"rpu": 5, "duration": "1s"}}


def test_numaflows_mono_vertex_examples_load_as_the_pipelines_they_amount_to():
    builtin = load_spec(MONO / "20-simple-mono-vertex-builtin.yaml")
    assert builtin.kind == "MonoVertex" and builtin.name == "simple-mono-vertex-builtin"
    assert [(v.name, v.kind) for v in builtin.vertices] == [
        ("simple-mono-vertex-builtin", "source"),
        ("sink", "sink"),
    ]
    assert builtin.vertex("simple-mono-vertex-builtin").source.generator.rpu == 5
    full = load_spec(MONO / "21-simple-mono-vertex.yaml")
    assert [(v.name, v.kind) for v in full.vertices] == [
        ("simple-mono-vertex", "source"),
        ("udf", "udf"),
        ("sink", "sink"),
    ]
    assert [(e.source, e.target, e.tags) for e in full.edges] == [
        ("simple-mono-vertex", "udf", None),
        ("udf", "sink", None),
    ]
    source = full.vertex("simple-mono-vertex").source
    assert source.kind == "udsource" and source.transformer is not None
    sink = full.vertex("sink").sink
    assert sink.kind == "udsink" and sink.fallback.kind == "udsink"
    assert full.bypass is None
    bypass = load_spec(MONO / "23-mono-vertex-bypass.yaml").bypass
    assert bypass == Bypass(
        sink=TagCondition(("drop",), "not"),
        fallback=TagCondition(("corrupted", "parse-error"), "or"),
        on_success=TagCondition(("audit", "high-priority"), "and"),
    )


def test_limits_of_a_mono_vertex_are_its_vertices_and_kubernetes_fields_are_listed():
    spec = parse_spec(
        _mono(
            {
                "source": GENERATOR,
                "sink": {"log": {}},
                "limits": {"readBatchSize": 7, "readTimeout": "3s", "concurrency": 2},
                "scale": {"min": 1, "max": 2},
                "replicas": 2,
            }
        )
    )
    assert {v.limits.read_batch_size for v in spec.vertices} == {7}
    assert {v.limits.read_timeout.total_seconds() for v in spec.vertices} == {3.0}
    assert set(spec.ignored) >= {"spec.limits.concurrency", "spec.scale", "spec.replicas"}


@pytest.mark.parametrize(
    ("name", "spec", "message"),
    [
        ("Bad_Name", {"source": GENERATOR, "sink": {"log": {}}}, 'invalid mvtx name "Bad_Name"'),
        ("mv", {"sink": {"log": {}}}, "source is not defined"),
        ("mv", {"source": GENERATOR}, "sink is not defined"),
        (
            "mv",
            {"source": {"udsource": {"container": {}}}, "sink": {"log": {}}},
            "invalid source: invalid user-defined source spec, a customized image is required",
        ),
        (
            "mv",
            {
                "source": GENERATOR,
                "sink": {"log": {}},
                "udf": {"container": {"image": "r"}, "groupBy": {"window": {}}},
            },
            "invalid udf: groupBy/reduce is not supported in monovertex",
        ),
        (
            "mv",
            {"source": GENERATOR, "sink": {"log": {}}, "udf": {}},
            "invalid udf: invalid udf spec, a customized image is required",
        ),
        (
            "mv",
            {"source": GENERATOR, "sink": {"log": {}}, "sidecars": [{"name": "numa"}]},
            'invalid sidecar container name: "numa" is reserved for containers created by numaflow',
        ),
        (
            "mv",
            {
                "source": GENERATOR,
                "sink": {"log": {}, "retryStrategy": {"onFailure": "fallback"}},
            },
            "invalid sink: given OnFailure strategy is fallback but fallback sink is not provided",
        ),
    ],
)
def test_a_bad_mono_vertex_fails_with_numaflows_text(name: str, spec: dict, message: str):
    with pytest.raises(PipelineSpecError, match="^" + message.replace("(", r"\(")):
        parse_spec(_mono(spec, name))


def test_bypass_to_a_sink_the_mono_vertex_lacks_is_refused_and_fields_are_checked():
    spec = {
        "source": GENERATOR,
        "udf": {"container": {"image": "r"}},
        "sink": {"log": {}},
        "bypass": {"fallback": {"tags": {"values": ["bad"]}}},
    }
    with pytest.raises(PipelineSpecError, match="spec.bypass.fallback: bypasses to spec.sink"):
        parse_spec(_mono(spec))
    spec["bypass"] = {"sink": {"tags": {"operator": "xor", "values": ["a"]}}}
    with pytest.raises(PipelineSpecError, match="operator: expected one of or, and, not"):
        parse_spec(_mono(spec))
    spec["bypass"] = {"nowhere": {}}
    with pytest.raises(PipelineSpecError, match="unknown field 'nowhere'"):
        parse_spec(_mono(spec))
    spec.pop("bypass")
    spec["limits"] = {"rateLimit": {"max": 5}}
    with pytest.raises(PipelineSpecError, match="rate limiting is not supported"):
        parse_spec(_mono(spec))


@pytest.mark.parametrize(
    ("condition", "tags", "holds"),
    [
        (TagCondition(("a", "b"), "or"), ["b"], True),
        (TagCondition(("a", "b"), "or"), [], False),
        (TagCondition(("a", "b"), "and"), ["a"], False),
        (TagCondition(("a", "b"), "and"), ["b", "a", "c"], True),
        (TagCondition(("a",), "not"), [], True),
        (TagCondition(("a",), "not"), ["a"], False),
        (TagCondition((), "and"), ["x"], True),  # no values: every message
        (TagCondition(("a",), "xor"), ["a"], False),  # Numaflow forwards nothing
    ],
)
def test_tag_conditions_hold_as_numaflows_forwarding_rule(condition, tags, holds):
    assert condition.holds(tags) is holds


def test_bypass_takes_the_first_condition_that_holds_in_numaflows_order():
    bypass = Bypass(
        sink=TagCondition(("keep",)),
        fallback=TagCondition(("bad", "keep"), "or"),
        on_success=TagCondition(("audit",)),
    )
    assert bypass.destination(["keep"]) == "sink"  # sink is tried first
    assert bypass.destination(["bad"]) == "fallback"
    assert bypass.destination(["audit", "bad"]) == "fallback"
    assert bypass.destination(["audit"]) == "onSuccess"
    assert bypass.destination([]) == "sink"  # none holds: on to the sink as usual


def _files(**files: str) -> dict[str, str]:
    """``--udf`` handlers: field (or vertex) name -> the file in examples/numaflow/udfs."""
    return {name: str(UDFS / file) for name, file in files.items()}


def test_handlers_are_named_by_the_field_they_replace():
    handlers = _files(
        udsource="counter_source.py",
        transformer="now_transformer.py",
        udsink="print_sink.py",
        fallback="fallback_log_sink.py",
    )
    flow = load(MONO / "21-simple-mono-vertex.yaml", udfs=handlers)
    assert [(s.kind, s.step_id) for s in flow.steps] == [
        ("input", "simple-mono-vertex"),
        ("flat_map", "simple-mono-vertex.transformer"),
        ("flat_map", "udf"),  # map-cat: flowspark's builtin cat
        ("output", "sink"),
    ]
    with pytest.raises(PipelineSpecError, match="--udf names no part of MonoVertex .*: in;"):
        load(MONO / "21-simple-mono-vertex.yaml", udfs={**handlers, "in": "x.py"})
    missing = "its transformer container image .* --udf transformer="
    with pytest.raises(PipelineSpecError, match=missing):
        load(MONO / "21-simple-mono-vertex.yaml", udfs={"udsource": handlers["udsource"]})


def test_bypass_adds_a_filter_and_an_output_per_destination():
    handlers = _files(udsource="counter_source.py", udf="tag_parity.py", udsink="print_sink.py")
    flow = load(MONO / "bypass-to-fallback.yaml", udfs=handlers)
    assert [(s.kind, s.step_id) for s in flow.steps] == [
        ("input", "bypass-to-fallback"),
        ("map_stream", "udf"),
        ("filter", "sink.bypass.fb"),
        ("output", "sink.fb"),
        ("filter", "sink.bypass"),
        ("output", "sink"),
    ]


PIPELINE_WITH_EVERY_HANDLER = """\
apiVersion: numaflow.numaproj.io/v1alpha1
kind: Pipeline
metadata: {name: p}
spec:
  vertices:
    - name: in
      source:
        udsource: {container: {image: my-source}}
        transformer: {container: {image: my-transformer}}
    - name: out
      sink:
        udsink: {container: {image: my-sink}}
        fallback: {udsink: {container: {image: my-fallback}}}
  edges:
    - {from: in, to: out}
"""


def test_a_pipelines_transformer_and_fallback_sink_take_handlers_of_their_own():
    # A udsource vertex's transformer is VERTEX.transformer, a sink's fallback VERTEX.fb.
    handlers = _files(
        **{
            "in": "counter_source.py",
            "in.transformer": "now_transformer.py",
            "out": "print_sink.py",
            "out.fb": "fallback_log_sink.py",
        }
    )
    flow = load(PIPELINE_WITH_EVERY_HANDLER, udfs=handlers)
    assert [(s.kind, s.step_id) for s in flow.steps] == [
        ("input", "in"),
        ("flat_map", "in.transformer"),
        ("output", "out"),
    ]
    (out,) = [s for s in flow.steps if s.kind == "output"]
    assert out.args["output"].fallback is not None
    handlers.pop("in.transformer")
    with pytest.raises(PipelineSpecError, match="--udf in.transformer=path/to/udf.py"):
        load(PIPELINE_WITH_EVERY_HANDLER, udfs=handlers)


def test_an_annotation_names_a_handler_by_its_field_too():
    yaml = f"""\
apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: ann
  annotations:
    flowspark.io/udf.udsink: {UDFS / "print_sink.py"}
spec:
  source: {{generator: {{rpu: 5, duration: 1s}}}}
  sink: {{udsink: {{container: {{image: my-sink}}}}}}
"""
    flow = load(yaml)
    (out,) = [s for s in flow.steps if s.kind == "output"]
    assert (out.step_id, type(out.args["output"]).__name__) == ("sink", "UdSinkOutput")
