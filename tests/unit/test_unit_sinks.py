"""Exactly-once file outputs: `_PartitionedWriter` rewinds a replayed micro-batch.

Spark calls ``begin(batch) / write(...) / commit(batch)`` per micro-batch; a crash
is simulated by dropping the writer and building a new one on the same state file.
"""

from __future__ import annotations

from pathlib import Path
from zlib import adler32

import pyarrow as pa
import pytest

from flowspark.connectors.files import DirOutput, FileOutput
from flowspark.dataflow import Dataflow
from flowspark.engine.errors import RecoveryDirectoryError
from flowspark.engine.sink import BatchDispatcher, FlowFailed, _PartitionedWriter, _writer
from flowspark.outputs import PartitionedOutput
from flowspark.plan.graph import build_plan
from flowspark.runtime.codec import STDOUT_PORT, encode_items
from flowspark.runtime.errors import step_failure
from flowspark.testing import TestingInput, TestingOutput


def batch_lines(batch_id: int, n: int = 3) -> list[str]:
    return [f"b{batch_id}-{i}" for i in range(n)]


def run_batch(writer: _PartitionedWriter, batch_id: int, items=None) -> None:
    writer.begin(batch_id)
    writer.write(batch_lines(batch_id) if items is None else items)
    writer.commit(batch_id)


def expected(*batch_ids: int) -> str:
    return "".join(f"{line}\n" for b in batch_ids for line in batch_lines(b))


@pytest.fixture
def out_file(tmp_path: Path) -> Path:
    return tmp_path / "out" / "result.txt"


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path / "state" / "out.pickle"


def crash(writer: _PartitionedWriter) -> None:
    """The process dies: nothing more happens through this writer."""
    writer.close()


# -- FileOutput -------------------------------------------------------------------------


@pytest.fixture
def file_writer(out_file: Path, state: Path):
    """``file_writer(*batches)``: a new writer of ``FileOutput(out_file)`` on ``state`` (after
    a crash, the restarted one) that has run ``batches``."""

    def make(*batches: int) -> _PartitionedWriter:
        writer = _PartitionedWriter(FileOutput(out_file), state)
        for b in batches:
            run_batch(writer, b)
        return writer

    return make


def test_batches_are_appended_in_order(out_file, file_writer):
    file_writer(0, 1, 2).close()
    assert out_file.read_text() == expected(0, 1, 2)


def test_replay_of_the_last_committed_batch_writes_it_once(out_file, file_writer):
    crash(file_writer(0, 1, 2))  # after our commit(2) but before Spark recorded batch 2 as done
    file_writer(2).close()
    assert out_file.read_text() == expected(0, 1, 2)


def test_replay_then_continue(out_file, file_writer):
    crash(file_writer(0, 1, 2))
    file_writer(2, 3, 4).close()
    assert out_file.read_text() == expected(0, 1, 2, 3, 4)


def test_crash_in_the_middle_of_a_batch_is_truncated_back(out_file, file_writer):
    writer = file_writer(0, 1, 2)
    writer.begin(3)
    writer.write(batch_lines(3)[:2])  # no commit
    crash(writer)
    assert out_file.read_text() == expected(0, 1, 2) + "b3-0\nb3-1\n"

    writer = file_writer()
    writer.begin(3)
    assert out_file.read_text() == expected(0, 1, 2)
    writer.write(batch_lines(3))
    writer.commit(3)
    writer.close()
    assert out_file.read_text() == expected(0, 1, 2, 3)


def test_crash_during_a_replay_is_rewound_again(out_file, file_writer):
    crash(file_writer(0, 1, 2))
    writer = file_writer()
    writer.begin(2)
    writer.write(batch_lines(2))  # the replay dies before commit too
    crash(writer)
    file_writer(2).close()
    assert out_file.read_text() == expected(0, 1, 2)


def test_replay_of_the_first_batch_starts_fresh(out_file, file_writer):
    crash(file_writer(0))
    file_writer(0).close()
    assert out_file.read_text() == expected(0)


def test_replay_older_than_both_snapshots_is_refused_and_the_file_kept(out_file, file_writer):
    # Only the last two generations are kept: the state before batch 1 is gone, so
    # nothing proves where to cut the file back to (the commit log was lost).
    crash(file_writer(0, 1, 2))
    writer = file_writer()
    with pytest.raises(RecoveryDirectoryError, match=r"out\.pickle holds micro-batches 1 and 2"):
        writer.begin(1)
    writer.close()
    assert out_file.read_text() == expected(0, 1, 2)


