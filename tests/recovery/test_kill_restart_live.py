"""SIGKILL a flow reading a live, paced bytewax input; restart it: exactly once.

The input is a ``PartitionedInput`` whose parts pace themselves with
``next_awake()`` (different speeds) and resume from ``snapshot()``. The run has
no ``--bounded``: it ends by itself when every part has raised StopIteration.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.recovery.cli_runs import PACED_INPUT, kill_mid_run_then_restart

PARTS = {"a": (300, 0.03), "b": (40, 0.25), "c": (0, 0.001)}

FLOW = """
from flowspark.connectors.files import FileOutput
from flowspark.dataflow import Dataflow

flow = Dataflow()
flow.input("live", PacedInput())
if {keyed!r}:
    flow.stateful_map("running", lambda: 0, lambda total, n: (total + n, (n, total + n)))
    flow.map(lambda kv: f"{{kv[0]}} {{kv[1][0]}} {{kv[1][1]}}")
else:
    flow.map(lambda kv: f"{{kv[0]}} {{kv[1]}}")
flow.output("out", FileOutput({out!r}))
"""


def _expected(keyed: bool) -> list[str]:
    lines = []
    for part, n in (("a", 300), ("b", 40)):
        total = 0
        for i in range(1, n + 1):
            total += i
            lines.append(f"{part} {i} {total}" if keyed else f"{part} {i}")
    return lines


@pytest.mark.slow
@pytest.mark.parametrize(("keyed", "kill_after_lines"), [(False, 1), (False, 200), (True, 1)])
def test_sigkill_a_live_paced_input_then_restart_yields_every_item_once(
    tmp_path: Path, keyed: bool, kill_after_lines: int
):
    out = tmp_path / "out.txt"
    flow_file = tmp_path / "liveflow.py"
    flow_file.write_text(
        f"PARTS = {PARTS!r}\n" + PACED_INPUT + FLOW.format(out=str(out), keyed=keyed)
    )
    recovery = tmp_path / "recovery"
    expected = _expected(keyed)

    lines = kill_mid_run_then_restart(flow_file, recovery, out, kill_after_lines, len(expected))
    assert sorted(lines) == sorted(expected)
    for part in ("a", "b"):  # each part's items in order
        assert [x for x in lines if x[0] == part] == [x for x in expected if x[0] == part]
