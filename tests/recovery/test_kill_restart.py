"""SIGKILL a running flow, restart it on the same recovery directory: exactly once.

The flow runs through the CLI in its own process group (Python driver, JVM,
Python workers) so the kill takes all of it, as a crash would.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

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


def _start(flow_file: Path, recovery: Path) -> subprocess.Popen:
    cmd = [
        sys.executable, "-m", "flowspark.run", f"{flow_file}:flow",
        "--master", "local[2]", "-r", str(recovery), "--bounded", "-s", "0",
    ]  # fmt: skip
    return subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


@pytest.mark.slow
@pytest.mark.parametrize("kill_after_lines", [1, 700, 1600])
def test_sigkill_then_restart_yields_every_line_once(tmp_path: Path, kill_after_lines: int):
    expected = _write_input(tmp_path / "data")
    out = tmp_path / "out.txt"
    flow_file = tmp_path / "killflow.py"
    flow_file.write_text(FLOW.format(data=str(tmp_path / "data"), out=str(out)))
    recovery = tmp_path / "recovery"

    proc = _start(flow_file, recovery)
    deadline = time.monotonic() + 240
    while len(_lines(out)) < kill_after_lines and proc.poll() is None:
        assert time.monotonic() < deadline, "the flow made no progress"
        time.sleep(0.02)
    killed_mid_run = proc.poll() is None
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    written_before = len(_lines(out))
    assert killed_mid_run and written_before < len(expected), "kill landed after the end"

    proc = _start(flow_file, recovery)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err.decode()[-3000:]
    lines = _lines(out)
    duplicates = [line for line, n in Counter(lines).items() if n > 1]
    assert not duplicates, f"{len(duplicates)} lines written twice, e.g. {duplicates[:3]}"
    assert set(lines) == expected
    assert len(lines) == len(expected)
