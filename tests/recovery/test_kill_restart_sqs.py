"""SIGKILL a flow that reads an SQS queue (moto's server) mid-run; restart it.

flowspark deletes a micro-batch's messages only once Spark has committed it, so after
the kill and a restart on the same recovery directory every message reaches the
(exactly-once) file sink; the only duplicates are messages of the committed
micro-batch whose delete the kill cut off: SQS gives them again once their visibility
timeout passes. The queue ends empty.

Micro-batches take whatever was read since the last one (no ``--max-batch-items``): a
cap would leave read messages waiting for a later batch, and one that waits longer
than its visibility timeout is given again while still in flight (at-least-once, as
on Numaflow, but not what this test is about).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.recovery.cli_runs import kill_once_written, output_lines
from tests.s3_server import S3Server, aws_env, queue_counts, sqs_client

TOTAL = 500
VISIBILITY_S = 10  # short, so that what the killed run held comes back soon; longer than a batch

FLOW = """
from flowspark.connectors.files import FileOutput
from flowspark.connectors.numaflow import SourcerInput
from flowspark.connectors.numaflow.sqs import SqsConfig, SqsSourcer
from flowspark.dataflow import Dataflow

config = SqsConfig(queue_name="orders", region="us-east-1", account_id="123456789012",
                   visibility_timeout={visibility})
flow = Dataflow("sqs")
source = SourcerInput(SqsSourcer(config), "in", read_batch_size=10, text_offsets=True)
flow.input("in", source).map("body", lambda d: d.value.decode()).output(
    "out", FileOutput({out!r})
)
"""


@pytest.mark.slow
def test_sigkill_mid_run_then_restart_loses_nothing_and_repeats_at_most_a_batch(
    tmp_path: Path, moto_server: S3Server
):
    env = {**os.environ, **aws_env(moto_server.endpoint), "PYTHONUNBUFFERED": "1"}
    sqs = sqs_client(moto_server.endpoint, "us-east-1")
    url = sqs.create_queue(QueueName="orders")["QueueUrl"]
    for start in range(0, TOTAL, 10):
        entries = [{"Id": str(i), "MessageBody": f"m{i}"} for i in range(start, start + 10)]
        sqs.send_message_batch(QueueUrl=url, Entries=entries)
    out, recovery, stderr = tmp_path / "out.txt", tmp_path / "recovery", tmp_path / "err.txt"
    flow_file = tmp_path / "sqs_flow.py"
    flow_file.write_text(FLOW.format(visibility=VISIBILITY_S, out=str(out)))
    cmd = [sys.executable, "-m", "flowspark.run", str(flow_file), "-r", str(recovery)]

    def start() -> subprocess.Popen:
        return subprocess.Popen(
            cmd, stdout=subprocess.DEVNULL, stderr=stderr.open("a"), env=env,
            start_new_session=True,
        )  # fmt: skip

    kill_once_written(start(), out, 100, stderr)
    written_before = set(output_lines(out))
    assert len(written_before) < TOTAL, "the run read everything before the kill"

    proc = start()
    deadline = time.monotonic() + 240
    try:
        # On until every message is written and the queue holds none (all deleted).
        while len(set(output_lines(out))) < TOTAL or queue_counts(sqs, url) != (0, 0):
            assert proc.poll() is None, stderr.read_text()[-3000:]
            assert time.monotonic() < deadline, (
                len(set(output_lines(out))),
                queue_counts(sqs, url),
            )
            time.sleep(0.2)
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=60)

    lines = output_lines(out)
    assert set(lines) == {f"m{i}" for i in range(TOTAL)}  # nothing lost, nothing invented
    duplicates = {v for v, n in Counter(lines).items() if n > 1}
    assert max(Counter(lines).values()) <= 2
    # Written (committed) before the kill and not deleted then: the last committed
    # micro-batch of the killed run, no more.
    assert duplicates <= written_before
    print(f"written before the kill {len(written_before)}, duplicates {len(duplicates)}")
