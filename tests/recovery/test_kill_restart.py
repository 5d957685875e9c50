"""SIGKILL a running flow, restart it on the same recovery directory: exactly once.

The flow runs through the CLI in its own process group (Python driver, JVM,
Python workers) so the kill takes all of it, as a crash would.
"""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.recovery.cli_runs import output_lines, start_cli

FLOW = """
from flowspark.connectors.files import DirInput, FileOutput
from flowspark.dataflow import Dataflow

flow = Dataflow()
flow.input("lines", DirInput({data!r}, glob_pat="*.txt", batch_size=40))
flow.map(str.upper)
flow.output("out", FileOutput({out!r}))
"""

FILES, LINES_PER_FILE = 4, 600


def _write_input(data: Path) -> set[str]:
    data.mkdir()
    expected = set()
    for f in range(FILES):
        lines = [f"file{f}-line{i}" for i in range(LINES_PER_FILE)]
        (data / f"{f}.txt").write_text("\n".join(lines) + "\n")
        expected.update(line.upper() for line in lines)
    return expected


@pytest.mark.slow
@pytest.mark.parametrize("kill_after_lines", [1, 700, 1600])
def test_sigkill_then_restart_yields_every_line_once(tmp_path: Path, kill_after_lines: int):
    expected = _write_input(tmp_path / "data")
    out = tmp_path / "out.txt"
    flow_file = tmp_path / "killflow.py"
    flow_file.write_text(FLOW.format(data=str(tmp_path / "data"), out=str(out)))
    recovery = tmp_path / "recovery"

    proc = start_cli(flow_file, recovery, "--bounded", "-s", "0")
    deadline = time.monotonic() + 240
    while len(output_lines(out)) < kill_after_lines and proc.poll() is None:
        assert time.monotonic() < deadline, "the flow made no progress"
        time.sleep(0.02)
    killed_mid_run = proc.poll() is None
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    written_before = len(output_lines(out))
    assert killed_mid_run and written_before < len(expected), "kill landed after the end"

    proc = start_cli(flow_file, recovery, "--bounded", "-s", "0")
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err.decode()[-3000:]
    lines = output_lines(out)
    duplicates = [line for line, n in Counter(lines).items() if n > 1]
    assert not duplicates, f"{len(duplicates)} lines written twice, e.g. {duplicates[:3]}"
    assert set(lines) == expected
    assert len(lines) == len(expected)
