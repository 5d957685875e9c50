"""A real S3-compatible HTTP server for tests (moto's ``moto_server``, from PyPI) on a
loopback port, stopped by pid; buckets are made with its S3 API."""

from __future__ import annotations

import urllib.request
from pathlib import Path
from typing import Any

from flowspark.engine.cluster import free_port
from tests.http_clients import server_binary
from tests.server_process import ServerProcess

ACCESS_KEY = "flowspark-test"
SECRET_KEY = "flowspark-test-secret"


class S3Server(ServerProcess):
    """``moto_server`` on 127.0.0.1; ``uri(bucket, key)`` names an object with the
    endpoint and keys in the URI (as a user may give them), so that processes Spark
    starts need no environment."""

    def __init__(self, log_dir: Path) -> None:
        self.port = free_port()
        self.log_dir = log_dir

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def uri(self, bucket: str, key: str = "", scheme: str = "s3a") -> str:
        query = f"?endpoint_override=127.0.0.1:{self.port}&scheme=http&region=us-east-1"
        return f"{scheme}://{ACCESS_KEY}:{SECRET_KEY}@{bucket}/{key}{query}"

    def start(self) -> S3Server:
        moto = server_binary("moto_server", "moto[server]")
        return self._launch_on_a_free_port(
            lambda port: [moto, "-H", "127.0.0.1", "-p", str(port)],
            self.log_dir,
            self._answers,
            wait_s=30,
            pause_s=0.1,
        )

    def _answers(self) -> None:
        urllib.request.urlopen(self.endpoint + "/moto-api/", timeout=1).close()

    def make_bucket(self, bucket: str) -> None:
        request = urllib.request.Request(f"{self.endpoint}/{bucket}", method="PUT")
        with urllib.request.urlopen(request, timeout=10) as reply:
            assert reply.status == 200, reply.status


# -- SQS: moto's server answers every AWS API it mocks, SQS too ----------------------


def aws_env(endpoint: str) -> dict[str, str]:
    """The environment that points boto3 (in this process or a flow's) at ``endpoint``."""
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
    }


def sqs_client(endpoint: str, region: str) -> Any:
    """A boto3 SQS client for moto's server at ``endpoint``."""
    import boto3

    return boto3.client(
        "sqs",
        region_name=region,
        endpoint_url=endpoint,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
    )


def queue_counts(sqs: Any, url: str) -> tuple[int, int]:
    """A queue's (visible, in flight) message counts."""
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    found = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    return int(found[names[0]]), int(found[names[1]])
