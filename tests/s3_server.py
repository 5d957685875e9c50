"""A real S3-compatible HTTP server for tests (moto's ``moto_server``, from PyPI) on a
loopback port, stopped by pid; buckets are made with its S3 API."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

from tests.http_clients import free_port, server_binary

ACCESS_KEY = "flowspark-test"
SECRET_KEY = "flowspark-test-secret"


class S3Server:
    """``moto_server`` on 127.0.0.1; ``uri(bucket, key)`` names an object with the
    endpoint and keys in the URI (as a user may give them), so that processes Spark
    starts need no environment."""

    def __init__(self, log_dir: Path) -> None:
        self.port = free_port()
        self.log_dir = log_dir
        self.proc: subprocess.Popen | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def uri(self, bucket: str, key: str = "", scheme: str = "s3a") -> str:
        query = f"?endpoint_override=127.0.0.1:{self.port}&scheme=http&region=us-east-1"
        return f"{scheme}://{ACCESS_KEY}:{SECRET_KEY}@{bucket}/{key}{query}"

    def start(self) -> S3Server:
        log = open(self.log_dir / f"moto-{self.port}.log", "ab")  # noqa: SIM115
        cmd = [
            server_binary("moto_server", "moto[server]"),
            "-H",
            "127.0.0.1",
            "-p",
            str(self.port),
        ]
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=log)
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(self.endpoint + "/moto-api/", timeout=1):
                    return self
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"moto_server did not start (see {log.name})") from None
                time.sleep(0.1)

    def make_bucket(self, bucket: str) -> None:
        request = urllib.request.Request(f"{self.endpoint}/{bucket}", method="PUT")
        with urllib.request.urlopen(request, timeout=10) as reply:
            assert reply.status == 200, reply.status

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=20)
        self.proc = None

    def __enter__(self) -> S3Server:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
