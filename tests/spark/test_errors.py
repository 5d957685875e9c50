"""A failing user function stops the run with a clean Python error."""

from __future__ import annotations

import pytest

from flowspark.connectors.stdio import StdOutput
from flowspark.dataflow import Dataflow
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
