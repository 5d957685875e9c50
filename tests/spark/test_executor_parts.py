"""Partitioned outputs that say ``writes_on = "executors"``: each part is written by the
Spark task that owns it (keyed by part name), its snapshot kept as Spark state."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import flowspark.operators as op
from flowspark.connectors.files import DirOutput, FileOutput
from flowspark.dataflow import Dataflow
from flowspark.engine.errors import RecoveryDirectoryError
from flowspark.engine.query import RunConfig, run_flow
from flowspark.outputs import (
    FixedPartitionedSink,
    PartitionedOutput,
    StatefulSink,
    StatefulSinkPartition,
)
from flowspark.runtime.errors import StepError
from flowspark.testing import TestingInput, TestingOutput, TestingSource

ITEMS = [(f"k{i % 7}", i) for i in range(300)]


def _dir_flow(folder: Path, writes_on: str, items: list = ITEMS) -> Dataflow:
    flow = Dataflow()
    stream = flow.input("inp", TestingInput(items, batch_size=11))
    doubled = stream.map(lambda kv: (kv[0], f"{kv[0]}:{kv[1] * 2}"))
    doubled.output("files", DirOutput(folder, 3, writes_on=writes_on))  # type: ignore[arg-type]
    return flow


@pytest.mark.parametrize("batch_job", [True, False], ids=["batch-job", "stream"])
def test_each_file_holds_what_the_driver_would_write_in_the_same_order(tmp_path, batch_job):
    progress = tmp_path / "progress.jsonl"
    config = RunConfig(batch_job=batch_job, max_batch_items=40, progress_json=str(progress))
    report = run_flow(_dir_flow(tmp_path / "exec", "executors"), config)
    run_flow(_dir_flow(tmp_path / "driver", "driver"), RunConfig(batch_job=batch_job))
    names = sorted(p.name for p in (tmp_path / "driver").iterdir())
    assert names == ["part_0", "part_1", "part_2"]
    for name in names:
        written = (tmp_path / "exec" / name).read_text()
        assert written and written == (tmp_path / "driver" / name).read_text()
    assert report.items_written == {"files": 300}
    batches = [json.loads(line)["steps"] for line in progress.read_text().splitlines()]
    assert {steps["files"]["on"] for steps in batches if "files" in steps} == {"executors"}
    assert sum(steps["files"]["in"] for steps in batches if "files" in steps) == 300


class RecordingPart(StatefulSink):
    """Appends ``pid part resume_state value`` lines to its part's file; its state is
    the count of lines written."""

    def __init__(self, folder: Path, part: str, resume_state: int | None) -> None:
        self.path = folder / part
        self.head = f"{os.getpid()} {part} {resume_state}"
        self.count = resume_state or 0

    def write_batch(self, values: list) -> None:
        with self.path.open("a") as f:
            f.writelines(f"{self.head} {value}\n" for value in values)
        self.count += len(values)

    def snapshot(self) -> int:
        return self.count


class RecordingOutput(PartitionedOutput):
    writes_on = "executors"

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def list_parts(self) -> list[str]:
        return ["even", "odd"]

    def part_fn(self, item_key: str) -> int:
        return int(item_key)

    def build_part(self, for_part: str, resume_state: int | None) -> RecordingPart:
        return RecordingPart(self.folder, for_part, resume_state)


def test_parts_are_built_in_spark_tasks_from_the_snapshot_of_the_batch_before(tmp_path):
    folder = tmp_path / "out"
    folder.mkdir()
    recovery = tmp_path / "rec"
    flow = Dataflow()
    items = [(str(i), i) for i in range(50)]
    flow.input("inp", TestingInput(items, batch_size=10)).output("rec", RecordingOutput(folder))
    run_flow(flow, RunConfig(recovery_dir=str(recovery), max_batch_items=10))
    for part, parity in (("even", 0), ("odd", 1)):
        lines = [line.split() for line in (folder / part).read_text().splitlines()]
        assert [int(line[3]) for line in lines] == list(range(parity, 50, 2))
        assert {line[0] for line in lines}.isdisjoint({str(os.getpid())})  # not the driver
        # Each build resumed from the count the part had written before it.
        resumes = [line[2] for line in lines]
        for i, resume in enumerate(resumes):
            assert resume == ("None" if i < 5 else str(i - i % 5))
    # The snapshots are Spark state, not the driver's snapshot file.
    assert not (recovery / "flowspark-sinks" / "rec.pickle").exists()


def test_an_output_with_parts_on_the_executors_passes_its_items_on(tmp_path):
    seen: list = []
    flow = Dataflow()
    stream = flow.input("inp", TestingInput(["a", "b", "c", "d"]))
    written = stream.output("file", FileOutput(tmp_path / "out.txt", writes_on="executors"))
    written.map(str.upper).output("seen", TestingOutput(seen))
    report = run_flow(flow, RunConfig())
    assert sorted(seen) == ["A", "B", "C", "D"]
    assert (tmp_path / "out.txt").read_text() == "a\nb\nc\nd\n"  # plain items, written whole
    assert report.items_written == {"file": 4, "seen": 4}


class BrokenPart(StatefulSink):
    def write_batch(self, values: list) -> None:
        raise PermissionError(13, "Permission denied", "/data/part")

    def snapshot(self) -> None:
        return None


class BrokenOutput(PartitionedOutput):
    writes_on = "executors"

    def list_parts(self) -> list[str]:
        return ["only"]

    def build_part(self, for_part: str, resume_state: object) -> BrokenPart:
        return BrokenPart()


@pytest.mark.parametrize("batch_job", [True, False], ids=["batch-job", "stream"])
def test_a_part_that_fails_to_write_stops_the_run_with_the_users_error(batch_job):
    flow = Dataflow()
    flow.input("inp", TestingInput([("k", "v1"), ("k", "v2")])).output("parts", BrokenOutput())
    with pytest.raises(PermissionError) as info:
        run_flow(flow, RunConfig(batch_job=batch_job))
    err = info.value
    assert isinstance(err, StepError)
    assert str(err).startswith("step 'parts' (write_batch) failed on item ['v1', 'v2']")
    assert (err.errno, err.filename) == (13, "/data/part")


def test_changing_writes_on_over_a_recovery_directory_is_refused_before_spark_runs(tmp_path):
    recovery = tmp_path / "rec"
    items = [("k", str(i)) for i in range(20)]
    config = RunConfig(recovery_dir=str(recovery), max_batch_items=5)
    run_flow(_dir_flow(tmp_path / "out", "driver", items), config)
    before = {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir()}
    with pytest.raises(RecoveryDirectoryError, match="writes_on cannot change"):
        run_flow(_dir_flow(tmp_path / "out", "executors", items), config)
    assert {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir()} == before


class LinesPartition021(StatefulSinkPartition):
    def __init__(self, path: Path, resume_state: int | None) -> None:
        self.path, self.at = path, resume_state or 0

    def write_batch(self, values: list) -> None:
        with self.path.open("a") as f:
            f.writelines(f"{os.getpid()} {value}\n" for value in values)
        self.at += len(values)

    def snapshot(self) -> int:
        return self.at


class LinesSink021(FixedPartitionedSink):
    writes_on = "executors"

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def list_parts(self) -> list[str]:
        return ["a", "b"]

    def build_part(self, step_id: str, for_part: str, resume_state: int | None):
        return LinesPartition021(self.folder / for_part, resume_state)


def test_a_bytewax_021_fixed_partitioned_sink_writes_on_the_executors_when_it_says_so(tmp_path):
    flow = Dataflow("f")
    words = op.input("inp", flow, TestingSource([("x", 1), ("y", 2), ("z", 3), ("x", 4)]))
    op.output("out", words, LinesSink021(tmp_path))
    report = run_flow(flow, RunConfig())
    lines = [line.split() for p in ("a", "b") for line in (tmp_path / p).read_text().splitlines()]
    assert sorted(int(line[1]) for line in lines) == [1, 2, 3, 4]
    assert {line[0] for line in lines}.isdisjoint({str(os.getpid())})
    assert report.items_written == {"f.out": 4}


def test_spark_keeps_one_state_key_per_part(tmp_path):
    """Spark keeps one state row per part: the run's state keys are the parts."""
    progress = tmp_path / "progress.jsonl"
    config = RunConfig(
        recovery_dir=str(tmp_path / "rec"), progress_json=str(progress), max_batch_items=60
    )
    run_flow(_dir_flow(tmp_path / "out", "executors"), config)
    batches = [json.loads(line) for line in progress.read_text().splitlines()]
    assert {b["state_keys"] for b in batches if "files" in b["steps"]} == {3}
