"""SIGKILL a stateful flow at its first line, restart it, SIGKILL it again mid-run
and restart it: the sink holds exactly what an uninterrupted run writes
(reduce_window, bytewax 0.21's fold_window, stateful_map, batch and a Numaflow
accumulator, whose handler is rebuilt from its WAL after each restart).

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
from flowspark.connectors.files import DirInput, FileOutput
from flowspark.dataflow import Dataflow
from flowspark.window import EventClockConfig, TumblingWindow

T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
flow = Dataflow()
flow.input("lines", DirInput({data!r}, batch_size=8))

def parse(line):
    key, n = line.split(",")
    return key, int(n)

flow.map(parse)
OP = {op!r}
if OP == "reduce_window":
    # Hours apart: the few seconds of wall time between micro-batches (which the
    # event clock adds to its watermark) never decide what is late.
    clock = EventClockConfig(lambda n: T0 + timedelta(hours=n), timedelta(0))
    flow.reduce_window("sum", clock, TumblingWindow(timedelta(hours=5), T0), lambda a, b: a + b)
    flow.map(lambda kv: f"{{kv[0]}} {{kv[1]}}")
elif OP == "window_021":
    # bytewax 0.21's windows (the ``window`` kind) on the same clock and windows.
    import flowspark.operators as op
    import flowspark.operators.windowing as win

    clock = win.EventClock(lambda n: T0 + timedelta(hours=n), timedelta(0))
    windower = win.TumblingWindower(timedelta(hours=5), T0)
    wo = win.fold_window("sum21", flow._chain(), clock, windower, lambda: 0,
                         lambda a, n: a + n, lambda a, b: a + b)
    flow._extend(op.map("fmt", wo.down, lambda kv: f"{{kv[0]}} {{kv[1][0]}} {{kv[1][1]}}"))
elif OP == "stateful_map":
    def running(total, n):
        total += n
        return total, total
    flow.stateful_map("running", lambda: 0, running)
    flow.map(lambda kv: f"{{kv[0]}} {{kv[1]}}")
elif OP == "accumulate":
    from flowspark.accumulator import Message

    async def sorter(datums, output):
        # Emits datums below the watermark in event-time order. It keeps nothing the
        # outbound watermark has passed, so a restart (a rebuild from the retained
        # WAL) must leave it as it was: what it still holds when its stream ends, said
        # by the code after the loop, matches an uninterrupted run's.
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

    flow.to_datums(keys=lambda kv: [kv[0]], value=lambda kv: str(kv[1]),
                   event_time=lambda kv: T0 + timedelta(hours=kv[1]))
    flow.accumulate("sort", sorter, timedelta(hours=1), watermark_delay=timedelta(hours=2))
    flow.map(lambda d: f"{{d.keys[0]}} {{d.value.decode()}}")
else:
    flow.batch("batch", 3, timedelta(hours=1))
    flow.map(lambda kv: f"{{kv[0]}} {{kv[1]}}")
flow.output("out", FileOutput({out!r}))
"""

KEYS, VALUES = 3, 48


def _write_input(data: Path) -> None:
    data.mkdir()
    for k in range(KEYS):
        lines = [f"key{k},{i}" for i in range(VALUES)]
        (data / f"{k}.txt").write_text("\n".join(lines) + "\n")


def _setup(tmp_path: Path, op: str, name: str) -> tuple[Path, Path, Path]:
    data = tmp_path / "data"
    if not data.exists():
        _write_input(data)
    out = tmp_path / f"{name}.txt"
    flow_file = tmp_path / f"{name}_flow.py"
    flow_file.write_text(FLOW.format(data=str(data), out=str(out), op=op))
    return flow_file, out, tmp_path / f"{name}_recovery"


OPS = ["reduce_window", "window_021", "stateful_map", "batch", "accumulate"]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    """What an uninterrupted run of each op's flow writes (sorted): every op's run on
    the warm child's one Spark session (tests.warm_cli), not a Spark start per op."""
    root = tmp_path_factory.mktemp("uninterrupted")
    outs = {}
    for op in OPS:
        op_dir = root / op
        op_dir.mkdir()
        flow_file, outs[op], recovery = _setup(op_dir, op, f"uninterrupted_{op}")
        run_to_end(flow_file, recovery, "--bounded", "-s", "0")
    return {op: sorted(output_lines(out)) for op, out in outs.items()}


@pytest.mark.slow
@pytest.mark.parametrize("op", OPS)
def test_sigkill_and_restart_matches_an_uninterrupted_run(
    tmp_path: Path, op: str, uninterrupted: dict[str, list[str]]
):
    expected = uninterrupted[op]
    assert expected, "the uninterrupted run wrote nothing"

    # Killed at its first line, then again mid-run once restarted (a crash loop's
    # second crash resumes from a resumed run's checkpoint), then run to its end.
    # The accumulator writes half its lines with the end of the input (the vertex
    # watermark releases what the sorter holds only as the input ends): a third is
    # still mid-run.
    mid = len(expected) // (3 if op == "accumulate" else 2)
    flow_file, out, recovery = _setup(tmp_path, op, "killed")
    for kill_after in [1, mid]:
        proc = start_cli(flow_file, recovery, "--bounded", "-s", "0")
        deadline = time.monotonic() + 240
        while len(output_lines(out)) < kill_after and proc.poll() is None:
            assert time.monotonic() < deadline, "the flow made no progress"
            time.sleep(0.01)
        assert proc.poll() is None, f"the run ended before the kill point {kill_after}"
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        assert len(output_lines(out)) < len(expected), f"the kill after {kill_after} came too late"
    run_to_end(flow_file, recovery, "--bounded", "-s", "0")
    assert sorted(output_lines(out)) == expected
