"""User-defined sources on Spark: pynumaflow's simple_source example as a pipeline vertex
(its YAML unchanged), and a ``Sourcer`` as a Python flow's input, acked once committed."""

from __future__ import annotations

import base64
import json
import time
from datetime import UTC, datetime
from pathlib import Path

from flowspark import sourcer
from flowspark.connectors.numaflow import SourcerInput
from flowspark.dataflow import Dataflow
from flowspark.engine.query import RunConfig, run_flow
from flowspark.shared.asynciter import NonBlockingIterator
from flowspark.testing import TestingOutput
from tests.flowspark_run import run_until
from tests.numaflow_log import log_records

ROOT = Path(__file__).resolve().parents[2]
UDFS = ROOT / "examples" / "numaflow" / "udfs"


def test_pynumaflows_simple_source_runs_as_a_vertex_and_prints_what_numaflow_prints():
    # Numaflow's example pipeline.yaml unchanged (udsource image -> log sink,
    # readBatchSize 2) with the example file, prefix swapped, as the vertex. The source
    # reads 2 messages and then nothing until they are acked: every line past the
    # second shows that flowspark acked a committed micro-batch.
    run = run_until(
        [str(UDFS / "simple_source.yaml"), "--udf", f"in={UDFS / 'simple_source.py'}"],
        lambda lines: len(log_records(lines)) >= 8,
    )
    assert "Starting grpc server" in run.stderr  # the example's own log line
    # Numaflow's log sink: payload str(read_idx) after the increment, no keys, the
    # example's event time (now), a fresh x-txn-id header, id = Numaflow's offset
    # string "<base64 offset>-<partition>".
    for i, record in enumerate(log_records(run.lines)[:8]):
        assert (record["payload"], record["keys"]) == (str(i + 1), "")
        assert record["id"] == f"{base64.b64encode(str(i).encode()).decode()}-0"
        headers = record["headers"]
        assert headers.startswith("x-txn-id: ") and headers.endswith(", ")
        assert abs(record["event_time"] - time.time() * 1000) < 600_000


class Numbers(sourcer.Sourcer):
    """``total`` messages, then nothing; each ack is appended to ``acks`` (the source
    runs in Spark's planning process: a file is how the test sees its acks)."""

    def __init__(self, total: int, acks: str) -> None:
        self.total = total
        self.acks = acks
        self.next = 0

    async def read_handler(self, datum: sourcer.ReadRequest, output: NonBlockingIterator) -> None:
        for _ in range(min(datum.num_records, self.total - self.next)):
            offset = sourcer.Offset(str(self.next).encode(), 0)
            when = datetime(2024, 1, 1, tzinfo=UTC)
            await output.put(sourcer.Message(b"%d" % self.next, offset, when, keys=["k"]))
            self.next += 1

    async def ack_handler(self, ack_request: sourcer.AckRequest) -> None:
        with open(self.acks, "a") as f:
            f.write(" ".join(o.offset.decode() for o in ack_request.offsets) + "\n")

    async def nack_handler(self, nack_request: sourcer.NackRequest) -> None:
        raise AssertionError("never called")

    async def pending_handler(self) -> sourcer.PendingResponse:
        return sourcer.PendingResponse(count=self.total - self.next)

    async def active_partitions_handler(self) -> sourcer.PartitionsResponse:
        return sourcer.PartitionsResponse(partitions=[0])


def test_a_sourcer_as_a_python_flows_input_is_read_whole_and_acked(tmp_path: Path):
    acks = tmp_path / "acks.txt"
    flow = Dataflow("udsource")
    out: list = []
    inp = SourcerInput(Numbers(25, str(acks)), "numbers", read_batch_size=4)
    flow.input("numbers", inp).map("v", lambda d: (d.keys, d.value, d.id)).output(
        "out", TestingOutput(out)
    )
    progress = tmp_path / "progress.jsonl"
    run_flow(flow, RunConfig(bounded=True, max_batch_items=8, progress_json=str(progress)))
    ids = [f"{base64.b64encode(b'%d' % i).decode()}-0" for i in range(25)]
    assert out == [(["k"], b"%d" % i, ids[i]) for i in range(25)]
    # Every offset acked once, in read order, after its micro-batch committed (the
    # last one when the run asked for more and found nothing).
    acked = [o for line in acks.read_text().splitlines() for o in line.split()]
    assert acked == [str(i) for i in range(25)]
    backlogs = [
        json.loads(line)["steps"]["numbers"].get("backlog")
        for line in progress.read_text().splitlines()
        if "numbers" in json.loads(line).get("steps", {})
    ]
    assert backlogs and backlogs[-1] == 0 and max(b or 0 for b in backlogs) > 0


def test_a_source_server_is_an_input_too(tmp_path: Path):
    flow = Dataflow("server")
    out: list = []
    server = sourcer.SourceAsyncServer(Numbers(3, str(tmp_path / "acks.txt")))
    flow.input("in", server).map("v", lambda d: d.value).output("out", TestingOutput(out))
    run_flow(flow, RunConfig(bounded=True))
    assert out == [b"0", b"1", b"2"]
