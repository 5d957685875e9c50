"""A failing user function stops the run with a clean Python error."""

from __future__ import annotations

from collections.abc import AsyncIterable
from datetime import UTC, datetime

import pytest

from flowspark.connectors.stdio import StdOutput
from flowspark.dataflow import Dataflow
from flowspark.engine.query import RunConfig, run_flow
from flowspark.mapstreamer import Datum as MapDatum
from flowspark.mapstreamer import Message as MapMessage
from flowspark.outputs import DynamicOutput, StatelessSink
from flowspark.runtime.errors import StepError
from flowspark.testing import TestingInput, TestingOutput, run_main


def _failing_flow(items):
    flow = Dataflow()
    flow.input("inp", TestingInput(items))

    def shout(s):
        return s.upper()

    flow.map(shout)
    flow.output("out", TestingOutput([]))
    return flow


def test_error_names_step_function_and_item():
    with pytest.raises(StepError) as info:
        run_main(_failing_flow(["a", "b", 42, "c"]))
    err = info.value
    assert err.step_id == "map_shout"
    assert "shout" in str(err)
    assert "42" in str(err)
    assert "AttributeError" in str(err)
    assert isinstance(err.__cause__, AttributeError)
    assert any("def shout" in note or "s.upper()" in note for note in err.__cause__.__notes__)


def test_error_item_repr_is_truncated():
    with pytest.raises(StepError) as info:
        run_main(_failing_flow([{"x": "y" * 10_000}]))
    assert len(str(info.value)) < 600


def test_no_jvm_stack_on_stderr(capfd):
    with pytest.raises(StepError):
        run_main(_failing_flow([1]))
    err = capfd.readouterr().err
    assert "\tat org.apache" not in err
    assert "Py4JJavaError" not in err


def test_explicit_step_id_is_named():
    flow = Dataflow()
    s = flow.input("inp", TestingInput([1, 0]))
    s.map("invert", lambda x: 1 / x).output("out", StdOutput())
    with pytest.raises(StepError, match="step 'invert'.*item 0.*ZeroDivisionError"):
        run_main(flow)


def test_bad_flows_fail_before_spark_runs():
    with pytest.raises(ValueError, match="no output"):
        flow = Dataflow()
        flow.input("inp", TestingInput([1]))
        run_main(flow)
    with pytest.raises(ValueError, match="no input"):
        run_main(Dataflow())


def test_session_still_usable_after_a_failure():
    with pytest.raises(StepError):
        run_main(_failing_flow([1]))
    out: list = []
    flow = Dataflow()
    flow.input("inp", TestingInput([1, 2]))
    flow.output("out", TestingOutput(out))
    run_main(flow)
    assert out == [1, 2]


# -- the error keeps the user's exception type -------------------------------------------


def _dividing_flow(items):
    flow = Dataflow()
    s = flow.input("inp", TestingInput(items))
    s.map("invert", lambda x: 1 / x).output("out", TestingOutput([]))
    return flow


def _caught(run, flow, kind: type[BaseException]) -> BaseException:
    """Run ``flow`` and return what an ``except kind`` clause catches."""
    try:
        run(flow)
    except kind as exc:
        return exc
    raise AssertionError(f"no {kind.__name__} raised")


@pytest.mark.parametrize(
    "items",
    [["x"], [("k", 1, 2)], [(1, "x")]],
    ids=["not-a-tuple", "three-tuple", "int-key"],
)
def test_except_type_error_catches_a_stateful_step_fed_a_bad_item(items):
    flow = Dataflow()
    flow.input("inp", TestingInput(items))
    flow.stateful_map("sm", lambda: 0, lambda s, v: (s, v))
    flow.output("out", TestingOutput([]))
    err = _caught(run_main, flow, TypeError)
    assert isinstance(err, StepError)
    assert err.step_id == "sm"
    assert "step 'sm'" in str(err)
    assert "TypeError" in str(err)
    assert isinstance(err.__cause__, TypeError)


@pytest.mark.parametrize("batch_job", [True, False], ids=["batch-job", "stream"])
def test_except_zero_division_error_catches_a_failing_map(batch_job):
    err = _caught(
        lambda f: run_flow(f, RunConfig(batch_job=batch_job)),
        _dividing_flow([1, 2, 0, 4]),
        ZeroDivisionError,
    )
    assert isinstance(err, StepError)
    assert str(err).startswith("step 'invert' (")
    assert "failed on item 0: ZeroDivisionError: division by zero" in str(err)
    assert (err.step_id, err.item) == ("invert", "0")
    assert type(err.__cause__) is ZeroDivisionError
    assert any("Traceback in the Spark worker" in n for n in err.__cause__.__notes__)


def test_run_main_raises_the_users_type_too():
    with pytest.raises(ZeroDivisionError, match="step 'invert'.*item 0"):
        run_main(_dividing_flow([0]))


class SinkFull(OSError):
    pass


class _FailingSink(StatelessSink):
    def write_batch(self, items):
        raise SinkFull(28, "No space left on device", "/data/out")


class FailingOutput(DynamicOutput):
    def build(self, worker_index, worker_count):
        return _FailingSink()


def test_a_failing_sink_keeps_its_type():
    flow = Dataflow()
    flow.input("inp", TestingInput(["a", "b"]))
    flow.output("sink", FailingOutput())
    err = _caught(run_main, flow, SinkFull)
    assert isinstance(err, StepError)
    assert isinstance(err, OSError)
    assert err.errno == 28
    assert err.filename == "/data/out"
    assert str(err).startswith("step 'sink' (write_batch) failed on item ['")
    assert "SinkFull: [Errno 28] No space left on device" in str(err)
    assert type(err.__cause__) is SinkFull


class HandlerError(Exception):
    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"{key}: {reason}")
        self.key = key


async def _picky_handler(keys: list[str], datum: MapDatum) -> AsyncIterable[MapMessage]:
    if datum.value == b"bad":
        raise HandlerError(keys[0], "cannot take this one")
    yield MapMessage(datum.value, keys=keys)


def test_a_numaflow_handler_failure_keeps_its_type():
    at = datetime(2024, 1, 1, tzinfo=UTC)
    items = [MapDatum(["k"], b"ok", at, at), MapDatum(["k"], b"bad", at, at)]
    flow = Dataflow()
    flow.input("inp", TestingInput(items))
    flow.map_stream("picky", _picky_handler)
    flow.output("out", TestingOutput([]))
    err = _caught(run_main, flow, HandlerError)
    assert isinstance(err, StepError)
    assert err.key == "k"
    assert "step 'picky'" in str(err) and "cannot take this one" in str(err)


def test_a_bad_byte_in_a_file_input_names_the_step_the_file_and_the_line(tmp_path):
    from flowspark.connectors.files import FileInput

    path = tmp_path / "events.txt"
    path.write_bytes(b"a 1\nb 2\nc \xff3\nd 4\n")
    flow = Dataflow()
    flow.input("events", FileInput(path))
    flow.output("out", TestingOutput([]))
    with pytest.raises(ValueError) as caught:
        run_main(flow)
    assert isinstance(caught.value, StepError) and caught.value.step_id == "events"
    assert f"{path}, line 3: not UTF-8 text" in str(caught.value)
