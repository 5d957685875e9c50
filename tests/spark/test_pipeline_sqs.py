"""Numaflow's SQS source on a real SQS API (moto's server): example 22, the SQS-reading
MonoVertex, run from its YAML unchanged; each message logged once as Numaflow's log
sink logs it, and deleted from the queue once its micro-batch is committed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import boto3
import pytest

from tests.s3_server import S3Server
from tests.server_process import interrupt

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "numaflow" / "monovertex" / "22-sqs-source-mvtx.yaml"
N = 25


@pytest.fixture()
def moto(tmp_path):
    server = S3Server(tmp_path).start()  # moto's server answers every AWS API it mocks
    try:
        yield server
    finally:
        server.stop()


def _aws_env(endpoint: str) -> dict[str, str]:
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "flowspark-test",
        "AWS_SECRET_ACCESS_KEY": "flowspark-test-secret",
    }


def _queue_counts(sqs, url: str) -> tuple[int, int]:
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    found = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    return int(found[names[0]]), int(found[names[1]])


def test_numaflows_sqs_mono_vertex_logs_each_message_once_and_deletes_it(moto, monkeypatch):
    env = _aws_env(moto.endpoint)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    # The example's queue: us-west-2, moto's default account 123456789012.
    sqs = boto3.client("sqs", region_name="us-west-2")
    url = sqs.create_queue(QueueName="sqs-numa-test")["QueueUrl"]
    sent = {}
    for i in range(N):
        reply = sqs.send_message(QueueUrl=url, MessageBody=f"m{i}")
        sent[reply["MessageId"]] = f"m{i}"

    proc = subprocess.Popen(
        [sys.executable, "-m", "flowspark.run", str(EXAMPLE)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        env={**os.environ, **env, "PYTHONPATH": str(ROOT / "src"), "PYTHONUNBUFFERED": "1"},
        start_new_session=True,
    )  # fmt: skip
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout or []), daemon=True)
    reader.start()
    deadline = time.monotonic() + 240
    try:
        # Every message logged, and every one deleted (its micro-batch committed).
        while sum(line[:1] == "{" for line in list(lines)) < N or _queue_counts(sqs, url) != (
            0,
            0,
        ):
            assert proc.poll() is None, proc.stderr.read()[-3000:] if proc.stderr else ""
            assert time.monotonic() < deadline, f"{len(lines)} lines, {_queue_counts(sqs, url)}"
            time.sleep(0.2)
    finally:
        interrupt(proc)
    reader.join(timeout=10)
    messages = [json.loads(line)["message"] for line in lines if line[:1] == "{"]
    seen = {}
    for text in messages:
        payload, rest = text.removeprefix("Payload - ").split(" Keys - ", 1)
        key, rest = rest.split(" EventTime - ", 1)
        event_ms, rest = rest.split(" Headers - ", 1)
        headers, ident = rest.rsplit(" ID - ", 1)
        # Numaflow's SQS source: key = message id, event time = SentTimestamp, the
        # system attributes as headers, id = "<receipt handle>-<replica>".
        assert f"SentTimestamp: {event_ms}" in headers
        assert ident.endswith("-0") and len(ident) > 10
        assert key not in seen, f"message {key} logged twice"
        seen[key] = payload
    assert seen == sent
