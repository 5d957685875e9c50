"""Spark Connect: flows run on a Connect server started from the pip package
(``python -m flowspark.cluster connect-start``), with their outputs written in the
client: the quickstart and the Numaflow example give the local run's output; a
keyed live flow and a keyed event-time window flow whose steps reach a helper
module (shipped to the server as an artifact) lose nothing and duplicate nothing
through a SIGKILL of the client; a step's error keeps its type in the client; an
output that writes on the executors is written by the server's tasks, not the client."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from flowspark.engine.cluster import free_port, start_connect_server, stop_connect_server
from tests.recovery.cli_runs import (
    PACED_INPUT,
    WINDOW_FLOW,
    WINDOW_HELPERS,
    WINDOW_PARTS,
    expected_window_sums,
    kill_mid_run_then_restart,
    output_lines,
    start_cli,
)

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    directory = tmp_path_factory.mktemp("connect")
    info = start_connect_server(port=free_port(), master="local[2]", directory=directory)
    try:
        yield info.url
    finally:
        stop_connect_server(directory)


def _run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "flowspark.run", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.parametrize(
    ("flow", "args"),
    [("examples/quickstart.py", ()), ("examples/numaflow_join_sort.py", ("--bounded",))],
)
def test_examples_through_connect_print_the_local_output_here(
    server, flow, args, tmp_path, local_output
):
    """Streamed on the server with a recovery directory; run locally as a batch job."""
    recovery = ("-r", str(tmp_path / "recovery"), "--shared-recovery")
    remote = _run(flow, *args, "--remote", server, *recovery)
    assert remote.returncode == 0, remote.stderr[-3000:]
    local = local_output(flow, *args)
    assert remote.stdout.strip()
    assert sorted(remote.stdout.splitlines()) == sorted(local.splitlines())
    assert (tmp_path / "recovery" / "commits").is_dir()


KEYED_FLOW = """
from flowspark.connectors.files import FileOutput
from flowspark.dataflow import Dataflow

flow = Dataflow()
flow.input("live", PacedInput())
flow.stateful_map("count", lambda: 0, lambda n, i: (n + 1, (i, n + 1)))
flow.map(lambda kv: f"{{kv[0]}} {{kv[1][0]}} {{kv[1][1]}}")
flow.output("out", FileOutput({out!r}))
"""

PARTS = {"a": (600, 0.03), "b": (200, 0.09)}  # 18 s of input each


def test_a_keyed_live_flow_survives_a_killed_client_exactly_once(server, tmp_path: Path):
    """The query runs on the server, its micro-batches come back to this client's
    sinks; SIGKILL the client mid-run, run it again on the same recovery directory:
    every item once, each key's running count unbroken."""
    out = tmp_path / "out.txt"
    flow_file = tmp_path / "flow.py"
    flow_file.write_text(f"PARTS = {PARTS!r}\n" + PACED_INPUT + KEYED_FLOW.format(out=str(out)))
    expected = [f"{p} {i} {i}" for p, (n, _) in PARTS.items() for i in range(1, n + 1)]
    lines = kill_mid_run_then_restart(
        flow_file, tmp_path / "recovery", out, 60, len(expected),
        "--remote", server, "--shared-recovery",
    )  # fmt: skip
    assert sorted(lines) == sorted(expected)


def test_a_window_flow_with_a_helper_module_survives_a_killed_client(server, tmp_path: Path):
    """The flow's steps reach ``helpers`` (beside the flow, on no path of the
    server's) through a global: it ships as a Connect artifact. SIGKILL the client
    a few micro-batches in (every window still open), run it again: exact sums."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "helpers.py").write_text(WINDOW_HELPERS)
    out = tmp_path / "sums.txt"
    flow_file = project / "flow.py"
    flow_file.write_text(
        f"PARTS = {WINDOW_PARTS!r}\n" + PACED_INPUT + WINDOW_FLOW.format(out=str(out))
    )
    recovery = tmp_path / "recovery"
    args = ("--remote", server, "--shared-recovery")
    run = start_cli(flow_file, recovery, *args)
    deadline = time.monotonic() + 240
    while _committed(recovery) < 3 and run.poll() is None:
        assert time.monotonic() < deadline, "the flow made no progress"
        time.sleep(0.05)
    assert run.poll() is None, run.communicate()[1].decode()[-3000:]
    os.killpg(run.pid, signal.SIGKILL)
    run.wait()
    assert output_lines(out) == []  # killed mid-run: every window still open
    run = start_cli(flow_file, recovery, *args)
    _, err = run.communicate(timeout=300)
    assert run.returncode == 0, err.decode()[-3000:]
    lines = output_lines(out)
    assert not [line for line, n in Counter(lines).items() if n > 1]
    assert sorted(lines) == sorted(expected_window_sums())


def _committed(recovery: Path) -> int:
    commits = recovery / "commits"
    return sum(not p.name.startswith(".") for p in commits.iterdir()) if commits.exists() else 0


ERROR_SCRIPT = """
import sys
from flowspark.dataflow import Dataflow
from flowspark.engine.query import RunConfig, run_flow
from flowspark.testing import TestingInput, TestingOutput

