"""Small HTTP client helpers for tests that feed Numaflow HTTP sources."""

from __future__ import annotations

import http.client
import shutil
import subprocess
import sys
import time
from pathlib import Path


def server_binary(name: str, package: str) -> str:
    """A server program that a test dependency installs beside this Python (or on PATH)."""
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    if found is None:
        raise RuntimeError(f"{name} not found: pip install {package!r}")
    return found


def post(
    port: int,
    vertex: str,
    body: bytes,
    event_time: int | None = None,
    keys: str | None = None,
    event_id: str | None = None,
    token: str | None = None,
    conn: http.client.HTTPConnection | None = None,
) -> tuple[int, bytes]:
    """POST one event to ``/vertices/{vertex}``; returns (status, reply body)."""
    headers = {}
    if event_time is not None:
        headers["x-numaflow-event-time"] = str(event_time)
    if keys is not None:
        headers["x-numaflow-keys"] = keys
    if event_id is not None:
        headers["x-numaflow-id"] = event_id
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    own = conn is None
    conn = conn or http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("POST", f"/vertices/{vertex}", body=body, headers=headers)
        reply = conn.getresponse()
        return reply.status, reply.read()
    finally:
        if own:
            conn.close()


def wait_healthy(
    port: int,
    proc: subprocess.Popen | None = None,
    timeout: float = 120,
    token: str | None = None,
) -> None:
    """Wait until ``GET /health`` answers 200 (fail early if ``proc`` exits)."""
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the run exited with {proc.returncode} before /health")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/health", headers=headers)
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"/health on port {port} did not answer 200 in {timeout} s")


def scrape_metrics(url: str) -> dict[tuple[str, str], float]:
    """A Prometheus endpoint's samples: ``(name, its "step" label or "") -> value``."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    return {
        (sample.name, sample.labels.get("step", "")): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }
