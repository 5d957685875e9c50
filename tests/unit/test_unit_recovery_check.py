"""A recovery directory that does not add up is refused before anything is written
(``flowspark.engine.recovery_check`` and the run token in ``engine/sink.py``), without
Spark: directories laid out by hand as Spark's commit log and flowspark's sink
snapshots would be."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest

from flowspark.connectors.files import FileOutput
from flowspark.dataflow import Dataflow
from flowspark.engine.errors import RecoveryDirectoryError
from flowspark.engine.recovery_check import check_recovery_directory, last_committed_batch
from flowspark.engine.sink import SINKS_DIR, BatchDispatcher
from flowspark.outputs import DynamicOutput, StatelessSink
from flowspark.plan.graph import build_plan
from flowspark.runtime.storage import Location
from flowspark.testing import TestingInput, TestingOutput


def plan_with(output: Any) -> Any:
    flow = Dataflow()
    flow.input("inp", TestingInput([1])).output("out", output)
    return build_plan(flow)


def lay_out(rec: Path, commits: list[int], snapshot: tuple | None | str) -> Path:
    """Spark's ``metadata``, ``offsets/N`` and ``commits/N`` for each N, and
    ``flowspark-sinks/out.pickle`` holding ``(prev batch, last batch)`` generations
    (``None``: no file; a str: those bytes)."""
    (rec / "commits").mkdir(parents=True)
    (rec / "offsets").mkdir()
    if commits:
        (rec / "metadata").write_text('{"id":"0e5f"}')
    for batch in commits:
        (rec / "offsets" / str(batch)).write_text("v1\n{}\n{}")
        (rec / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}')
    (rec / "commits" / ".7.0c1d.tmp").write_text("")  # Spark's temporary: not a commit
    if snapshot is not None:
        (rec / SINKS_DIR).mkdir()
        path = rec / SINKS_DIR / "out.pickle"
        if isinstance(snapshot, str):
            path.write_bytes(snapshot.encode())
        else:
            prev, last = ((b, [10 * b]) if b is not None else None for b in snapshot)
            path.write_bytes(pickle.dumps({"prev": prev, "last": last}))
    return rec


@pytest.fixture
def file_plan(tmp_path: Path) -> Any:
    return plan_with(FileOutput(tmp_path / "out.txt"))


@pytest.mark.parametrize(
    ("commits", "snapshot", "last"),
    [
        ([], None, None),  # a fresh directory
        ([], (None, 0), None),  # batch 0 written, not committed
        ([0, 1, 2], (1, 2), 2),  # the last commit's snapshot
        ([0, 1, 2], (2, 3), 2),  # batch 3 written, not committed
        ([5, 6, 7, 8], (7, 8), 8),  # older commit files removed by Spark
    ],
)
def test_a_directory_that_adds_up_is_accepted(tmp_path, file_plan, commits, snapshot, last):
    rec = Location.parse(lay_out(tmp_path / "rec", commits, snapshot))
    assert check_recovery_directory(rec, file_plan) == last
    assert last_committed_batch(rec) == last


@pytest.mark.parametrize(
    ("commits", "snapshot", "problem"),
    [
        ([0, 1, 2], None, "is missing, but micro-batches up to 2 are committed"),
        ([0, 1, 2], (0, 1), "is of micro-batch 1, but micro-batches up to 2 are committed"),
        ([0, 1, 2], (4, 5), "is of micro-batch 5, but micro-batches up to 2 are committed"),
        ([], (30, 31), "is of micro-batch 31, but no micro-batch is committed"),
        ([0, 1, 2], (1, 3), "holds micro-batch 3 after micro-batch 1, but micro-batches up"),
        ([0, 1, 2], (None, 3), "holds micro-batch 3 after nothing, but micro-batches up"),
        ([0], "garbage", "cannot be read (UnpicklingError"),
    ],
)
def test_a_directory_that_does_not_add_up_is_refused_naming_the_snapshot(
    tmp_path, file_plan, commits, snapshot, problem
):
    rec = lay_out(tmp_path / "rec", commits, snapshot)
    with pytest.raises(RecoveryDirectoryError) as caught:
        check_recovery_directory(Location.parse(rec), file_plan)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"recovery directory {rec} does not add up: ")
    assert f"the snapshot of output 'out', {rec / SINKS_DIR / 'out.pickle'}, {problem}" in message
    assert message.endswith(
        "nothing was written. Restore the whole directory from a copy, or start over "
        "with a new recovery directory"
    )


def test_spark_files_the_commits_need_are_asked_for(tmp_path, file_plan):
    rec = lay_out(tmp_path / "rec", [0, 1, 2], (1, 2))
    (rec / "offsets" / "2").unlink()
    with pytest.raises(RecoveryDirectoryError, match=r"offsets has no entry for micro-batch 2,"):
        check_recovery_directory(Location.parse(rec), file_plan)
    (rec / "metadata").unlink()
    with pytest.raises(RecoveryDirectoryError, match=r"rec/metadata is missing, but its logs"):
        check_recovery_directory(Location.parse(rec), file_plan)


def test_outputs_without_snapshots_are_not_asked_for_one(tmp_path):
    rec = Location.parse(lay_out(tmp_path / "rec", [0, 1], None))
    assert check_recovery_directory(rec, plan_with(TestingOutput([]))) == 1


class _NamingSink(StatelessSink):
    """A sink that names its writes by the run token (as JetStreamOutput does)."""

    def __init__(self, closed: list[bool]) -> None:
        self.closed = closed

    def begin_batch(self, batch_id: int, run_token: str) -> None:
        pass

    def write_batch(self, items: list[Any]) -> None:
        pass

    def close(self) -> None:
        self.closed.append(True)


class _NamingOutput(DynamicOutput):
    def __init__(self) -> None:
        self.closed: list[bool] = []

    def build(self, worker_index: int, worker_count: int) -> StatelessSink:
        return _NamingSink(self.closed)


def test_a_missing_run_token_is_refused_once_batches_are_committed(tmp_path):
    output = _NamingOutput()
    plan = plan_with(output)
    sinks = tmp_path / "rec" / SINKS_DIR
    fresh = BatchDispatcher(plan, sinks, resuming=False)  # a fresh run makes one
    token = (sinks / "out.token").read_text()
    fresh.close()
    again = BatchDispatcher(plan, sinks, resuming=True)
    assert again.writers[plan.sink_ports[plan.outputs[0]]].token == token
    again.close()

    (sinks / "out.token").unlink()
    closed_before = len(output.closed)
    with pytest.raises(RecoveryDirectoryError) as caught:
        BatchDispatcher(plan, sinks, resuming=True)
    message = str(caught.value)
    assert "\n" not in message
    assert f"the run token {sinks / 'out.token'} is missing but Spark has committed" in message
    assert not (sinks / "out.token").exists()  # no new token made
    assert len(output.closed) == closed_before + 1  # the sink built for it was closed
