"""SIGKILL a Numaflow pipeline with an HTTP source while clients post; restart it.

Every event that got a 200 must reach the file sink exactly once after the
restart on the same recovery directory; events that got anything else (a reset
connection when the run died) may or may not arrive, but never twice.

The pipelines are Numaflow's ``2-http-pipeline.yaml`` (``http -> map-cat (builtin cat) ->
log sink``) and ``10-cycle-to-prev.yaml`` (``http -> cat -> retry``, retry sending each
event back to cat twice), each loaded by a Python flow module that swaps the log sink
for a ``FileOutput`` (``load(..., outputs=...)``) and keeps the HTTP journals next to
the recovery directory.
"""

from __future__ import annotations

import http.client
import os
import re
import runpy
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from flowspark.connectors.numaflow.http import journal as J
from flowspark.engine.cluster import free_port
from tests.http_clients import post, wait_healthy
from tests.warm_cli import WarmRun

ROOT = Path(__file__).parents[2]
PIPELINE = ROOT / "tests" / "data" / "numaflow" / "2-http-pipeline.yaml"
CYCLE = ROOT / "tests" / "data" / "numaflow" / "10-cycle-to-prev.yaml"
RETRY = ROOT / "examples" / "numaflow" / "udfs" / "retry.py"

FLOW = """
from flowspark.connectors.files import FileOutput
from flowspark.pipeline import load

flow = load({pipeline!r}, state_dir={journals!r}, outputs={{"out": FileOutput({out!r})}},
            udfs={udfs!r})
"""

ID = re.compile(r"value=b'([^']*)'")  # each event's body is its id


class Clients:
    """``n`` keep-alive clients posting unique ids until stopped, the server dies, or
    each has posted ``limit`` (``None``: no limit)."""

    def __init__(self, port: int, prefix: str, n: int = 8, limit: int | None = None) -> None:
        self.port = port
        self.limit = limit
        self.acked: list[str] = []
        self.other: list[str] = []
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._client, args=(f"{prefix}-{c}",)) for c in range(n)
        ]
        for thread in self._threads:
            thread.start()

    def _client(self, name: str) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        i = 0
        while not self._stop.is_set() and (self.limit is None or i < self.limit):
            event_id = f"{name}-{i}"
            i += 1
            try:
                status, _ = post(self.port, "in", event_id.encode(), event_id=event_id, conn=conn)
            except (OSError, http.client.HTTPException):
                self.other.append(event_id)
                return  # the run is gone
            (self.acked if status == 200 else self.other).append(event_id)

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=60)


def _start(
    flow_file: Path, recovery: Path, port: int, stderr: Path, env: dict[str, str]
) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "flowspark.run", str(flow_file), "-r", str(recovery)]
    return subprocess.Popen(
        cmd,
        stdout=subprocess.DEVNULL,
        stderr=stderr.open("a"),
        start_new_session=True,
        env={**os.environ, "FLOWSPARK_HTTP_PORT": str(port), "PYTHONUNBUFFERED": "1", **env},
    )


def _ids(out: Path) -> list[str]:
    return ID.findall(out.read_text()) if out.exists() else []


@pytest.mark.slow
@pytest.mark.parametrize(
    ("post_seconds", "written_before_kill"),
    [(1.0, 0), (4.0, 0), (1.0, 2000)],  # the last kills once the sink has written
)
def test_sigkill_under_http_load_then_restart_keeps_every_acknowledged_event_once(
    tmp_path: Path, post_seconds: float, written_before_kill: int
):
    _kill_under_load_then_restart(tmp_path, PIPELINE, {}, post_seconds, written_before_kill)


@pytest.mark.slow
def test_a_cycle_killed_under_http_load_then_restarted_writes_each_event_once(tmp_path: Path):
    # Each event goes round cat -> retry -> cat twice within its micro-batch; a batch
    # the kill cut short is run again whole after the restart (retry's counts start
    # afresh in the new workers), so each event still leaves the cycle once.
    _kill_under_load_then_restart(tmp_path, CYCLE, {"retry": str(RETRY)}, 1.0, 0)


