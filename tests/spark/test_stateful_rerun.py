"""A finished bounded keyed flow refuses new input on its recovery directory (no silent drop)."""

from __future__ import annotations

from pathlib import Path

import pytest

from flowspark.connectors.files import DirInput
from flowspark.dataflow import Dataflow
from flowspark.engine.errors import FlowRunError
from flowspark.recovery import RecoveryConfig
from flowspark.testing import TestingOutput, run_main


def _flow(data: Path, out: list) -> Dataflow:
    flow = Dataflow()
    flow.input("inp", DirInput(data))
    flow.map(lambda line: (line, 1))
    flow.stateful_map("count", lambda: 0, lambda n, one: (n + one, n + one))
    flow.output("out", TestingOutput(out))
    return flow


def test_rerun_with_new_input_after_the_end_fails_clearly(tmp_path: Path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "1.txt").write_text("a\na\n")
    recovery = RecoveryConfig(tmp_path / "ck")
    first: list = []
    run_main(_flow(data, first), recovery_config=recovery)
    assert first == [("a", 1), ("a", 2)]
    # The same input again: nothing new, nothing emitted, no error.
    again: list = []
    run_main(_flow(data, again), recovery_config=recovery)
    assert again == []
    (data / "2.txt").write_text("a\n")
    with pytest.raises(FlowRunError, match="new recovery directory"):
        run_main(_flow(data, []), recovery_config=recovery)
