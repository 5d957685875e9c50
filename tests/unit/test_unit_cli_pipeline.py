"""``python -m flowspark.run pipeline.yaml`` with a bad pipeline: one line, before Spark.

Each run has a stand-in ``pyspark`` package first on its path that fails on import,
so a message that gets printed proves Spark was never started.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.pipeline_yaml import in_udf_out

GOOD = in_udf_out("cat", "builtin: {name: cat}")

CASES = {
    "bad duration": (
        GOOD.replace("duration: 1s", "duration: 1x"),
        "spec.vertices[0].source.generator.duration: invalid duration '1x'",
    ),
    "edge to a missing vertex": (
        GOOD + "    - from: cat\n      to: nowhere\n",
        'invalid edge: no vertex named "nowhere"',
    ),
    "source as a to": (
        GOOD + "    - from: cat\n      to: in\n",
        'invalid vertex "in", source must have 0 from edges and at least 1 to edge',
    ),
    "sink as a from": (
        GOOD + "    - from: out\n      to: cat\n",
        'invalid vertex "out", sink must have 0 to edges and at least 1 from edge',
    ),
    "reduce on a cycle": (
        in_udf_out(
            "sum",
            "container: {image: x}\n        groupBy:\n          window: {fixed: {length: 10s}}\n",
        )
        + "    - from: sum\n      to: sum\n",
        'there\'s a Reduce Vertex at or to the right of a Cycle occurring at Vertex "sum"',
    ),
    "unknown field": (
        GOOD.replace("log: {}", "log: {}\n        bogus: 1"),
        "spec.vertices[2].sink: unknown field 'bogus'",
    ),
    "not a pipeline": (
        GOOD.replace("kind: Pipeline", "kind: ServingPipeline"),
        "kind",
    ),
    "window without length": (
        GOOD.replace(
            "builtin: {name: cat}",
            "container: {image: x}\n        groupBy:\n          window: {fixed: {}}\n"
            "          storage: {emptyDir: {}}",
        ),
        'invalid "groupBy.window.fixed", "length" is missing',
    ),
}


@pytest.fixture(scope="module")
def no_spark(tmp_path_factory) -> Path:
    stand_in = tmp_path_factory.mktemp("no_spark") / "pyspark"
    stand_in.mkdir()
    (stand_in / "__init__.py").write_text("raise ImportError('Spark must not start')\n")
    return stand_in.parent


def _run(path: Path, no_spark: Path, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(no_spark), *sys.path[1:]])}
    return subprocess.run(
        [sys.executable, "-m", "flowspark.run", str(path), *extra],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_bad_pipeline_fails_with_one_line_before_spark(case, tmp_path, no_spark):
    text, message = CASES[case]
    path = tmp_path / "pipeline.yaml"
    path.write_text(text)
    done = _run(path, no_spark)
    assert done.returncode != 0
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"flowspark.run: {path}: ")
    assert message in lines[0]


def test_a_udf_flag_for_no_vertex_and_a_missing_file(tmp_path, no_spark):
    path = tmp_path / "pipeline.yaml"
    path.write_text(GOOD)
    done = _run(path, no_spark, "--udf", "nope=x.py")
    assert done.returncode != 0
    assert "--udf names no vertex of the pipeline: nope" in done.stderr
    done = _run(tmp_path / "absent.yaml", no_spark)
    assert done.returncode != 0
    assert done.stderr.strip() == f"flowspark.run: no such file: {tmp_path / 'absent.yaml'}"


def test_kubernetes_only_fields_are_listed_once_in_one_warning(caplog):
    from flowspark.pipeline import load

    text = GOOD.replace(
        "  name: p\n", "  name: p\n  annotations:\n    flowspark.io/udf.cat: cat.py\n"
    ).replace(
        "    - name: cat\n", "    - name: cat\n      scale: {min: 1, max: 3}\n      partitions: 2\n"
    )
    with caplog.at_level("WARNING", logger="flowspark.pipeline"):
        load(text)
    warnings = [r.getMessage() for r in caplog.records if r.name.startswith("flowspark.pipeline")]
    assert len(warnings) == 1
    assert "spec.vertices[1].scale" in warnings[0]
    assert "spec.vertices[1].partitions" in warnings[0]
    assert "annotations" not in warnings[0]  # flowspark's own annotation is read


def test_outputs_replace_sink_vertices_by_name():
    from flowspark.pipeline import PipelineSpecError, load
    from flowspark.testing import TestingOutput

    out: list = []
    flow = load(GOOD, outputs={"out": TestingOutput(out)})
    sink = [s for s in flow.steps if s.step_id == "out"][0]
    assert sink.args["output"].__class__.__name__ == "TestingOutput"
    with pytest.raises(PipelineSpecError, match="outputs names no sink vertex: cat"):
        load(GOOD, outputs={"cat": TestingOutput(out)})
