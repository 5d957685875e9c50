"""Numaflow Pipeline YAML on Spark: generator sources, builtins standing in for
Numaflow's example images, Python UDF scripts, conditional edges, log and
blackhole sinks (HTTP sources: tests/spark/test_pipeline_http.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flowspark.engine.query import RunConfig, run_flow
from flowspark.pipeline.build import load
from tests.numaflow_log import log_records
from tests.pipeline_yaml import pipeline

DATA = Path(__file__).resolve().parents[1] / "data" / "numaflow"


def _log_records(text: str) -> list[dict]:
    return log_records(text.splitlines())


def _run_bounded(flow) -> None:
    run_flow(flow, RunConfig(bounded=True))


def test_numaflows_simple_pipeline_runs_from_its_yaml_unchanged(capfd):
    # generator (rpu 5 per 1 s) -> quay.io/numaio/numaflow-go/map-cat -> log; the cat
    # image runs as the builtin cat.
    flow = load(DATA / "1-simple-pipeline.yaml")
    _run_bounded(flow)
    records = _log_records(capfd.readouterr().out)
    assert len(records) == 5  # one tick's worth: what is available at once
    for record in records:
        payload = json.loads(record["payload"])
        assert set(payload) == {"id", "value"} and record["keys"] == ""
        assert payload["value"] // 1_000_000 == int(record["event_time"])  # value = event ns


def test_generator_keys_are_assigned_round_robin(capfd):
    flow = load(DATA / "1-simple-pipeline-keys.yaml")  # keyCount 5, value 5
    _run_bounded(flow)
    records = _log_records(capfd.readouterr().out)
    assert records and sorted({r["keys"] for r in records}) == [f"key-{i}" for i in range(5)]
    assert {json.loads(r["payload"])["value"] for r in records} == {5}


UDF_EVEN_ODD = """
from flowspark.mapstreamer import Datum, MapStreamAsyncServer, Message


async def handler(keys, datum: Datum):
    n = int(keys[0].split("-")[1])
    tag = "even-tag" if n % 2 == 0 else "odd-tag"
    yield Message(datum.value, keys=keys, tags=[tag])


if __name__ == "__main__":
    MapStreamAsyncServer(handler).start()
"""

TAGGED_SPEC = """
    vertices:
      - name: in
        source:
          generator: {rpu: 4, duration: 1s, keyCount: 4}
      - name: even-odd
        udf:
          container: {image: my-registry/even-odd:v1}
      - name: even-sink
        sink: {log: {}}
      - name: odd-sink
        sink: {blackhole: {}}
    edges:
      - {from: in, to: even-odd}
      - from: even-odd
        to: even-sink
        conditions: {tags: {values: [even-tag]}}
      - from: even-odd
        to: odd-sink
        conditions: {tags: {operator: not, values: [even-tag]}}
"""
TAGGED = pipeline("tagged", TAGGED_SPEC, {"flowspark.io/udf.even-odd": "even_odd.py"})


def test_a_map_stream_udf_script_and_conditional_edges(tmp_path, capfd):
    (tmp_path / "even_odd.py").write_text(UDF_EVEN_ODD)
    (tmp_path / "pipeline.yaml").write_text(TAGGED)
    _run_bounded(load(tmp_path / "pipeline.yaml"))
    records = _log_records(capfd.readouterr().out)
    # Only the even keys reach the log sink; the odd ones went to the blackhole.
    assert sorted(r["keys"] for r in records) == ["key-0", "key-2"]


def test_the_udf_flag_overrides_the_annotation_and_must_name_a_vertex(tmp_path):
    (tmp_path / "even_odd.py").write_text(UDF_EVEN_ODD)
    (tmp_path / "other.py").write_text("x = 1\n")
    (tmp_path / "pipeline.yaml").write_text(TAGGED)
    with pytest.raises(ValueError, match="starts no server"):
        load(tmp_path / "pipeline.yaml", udfs={"even-odd": str(tmp_path / "other.py")})
    with pytest.raises(ValueError, match="--udf names no vertex of the pipeline: nope"):
        load(tmp_path / "pipeline.yaml", udfs={"nope": "x.py"})


def test_an_image_without_a_python_handler_fails_before_spark_with_how_to_give_one():
    with pytest.raises(ValueError) as caught:
        load(pipeline("tagged", TAGGED_SPEC))  # no annotation names a file for even-odd
    message = str(caught.value)
    assert "even-odd" in message and "--udf even-odd=" in message
    assert "flowspark.io/udf.even-odd" in message


@pytest.mark.parametrize(
    "example",
    [
        "1-simple-pipeline",
        "1-simple-pipeline-keys",
        "1-simple-pipeline-wm-disabled",
        "5-auto-scaling",
        "9-multi-partition-pipeline",
    ],
)
def test_numaflows_generator_examples_marked_runnable_with_builtins_run_unchanged(example, capfd):
    # Numaflow's README class B with a generator source (the HTTP ones:
    # tests/spark/test_pipeline_http.py): the YAML file as Numaflow ships it.
    _run_bounded(load(DATA / f"{example}.yaml"))
    records = _log_records(capfd.readouterr().out)
    assert records
    for record in records:
        payload = json.loads(record["payload"])
        assert set(payload) == {"id", "value"}
        assert record["id"]
