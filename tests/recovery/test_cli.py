"""The CLI end to end: the quickstart prints its results; Ctrl-C stops an endless flow,
and cancels a bounded batch job, cleanly."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

ENDLESS = """
import os
from datetime import datetime, timedelta, timezone

from flowspark.connectors.stdio import StdOutput
from flowspark.inputs import AbortExecution, DynamicInput, StatelessSource
from flowspark.dataflow import Dataflow
from flowspark.testing import TestingInput

def make(n):
    flow = Dataflow()
    flow.input("inp", TestingInput(range(n)))
    flow.map(lambda x: f"item {x}")
    flow.output("out", StdOutput())
    return flow

class _Ticks(StatelessSource):
    # An endless live source: one item every 0.1 s, never StopIteration.

    def __init__(self, fail):
        self.i, self.due, self.fail = 0, datetime.now(timezone.utc), fail

    def next_batch(self):
        if datetime.now(timezone.utc) < self.due:
            return []
        self.i += 1
        self.due = datetime.now(timezone.utc) + timedelta(seconds=0.1)
        if self.i == 3 and self.fail == "raise":
            raise ConnectionError("the feed went away")
        if self.i == 3 and self.fail == "exit":
            os._exit(3)  # the source's process dies
        if self.i == 3 and self.fail == "abort":
            raise AbortExecution()  # bytewax's way to stop a run here
        return [self.i]

    def next_awake(self):
        return self.due


class Ticks(DynamicInput):
    def __init__(self, fail=None):
        self.fail = fail

    def build(self, worker_index, worker_count):
        return _Ticks(self.fail)


def ticks(fail=None):
    flow = Dataflow()
    flow.input("ticks", Ticks(fail))
    flow.map(lambda x: f"item {x}")
    flow.output("out", StdOutput())
    return flow

def slow(n, started):
    # Each item takes 0.1 s; the first one taken creates the file ``started``.
    import time

    def step(x):
        if not os.path.exists(started):
            open(started, "a").close()
        time.sleep(0.1)
        return x

    flow = Dataflow()
    flow.input("inp", TestingInput(range(n)))
    flow.map(step)
    flow.output("out", StdOutput())
    return flow
"""


@pytest.mark.slow
def test_quickstart_prints_its_results():
    proc = subprocess.run(
        [sys.executable, "-m", "flowspark.run", "examples/quickstart.py", "--bounded",
         "--master", "local[2]"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert "long word: flowing" in lines
    assert any(line.split() == ["spark", "5"] for line in lines)
    assert "Traceback" not in proc.stderr


@contextlib.contextmanager
def _running_cli(folder: Path, *args: str) -> Iterator[subprocess.Popen]:
    """``python -m flowspark.run ARGS`` on the ENDLESS module in ``folder``; its whole
    process group (JVM included) is killed on the way out if it still runs."""
    (folder / "endless.py").write_text(ENDLESS)
    proc = subprocess.Popen(
        [sys.executable, "-m", "flowspark.run", *args, "--master", "local[2]"],
        cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def _ctrl_c(proc: subprocess.Popen) -> tuple[str, str, float]:
    """Send SIGINT; return the process's stdout, stderr and the seconds it took to end."""
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-3000:]
    assert "Traceback" not in err
    assert "stopped" in err
    return out, err, time.monotonic() - sent


@pytest.mark.slow
def test_ctrl_c_stops_an_endless_flow_cleanly(tmp_path: Path):
    with _running_cli(tmp_path, "endless:ticks()", "--trigger-interval", "0.2") as proc:
        first = proc.stdout.readline()  # blocks until the flow has printed
        assert first == "item 1\n"
        time.sleep(1.0)
        assert proc.poll() is None, "a flow whose input never ends keeps running"
        _ctrl_c(proc)


@pytest.mark.slow
@pytest.mark.parametrize("recovery", [False, True])
def test_a_run_without_bounded_ends_when_its_inputs_end(tmp_path: Path, recovery: bool):
    args = ["-r", str(tmp_path / "rec")] if recovery else []
    with _running_cli(tmp_path, "endless:make(2500)", *args) as proc:
        out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    assert out.splitlines() == [f"item {i}" for i in range(2500)]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("fail", "message"),
    [("raise", "step 'ticks'.*ConnectionError: the feed went away"), ("exit", "Spark stopped")],
)
def test_a_failing_source_ends_the_run_with_one_clear_error(
    tmp_path: Path, fail: str, message: str
):
    with _running_cli(tmp_path, f"endless:ticks({fail!r})", "-r", str(tmp_path / "r")) as proc:
        out, err = proc.communicate(timeout=300)
    assert proc.returncode == 1, err[-3000:]
    assert re.search(message, err), err[-3000:]
    assert "\tat org.apache" not in err  # no JVM stack
    if fail == "raise":  # what was read before the failure is still delivered
        assert out.splitlines() == ["item 1", "item 2"]


