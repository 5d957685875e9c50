"""Keyed steps run in the session's one pool of Python workers, the one it warmed.

Spark starts one worker daemon per set of environment variables; a second daemon
for transformWithState's tasks would start its workers cold beside the warmed ones.
"""

from __future__ import annotations

from pathlib import Path

from flowspark.dataflow import Dataflow
from flowspark.engine.query import RunConfig, run_flow
from flowspark.engine.session import get_session
from flowspark.testing import TestingInput, TestingOutput


def _children(pid: int) -> list[int]:
    """The pids ``pid``'s threads started (Linux's ``/proc/PID/task/TID/children``)."""
    children: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            children += [int(p) for p in (task / "children").read_text().split()]
        except OSError:  # the thread ended after the listing
            continue
    return children


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def test_a_keyed_step_runs_in_the_warmed_worker_pool(tmp_path: Path) -> None:
    flow = Dataflow()
    flow.input("inp", TestingInput(range(40)))
    flow.map(lambda x: (str(x % 4), x))
    flow.stateful_map("sum", lambda: 0, lambda s, x: (s + x, s + x))
    out: list[tuple[str, int]] = []
    flow.output("out", TestingOutput(out))
    run_flow(flow, RunConfig(batch_job=False, recovery_dir=str(tmp_path / "r")))
    assert sorted(out)[-1] == ("3", sum(range(3, 40, 4)))  # the keyed step ran

    jvm = get_session().sparkContext._gateway.proc.pid
    daemons = [p for p in _children(jvm) if _cmdline(p).endswith("pyspark.daemon pyspark.worker ")]
    assert len(daemons) == 1, [_cmdline(p) for p in daemons]
