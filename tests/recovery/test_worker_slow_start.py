"""A Python worker that Spark gave up waiting for (it waits 10 s for one to connect
back, which a busy machine can exceed) does not end the run: the query resumes from
its checkpoint and writes every item once."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

FLOW = """
from flowspark.connectors.files import FileOutput
from flowspark.dataflow import Dataflow
from flowspark.testing import TestingInput

flow = Dataflow()
flow.input("inp", TestingInput(list(range(40)), batch_size=5))
flow.map(lambda x: x * 2)
flow.output("out", FileOutput({out!r}))
"""

# Spark's Python for the run: the first streaming source runner (a worker Spark waits
# 10 s for) starts 11 s late; every other Python process starts at once.
SLOW_PYTHON = """#!/bin/sh
case " $* " in
  *python_streaming_source_runner*) mkdir {mark} 2>/dev/null && sleep 11 ;;
esac
exec {python} "$@"
"""


@pytest.mark.slow
def test_a_worker_slow_to_connect_back_is_waited_out_and_every_item_written_once(
    tmp_path: Path,
):
    out = tmp_path / "out.txt"
    flow = tmp_path / "flow.py"
    flow.write_text(FLOW.format(out=str(out)))
    python = tmp_path / "slow_python.sh"
    python.write_text(SLOW_PYTHON.format(mark=tmp_path / "slowed", python=sys.executable))
    python.chmod(0o755)
    done = subprocess.run(
        [sys.executable, "-m", "flowspark.run", f"{flow}:flow", "--master", "local[2]",
         "-r", str(tmp_path / "recovery")],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
        env={**os.environ, "PYSPARK_PYTHON": str(python)},
    )  # fmt: skip
    assert (tmp_path / "slowed").is_dir(), "the source runner was not slowed: nothing tested"
    assert done.returncode == 0, done.stderr[-3000:]
    assert "resuming the query from its checkpoint" in done.stderr
    assert sorted(int(line) for line in out.read_text().split()) == [2 * x for x in range(40)]
