"""The task side of outputs written on the executors (runtime/executor_writes.py)."""

from __future__ import annotations

import pickle

import pytest

from flowspark.connectors.files import FileOutput
from flowspark.dataflow import Dataflow
from flowspark.engine.sink import _DynamicWriter
from flowspark.outputs import DynamicOutput, Output, StatelessSink
from flowspark.plan.graph import build_plan
from flowspark.runtime import executor_writes
from flowspark.runtime.codec import STDOUT_PORT, WRITTEN_COUNT_PORT, decode_count, decode_items
from flowspark.runtime.compile import compile_flow, with_run_tokens
from flowspark.runtime.errors import RemoteStepFailure, StepError, find_step_error
from flowspark.runtime.executor_writes import (
    ExecutorOutput,
    close_task_sinks,
    with_token,
    write_here,
)
from flowspark.runtime.stage import StageContext
from flowspark.runtime.task import leaving_rows, run_program
from flowspark.testing import TestingInput, TestingOutput


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
def _fresh(monkeypatch):
    Recorded.log = []
    attempt = [1]
    monkeypatch.setattr(executor_writes, "task_context", lambda: StageContext(attempt=attempt[0]))
    yield attempt
    close_task_sinks()


def test_one_sink_per_task_is_begun_once_and_counts_each_write(_fresh):
    target = ExecutorOutput("out", Recorded(), 2, "tok")
    rows = [*write_here(target, ["x", "y"]), *write_here(target, range(3))]
    assert [(port, decode_count(data)) for port, _, data in rows] == [
        (WRITTEN_COUNT_PORT, ("out", 2)),
        (WRITTEN_COUNT_PORT, ("out", 3)),
    ]
    assert close_task_sinks() == b""
    assert Recorded.log == [
        ("build", 0, 2),
        ("begin", 0, "tok.0"),  # outside Spark: partition 0 of micro-batch 0
        ("write", ["x", "y"]),
        ("write", [0, 1, 2]),
        ("close",),
    ]


def test_the_next_task_in_the_process_closes_the_last_ones_sinks_and_builds_its_own(_fresh):
    target = ExecutorOutput("out", Recorded(), 1, "tok")
    list(write_here(target, ["a"]))
    _fresh[0] = 2  # another task attempt
    list(write_here(target, ["b"]))
    assert [entry[0] for entry in Recorded.log] == [
        "build", "begin", "write", "close", "build", "begin", "write",
    ]  # fmt: skip


def test_printed_text_travels_as_a_stdout_row(capsys):
    class Printing(Recorded):
        def build(self, worker_index: int, worker_count: int) -> StatelessSink:
            class Sink(StatelessSink):
                def write_batch(self, items: list) -> None:
                    print(*items)

                def close(self) -> None:
                    print("closed")

            return Sink()

    rows = list(write_here(ExecutorOutput("out", Printing(), 1, "t"), ["hi", 2]))
    assert [(port, data) for port, _, data in rows][0] == (STDOUT_PORT, b"hi 2\n")
    assert close_task_sinks() == b"closed\n"
    assert capsys.readouterr().out == ""


def test_a_failing_write_names_the_step_and_the_items():
    target = ExecutorOutput("second", Recorded(fail_on="bad"), 1, "tok")
    with pytest.raises(RemoteStepFailure) as info:
        list(write_here(target, ["fine", "bad"]))
    error = find_step_error(str(info.value))
    assert isinstance(error, KeyError)
    assert isinstance(error, StepError)
    assert str(error).startswith("step 'second' (write_batch) failed on item ['fine', 'bad']")


def _flow(seen: list) -> Dataflow:
    flow = Dataflow()
    stream = flow.input("inp", TestingInput([1, 2, 3]))
    stream.output("there", Recorded())
    stream.map(lambda x: x * 10).output("here", TestingOutput(seen))
    return flow


