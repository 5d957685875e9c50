"""Batch map on local Spark: from Python, pynumaflow's batch-map example file run over
stdin, and its pipeline YAML with ``--udf`` (the types, id rules and checks without
Spark: tests/unit/test_unit_batch_map.py)."""

from __future__ import annotations

import json
import os
import re
import runpy
import subprocess
import sys
from collections.abc import AsyncIterable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import flowspark.batchmapper as bm
from flowspark.dataflow import Dataflow
from flowspark.engine.query import RunConfig, run_flow
from flowspark.pipeline.build import load
from flowspark.runtime.errors import StepError
from flowspark.testing import TestingInput, TestingOutput, run_main
from tests.numaflow_log import log_records
from tests.pipeline_yaml import pipeline

ROOT = Path(__file__).resolve().parents[2]
UDFS = ROOT / "examples" / "numaflow" / "udfs"
EXAMPLE = UDFS / "batchmap_flatmap.py"
T0 = datetime(2024, 1, 1, tzinfo=UTC)

# pynumaflow's example as the user's file holds it (not run as __main__: no server).
Flatmap = runpy.run_path(str(EXAMPLE), run_name="batchmap_flatmap")["Flatmap"]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT / "src")}


def test_the_example_class_in_a_flow_answers_every_datum_in_order():
    rows = [(f"r{i}", ",".join(f"{i}.{j}" for j in range(i % 3 + 1))) for i in range(7)]
    flow = Dataflow()
    out: list = []
    flow.input("inp", TestingInput(rows, batch_size=4)).to_datums(
        keys=lambda r: ["k"],
        value=lambda r: r[1],
        event_time=lambda r: T0 + timedelta(seconds=int(r[0][1:])),
        id=lambda r: r[0],
    ).batch_map("split", Flatmap(), batch_size=2).output("out", TestingOutput(out))
    run_main(flow)
    expected = [
        (f"r{i}-{j}", f"{i}.{j}".encode(), T0 + timedelta(seconds=i))
        for i in range(7)
        for j in range(i % 3 + 1)
    ]
    assert sorted((d.id, d.value, d.event_time) for d in out) == sorted(expected)
    assert all(d.keys == [] for d in out)  # the example's messages carry no keys


async def tag_evens(datums: AsyncIterable[bm.Datum]) -> bm.BatchResponses:
    responses = bm.BatchResponses()
    async for d in datums:
        response = bm.BatchResponse.from_id(d.id)
        n = int(d.value)
        response.append(
            bm.Message(d.value, keys=d.keys, tags=["even"]) if n % 2 == 0 else bm.Message.to_drop()
        )
        responses.append(response)
    return responses


def test_a_function_handler_with_drops_through_the_dataflow_method():
    flow = Dataflow()
    out: list = []
    flow.input("inp", TestingInput([("k", str(i)) for i in range(10)]))
    flow.batch_map("evens", tag_evens, batch_size=3)
    flow.output("out", TestingOutput(out))
    run_main(flow)
    # No ids: each batch's requests go by position ("0", "1", "2").
    assert sorted(int(d.value) for d in out) == [0, 2, 4, 6, 8]
    assert all(d.keys == ["k"] and d.tags == ["even"] and d.id.endswith("-0") for d in out)


async def forgets_the_last(datums: AsyncIterable[bm.Datum]) -> list[bm.BatchResponse]:
    batch = [d async for d in datums]
    return [bm.BatchResponse.from_id(d.id) for d in batch[:-1]]


