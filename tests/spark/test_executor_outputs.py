"""Outputs that say ``writes_on = "executors"``: their sinks run in Spark's tasks."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import flowspark.operators as op
from flowspark.dataflow import Dataflow
from flowspark.engine.query import RunConfig, run_flow
from flowspark.outputs import DynamicOutput, DynamicSink, StatelessSink, StatelessSinkPartition
from flowspark.runtime.errors import StepError
from flowspark.testing import TestingInput, TestingOutput, TestingSource


class LinesSink(StatelessSink):
    """Appends ``pid worker_index worker_count batch token item`` lines to a file of its own."""

    def __init__(self, folder: str, worker_index: int, worker_count: int) -> None:
        self.path = Path(folder) / f"{os.getpid()}-{worker_index}.txt"
        self.head = f"{os.getpid()} {worker_index} {worker_count}"
        self.batch = "- -"

    def begin_batch(self, batch_id: int, run_token: str) -> None:
        self.batch = f"{batch_id} {run_token}"

    def write_batch(self, items: list) -> None:
        with self.path.open("a") as f:
            f.writelines(f"{self.head} {self.batch} {item}\n" for item in items)


class LinesOutput(DynamicOutput):
    writes_on = "executors"

    def __init__(self, folder: Path) -> None:
        self.folder = str(folder)

    def build(self, worker_index: int, worker_count: int) -> LinesSink:
        return LinesSink(self.folder, worker_index, worker_count)


def _lines(folder: Path) -> list[list[str]]:
    return [line.split() for path in folder.iterdir() for line in path.read_text().splitlines()]


def _flow(items: list, folder: Path, seen: list) -> Dataflow:
    flow = Dataflow()
    stream = flow.input("inp", TestingInput(items, batch_size=7))
    stream.map(lambda x: x * 10).output("spread", LinesOutput(folder))
    stream.output("here", TestingOutput(seen))
    return flow


@pytest.mark.parametrize("batch_job", [True, False], ids=["batch-job", "stream"])
def test_each_item_is_written_once_by_spark_tasks_beside_a_driver_output(tmp_path, batch_job):
    folder = tmp_path / "out"
    folder.mkdir()
    seen: list[int] = []
    progress = tmp_path / "progress.jsonl"
    config = RunConfig(batch_job=batch_job, progress_json=str(progress))
    report = run_flow(_flow(list(range(100)), folder, seen), config)
    lines = _lines(folder)
    assert sorted(int(line[-1]) for line in lines) == [i * 10 for i in range(100)]
    assert {line[0] for line in lines}.isdisjoint({str(os.getpid())})  # not the driver
    assert {(int(line[1]), int(line[2])) for line in lines} <= {(0, 2), (1, 2)}
    assert sorted(seen) == list(range(100))
    assert report.items_written == {"spread": 100, "here": 100}
    batches = [json.loads(line)["steps"] for line in progress.read_text().splitlines()]
    assert sum(steps["spread"]["in"] for steps in batches if "spread" in steps) == 100
    assert {steps["spread"]["on"] for steps in batches if "spread" in steps} == {"executors"}
    assert {steps["here"]["on"] for steps in batches if "here" in steps} == {"driver"}


def test_a_sink_names_its_writes_by_the_run_token_and_its_partition(tmp_path):
    folder = tmp_path / "out"
    folder.mkdir()
    recovery = tmp_path / "rec"
    run_flow(_flow(list(range(40)), folder, []), RunConfig(recovery_dir=str(recovery)))
    token = (recovery / "flowspark-sinks" / "spread.token").read_text().strip()
    lines = _lines(folder)
    assert {line[4] for line in lines} <= {f"{token}.0", f"{token}.1"}
    assert all(line[4] == f"{token}.{line[1]}" for line in lines)
    assert {int(line[3]) for line in lines} <= set(range(10))  # micro-batch ids


class PrintingOutput(DynamicOutput):
    writes_on = "executors"

    def build(self, worker_index: int, worker_count: int) -> StatelessSink:
        class Printing(StatelessSink):
            def write_batch(self, items: list) -> None:
                for item in items:
                    print(f"wrote {item}")

        return Printing()


def test_what_an_executor_sink_prints_reaches_the_drivers_stdout(capsys):
    flow = Dataflow()
    flow.input("inp", TestingInput(["a", "b", "c"])).output("out", PrintingOutput())
    capsys.readouterr()
    run_flow(flow, RunConfig())
    assert sorted(capsys.readouterr().out.splitlines()) == ["wrote a", "wrote b", "wrote c"]


class DiskFull(OSError):
    pass


class FailingOutput(DynamicOutput):
    writes_on = "executors"

    def build(self, worker_index: int, worker_count: int) -> StatelessSink:
        class Failing(StatelessSink):
            def write_batch(self, items: list) -> None:
                raise DiskFull(28, "No space left on device", "/data/out")

        return Failing()


@pytest.mark.parametrize("batch_job", [True, False], ids=["batch-job", "stream"])
def test_a_failing_executor_sink_stops_the_run_with_the_users_error(batch_job):
    flow = Dataflow()
    flow.input("inp", TestingInput(["a", "b"])).output("sink", FailingOutput())
    with pytest.raises(DiskFull) as info:
        run_flow(flow, RunConfig(batch_job=batch_job))
    err = info.value
    assert isinstance(err, StepError)
    assert str(err).startswith("step 'sink' (write_batch) failed on item ['")
    assert "DiskFull: [Errno 28] No space left on device" in str(err)
    assert (err.errno, err.filename) == (28, "/data/out")


class LinesPartition(StatelessSinkPartition):
    def __init__(self, folder: str, worker_index: int, worker_count: int) -> None:
        self.lines = LinesSink(folder, worker_index, worker_count)

    def write_batch(self, items: list) -> None:
        self.lines.write_batch(items)


class LinesSink021(DynamicSink):
    writes_on = "executors"

    def __init__(self, folder: Path) -> None:
        self.folder = str(folder)

    def build(self, step_id: str, worker_index: int, worker_count: int) -> LinesPartition:
        return LinesPartition(self.folder, worker_index, worker_count)


def test_a_bytewax_021_dynamic_sink_writes_on_the_executors_when_it_says_so(tmp_path):
    folder = tmp_path / "out"
    folder.mkdir()
    flow = Dataflow("f")
    words = op.input("inp", flow, TestingSource(["a", "b", "c", "d"]))
    op.output("out", op.map("upper", words, str.upper), LinesSink021(folder))
    run_flow(flow, RunConfig())
    lines = _lines(folder)
    assert sorted(line[-1] for line in lines) == ["A", "B", "C", "D"]
    assert {line[0] for line in lines}.isdisjoint({str(os.getpid())})


@pytest.mark.parametrize("batch_job", [True, False], ids=["batch-job", "stream"])
def test_a_keyed_steps_output_is_written_by_its_own_tasks_each_key_in_order(tmp_path, batch_job):
    """After a keyed step every item of a key is in one task, in the key's order."""
    folder = tmp_path / "out"
    folder.mkdir()
    flow = Dataflow()
    stream = flow.input("inp", TestingInput([(f"k{i % 3}", i) for i in range(60)], batch_size=9))
    running = stream.stateful_map("sum", lambda: 0, lambda acc, v: (acc + v, f"{acc + v}"))
    running.map(lambda kv: f"{kv[0]}={kv[1]}").output("sums", LinesOutput(folder))
    recovery = None if batch_job else str(tmp_path / "rec")
    report = run_flow(flow, RunConfig(batch_job=batch_job, recovery_dir=recovery))
    assert report.streamed is not batch_job
    lines = sorted(_lines(folder), key=lambda line: int(line[3]))  # by micro-batch, stable
    assert report.items_written == {"sums": 60}
    by_key: dict[str, list[int]] = {}
    for line in lines:
        key, total = line[-1].split("=")
        by_key.setdefault(key, []).append(int(total))
    expected = {f"k{k}": [sum(range(k, i + 1, 3)) for i in range(k, 60, 3)] for k in range(3)}
    assert by_key == expected
    assert {line[0] for line in lines}.isdisjoint({str(os.getpid())})
