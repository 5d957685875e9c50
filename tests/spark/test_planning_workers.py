"""Spark's Python data-source planning processes are stopped when the run asks for it
(source lookup and creation once its query is built, read planning after its first
micro-batch; none comes back during the run), and Spark starts them again for the next."""

from __future__ import annotations

import time
from pathlib import Path

from flowspark.dataflow import Dataflow
from flowspark.engine.planning_workers import PLANNING_MODULES, stop_planning_workers
from flowspark.engine.query import RunConfig, run_flow
from flowspark.testing import TestingInput, TestingOutput


def _planning_processes(jvm_pid: int) -> list[str]:
    """The command lines of the JVM's planning daemons and their workers."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            stat = (proc / "stat").read_text()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        grandparent_ok = parent == jvm_pid or _parent(parent) == jvm_pid
        if grandparent_ok and any(m in cmdline for m in PLANNING_MODULES):
            found.append(cmdline)
    return found


def _gone(jvm_pid: int) -> bool:
    """Whether the planning processes have exited (a stopped daemon gets SIGTERM and
    exits a moment later), waiting up to 10 s."""
    deadline = time.monotonic() + 10
    while _planning_processes(jvm_pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except OSError:
        return -1


def _run(release: bool) -> list[int]:
    out: list[int] = []
    flow = Dataflow("planning")
    flow.input("in", TestingInput(list(range(10)))).map("inc", lambda x: x + 1).output(
        "out", TestingOutput(out)
    )
    run_flow(flow, RunConfig(batch_job=False, release_planning_workers=release))
    return out


def test_a_run_that_asks_stops_the_planning_processes_and_the_next_run_works(spark):
    jvm_pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    assert sorted(_run(release=False)) == list(range(1, 11))
    assert _planning_processes(jvm_pid), "a streamed run plans through Spark's daemons"
    assert sorted(_run(release=True)) == list(range(1, 11))
    assert _gone(jvm_pid), _planning_processes(jvm_pid)
    # Spark starts them again for the next query, which runs as before.
    assert sorted(_run(release=False)) == list(range(1, 11))
    assert _planning_processes(jvm_pid)
    assert stop_planning_workers(spark) == sorted(PLANNING_MODULES)
    assert _gone(jvm_pid), _planning_processes(jvm_pid)