async def divides(datums: AsyncIterable[bm.Datum]) -> list[bm.BatchResponse]:
    return [
        bm.BatchResponse.with_msgs(d.id, [bm.Message(b"%d" % (1 // int(d.value)))])
        async for d in datums
    ]


def test_a_missing_id_and_a_user_exception_are_step_errors_naming_the_step():
    def flow_with(handler: object) -> Dataflow:
        flow = Dataflow()
        items = [(str(i), f"id-{i}") for i in range(3)]
        flow.input("inp", TestingInput(items)).to_datums(
            value=lambda x: x[0], id=lambda x: x[1]
        ).batch_map("answers", handler).output("out", TestingOutput([]))
        return flow

    with pytest.raises(StepError) as info:
        run_main(flow_with(forgets_the_last))
    # The last datum of a batch (its micro-batch's part: one or two batches here).
    assert "'answers'" in str(info.value)
    assert re.search(r"no response for request id 'id-[12]'", str(info.value))
    with pytest.raises(ZeroDivisionError) as caught:  # the user's type, as a StepError
        run_main(flow_with(divides))
    assert isinstance(caught.value, StepError) and "'answers'" in str(caught.value)


def test_the_example_file_runs_over_stdin():
    lines = "".join(
        json.dumps(line) + "\n"
        for line in (
            {"value": "a,b", "id": "x", "event_time": 1000},
            {"keys": ["k"], "value": "d,e,f", "event_time": 2000, "id": "y"},
        )
    )
    done = subprocess.run(
        [sys.executable, str(EXAMPLE)], input=lines + "c\n", capture_output=True, text=True,
        timeout=300, env=_env(), cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    printed = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(p["id"], p["value"], p["keys"], p["tags"]) for p in printed] == [
        ("x-0", "a", [], []),
        ("x-1", "b", [], []),
        ("y-0", "d", [], []),
        ("y-1", "e", [], []),
        ("y-2", "f", [], []),
        ("3-0", "c", [], []),  # a plain line: its id is its line number
    ]
    assert [p["event_time"] for p in printed[:5]] == ["1970-01-01T00:00:01+00:00"] * 2 + [
        "1970-01-01T00:00:02+00:00"
    ] * 3


def test_the_examples_pipeline_runs_with_the_udf_flag():
    # pynumaflow's example pipeline.yaml unchanged: a generator (500 per 1 s), the
    # batch-map-flatmap image as the example file, a log sink; --bounded: one tick.
    done = subprocess.run(
        [
            sys.executable, "-m", "flowspark.run", str(UDFS / "batchmap_flatmap.yaml"),
            "--udf", f"batch-flatmap={EXAMPLE}", "--bounded",
        ],
        capture_output=True, text=True, timeout=300, env=_env(), cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    messages = [json.loads(line)["message"] for line in done.stdout.splitlines() if line[:1] == "{"]
    records = log_records(done.stdout.splitlines())
    assert len(records) == 1000  # 500 generated payloads, each split in two at its comma
    # The generator's payload {"id":"<offset>","value":<event ns>} split on its comma:
    # per datum, in order, exactly these two lines (ids "<offset>-0" and "<offset>-1").
    parents = [r["id"].removesuffix("-0") for r in records[::2]]
    expected = []
    for parent, second in zip(parents, records[1::2]):
        ns = int(second["payload"].removeprefix('"value":').removesuffix("}"))
        ms = ns // 1_000_000
        expected += [
            f'Payload - {{"id":"{parent}" Keys -  EventTime - {ms} Headers -  ID - {parent}-0',
            f'Payload - "value":{ns}}} Keys -  EventTime - {ms} Headers -  ID - {parent}-1',
        ]
    assert messages == expected
    assert len(set(parents)) == 500


SIZES_UDF = """
from flowspark.batchmapper import BatchMapAsyncServer, BatchResponse, Message


async def sizes(datums):
    batch = [datum async for datum in datums]
    size = str(len(batch)).encode()
    return [BatchResponse.with_msgs(datum.id, [Message(size)]) for datum in batch]


if __name__ == "__main__":
    BatchMapAsyncServer(sizes).start()
"""

SIZES_PIPELINE = pipeline(
    "sizes",
    """
    vertices:
      - name: in
        source:
          generator: {rpu: 250, duration: 1s}
      - name: sizes
        limits: {readBatchSize: 100}
        udf:
          container: {image: my/batch-sizes:v1}
      - name: out
        sink: {log: {}}
    edges:
      - {from: in, to: sizes}
      - {from: sizes, to: out}
    """,
)


def test_the_vertex_read_batch_size_sets_the_batches(tmp_path):
    (tmp_path / "sizes.py").write_text(SIZES_UDF)
    out: list = []
    flow = load(
        SIZES_PIPELINE,
        udfs={"sizes": str(tmp_path / "sizes.py")},
        outputs={"out": TestingOutput(out)},
    )
    run_flow(flow, RunConfig(bounded=True))
    sizes = [int(d.value) for d in out]
    assert len(sizes) == 250 and max(sizes) == 100  # batches of at most readBatchSize
    # Each datum reports its batch's size: a batch of s datums reports s, s times.
    assert all(sizes.count(s) % s == 0 for s in set(sizes))
