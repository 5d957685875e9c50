"""SIGKILL a stateful flow at its first line, restart it, SIGKILL it again mid-run
and restart it: the sink holds exactly what an uninterrupted run writes
(reduce_window, bytewax 0.21's fold_window, stateful_map, batch and a Numaflow
accumulator, whose handler is rebuilt from its WAL after each restart), as five
branches of one flow: one uninterrupted run and one killed run serve the five tests.

Each key's values live in one input file, so per-key arrival order — and with it
every stateful result — is the same in every run.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from tests.recovery.cli_runs import output_lines, run_to_end, start_cli

FLOW = """
from datetime import datetime, timedelta, timezone
from flowspark.accumulator import Message
from flowspark.connectors.files import DirInput, FileOutput
from flowspark.dataflow import Dataflow
from flowspark.window import EventClockConfig, TumblingWindow
import flowspark.operators as op
import flowspark.operators.windowing as win

T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
OUT = {out!r}
flow = Dataflow()

def parse(line):
    key, n = line.split(",")
    return key, int(n)

def write(op_name, stream):
    stream.output(f"out_{{op_name}}", FileOutput(f"{{OUT}}/{{op_name}}.txt"))

values = flow.input("lines", DirInput({data!r}, batch_size=8)).map(parse)

# Hours apart: the few seconds of wall time between micro-batches (which the event
# clock adds to its watermark) never decide what is late.
clock = EventClockConfig(lambda n: T0 + timedelta(hours=n), timedelta(0))
five_hours = TumblingWindow(timedelta(hours=5), T0)
sums = values.reduce_window("sum", clock, five_hours, lambda a, b: a + b)
write("reduce_window", sums.map(lambda kv: f"{{kv[0]}} {{kv[1]}}"))

# bytewax 0.21's windows (the ``window`` kind) on the same clock and windows.
wo = win.fold_window("sum21", values, win.EventClock(lambda n: T0 + timedelta(hours=n),
                     timedelta(0)), win.TumblingWindower(timedelta(hours=5), T0),
                     lambda: 0, lambda a, n: a + n, lambda a, b: a + b)
write("window_021", op.map("fmt21", wo.down, lambda kv: f"{{kv[0]}} {{kv[1][0]}} {{kv[1][1]}}"))

def running(total, n):
    total += n
    return total, total

write("stateful_map", values.stateful_map("running", lambda: 0, running)
      .map(lambda kv: f"{{kv[0]}} {{kv[1]}}"))
write("batch", values.batch("batch", 3, timedelta(hours=1)).map(lambda kv: f"{{kv[0]}} {{kv[1]}}"))

async def sorter(datums, output):
    # Emits datums below the watermark in event-time order. It keeps nothing the
    # outbound watermark has passed, so a restart (a rebuild from the retained WAL)
    # must leave it as it was: what it still holds when its stream ends, said by the
    # code after the loop, matches an uninterrupted run's.
    buffer = []
    async for d in datums:
        buffer.append(d)
        buffer.sort(key=lambda x: x.event_time)
        while buffer and buffer[0].event_time <= d.watermark:
            await output.put(Message.from_datum(buffer.pop(0)))
    left = len(buffer)
    for d in buffer:
        await output.put(Message.from_datum(d))
    await output.put(Message(b"left=%d" % left, keys=d.keys, event_time=d.event_time))

datums = values.to_datums(keys=lambda kv: [kv[0]], value=lambda kv: str(kv[1]),
                          event_time=lambda kv: T0 + timedelta(hours=kv[1]))
sorted_datums = datums.accumulate("sort", sorter, timedelta(hours=1),
                                  watermark_delay=timedelta(hours=2))
write("accumulate", sorted_datums.map(lambda d: f"{{d.keys[0]}} {{d.value.decode()}}"))
"""

KEYS, VALUES = 3, 48


def _write_input(data: Path) -> None:
    data.mkdir()
    for k in range(KEYS):
        lines = [f"key{k},{i}" for i in range(VALUES)]
        (data / f"{k}.txt").write_text("\n".join(lines) + "\n")


OPS = ["reduce_window", "window_021", "stateful_map", "batch", "accumulate"]


def _setup(root: Path, name: str) -> tuple[Path, Path, Path]:
    """The flow file of a run called ``name`` under ``root``, its output folder (a file
    per op) and its recovery directory."""
    data = root / "data"
    if not data.exists():
        _write_input(data)
    out = root / name
    out.mkdir()
    flow_file = root / f"{name}_flow.py"
    flow_file.write_text(FLOW.format(data=str(data), out=str(out)))
    return flow_file, out, root / f"{name}_recovery"


def _outputs(out: Path) -> dict[str, list[str]]:
    return {op: output_lines(out / f"{op}.txt") for op in OPS}


def _written(out: Path) -> int:
    return sum(len(lines) for lines in _outputs(out).values())


@pytest.fixture(scope="module")
def runs(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """What each op writes (sorted) in an uninterrupted run, and in a run killed at its
    first line, then again mid-run once restarted (a crash loop's second crash resumes
    from a resumed run's checkpoint), then run to its end. The five ops are branches of
    one flow, fed by one input: each restart resumes all five from one checkpoint."""
    root = tmp_path_factory.mktemp("stateful")
    flow_file, out, recovery = _setup(root, "uninterrupted")
    run_to_end(flow_file, recovery, "--bounded", "-s", "0")
    expected = {op: sorted(lines) for op, lines in _outputs(out).items()}
    assert all(expected.values()), f"an uninterrupted run wrote nothing for an op: {expected}"
    total = sum(len(lines) for lines in expected.values())

    # The accumulator writes half its lines with the end of the input (the vertex
    # watermark releases what the sorter holds only as the input ends): the mid-run
    # kill counts a third of its lines.
    mid = sum(len(lines) // (3 if op == "accumulate" else 2) for op, lines in expected.items())
    flow_file, out, recovery = _setup(root, "killed")
    for kill_after in [1, mid]:
        proc = start_cli(flow_file, recovery, "--bounded", "-s", "0")
        deadline = time.monotonic() + 240
        while _written(out) < kill_after and proc.poll() is None:
            assert time.monotonic() < deadline, "the flow made no progress"
            time.sleep(0.01)
        assert proc.poll() is None, f"the run ended before the kill point {kill_after}"
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        assert _written(out) < total, f"the kill after {kill_after} lines came too late"
    run_to_end(flow_file, recovery, "--bounded", "-s", "0")
    return expected, {op: sorted(lines) for op, lines in _outputs(out).items()}


@pytest.mark.slow
@pytest.mark.parametrize("op", OPS)
def test_sigkill_and_restart_matches_an_uninterrupted_run(
    op: str, runs: tuple[dict[str, list[str]], dict[str, list[str]]]
):
    expected, killed = runs
    assert killed[op] == expected[op]
