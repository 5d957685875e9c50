"""A damaged recovery directory is named, in one line, and the run exits 1: a
truncated keyed-state file, offsets log file or commit log file, found after a
SIGKILL, each gives which kind of file, its path and batch, and the choices."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from tests.recovery.cli_runs import PACED_INPUT, start_cli

# A keyed flow that keeps state for the whole run: a running sum per key.
FLOW = (
    PACED_INPUT
    + """
from flowspark.connectors.files import FileOutput
from flowspark.dataflow import Dataflow

PARTS = {{"a": (100000, 0.002), "b": (100000, 0.002)}}

flow = Dataflow()
flow.input("live", PacedInput())
flow.stateful_map("sums", lambda: 0, lambda acc, i: (acc + i, acc + i))
flow.map(lambda kv: f"{{kv[0]}} {{kv[1]}}")
flow.output("out", FileOutput({out!r}))
"""
)


def _batch_files(directory: Path) -> list[int]:
    return sorted(int(p.name) for p in directory.glob("[0-9]*")) if directory.exists() else []


@pytest.fixture(scope="module")
def killed_run(tmp_path_factory) -> tuple[Path, Path, Path]:
    """A recovery directory after a SIGKILL mid-run, with a dozen commits."""
    root = tmp_path_factory.mktemp("damage")
    out = root / "out.txt"
    flow_file = root / "flow.py"
    flow_file.write_text(FLOW.format(out=str(out)))
    recovery = root / "rec"
    proc = start_cli(flow_file, recovery)
    deadline = time.monotonic() + 240
    while len(_batch_files(recovery / "commits")) < 12 and proc.poll() is None:
        assert time.monotonic() < deadline, "the flow made no progress"
        time.sleep(0.05)
    assert proc.poll() is None, proc.communicate()[1].decode()[-3000:]
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()
    return flow_file, recovery, out


def _copy(recovery: Path, into: Path) -> Path:
    import shutil

    shutil.copytree(recovery, into)
    return into


def _run_again(flow_file: Path, recovery: Path) -> tuple[int, str]:
    proc = start_cli(flow_file, recovery)
    try:
        _, err = proc.communicate(timeout=150)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return proc.returncode, err.decode()


def _one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err[-3000:]
    assert "\tat " not in err and "org.apache" not in err
    return lines[0]


def test_a_truncated_state_file_is_named(killed_run, tmp_path):
    flow_file, recovery, _ = killed_run
    copy = _copy(recovery, tmp_path / "rec")
    committed = _batch_files(copy / "commits")[-1]
    # The state a restart loads: the version after the last committed batch.
    target = next((copy / "state").glob(f"*/*/{committed + 1}.changelog"))
    target.write_bytes(target.read_bytes()[:20])
    code, err = _run_again(flow_file, copy)
    line = _one_line(err)
    assert code == 1
    assert line.startswith("flowspark: the recovery directory is damaged: a keyed-state file ")
    assert f"{target} (batch {committed}): it is cut short" in line
    assert "restore the recovery directory from a copy, or start over with a new one" in line


@pytest.mark.parametrize(
    ("kind", "cut", "said"),
    [
        ("offsets", "v1\n", "offsets log file {target} (batch {n}): it is incomplete"),
        (
            "commits",
            'v1\n{"nextBatchWatermarkMs":0',
            "commit log file {target} (batch {n}): line 2 is not whole JSON",
        ),
    ],
)
def test_a_truncated_log_file_is_named(killed_run, tmp_path, kind, cut, said):
    flow_file, recovery, _ = killed_run
    copy = _copy(recovery, tmp_path / "rec")
    newest = _batch_files(copy / kind)[-1]
    target = copy / kind / str(newest)
    target.write_text(cut)
    code, err = _run_again(flow_file, copy)
    line = _one_line(err)
    assert code == 1
    assert said.format(target=target, n=newest) in line
