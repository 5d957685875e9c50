"""``python -m flowspark.run`` at run time: a failing step exits 1 with at most three
lines naming the step (the user's innermost frame, then the one line), and a closed
standard output (``| head -1``) ends the run quietly, exit 32 (``EPIPE``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

FAILING = """\
from flowspark.connectors.stdio import StdOutput
from flowspark.dataflow import Dataflow
from flowspark.testing import TestingInput


def invert(x):
    return 1 / x


flow = Dataflow()
flow.input("inp", TestingInput([2, 1, 0, 4])).map("invert", invert).output("out", StdOutput())
"""

MANY_LINES = """\
from flowspark.connectors.stdio import StdOutput
from flowspark.dataflow import Dataflow
from flowspark.testing import TestingInput

flow = Dataflow()
lines = flow.input("inp", TestingInput(range(40_000))).map("line", lambda i: f"{i:08d} " + "x" * 60)
lines.output("out", StdOutput())
"""


def _cli(tmp_path: Path, stdout: int, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "flowspark.run", *args, "--master", "local[2]"],
        cwd=tmp_path,
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_a_failing_step_exits_1_naming_the_step_in_three_lines(tmp_path):
    (tmp_path / "flow.py").write_text(FAILING)
    proc = _cli(tmp_path, subprocess.DEVNULL, "flow.py", "--bounded")
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 1, err[-3000:]
    lines = err.rstrip().splitlines()
    assert len(lines) <= 3, err
    assert lines == [
        f'  File "{tmp_path / "flow.py"}", line 7, in invert',
        "    return 1 / x",
        "flowspark: step 'invert' (invert) failed on item 0: ZeroDivisionError: division by zero",
    ]


def test_a_closed_stdout_ends_the_run_quietly(tmp_path):
    (tmp_path / "many.py").write_text(MANY_LINES)
    proc = _cli(tmp_path, subprocess.PIPE, "many.py")
    assert proc.stdout is not None
    first = proc.stdout.readline()
    proc.stdout.close()  # as `| head -1` does once it has its line
    _, err = proc.communicate(timeout=300)
    assert first == "00000000 " + "x" * 60 + "\n"
    assert (proc.returncode, err) == (32, "")
