"""The recovery directory is safe to get wrong, through the CLI on real Spark.

One live run per directory (a second run fails at once, naming the holder, and the
first one's output is whole), a killed run's lock is taken over, a directory that
lost its sink snapshot is refused without touching the output, and a fresh
directory starts fresh. Each flow runs in a process group of its own, so that a
SIGKILL takes Spark's JVM and workers with it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.recovery.cli_runs import output_lines, run_to_end

FLOW = """
from flowspark.connectors.files import FileInput, FileOutput
from flowspark.dataflow import Dataflow

flow = Dataflow()
flow.input("inp", FileInput({data!r}, batch_size={batch}))
flow.map(str.upper)
flow.output("out", FileOutput({out!r}))
"""


def make_flow(tmp_path: Path, lines: int, batch: int) -> tuple[Path, Path, list[str]]:
    """The flow file, its output file and the lines it should write, in order."""
    data = tmp_path / "d.txt"
    data.write_text("".join(f"item-{i:05d}\n" for i in range(lines)))
    out = tmp_path / "out.txt"
    flow = tmp_path / "flow.py"
    flow.write_text(FLOW.format(data=str(data), out=str(out), batch=batch))
    return flow, out, [f"ITEM-{i:05d}" for i in range(lines)]


def cli(flow: Path, rec: Path, master: str = "local[2]") -> list[str]:
    return [sys.executable, "-m", "flowspark.run", f"{flow}:flow", "--master", master,
            "--bounded", "-s", "0", "-r", str(rec)]  # fmt: skip


def start(cmd: list[str]) -> subprocess.Popen:
    return subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def wait_for_lines(proc: subprocess.Popen, out: Path, count: int) -> None:
    deadline = time.monotonic() + 180
    while len(output_lines(out)) < count:
        assert proc.poll() is None, f"the run ended first: {proc.communicate()[1][-3000:]}"
        assert time.monotonic() < deadline, "the flow made no progress"
        time.sleep(0.01)


def kill_mid_run(cmd: list[str], out: Path, after_lines: int, total: int) -> int:
    """Run ``cmd``, SIGKILL its process group once ``out`` has ``after_lines`` lines
    (asserting the run had not finished); return the killed driver's pid."""
    proc = start(cmd)
    try:
        wait_for_lines(proc, out, after_lines)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
    assert len(output_lines(out)) < total, "the kill landed after the end"
    return proc.pid


def run(cmd: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def run_to_the_end(flow: Path, rec: Path, out: Path, expected: list[str]) -> None:
    """A run on ``rec`` (on the warm child, as :func:`cli` would run it) ends well,
    ``out`` holding every expected line once."""
    run_to_end(flow, rec, "--bounded", "-s", "0")
    assert output_lines(out) == expected


@pytest.mark.slow
def test_a_second_run_on_the_directory_fails_at_once_and_the_first_writes_everything(
    tmp_path: Path,
):
    flow, out, expected = make_flow(tmp_path, 10000, 250)  # 40 micro-batches
    rec = tmp_path / "rec"
    first = start(cli(flow, rec, "local[1]"))
    try:
        wait_for_lines(first, out, 1)  # its query is running
        started = time.monotonic()
        second = run(cli(flow, rec, "local[1]"))
        took = time.monotonic() - started
        assert first.poll() is None, "the first run ended before the second was refused"
    finally:
        _, first_err = first.communicate(timeout=300)

    assert second.returncode == 2, second.stderr[-3000:]
    assert second.stderr.count("\n") == 1, second.stderr
    assert second.stderr.startswith(
        f"flowspark: recovery directory {rec} is in use by another run "
        f"(host {os.uname().nodename}, pid {first.pid}, started "
    ), second.stderr
    assert took < 30, f"refused after {took:.0f} s: Spark was started first"
    assert first.returncode == 0, first_err[-3000:]
    assert output_lines(out) == expected


@pytest.mark.slow
def test_the_lock_of_a_killed_run_is_taken_over_and_every_line_written_once(tmp_path: Path):
    flow, out, expected = make_flow(tmp_path, 4000, 100)
    rec = tmp_path / "rec"
    killed = kill_mid_run(cli(flow, rec), out, 1500, len(expected))
    # The lock file still names the killed run; the kernel dropped its flock.
    assert json.loads((rec / "flowspark.lock").read_text())["pid"] == killed
    run_to_the_end(flow, rec, out, expected)


@pytest.mark.slow
def test_a_lost_sink_snapshot_is_refused_and_the_output_left_as_it_was(tmp_path: Path):
    flow, out, expected = make_flow(tmp_path, 4000, 100)
    rec = tmp_path / "rec"
    kill_mid_run(cli(flow, rec), out, 1500, len(expected))
    snapshot = rec / "flowspark-sinks" / "out.pickle"
    kept = snapshot.read_bytes()
    snapshot.unlink()  # a directory copied or restored in part
    before = out.read_bytes()

    refused = run(cli(flow, rec))
    assert refused.returncode == 2, refused.stderr[-3000:]
    assert refused.stderr.count("\n") == 1, refused.stderr
    assert refused.stderr.startswith(f"flowspark: recovery directory {rec} does not add up: ")
    assert f"the snapshot of output 'out', {snapshot}, is missing, but micro-batches" in (
        refused.stderr
    )
    assert "start over with a new recovery directory" in refused.stderr
    assert out.read_bytes() == before

    snapshot.write_bytes(kept)  # restored: the run goes on where it stopped
    run_to_the_end(flow, rec, out, expected)


@pytest.mark.slow
def test_a_fresh_directory_starts_fresh(tmp_path: Path):
    flow, out, expected = make_flow(tmp_path, 500, 100)
    out.write_text("left over from an earlier flow\n")
    rec = tmp_path / "new" / "rec"  # not there yet

    run_to_the_end(flow, rec, out, expected)  # started over, as bytewax's FileOutput does
    assert (rec / "flowspark.lock").read_text() == ""  # released at the end

    run_to_the_end(flow, rec, out, expected)  # nothing new to read: nothing written