@pytest.mark.slow
def test_a_run_that_dropped_delivered_events_from_its_journal_killed_then_restarted(
    tmp_path: Path,
):
    # A 1 s dedup window: while the first run goes on, the HTTP server drops from its
    # journal what the flow committed (its .start file moves on). The kill comes
    # after such a drop; the restart resumes from its checkpoint, which is never
    # before the journal's start: every acknowledged event once, none lost.
    start = tmp_path / "journals" / "in.journal.start"

    def dropped() -> bool:
        return start.exists() and J.read_start(tmp_path / "journals" / "in.journal") > 8

    env = {"FLOWSPARK_HTTP_DEDUP_WINDOW": "1"}
    _kill_under_load_then_restart(tmp_path, PIPELINE, {}, 1.0, 0, env=env, before_kill=dropped)
    assert J.read_start(tmp_path / "journals" / "in.journal") > 8


COUNTDOWN = ROOT / "examples" / "numaflow" / "udfs" / "countdown.py"
COUNTDOWN_CYCLE = ROOT / "tests" / "data" / "numaflow" / "countdown-cycle.yaml"


@pytest.mark.slow
def test_a_cycle_whose_datums_wait_in_state_killed_then_restarted_writes_each_event_once(
    tmp_path: Path,
):
    # Each event goes round 250 times, more than one micro-batch runs
    # (ROUNDS_PER_BATCH), so at the kill (once 200 events have left) the later ones
    # are on the cycle, in the step's keyed state. The restart picks them up from
    # the checkpoint: each acknowledged event leaves once. Each client posts at most
    # 200 events: unbounded, fast clients pile up more rounds than the run's
    # deadline allows while the first 200 go round.
    from flowspark.runtime.numaflow.cycle import ROUNDS_PER_BATCH

    assert runpy.run_path(str(COUNTDOWN))["ROUNDS"] > ROUNDS_PER_BATCH
    udfs = {"countdown": str(COUNTDOWN)}
    _kill_under_load_then_restart(tmp_path, COUNTDOWN_CYCLE, udfs, 1.0, 200, 200)


def _kill_under_load_then_restart(
    tmp_path: Path,
    pipeline: Path,
    udfs: dict[str, str],
    post_seconds: float,
    written: int,
    limit: int | None = None,
    env: dict[str, str] | None = None,
    before_kill: Callable[[], bool] | None = None,
) -> None:
    out = tmp_path / "out.txt"
    recovery = tmp_path / "recovery"
    flow_file = tmp_path / "httpflow.py"
    journals = str(tmp_path / "journals")
    flow_file.write_text(
        FLOW.format(pipeline=str(pipeline), journals=journals, out=str(out), udfs=udfs)
    )
    port = free_port()

    stderr = tmp_path / "stderr.txt"
    env = env or {}
    proc = _start(flow_file, recovery, port, stderr, env)
    wait_healthy(port, proc)
    first = Clients(port, "run1", limit=limit)
    time.sleep(post_seconds)
    deadline = time.monotonic() + 120
    while len(_ids(out)) < written or (before_kill is not None and not before_kill()):
        assert time.monotonic() < deadline and proc.poll() is None, "not ready to kill in time"
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)  # the driver, Spark's JVM and workers, the fsyncer
    proc.wait()
    first.stop()
    assert first.acked, "no event was acknowledged before the kill"
    written_before_restart = len(_ids(out))

    # The restart on the warm child (tests.warm_cli), as _start would run it.
    restart = WarmRun(
        [str(flow_file), "-r", str(recovery)], env={"FLOWSPARK_HTTP_PORT": str(port), **env}
    )
    try:
        wait_healthy(port, restart)  # type: ignore[arg-type]
        second = Clients(port, "run2", n=2, limit=limit)
        time.sleep(1.0)
        second.stop()
        acked = first.acked + second.acked
        deadline = time.monotonic() + 180
        while not set(acked) <= set(_ids(out)):
            assert restart.poll() is None, restart.stderr()[-3000:]
            assert time.monotonic() < deadline, (
                f"{len(set(acked) - set(_ids(out)))} of {len(acked)} acknowledged "
                f"events never reached the sink; stderr: {restart.stderr()[-3000:]}"
            )
            time.sleep(0.5)
        time.sleep(2.0)  # let any duplicate show up
    finally:
        restart.interrupt()

    ids = _ids(out)
    duplicates = [i for i, n in Counter(ids).items() if n > 1]
    assert not duplicates, f"{len(duplicates)} events written twice, e.g. {duplicates[:3]}"
    assert set(acked) <= set(ids)
    assert set(ids) <= set(acked) | set(first.other) | set(second.other)  # nothing invented
    print(
        f"acked {len(first.acked)} + {len(second.acked)}; written before the restart "
        f"{written_before_restart}; unacknowledged {len(first.other)}"
    )
