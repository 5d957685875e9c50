"""``python -m flowspark.cluster start|status|stop`` runs a Spark standalone cluster
from the pip package, and a flow run on it with ``--master spark://…`` gives the
same output as on embedded local Spark."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from flowspark.engine.cluster import free_port
from flowspark.shared.processes import pid_alive

ROOT = Path(__file__).resolve().parents[2]


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs: an exited process that its parent (here init, once the
    CLI that started it has exited) has yet to reap does not."""
    return pid_alive(pid)


def _cli(*args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )


def _start(state: Path, *args: str) -> str:
    """``python -m flowspark.cluster start ARGS`` on free ports; the master's URL."""
    port, ui_port = free_port(), free_port()
    started = _cli("-m", "flowspark.cluster", "start", *args, "--dir", str(state),
                   "--port", str(port), "--ui-port", str(ui_port))  # fmt: skip
    assert started.returncode == 0, started.stderr
    assert started.stdout.strip() == f"spark://127.0.0.1:{port}"
    return started.stdout.strip()


PARALLELISM = """
from flowspark.engine.session import get_session, session_parallelism

spark = get_session({master!r})
print(session_parallelism(), spark.conf.get("spark.sql.shuffle.partitions"))
"""


def _parallelism(master: str, **env: str) -> str:
    """What a session on ``master`` (in a fresh process) runs micro-batches with."""
    done = subprocess.run(
        [sys.executable, "-c", PARALLELISM.format(master=master)],
        capture_output=True, text=True, timeout=180, cwd=ROOT, env={**os.environ, **env},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip()


@pytest.mark.slow
def test_a_cluster_in_one_command_runs_the_quickstart_with_the_same_output(
    tmp_path: Path, local_output
):
    state = tmp_path / "cluster"
    master = _start(state, "--workers", "2")
    info = json.loads((state / "cluster.json").read_text())
    pids = [info["master_pid"], *info["worker_pids"]]
    try:
        status = json.loads(_cli("-m", "flowspark.cluster", "status", "--dir", str(state)).stdout)
        assert status["running"] and [w["state"] for w in status["workers"]] == ["ALIVE"] * 2
        again = _cli("-m", "flowspark.cluster", "start", "--dir", str(state))
        assert again.returncode == 1 and "is running at" in again.stderr

        on_cluster = _cli("-m", "flowspark.run", "examples/quickstart.py", "--master", master)
        assert on_cluster.returncode == 0, on_cluster.stderr[-3000:]
        # Partitions per micro-batch follow the cluster's cores (2 workers x 1 core),
        # not the driver's; $FLOWSPARK_PARALLELISM overrides them.
        assert _parallelism(master) == "2 2"
        assert _parallelism(master, FLOWSPARK_PARALLELISM="3") == "3 3"
    finally:
        stopped = _cli("-m", "flowspark.cluster", "stop", "--dir", str(state))
    assert stopped.returncode == 0 and master in stopped.stderr
    assert _cli("-m", "flowspark.cluster", "status", "--dir", str(state)).stdout == "no cluster\n"
    assert [pid for pid in pids if _alive(pid)] == []

    local = local_output("examples/quickstart.py")  # run on embedded Spark
    assert on_cluster.stdout.strip() and sorted(on_cluster.stdout.splitlines()) == sorted(
        local.splitlines()
    )


HELPERS = """
def double(x):
    return 2 * x
"""

SHIPPED_FLOW = """
import sys

sys.path.insert(0, {site!r})  # a package "installed" on the driver only
import helpers  # the user's own module, beside the flow
from flowspark.connectors.stdio import StdOutput
from flowspark.dataflow import Dataflow
from flowspark.testing import TestingInput


def imported_when_called(x):
    import helpers as h

    return h.double(x) + 1


flow = Dataflow()
flow.input("inp", TestingInput(list(range(5))))
flow.map(lambda x: helpers.double(x))  # a helper reached through a global name
flow.map(imported_when_called)
if {needs_installed!r}:
    import fakepkg_only_here

    flow.map(lambda x: fakepkg_only_here.VALUE + x)
flow.output("out", StdOutput())
"""


@pytest.mark.slow
def test_the_users_own_modules_reach_the_executors_and_a_missing_package_is_named(
    tmp_path: Path,
):
    """Executors of a standalone cluster do not share the driver's sys.path: the
    user's modules travel in a zip; an installed package missing there is named."""
    project = tmp_path / "project"
    site = tmp_path / "site-packages"  # counts as installed: not shipped
    project.mkdir()
    site.mkdir()
    (project / "helpers.py").write_text(HELPERS)
    (site / "fakepkg_only_here.py").write_text("VALUE = 100\n")
    state = tmp_path / "cluster"
    master = _start(state, "--workers", "1", "--cores", "2")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    try:
        results = []
        for needs_installed in (False, True):
            flow = project / f"flow_{needs_installed}.py"
            flow.write_text(SHIPPED_FLOW.format(site=str(site), needs_installed=needs_installed))
            results.append(
                subprocess.run(
                    [sys.executable, "-m", "flowspark.run", f"{flow}:flow", "--master", master],
                    capture_output=True,
                    text=True,
                    timeout=240,
                    cwd=tmp_path,
                    env=env,
                )  # fmt: skip
            )
    finally:
        _cli("-m", "flowspark.cluster", "stop", "--dir", str(state))
    shipped, missing = results
    assert shipped.returncode == 0, shipped.stderr[-3000:]
    assert shipped.stdout.split() == ["1", "5", "9", "13", "17"]
    assert missing.returncode == 1
    assert missing.stderr.strip().splitlines()[-1] == (
        "flowspark: Spark stopped the flow: a worker cannot import module 'fakepkg_only_here': "
        "install it on every worker (flowspark ships only your own modules, not installed "
        "packages)"
    )


@pytest.mark.slow
def test_a_cluster_without_workers_fails_in_one_line_instead_of_waiting_forever(
    tmp_path: Path,
):
    state = tmp_path / "cluster"
    master = _start(state, "--workers", "0")
    try:
        run = subprocess.run(
            [sys.executable, "-m", "flowspark.run", "examples/quickstart.py", "--master", master],
            capture_output=True, text=True, timeout=180, cwd=ROOT,
            env={**os.environ, "FLOWSPARK_EXECUTOR_WAIT": "3"},
        )  # fmt: skip
    finally:
        _cli("-m", "flowspark.cluster", "stop", "--dir", str(state))
    assert run.returncode == 1
    assert run.stderr.strip().splitlines() == [
        f"flowspark: no Spark executor registered with {master} in 3 s: are workers running "
        "there, with the cores and memory this application asks for?"
    ]
