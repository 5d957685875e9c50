"""What the SIGKILL tests share: a flow run through the CLI in a process group of its
own (so ``os.killpg`` kills Spark with it), the lines a file output holds, and a
live bytewax-style input whose parts pace themselves with ``next_awake()``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

# Flow-file code: ``PacedInput()`` reads the parts of a module-level
# ``PARTS = {name: (items, seconds between items)}``; part ``p`` yields ``(p, 1)``,
# ``(p, 2)``, … each when its time has come and resumes from its count.
PACED_INPUT = """
from datetime import datetime, timedelta, timezone

from flowspark.inputs import PartitionedInput, StatefulSource


class Paced(StatefulSource):
    def __init__(self, part, n, every, i):
        self.part, self.n, self.every, self.i = part, n, timedelta(seconds=every), i
        self.due = datetime.now(timezone.utc)

    def next_batch(self):
        if self.i >= self.n:
            raise StopIteration
        now = datetime.now(timezone.utc)
        if now < self.due:
            return []
        self.due = now + self.every
        self.i += 1
        return [(self.part, self.i)]

    def next_awake(self):
        return self.due

    def snapshot(self):
        return self.i


class PacedInput(PartitionedInput):
    def list_parts(self):
        return list(PARTS)

    def build_part(self, for_part, resume_state):
        n, every = PARTS[for_part]
        return Paced(for_part, n, every, resume_state or 0)
"""


def start_cli(flow_file: Path, recovery: Path, *args: str) -> subprocess.Popen:
    """``python -m flowspark.run FLOW_FILE:flow --master local[2] -r RECOVERY ARGS``."""
    cmd = [sys.executable, "-m", "flowspark.run", f"{flow_file}:flow", "--master", "local[2]",
           "-r", str(recovery), *args]  # fmt: skip
    return subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def output_lines(path: Path) -> list[str]:
    """The lines a file output holds now (none before it exists)."""
    return path.read_text().splitlines() if path.exists() else []