@pytest.mark.slow
def test_a_source_that_aborts_ends_the_run_with_exit_0_and_says_so(tmp_path: Path):
    with _running_cli(tmp_path, "endless:ticks('abort')", "-r", str(tmp_path / "r")) as proc:
        out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    assert out.splitlines() == ["item 1", "item 2"]  # what it read before, delivered
    assert "flowspark: input 'ticks' aborted the run (AbortExecution)" in err


@pytest.mark.slow
def test_ctrl_c_cancels_a_bounded_batch_job_cleanly(tmp_path: Path):
    # A bounded in-memory input without a recovery directory runs as one batch job.
    started = tmp_path / "started"
    with _running_cli(tmp_path, f"endless:slow(2000, {str(started)!r})", "--bounded") as proc:
        deadline = time.monotonic() + 120
        while not started.exists():  # Spark started, the job running (it takes 100 s)
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "the job did not start"
            time.sleep(0.05)
        time.sleep(1.0)  # a few items in
        assert proc.poll() is None
        out, _err, took = _ctrl_c(proc)
    assert took < 60, f"the job was not cancelled ({took:.0f} s)"
    assert "item" not in out  # nothing written: the job never finished


def test_factory_with_a_bad_attribute_exits_with_a_message(tmp_path: Path):
    (tmp_path / "endless.py").write_text(ENDLESS)
    proc = subprocess.run(
        [sys.executable, "-m", "flowspark.run", "endless:nothing"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode != 0
    assert "has no attribute 'nothing'" in proc.stderr
    assert "Traceback" not in proc.stderr


FAILING_FLOW = """\
from flowspark.connectors.stdio import StdOutput
from flowspark.dataflow import Dataflow
from flowspark.testing import TestingInput

import helpers


def shout(s):
    return s.upper()


def build(stateful):
    flow = Dataflow()
    flow.input("inp", TestingInput(["a", "b", 42, "c"]))
    if stateful:
        flow.map(lambda s: ("k", s))
        flow.stateful_map("remember", lambda: None, helpers.remember)
    else:
        flow.map(shout)
    flow.output("out", StdOutput())
    return flow
"""

HELPERS = """\
def remember(last, item):
    return item, last + item
"""


@pytest.mark.slow
@pytest.mark.parametrize("stateful", [False, True], ids=["map-in-flow-file", "helper-module"])
def test_a_failing_step_names_the_users_file_and_line(tmp_path: Path, stateful: bool):
    (tmp_path / "flow.py").write_text(FAILING_FLOW)
    (tmp_path / "helpers.py").write_text(HELPERS)
    args = ["-r", str(tmp_path / "rec")] if stateful else ["--bounded"]
    proc = subprocess.run(
        [sys.executable, "-m", "flowspark.run", f"flow:build({stateful})", *args,
         "--master", "local[2]"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-3000:]
    err = proc.stderr
    if stateful:
        where = (
            f'File "{tmp_path / "helpers.py"}", line 2, in remember\n    return item, last + item'
        )
        assert "TypeError: unsupported operand type(s) for +: 'NoneType' and 'str'" in err
    else:
        where = f'File "{tmp_path / "flow.py"}", line 9, in shout\n    return s.upper()'
        assert "AttributeError: 'int' object has no attribute 'upper'" in err
    assert where in err, err[-3000:]
    assert "<dynamic-code>" not in err
    assert "/flowspark/runtime/" not in err and "/flowspark/engine/" not in err  # none of ours
    assert err.rstrip().splitlines()[-1].startswith("flowspark: step ")


STOP_THEN_START_AGAIN = """
import threading
from flowspark.engine.session import get_session, stop_session

first = get_session("local[1]")
servers = [first.sparkContext._accumulatorServer]
stop_session()
second = get_session("local[1]")
servers.append(second.sparkContext._accumulatorServer)
assert second.range(5).count() == 5
stop_session()
for thread in threading.enumerate():
    if thread.name == "accumulator-server-stop":
        thread.join(timeout=10)
        assert not thread.is_alive(), "an accumulator server did not stop"
assert [server.socket.fileno() for server in servers] == [-1, -1], "a server is still open"
print("ok")
"""


def test_a_stopped_session_closes_its_accumulator_server_and_a_new_one_starts():
    """``stop_session`` does not wait for PySpark's accumulator server (its handler
    polls once a second), but the server still stops and closes its socket, and a
    new session starts and runs in the same process."""
    done = subprocess.run(
        [sys.executable, "-c", STOP_THEN_START_AGAIN],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "ok"