def check(x):
    if x == 7:
        raise KeyError("boom")
    return x

for recovery in (None, sys.argv[2]):
    flow = Dataflow()
    flow.input("inp", TestingInput(list(range(20))))
    flow.map(check)
    flow.output("out", TestingOutput([]))
    try:
        run_flow(flow, RunConfig(remote=sys.argv[1], recovery_dir=recovery,
                                 recovery_shared=True, bounded=True))
    except KeyError as exc:
        print("KeyError", "map_check" in str(exc), "item 7" in str(exc))
"""


def test_a_step_error_keeps_its_type_in_the_client(server, tmp_path: Path):
    """As a batch job and as a stream with recovery: ``except KeyError`` catches it,
    with the step and the item in the message."""
    script = tmp_path / "errors.py"
    script.write_text(ERROR_SCRIPT)
    done = subprocess.run(
        [sys.executable, str(script), server, str(tmp_path / "rec")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == ["KeyError True True"] * 2


EXECUTOR_FLOW = """
import os
import sys
from pathlib import Path

from flowspark.connectors.files import DirOutput
from flowspark.connectors.stdio import StdOutput
from flowspark.dataflow import Dataflow
from flowspark.outputs import DynamicOutput, StatelessSink
from flowspark.testing import TestingInput

FOLDER = {folder!r}


class Lines(StatelessSink):
    def __init__(self, worker):
        self.path = Path(FOLDER) / f"{{os.getpid()}}-{{worker}}.txt"

    def write_batch(self, items):
        with self.path.open("a") as f:
            f.writelines(f"{{os.getpid()}} {{item}}\\n" for item in items)


class LinesOutput(DynamicOutput):
    writes_on = "executors"

    def build(self, worker_index, worker_count):
        return Lines(worker_index)


print(f"client pid {{os.getpid()}}", file=sys.stderr)
flow = Dataflow()
numbers = flow.input("inp", TestingInput(list(range(50)), batch_size=7))
numbers.map(lambda x: x * 2).output("spread", LinesOutput())
numbers.filter(lambda x: x % 10 == 0).output("here", StdOutput())
numbers.map(lambda x: (str(x % 3), str(x))).output(
    "files", DirOutput({files!r}, 2, writes_on="executors")
)
"""


def test_an_output_on_the_executors_is_written_by_the_servers_tasks(server, tmp_path: Path):
    """Its sinks run on the Connect server's executors (here on this machine, so the
    test reads their files), a partitioned output's parts each in the task that owns
    it; the client's own outputs print in the client."""
    folder, files = tmp_path / "lines", tmp_path / "files"
    folder.mkdir()
    flow = EXECUTOR_FLOW.format(folder=str(folder), files=str(files))
    (tmp_path / "flow.py").write_text(flow)
    done = _run("flow.py", "--remote", server, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert sorted(done.stdout.split()) == sorted(str(i) for i in range(0, 50, 10))
    lines = [line.split() for path in folder.iterdir() for line in path.read_text().splitlines()]
    assert sorted(int(item) for _, item in lines) == [i * 2 for i in range(50)]
    client = [line.split()[-1] for line in done.stderr.splitlines() if "client pid" in line]
    assert client and client[0] not in {pid for pid, _ in lines}
    parts = {path.name: path.read_text().split() for path in files.iterdir()}
    assert sorted(int(x) for part in parts.values() for x in part) == list(range(50))
    assert all(part == sorted(part, key=int) for part in parts.values())
