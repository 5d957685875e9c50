"""Numaflow's SQS source on a real SQS API (moto's server): example 22, the SQS-reading
MonoVertex, run from its YAML unchanged; each message logged once as Numaflow's log
sink logs it, and deleted from the queue once its micro-batch is committed."""

from __future__ import annotations

from pathlib import Path

from tests.flowspark_run import run_until
from tests.numaflow_log import log_records
from tests.s3_server import aws_env, queue_counts, sqs_client

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "numaflow" / "monovertex" / "22-sqs-source-mvtx.yaml"
N = 25


def test_numaflows_sqs_mono_vertex_logs_each_message_once_and_deletes_it(moto_server):
    env = aws_env(moto_server.endpoint)  # for the run: the YAML names no endpoint
    # The example's queue: us-west-2, moto's default account 123456789012.
    sqs = sqs_client(moto_server.endpoint, "us-west-2")
    url = sqs.create_queue(QueueName="sqs-numa-test")["QueueUrl"]
    sent = {}
    for i in range(N):
        reply = sqs.send_message(QueueUrl=url, MessageBody=f"m{i}")
        sent[reply["MessageId"]] = f"m{i}"

    def all_logged_and_deleted(lines: list[str]) -> bool:
        # Every message logged, and every one deleted (its micro-batch committed).
        return len(log_records(lines)) >= N and queue_counts(sqs, url) == (0, 0)

    # A process of its own: Spark's Python workers read the credentials from the
    # environment they start with.
    run = run_until([str(EXAMPLE)], all_logged_and_deleted, env=env, warm=False)
    seen = {}
    for record in log_records(run.lines):
        # Numaflow's SQS source: key = message id, event time = SentTimestamp, the
        # system attributes as headers, id = "<receipt handle>-<replica>".
        assert f"SentTimestamp: {record['event_time']}" in record["headers"]
        assert record["id"].endswith("-0") and len(record["id"]) > 10
        assert record["keys"] not in seen, f"message {record['keys']} logged twice"
        seen[record["keys"]] = record["payload"]
    assert seen == sent
