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

from tests.http_clients import free_port

ROOT = Path(__file__).resolve().parents[2]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _cli(*args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )


@pytest.mark.slow
def test_a_cluster_in_one_command_runs_the_quickstart_with_the_same_output(tmp_path: Path):
    state = tmp_path / "cluster"
    port, ui_port = free_port(), free_port()
    started = _cli("-m", "flowspark.cluster", "start", "--workers", "2", "--dir", str(state),
                   "--port", str(port), "--ui-port", str(ui_port))  # fmt: skip
    assert started.returncode == 0, started.stderr
    master = started.stdout.strip()
    assert master == f"spark://127.0.0.1:{port}"
    info = json.loads((state / "cluster.json").read_text())
    pids = [info["master_pid"], *info["worker_pids"]]
    try:
        status = json.loads(_cli("-m", "flowspark.cluster", "status", "--dir", str(state)).stdout)
        assert status["running"] and [w["state"] for w in status["workers"]] == ["ALIVE"] * 2
        again = _cli("-m", "flowspark.cluster", "start", "--dir", str(state))
        assert again.returncode == 1 and "is running at" in again.stderr

        on_cluster = _cli("-m", "flowspark.run", "examples/quickstart.py", "--master", master)
        assert on_cluster.returncode == 0, on_cluster.stderr[-3000:]
    finally:
        stopped = _cli("-m", "flowspark.cluster", "stop", "--dir", str(state))
    assert stopped.returncode == 0 and master in stopped.stderr
    assert _cli("-m", "flowspark.cluster", "status", "--dir", str(state)).stdout == "no cluster\n"
    assert [pid for pid in pids if _alive(pid)] == []

    local = _cli("-m", "flowspark.run", "examples/quickstart.py")
    assert local.returncode == 0, local.stderr[-3000:]
    assert on_cluster.stdout.strip() and sorted(on_cluster.stdout.splitlines()) == sorted(
        local.stdout.splitlines()
    )
