"""Run ``python -m flowspark.run`` on a flow that never ends, until its output is enough."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from tests.server_process import interrupt
from tests.warm_cli import WarmRun

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class RunOutput:
    """What a stopped run printed, and how it exited."""

    lines: list[str]
    stderr: str
    returncode: int | None


def run_until(
    args: list[str],
    enough: Callable[[list[str]], bool],
    env: Mapping[str, str] | None = None,
    timeout: float = 240,
    warm: bool = True,
) -> RunOutput:
    """Run ``python -m flowspark.run *args`` from the repository root until
    ``enough(stdout lines)``, then stop it as Ctrl-C does. A run that exits first, or
    is not done in ``timeout`` seconds, fails the test with what it printed.

    ``warm``: on the warm child (:mod:`tests.warm_cli`), whose Spark session is up;
    otherwise as a process of its own: a run whose UDFs print in Spark's Python
    workers, or that gives them an environment of their own, needs one."""
    if warm:
        return _warm_run_until(args, enough, env or {}, timeout)
    proc = subprocess.Popen(
        [sys.executable, "-m", "flowspark.run", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        env={**os.environ, **(env or {}), "PYTHONPATH": str(ROOT / "src"), "PYTHONUNBUFFERED": "1"},
        start_new_session=True,
    )  # fmt: skip
    lines: list[str] = []
    reader = threading.Thread(
        target=lambda: lines.extend(line.rstrip("\n") for line in proc.stdout or []), daemon=True
    )
    reader.start()

    def cold_ended() -> str | None:
        if proc.poll() is None:
            return None
        return proc.stderr.read() if proc.stderr else ""

    try:
        _wait_for(enough, lambda: list(lines), cold_ended, timeout)
    finally:
        interrupt(proc)
    reader.join(timeout=10)
    stderr = proc.stderr.read() if proc.stderr else ""
    return RunOutput(lines, stderr, proc.returncode)


def _warm_run_until(
    args: list[str], enough: Callable[[list[str]], bool], env: Mapping[str, str], timeout: float
) -> RunOutput:
    run = WarmRun(args, env=env, cwd=ROOT)
    try:
        _wait_for(enough, run.lines, lambda: None if run.poll() is None else run.stderr(), timeout)
    finally:
        run.interrupt()
    return RunOutput(run.lines(), run.stderr(), run.returncode)


def _wait_for(
    enough: Callable[[list[str]], bool],
    lines: Callable[[], list[str]],
    ended: Callable[[], str | None],
    timeout: float,
) -> None:
    """Until ``enough(lines())``; fails if the run ends first (``ended()``: its stderr,
    ``None`` while it runs) or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while not enough(lines()):
        said = ended()
        assert said is None, said[-3000:]
        assert time.monotonic() < deadline, f"not enough output in {timeout:g} s: {lines()[-5:]}"
        time.sleep(0.2)
