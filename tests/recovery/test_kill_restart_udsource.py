"""SIGKILL a flow whose input is a user-defined source mid-run; restart it.

The source is durable the way a broker is: it reads messages ``0 … N-1`` in order,
appends every offset ``ack_handler`` gets to a file, and after a restart delivers again
every offset that file lacks. flowspark acks a micro-batch's offsets only once Spark
has committed it, so after the kill and a restart on the same recovery directory:

* nothing acked is lost: every message reaches the (exactly-once) file sink;
* the only duplicates are messages written before the kill and not acked then (the
  last committed micro-batch, whose ack the kill cut off): at most one micro-batch
  (``--max-batch-items``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.recovery.cli_runs import kill_once_written, output_lines, run_to_end

TOTAL = 3000
BATCH = 100  # --max-batch-items: the most items one micro-batch reads

FLOW = """
import asyncio
from datetime import datetime, timezone

from flowspark.connectors.files import FileOutput
from flowspark.connectors.numaflow import SourcerInput
from flowspark.dataflow import Dataflow
from flowspark.sourcer import Message, Offset, PartitionsResponse, PendingResponse, Sourcer


class Durable(Sourcer):
    def __init__(self, total, acks):
        self.total, self.acks = total, acks
        self.cursor = None
        self.in_flight = set()

    def _acked(self):
        try:
            text = open(self.acks).read()
        except FileNotFoundError:
            return set()
        whole = text[: text.rfind("\\n") + 1]  # a line the kill cut short is not an ack
        return {{int(o) for o in whole.split()}}

    async def read_handler(self, datum, output):
        if self.cursor is None:
            self.done = self._acked()
            self.cursor = 0
        await asyncio.sleep(0.01)
        sent = 0
        while sent < datum.num_records and self.cursor < self.total:
            i = self.cursor
            self.cursor += 1
            if i in self.done:
                continue
            when = datetime.now(timezone.utc)
            await output.put(Message(str(i).encode(), Offset(str(i).encode(), 0), when))
            self.in_flight.add(i)
            sent += 1

    async def ack_handler(self, ack_request):
        offsets = [int(o.offset) for o in ack_request.offsets]
        for i in offsets:
            self.in_flight.remove(i)  # only what it delivered is acked
        with open(self.acks, "a") as f:
            f.write(" ".join(map(str, offsets)) + "\\n")
            f.flush()

    async def nack_handler(self, nack_request):
        raise AssertionError("flowspark never nacks")

    async def pending_handler(self):
        return PendingResponse(count=self.total - (self.cursor or 0))

    async def active_partitions_handler(self):
        return PartitionsResponse(partitions=[0])


flow = Dataflow("durable")
source = SourcerInput(Durable({total}, {acks!r}), "in", read_batch_size=20)
flow.input("in", source).map("value", lambda d: d.value.decode()).output(
    "out", FileOutput({out!r})
)
"""


def _start(flow_file: Path, recovery: Path, stderr: Path, *args: str) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "flowspark.run", str(flow_file), "--master", "local[2]",
           "-r", str(recovery)]  # fmt: skip
    return subprocess.Popen(
        [*cmd, "--max-batch-items", str(BATCH), *args],
        stdout=subprocess.DEVNULL,
        stderr=stderr.open("a"),
        start_new_session=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def _acked(path: Path) -> set[str]:
    text = path.read_text() if path.exists() else ""
    return set(text[: text.rfind("\n") + 1].split())


@pytest.mark.slow
@pytest.mark.parametrize("written_before_kill", [300, 1500])
def test_sigkill_mid_run_then_restart_loses_nothing_acked_and_repeats_at_most_a_batch(
    tmp_path: Path, written_before_kill: int
):
    out, acks = tmp_path / "out.txt", tmp_path / "acks.txt"
    recovery, stderr = tmp_path / "recovery", tmp_path / "stderr.txt"
    flow_file = tmp_path / "udsource_flow.py"
    flow_file.write_text(FLOW.format(total=TOTAL, acks=str(acks), out=str(out)))

    kill_once_written(_start(flow_file, recovery, stderr), out, written_before_kill, stderr)
    written_before = set(output_lines(out))
    acked_before = _acked(acks)
    assert acked_before and acked_before <= written_before
    assert len(written_before) < TOTAL, "the run ended before the kill"

    # On to the end of the source, on the warm child (as _start would run it).
    run_to_end(flow_file, recovery, "--max-batch-items", str(BATCH), "--bounded")

    lines = output_lines(out)
    assert set(lines) == {str(i) for i in range(TOTAL)}  # nothing lost, nothing invented
    duplicates = {v for v, n in Counter(lines).items() if n > 1}
    assert max(Counter(lines).values()) <= 2
    # Written before the kill and not acked then: the committed micro-batch whose ack
    # the kill cut off (the batch in flight is rolled back by the exactly-once sink).
    assert duplicates <= written_before - acked_before
    assert len(duplicates) <= BATCH
    assert _acked(acks) == {str(i) for i in range(TOTAL)}  # the restart acked the rest
    print(
        f"written before the kill {len(written_before)}, acked {len(acked_before)}, "
        f"duplicates {len(duplicates)}"
    )
