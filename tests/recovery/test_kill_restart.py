"""SIGKILL a running flow, restart it on the same recovery directory: exactly once.

The flow runs through the CLI in its own process group (Python driver, JVM,
Python workers) so the kill takes all of it, as a crash would.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.recovery.cli_runs import kill_mid_run_then_restart

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

    lines = kill_mid_run_then_restart(
        flow_file, recovery, out, kill_after_lines, len(expected), "--bounded", "-s", "0"
    )
    assert set(lines) == expected
    assert len(lines) == len(expected)