def test_a_snapshot_older_than_the_batch_before_is_refused(out_file, file_writer):
    # Batches 3 and 4 committed, but the snapshot is of batch 2 (an old copy):
    # resuming from it would cut off what batches 3 and 4 wrote.
    crash(file_writer(0, 1, 2))
    with open(out_file, "a") as f:
        f.write(expected(3, 4))
    writer = file_writer()
    with pytest.raises(RecoveryDirectoryError, match="not the state after micro-batch 4"):
        writer.begin(5)
    writer.close()
    assert out_file.read_text() == expected(0, 1, 2, 3, 4)


def test_a_missing_snapshot_after_the_first_batch_is_refused(out_file, file_writer):
    out_file.parent.mkdir(parents=True)
    out_file.write_text(expected(0, 1))
    writer = file_writer()
    with pytest.raises(RecoveryDirectoryError, match="holds no micro-batch"):
        writer.begin(2)
    writer.close()
    assert out_file.read_text() == expected(0, 1)


def test_an_unreadable_snapshot_is_refused_naming_it(out_file, state, file_writer):
    state.parent.mkdir(parents=True)
    state.write_bytes(b"not a pickle")
    with pytest.raises(RecoveryDirectoryError, match=r"out\.pickle cannot be read"):
        file_writer()


def test_an_output_file_shorter_than_its_snapshot_is_left_as_it_is(out_file, file_writer):
    crash(file_writer(0, 1))
    out_file.write_text("cut\n")
    writer = file_writer()
    with pytest.raises(ValueError, match="holds 4 bytes, but the recovery directory says"):
        writer.begin(2)
    writer.close()
    assert out_file.read_text() == "cut\n"  # not padded with NULs


def test_replay_in_the_same_writer_rewinds(out_file, file_writer):
    file_writer(0, 1, 1).close()
    assert out_file.read_text() == expected(0, 1)


def test_fresh_start_truncates_an_existing_file(out_file, file_writer):
    out_file.parent.mkdir(parents=True)
    out_file.write_text("left over from an earlier run\n")
    file_writer(0).close()
    assert out_file.read_text() == expected(0)


def test_empty_batch_still_truncates_on_fresh_start(out_file, file_writer):
    out_file.parent.mkdir(parents=True)
    out_file.write_text("old\n")
    writer = file_writer()
    run_batch(writer, 0, items=[])
    writer.close()
    assert out_file.read_text() == ""


def test_state_file_is_written_atomically_next_to_nothing_else(state, file_writer):
    file_writer(0).close()
    assert sorted(p.name for p in state.parent.iterdir()) == ["out.pickle"]


@pytest.mark.parametrize(
    ("end", "items", "written"),
    [
        ("\n", [("k", "v"), 7, ("k", 3.5), (1, 2)], "v\n7\n3.5\n(1, 2)\n"),
        (";", ["a", "b"], "a;b;"),
        ("\n", ["żółć 🎉"], "żółć 🎉\n"),
    ],
    ids=["key-value-writes-the-value-others-str", "custom-end", "unicode-as-utf8"],
)
def test_items_become_lines(out_file, state, end, items, written):
    writer = _PartitionedWriter(FileOutput(out_file, end=end), state)
    run_batch(writer, 0, items=items)
    writer.close()
    assert out_file.read_bytes() == written.encode()


# -- DirOutput --------------------------------------------------------------------------


def test_dir_output_routes_by_assign_file_modulo_file_count(tmp_path, state):
    out = DirOutput(
        tmp_path / "d",
        3,
        file_namer=lambda i, n: f"file{i}of{n}.txt",
        assign_file=lambda key: int(key),
    )
    writer = _PartitionedWriter(out, state)
    run_batch(writer, 0, items=[("0", "a"), ("1", "b"), ("5", "c"), ("3", "d"), ("4", "e")])
    writer.close()
    assert (tmp_path / "d" / "file0of3.txt").read_text() == "a\nd\n"
    assert (tmp_path / "d" / "file1of3.txt").read_text() == "b\ne\n"
    assert (tmp_path / "d" / "file2of3.txt").read_text() == "c\n"


def test_dir_output_defaults_use_adler32_and_part_names(tmp_path, state):
    keys = ["apple", "banana", "cherry", "date", "elderberry"]
    writer = _PartitionedWriter(DirOutput(tmp_path / "d", 2), state)
    run_batch(writer, 0, items=[(k, k.upper()) for k in keys])
    writer.close()
    for i in range(2):
        want = "".join(f"{k.upper()}\n" for k in keys if adler32(k.encode()) % 2 == i)
        assert (tmp_path / "d" / f"part_{i}").read_text() == want


