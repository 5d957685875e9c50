"""SIGKILL a flow reading several inputs of different lengths and speeds (a paced
live input with parts of different speeds, an empty part and a file) into one keyed
step; restart it: every item of every input exactly once, in order per source."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.recovery.cli_runs import PACED_INPUT, kill_mid_run_then_restart

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

    progress = tmp_path / "progress.jsonl"
    lines = kill_mid_run_then_restart(
        flow_file,
        recovery,
        out,
        kill_after_lines,
        len(expected),
        "--max-batch-items",
        "100",
        "--progress-json",
        str(progress),
    )
    assert sorted(lines) == sorted(expected)
    # The restart's micro-batches (the file is started afresh by each run): at most
    # 100 items of each input in any of them, the replayed one included.
    batches = [json.loads(line) for line in progress.read_text().splitlines()]
    read = [b["steps"].get(s, {}).get("out", 0) for b in batches for s in ("live", "file")]
    assert batches and max(read) <= 100
    for key in SOURCES:  # each source's items in its order
        assert [x for x in lines if x.split()[0] == key] == [
            x for x in expected if x.split()[0] == key
        ]
