"""What the SIGKILL tests share: a flow run through the CLI in a process group of its
own (so ``os.killpg`` kills Spark with it), the lines a file output holds, and a
live bytewax-style input whose parts pace themselves with ``next_awake()``."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from tests.warm_cli import warm_run

# Flow-file code: ``PacedInput()`` reads the parts of a module-level
# ``PARTS = {name: (items, seconds between items)}``; part ``p`` yields ``(p, 1)``,
# ``(p, 2)``, … each when its time has come and resumes from its count.
PACED_INPUT = """
from datetime import datetime, timedelta, timezone

from flowspark.inputs import PartitionedInput, StatefulSource


class Paced(StatefulSource):
    def __init__(self, part, n, every, i):
        self.part, self.n, self.every, self.i = part, n, timedelta(seconds=every), i
        self.due = datetime.now(timezone.utc)

    def next_batch(self):
        if self.i >= self.n:
            raise StopIteration
        now = datetime.now(timezone.utc)
        if now < self.due:
            return []
        self.due = now + self.every
        self.i += 1
        return [(self.part, self.i)]

    def next_awake(self):
        return self.due

    def snapshot(self):
        return self.i


class PacedInput(PartitionedInput):
    def list_parts(self):
        return list(PARTS)

    def build_part(self, for_part, resume_state):
        n, every = PARTS[for_part]
        return Paced(for_part, n, every, resume_state or 0)
"""


def start_cli(flow_file: Path, recovery: Path, *args: str) -> subprocess.Popen:
    """``python -m flowspark.run FLOW_FILE:flow --master local[2] -r RECOVERY ARGS``."""
    cmd = [sys.executable, "-m", "flowspark.run", f"{flow_file}:flow", "--master", "local[2]",
           "-r", str(recovery), *args]  # fmt: skip
    return subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def run_to_end(flow_file: Path, recovery: Path, *args: str) -> None:
    """Run the flow on ``recovery`` to its end and assert it exited 0: on the
    warm child (:mod:`tests.warm_cli`), or, through Spark Connect
    (``--remote``), as a process of its own."""
    if "--remote" in args:
        proc = start_cli(flow_file, recovery, *args)
        _, err = proc.communicate(timeout=300)
        code, text = proc.returncode, err.decode()
    else:
        code, text = warm_run(flow_file, recovery, *args)
    assert code == 0, text[-3000:]


def output_lines(path: Path) -> list[str]:
    """The lines a file output holds now (none before it exists)."""
    return path.read_text().splitlines() if path.exists() else []


def kill_once_written(proc: subprocess.Popen, out: Path, lines: int, stderr: Path) -> None:
    """Wait (up to 180 s) until ``out`` holds ``lines`` lines, the run going on meanwhile
    (else the tail of its ``stderr`` file fails the test), then SIGKILL its process
    group: the driver, Spark's JVM and its Python workers."""
    deadline = time.monotonic() + 180
    while len(output_lines(out)) < lines:
        assert proc.poll() is None, stderr.read_text()[-3000:]
        assert time.monotonic() < deadline, "the sink wrote too little"
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def kill_mid_run_then_restart(
    flow_file: Path, recovery: Path, out: Path, kill_after_lines: int, total: int, *args: str
) -> list[str]:
    """Run the flow, SIGKILL its whole process group once ``out`` holds
    ``kill_after_lines`` lines (asserting it had not finished: fewer than ``total``),
    run it again to its end (exit 0, :func:`run_to_end`) and return what ``out``
    holds then, after asserting that no line was written twice."""
    proc = start_cli(flow_file, recovery, *args)
    deadline = time.monotonic() + 240
    while len(output_lines(out)) < kill_after_lines and proc.poll() is None:
        assert time.monotonic() < deadline, "the flow made no progress"
        time.sleep(0.01)
    killed_mid_run = proc.poll() is None
    os.killpg(proc.pid, signal.SIGKILL)
    _, first_err = proc.communicate()
    assert killed_mid_run, f"the first run ended by itself:\n{first_err.decode()[-3000:]}"
    assert len(output_lines(out)) < total, "kill landed after the end"

    run_to_end(flow_file, recovery, *args)
    lines = output_lines(out)
    duplicates = [line for line, n in Counter(lines).items() if n > 1]
    assert not duplicates, f"{len(duplicates)} lines written twice, e.g. {duplicates[:3]}"
    return lines


# A keyed event-time window flow whose steps reach the user's module ``helpers``
# (beside the flow file) through a global name; ``{out}``: its file output.
WINDOW_HELPERS = """
from datetime import datetime, timedelta, timezone

BASE = datetime(2024, 1, 1, tzinfo=timezone.utc)


def event_time(i):
    return BASE + timedelta(seconds=i)


def weight(i):
    return i * i
"""

WINDOW_PARTS = {"a": (600, 0.03), "b": (200, 0.09)}  # 18 s of input each

WINDOW_FLOW = """
from datetime import timedelta

import helpers  # the user's module beside the flow: workers get it shipped
from flowspark.connectors.files import FileOutput
from flowspark.dataflow import Dataflow
from flowspark.window import EventClockConfig, TumblingWindow

flow = Dataflow()
flow.input("live", PacedInput())
# Windows wait an hour of system time: they close when the input ends, never early
# (a worker lost stalls the run for seconds, which a shorter wait would turn into
# late items, as on bytewax).
clock = EventClockConfig(
    lambda i: helpers.event_time(i), wait_for_system_duration=timedelta(hours=1)
)
window = TumblingWindow(length=timedelta(seconds=10), align_to=helpers.BASE)
flow.fold_window("sum", clock, window, lambda: 0, lambda acc, i: acc + helpers.weight(i))
flow.map(lambda kv: f"{{kv[0]}} {{kv[1]}}")
flow.output("out", FileOutput({out!r}))
"""


def expected_window_sums() -> list[str]:
    """What ``WINDOW_FLOW`` writes for ``WINDOW_PARTS``: each part's 10 s sums."""
    lines = []
    for part, (n, _) in WINDOW_PARTS.items():
        sums: dict[int, int] = {}
        for i in range(1, n + 1):
            sums[i // 10] = sums.get(i // 10, 0) + i * i
        lines += [f"{part} {total}" for total in sums.values()]
    return lines


def kill_campaign(
    flow_file: Path,
    recovery: Path,
    written: Callable[[], int],
    total: int,
    kills: int,
    seed: int,
    *args: str,
) -> list[int]:
    """Run the flow ``kills`` times on one recovery directory, each run SIGKILLed (its
    whole process group) once ``written()`` has grown by a random share of what is
    left of ``total``, then once more to its end (exit 0); return how much was
    written at each kill. Every kill lands mid-run: a run that ends first fails."""
    rng = random.Random(seed)
    points: list[int] = []
    for left in range(kills, 0, -1):
        now = written()
        target = now + rng.randrange(1, max(2, 2 * (total - now) // (left + 2)))
        proc = start_cli(flow_file, recovery, *args)
        deadline = time.monotonic() + 240
        while written() < target:
            if proc.poll() is not None:
                _, err = proc.communicate()
                raise AssertionError(
                    f"run {len(points) + 1} ended before its kill at {target} of {total} "
                    f"(exit {proc.returncode}): {err.decode()[-2000:]}"
                )
            assert time.monotonic() < deadline, f"run {len(points) + 1} made no progress"
            time.sleep(0.01)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        points.append(written())
    run_to_end(flow_file, recovery, *args)
    return points