def test_a_compiled_program_writes_its_executor_outputs_and_passes_the_rest_as_rows():
    plan = build_plan(_flow([]))
    compiled = compile_flow(plan, key_partitions=2)
    ports = {plan.step(o).step_id: plan.sink_ports[o] for o in plan.outputs}
    compiled = with_run_tokens(compiled, {ports["there"]: "tok"})
    program = pickle.loads(compiled.inputs[0].program)
    assert list(program.executor_sinks) == [ports["there"]]
    leaving = program.run(compiled.inputs[0].entry, [1, 2, 3], StageContext())
    rows = list(leaving_rows(program, leaving, spread=1))
    assert [(port, decode_count(data)) for port, _, data in rows if port < 0] == [
        (WRITTEN_COUNT_PORT, ("there", 3))
    ]
    assert [list(decode_items(data)) for port, _, data in rows if port == ports["here"]] == [
        [10, 20, 30]
    ]
    assert Recorded.log[:3] == [("build", 0, 2), ("begin", 0, "tok.0"), ("write", [1, 2, 3])]


def test_run_program_leaves_the_sinks_open_for_the_rest_of_the_task():
    """A task may run its program several times (one per input chunk): one sink, its
    positions going on, until the task ends."""
    plan = build_plan(_flow([]))
    compiled = with_run_tokens(compile_flow(plan, 1), {plan.sink_ports[plan.outputs[0]]: "t"})
    program = pickle.loads(compiled.inputs[0].program)
    entry = compiled.inputs[0].entry
    for chunk in ([1], [2, 3]):
        list(run_program(program, [(entry, chunk)], StageContext()))
    assert [e[0] for e in Recorded.log] == ["build", "begin", "write", "write"]


def test_an_output_on_the_executors_has_a_run_token_and_no_sink_in_the_driver(tmp_path):
    writer = _DynamicWriter(Recorded(), tmp_path / "out.token")
    assert (writer.sink, Recorded.log) == (None, [])
    assert writer.token == (tmp_path / "out.token").read_text()
    writer.begin(3)
    writer.close()
    assert Recorded.log == []


def test_with_token_keeps_the_rest():
    target = ExecutorOutput("out", Recorded(), 4)
    assert with_token(target, "abc") == ExecutorOutput("out", target.output, 4, "abc")


class Everywhere(TestingOutput):
    writes_on = "everywhere"


class NeitherOnExecutors(Output):
    """Neither dynamic nor partitioned: flowspark has no sink of its own to build."""

    writes_on = "executors"


def test_an_output_that_says_another_place_fails_when_the_flow_is_built(tmp_path):
    flow = Dataflow()
    stream = flow.input("inp", TestingInput([1]))
    with pytest.raises(ValueError, match="^output 'out': writes_on is 'driver' or, for a Dyn"):
        stream.output("out", Everywhere([]))
    with pytest.raises(ValueError, match="got 'executors' on a NeitherOnExecutors$"):
        stream.output("bare", NeitherOnExecutors())
    with pytest.raises(ValueError, match="got 'workers' on a FileOutput$"):
        stream.output("file", FileOutput(tmp_path / "out.txt", writes_on="workers"))  # type: ignore[arg-type]


def test_a_stage_task_given_an_empty_batch_ends_without_rows():
    """The stage after an exchange takes the time of its fed rows for what its sinks
    print as they close; a batch with no rows feeds nothing."""
    from flowspark.engine.query import _stage_function
    from flowspark.runtime.task import rows_to_batch

    flow = Dataflow()
    stream = flow.input("inp", TestingInput([1])).redistribute("spread")
    stream.output("there", Recorded())
    level = compile_flow(build_plan(flow), 2).levels[0]
    stage = _stage_function(level.program, level.entries, 1)
    assert list(stage(iter([rows_to_batch([], [], [], 0)]))) == []
    assert Recorded.log == []


def test_a_sink_failing_to_close_leaves_the_others_closed_once_and_its_error_raised():
    class ClosingFails(Recorded):
        def build(self, worker_index: int, worker_count: int) -> StatelessSink:
            class Sink(StatelessSink):
                def write_batch(self, items: list) -> None:
                    pass

                def close(self) -> None:
                    raise OSError("disk gone")

            return Sink()

    list(write_here(ExecutorOutput("bad", ClosingFails(), 1, "t"), ["a"]))
    list(write_here(ExecutorOutput("good", Recorded(), 1, "t"), ["b"]))
    with pytest.raises(RemoteStepFailure) as info:
        close_task_sinks()
    error = find_step_error(str(info.value))
    assert isinstance(error, OSError)
    assert str(error).startswith("step 'bad' (close) failed")
    assert Recorded.log.count(("close",)) == 1
    assert close_task_sinks() == b""  # nothing is left open