def test_dir_output_replay_rewinds_every_file(tmp_path, state):
    def make():
        return DirOutput(tmp_path / "d", 2, assign_file=lambda key: int(key))

    writer = _PartitionedWriter(make(), state)
    for b in range(3):
        run_batch(writer, b, items=[("0", f"x{b}"), ("1", f"y{b}")])
    writer.begin(3)
    writer.write([("0", "x3"), ("1", "y3")])  # crash before commit
    crash(writer)
    writer = _PartitionedWriter(make(), state)
    run_batch(writer, 3, items=[("0", "x3"), ("1", "y3")])
    writer.close()
    assert (tmp_path / "d" / "part_0").read_text() == "x0\nx1\nx2\nx3\n"
    assert (tmp_path / "d" / "part_1").read_text() == "y0\ny1\ny2\ny3\n"


@pytest.mark.parametrize("bad", [0, -2, "3"])
def test_dir_output_file_count_must_be_positive(tmp_path, bad):
    with pytest.raises(ValueError, match="file_count must be a positive int"):
        DirOutput(tmp_path, bad)


def test_output_without_parts_is_rejected(tmp_path):
    class NoParts(PartitionedOutput):
        def list_parts(self):
            return []

        def build_part(self, for_part, resume_state):
            raise AssertionError("unreachable")

    with pytest.raises(ValueError, match="returned no parts"):
        _PartitionedWriter(NoParts(), tmp_path / "s.pickle")


def test_writer_for_a_non_output_is_a_type_error(tmp_path):
    with pytest.raises(TypeError, match="must subclass PartitionedOutput or DynamicOutput"):
        _writer(object(), "out", tmp_path)


# -- BatchDispatcher (fed an Arrow table directly, no Spark) ----------------------------


class FakeBatch:
    """What ``foreachBatch`` hands over, reduced to ``toArrow``."""

    def __init__(self, rows=None, error=None):
        self.rows, self.error = rows or [], error

    def toArrow(self):  # noqa: N802 - Spark's name
        if self.error is not None:
            raise self.error
        ports, datas = zip(*self.rows, strict=True) if self.rows else ((), ())
        return pa.table(
            {
                "port": pa.array(ports, pa.int32()),
                "key": pa.array([None] * len(ports), pa.string()),
                "data": pa.array(datas, pa.binary()),
            }
        )


def file_flow(path: Path, listing: list):
    flow = Dataflow()
    s = flow.input("inp", TestingInput([]))
    s.output("file", FileOutput(path)).output("mem", TestingOutput(listing))
    plan = build_plan(flow)
    return plan, plan.sink_ports[1], plan.sink_ports[2]


def test_dispatcher_routes_rows_to_their_outputs_and_prints_worker_stdout(
    tmp_path, out_file, capsys
):
    listing = []
    plan, file_port, mem_port = file_flow(out_file, listing)
    dispatcher = BatchDispatcher(plan, tmp_path / "state")
    dispatcher(
        FakeBatch(
            [
                (STDOUT_PORT, b"printed in a worker\n"),
                (file_port, encode_items(["a", "b"])),
                (mem_port, encode_items([1, 2])),
            ]
        ),
        0,
    )
    dispatcher.close()
    assert out_file.read_text() == "a\nb\n"
    assert listing == [1, 2]
    assert capsys.readouterr().out == "printed in a worker\n"
    assert dispatcher.batches == 1


def test_dispatcher_turns_a_worker_failure_into_the_step_error(tmp_path, out_file):
    plan, _, _ = file_flow(out_file, [])
    dispatcher = BatchDispatcher(plan, tmp_path / "state")
    jvm_error = RuntimeError("PythonException: " + str(step_failure("m", len, 5, KeyError("k"))))
    with pytest.raises(FlowFailed, match="step 'm' \\(len\\) failed on item 5"):
        dispatcher(FakeBatch(error=jvm_error), 0)
    assert dispatcher.error.step_id == "m"


def test_dispatcher_rejects_rows_for_unknown_ports(tmp_path, out_file):
    plan, _, _ = file_flow(out_file, [])
    dispatcher = BatchDispatcher(plan, tmp_path / "state")
    with pytest.raises(FlowFailed, match="unknown port 99"):
        dispatcher(FakeBatch([(99, encode_items([1]))]), 0)
