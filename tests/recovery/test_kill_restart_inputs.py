"""SIGKILL a flow reading several inputs of different lengths and speeds (a paced
live input with parts of different speeds, an empty part and a file) into one keyed
step; restart it: every item of every input exactly once, in order per source."""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.recovery.cli_runs import PACED_INPUT, output_lines, start_cli

PARTS = {"a": (200, 0.02), "b": (40, 0.2), "c": (0, 0.001)}

FLOW = """
from flowspark.connectors.files import FileInput, FileOutput
from flowspark.dataflow import Dataflow

flow = Dataflow()
live = flow.input("live", PacedInput())
lines = flow.input("file", FileInput({data!r})).map("parse", lambda line: ("f", int(line)))
merged = live.merge(lines)
counted = merged.stateful_map(
    "running", lambda: 0, lambda total, n: (total + n, (n, total + n))
)
counted.map("show", lambda kv: f"{{kv[0]}} {{kv[1][0]}} {{kv[1][1]}}").output(
    "out", FileOutput({out!r})
)
"""

SOURCES = {"a": 200, "b": 40, "f": 700}


def _expected() -> list[str]:
    lines = []
    for key, n in SOURCES.items():
        total = 0
        for i in range(1, n + 1):
            total += i
            lines.append(f"{key} {i} {total}")
    return lines


@pytest.mark.slow
@pytest.mark.parametrize("kill_after_lines", [5, 400])
def test_sigkill_with_inputs_of_different_lengths_then_restart_gives_each_item_once(
    tmp_path: Path, kill_after_lines: int
):
    data = tmp_path / "numbers.txt"
    data.write_text("".join(f"{i}\n" for i in range(1, SOURCES["f"] + 1)))
    out = tmp_path / "out.txt"
    flow_file = tmp_path / "inputsflow.py"
    flow_file.write_text(
        f"PARTS = {PARTS!r}\n" + PACED_INPUT + FLOW.format(data=str(data), out=str(out))
    )
    recovery = tmp_path / "recovery"
    expected = _expected()

    proc = start_cli(flow_file, recovery, "--max-batch-items", "100")
    deadline = time.monotonic() + 240
    while len(output_lines(out)) < kill_after_lines and proc.poll() is None:
        assert time.monotonic() < deadline, "the flow made no progress"
        time.sleep(0.01)
    killed_mid_run = proc.poll() is None
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert killed_mid_run and len(output_lines(out)) < len(expected), "kill landed after the end"

    proc = start_cli(flow_file, recovery, "--max-batch-items", "100")
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err.decode()[-3000:]
    lines = output_lines(out)
    duplicates = [line for line, n in Counter(lines).items() if n > 1]
    assert not duplicates, f"{len(duplicates)} lines written twice, e.g. {duplicates[:3]}"
    assert sorted(lines) == sorted(expected)
    for key in SOURCES:  # each source's items in its order
        assert [x for x in lines if x.split()[0] == key] == [
            x for x in expected if x.split()[0] == key
        ]
