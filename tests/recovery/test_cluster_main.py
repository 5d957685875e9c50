"""bytewax's ``cluster_main`` over two processes, as bytewax users start one per machine:
process 1 starts first and waits for process 0's master; process 0 runs the flow on
the Spark cluster the two make, prints its output, and both return when it is over.
Each process here is a fresh interpreter started the way a user's script would be.
The same cluster from bytewax's command lines: ``python -m flowspark.testing -p 2``
starts two ``python -m flowspark.run`` processes with bytewax run's flags."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from flowspark.engine.cluster import free_port

ROOT = Path(__file__).resolve().parents[2]

FLOW = """
import os
import sys

import flowspark.operators as op
from flowspark.connectors.stdio import StdOutSink
from flowspark.dataflow import Dataflow
from flowspark.testing import TestingSource, cluster_main

flow = Dataflow("cluster_main")
numbers = op.input("inp", flow, TestingSource(range(1000)))
keyed = op.key_on("key", numbers, lambda n: str(n % 4))
sums = op.reduce_final("sum", keyed, lambda a, b: a + b)
# Which executor's Python worker saw each key's sum: its parent, the executor's JVM.
tagged = op.map("tag", sums, lambda kv: (kv[0], kv[1], os.getppid()))
op.output("out", tagged, StdOutSink())

cluster_main(flow, sys.argv[1].split(","), int(sys.argv[2]), worker_count_per_proc=1)
print(f"process {sys.argv[2]} returned", file=sys.stderr)
"""


def _two_processes(cwd: Path, command: Callable[[int], list[str]]) -> tuple[str, str, str]:
    """Start process 1, then process 0 (``command(proc_id)``), as a cluster's processes
    may come up in any order; both must exit 0, and only process 0 writes the output.
    Process 0's stdout and stderr, and process 1's stderr.

    The driver does not wait for a task's preferred executor (``spark.locality.wait``
    0, from a ``spark-defaults.conf``), so tasks that can run at once go to both."""
    conf = cwd / "spark-conf"
    conf.mkdir()
    (conf / "spark-defaults.conf").write_text("spark.locality.wait 0\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "SPARK_CONF_DIR": str(conf)}

    def start(proc_id: int) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, *command(proc_id)], stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, cwd=cwd, env=env, start_new_session=True,
        )  # fmt: skip

    worker = start(1)
    driver = start(0)
    try:
        out, err = driver.communicate(timeout=300)
        worker_out, worker_err = worker.communicate(timeout=60)
    finally:
        for proc in (driver, worker):
            if proc.poll() is None:
                os.killpg(proc.pid, 9)
    assert driver.returncode == 0, err[-3000:]
    assert worker.returncode == 0, worker_err[-3000:]
    assert worker_out == ""  # the outputs are written from process 0
    return out, err, worker_err


def test_two_processes_run_a_flow_together_and_both_return(tmp_path: Path) -> None:
    (tmp_path / "flow.py").write_text(FLOW)
    addresses = f"127.0.0.1:{free_port()},127.0.0.1:{free_port()}"
    out, err, worker_err = _two_processes(tmp_path, lambda i: ["flow.py", addresses, str(i)])
    assert "process 0 returned" in err and "process 1 returned" in worker_err

    rows = [eval(line) for line in out.splitlines()]  # noqa: S307 - the flow's own tuples
    assert sorted((key, total) for key, total, _ in rows) == [
        (str(k), sum(n for n in range(1000) if n % 4 == k)) for k in range(4)
    ]
    # Two workers of one core each, two keyed partitions: both executors ran a task.
    assert len({executor for _, _, executor in rows}) == 2


CLI_FLOW = """
import os

import flowspark.operators as op
from flowspark.connectors.stdio import StdOutSink
from flowspark.dataflow import Dataflow
from flowspark.testing import TestingSource

flow = Dataflow("cli_cluster")
numbers = op.input("inp", flow, TestingSource(range(100)))
counts = op.count_final("count", numbers, lambda n: str(n % 2))
op.output("out", counts, StdOutSink())
"""


def test_bytewax_command_lines_make_the_same_cluster(tmp_path: Path) -> None:
    # python -m bytewax.testing flow -p 2 -w 1 -r DIR -s 30 -b 0, module name changed:
    # two python -m flowspark.run processes with bytewax run's -a/-i/-w/-r/-s/-b.
    (tmp_path / "flow.py").write_text(CLI_FLOW)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(
        [sys.executable, "-m", "flowspark.testing", "flow.py", "-p", "2", "-w", "1",
         "-r", str(tmp_path / "recovery"), "-s", "30", "-b", "0"],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert sorted(done.stdout.splitlines()) == ["('0', 50)", "('1', 50)"]
    assert done.stderr.count("-b/--backup-interval is not needed") == 2  # once a process
