"""The task side of outputs written on the executors (runtime/executor_writes.py)."""

from __future__ import annotations

import pytest

from flowspark.engine.sink import _DynamicWriter
from flowspark.outputs import DynamicOutput, StatelessSink
from flowspark.runtime.codec import (
    STDOUT_PORT,
    WRITTEN_COUNT_PORT,
    decode_count,
    encode_items,
    encode_range,
)
from flowspark.runtime.errors import RemoteStepFailure, StepError, find_step_error
from flowspark.runtime.executor_writes import ExecutorOutput, ExecutorWrites
from flowspark.runtime.task import rows_to_batch


class Recorded(DynamicOutput):
    """Sinks that note what happens to them in the class's ``log``."""

    writes_on = "executors"
    log: list = []

    def __init__(self, fail_on: object = None) -> None:
        self.fail_on = fail_on

    def build(self, worker_index: int, worker_count: int) -> StatelessSink:
        log, fail_on = self.log, self.fail_on
        log.append(("build", worker_index, worker_count))

        class Sink(StatelessSink):
            def begin_batch(self, batch_id: int, run_token: str) -> None:
                log.append(("begin", batch_id, run_token))

            def write_batch(self, items: list) -> None:
                if fail_on in items:
                    raise KeyError(fail_on)
                log.append(("write", list(items)))

            def close(self) -> None:
                log.append(("close",))

        return Sink()


@pytest.fixture(autouse=True)
def _fresh_log():
    Recorded.log = []


def _rows(*rows: tuple[int, bytes], ts_ms: int = 5) -> object:
    return rows_to_batch([p for p, _ in rows], [None] * len(rows), [d for _, d in rows], ts_ms)


def test_rows_of_other_ports_pass_on_untouched_and_each_output_reports_its_count():
    writes = ExecutorWrites({9: ExecutorOutput("out", Recorded(), "tok")}, 4, 2)
    batches = [
        _rows((3, b"a"), (9, encode_items(["x", "y"])), (3, b"b")),
        _rows((9, encode_range(range(3))), ts_ms=6),
        _rows((3, b"c"), ts_ms=7),
    ]
    out = list(writes(iter(batches)))
    passed = [(b.column(0).to_pylist(), b.column(2).to_pylist()) for b in out[:-1]]
    assert passed == [([3, 3], [b"a", b"b"]), ([3], [b"c"])]
    assert out[1].column(3).to_pylist()[0].timestamp() == 0.007
    assert out[-1].column(0).to_pylist() == [WRITTEN_COUNT_PORT]
    assert decode_count(out[-1].column(2).to_pylist()[0]) == ("out", 5)
    assert Recorded.log == [
        ("build", 0, 2),
        ("begin", 4, "tok.0"),
        ("write", ["x", "y"]),
        ("write", [0, 1, 2]),
        ("close",),
    ]


def test_a_task_without_rows_of_an_output_builds_no_sink_and_counts_nothing():
    writes = ExecutorWrites({9: ExecutorOutput("out", Recorded(), "tok")}, 0, 2)
    out = list(writes(iter([_rows((3, b"a"))])))
    assert [b.column(0).to_pylist() for b in out] == [[3]]
    assert Recorded.log == []


def test_printed_text_travels_as_a_stdout_row(capsys):
    class Printing(Recorded):
        def build(self, worker_index: int, worker_count: int) -> StatelessSink:
            class Sink(StatelessSink):
                def write_batch(self, items: list) -> None:
                    print(*items)

            return Sink()

    writes = ExecutorWrites({9: ExecutorOutput("out", Printing(), "tok")}, 0, 1)
    (last,) = list(writes(iter([_rows((9, encode_items(["hi", 2])))])))
    assert last.column(0).to_pylist() == [STDOUT_PORT, WRITTEN_COUNT_PORT]
    assert last.column(2).to_pylist()[0] == b"hi 2\n"
    assert capsys.readouterr().out == ""


def test_a_failing_write_names_the_step_and_the_items_and_closes_the_sinks():
    writes = ExecutorWrites(
        {
            8: ExecutorOutput("first", Recorded(), "tok"),
            9: ExecutorOutput("second", Recorded(fail_on="bad"), "tok"),
        },
        0,
        1,
    )
    batch = _rows((8, encode_items(["ok"])), (9, encode_items(["fine", "bad"])))
    with pytest.raises(RemoteStepFailure) as info:
        list(writes(iter([batch])))
    error = find_step_error(str(info.value))
    assert isinstance(error, KeyError)
    assert isinstance(error, StepError)
    assert str(error).startswith("step 'second' (write_batch) failed on item ['fine', 'bad']")
    assert Recorded.log.count(("close",)) == 2


def test_an_output_on_the_executors_builds_no_sink_in_the_driver_unless_rows_come(tmp_path):
    """On Spark Connect its rows reach the driver: the sink is built then, and begun."""
    writer = _DynamicWriter(Recorded(), tmp_path / "out.token")
    assert Recorded.log == []
    assert writer.token == (tmp_path / "out.token").read_text()
    writer.begin(3)
    writer.write(["a"])
    writer.begin(4)
    writer.close()
    token = writer.token
    assert Recorded.log == [
        ("build", 0, 1),
        ("begin", 3, token),
        ("write", ["a"]),
        ("begin", 4, token),
        ("close",),
    ]
