"""The HTTP source server alone: acknowledged events per second and request latency.

Starts ``flowspark.connectors.numaflow.http.HttpServer`` (one route, a fresh journal
directory) in a child process, then C keep-alive clients on loopback (raw asyncio,
one request in flight per connection, as HTTP/1.1 clients without pipelining) POST
events for ``--duration`` seconds, each with a unique ``x-numaflow-id``, an
``x-numaflow-event-time`` and ``x-numaflow-keys``. 200 means the event was
fsync'ed to the journal (group commit). Prints one JSON line::

    {"acked_per_s": ..., "p50_ms": ..., "p99_ms": ..., "statuses": {...},
     "journaled": ..., "server_cpu": ..., "fsync_helper_cpu": ...}

``journaled`` is the number of records in the journal afterwards (must equal the
200s); ``server_cpu`` the server process's CPU seconds per second of load, and
``fsync_helper_cpu`` its fsync helper's (mostly kernel time in fsync).

    python bench/http_ingest_server.py [-c 32] [-d 10] [--payload 100] [--tls]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from http_ingest import ResponseReader

ROOT = Path(__file__).resolve().parent.parent

SERVER = """
import sys, time
from flowspark.connectors.numaflow.http import HttpRoute, HttpServer
cert, key = (sys.argv[2], sys.argv[3]) if len(sys.argv) > 3 else (None, None)
server = HttpServer([HttpRoute("in")], sys.argv[1], port=0, certfile=cert, keyfile=key)
server.start()
print(server.port, flush=True)
sys.stdin.read()
server.stop()
"""


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    children = []
    for task in os.listdir(f"/proc/{pid}/task"):  # any thread may have started one
        try:
            with open(f"/proc/{pid}/task/{task}/children") as f:
                children += [int(p) for p in f.read().split()]
        except OSError:  # the thread ended after the listing
            continue
    return children


def _self_signed(directory: str) -> tuple[str, str]:
    cert, key = os.path.join(directory, "cert.pem"), os.path.join(directory, "key.pem")
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-keyout",
            key,
            "-out",
            cert,
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


async def load(
    port: int, concurrency: int, duration: float, payload: bytes, tls: bool
) -> tuple[dict[int, int], list[float], float]:
    loop = asyncio.get_running_loop()
    statuses: dict[int, int] = {}
    latencies: list[float] = []
    counter = itertools.count()
    prefix = os.urandom(4).hex()
    ssl_context = None
    if tls:
        import ssl

        ssl_context = ssl.create_default_context()
        ssl_context.check_hostname = False
        ssl_context.verify_mode = ssl.CERT_NONE
    stop_at = 0.0

    class Client(ResponseReader):
        def __init__(self, done: asyncio.Future[None]) -> None:
            self.done = done
            self.sent = 0.0

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self.transport = transport

        def send(self) -> None:
            now = time.perf_counter()
            if now >= stop_at:
                self.transport.close()
                if not self.done.done():
                    self.done.set_result(None)
                return
            self.sent = now
            self.transport.write(
                b"POST /vertices/in HTTP/1.1\r\nhost: localhost\r\n"
                b"content-type: application/json\r\nx-numaflow-id: %s-%d\r\n"
                b"x-numaflow-event-time: %d\r\nx-numaflow-keys: k%d\r\n"
                b"content-length: %d\r\n\r\n%s"
                % (
                    prefix.encode(),
                    next(counter),
                    time.time_ns() // 1_000_000,
                    id(self) % 7,
                    len(payload),
                    payload,
                )
            )

        def on_response(self, status: int) -> None:
            statuses[status] = statuses.get(status, 0) + 1
            latencies.append(time.perf_counter() - self.sent)
            self.send()

        def connection_lost(self, exc: Exception | None) -> None:
            if not self.done.done():
                self.done.set_result(None)

    clients = []
    for _ in range(concurrency):
        done = loop.create_future()
        _, client = await loop.create_connection(
            lambda done=done: Client(done),
            "127.0.0.1",
            port,
            ssl=ssl_context,
            server_hostname="localhost" if tls else None,
        )
        clients.append((client, done))
    start = time.perf_counter()
    stop_at = start + duration
    for client, _ in clients:
        client.send()
    await asyncio.gather(*(done for _, done in clients))
    return statuses, latencies, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-c", "--concurrency", type=int, default=32)
    parser.add_argument("-d", "--duration", type=float, default=10.0)
    parser.add_argument("--payload", type=int, default=100, help="body bytes")
    parser.add_argument("--tls", action="store_true")
    args = parser.parse_args()

    sys.path.insert(0, str(ROOT / "src"))
    from flowspark.connectors.numaflow.http import read_journal

    with tempfile.TemporaryDirectory(prefix="flowspark-http-bench-") as tmp:
        journal_dir = os.path.join(tmp, "journal")
        argv = [sys.executable, "-c", SERVER, journal_dir]
        if args.tls:
            argv += list(_self_signed(tmp))
        env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
        server = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        try:
            assert server.stdout is not None and server.stdin is not None
            port = int(server.stdout.readline())
            payload = (b'{"v":"' + b"x" * max(0, args.payload - 8) + b'"}')[: max(args.payload, 0)]
            helpers = _children(server.pid)  # the fsync helper
            cpu0 = _cpu_seconds(server.pid)
            helper0 = sum(_cpu_seconds(p) for p in helpers)
            statuses, latencies, elapsed = asyncio.run(
                load(port, args.concurrency, args.duration, payload, args.tls)
            )
            cpu = _cpu_seconds(server.pid) - cpu0
            helper_cpu = sum(_cpu_seconds(p) for p in helpers) - helper0
            server.stdin.close()
            server.wait(30)
        finally:
            if server.poll() is None:
                server.kill()
        journaled = len(read_journal(os.path.join(journal_dir, "in.journal")))
    latencies.sort()

    def pct(p: float) -> float:
        return round(latencies[min(len(latencies) - 1, int(len(latencies) * p))] * 1e3, 2)

    print(
        json.dumps(
            {
                "concurrency": args.concurrency,
                "duration_s": round(elapsed, 2),
                "tls": args.tls,
                "payload_bytes": len(payload),
                "acked_per_s": round(statuses.get(200, 0) / elapsed),
                "p50_ms": pct(0.50),
                "p99_ms": pct(0.99),
                "statuses": statuses,
                "journaled": journaled,
                "server_cpu": round(cpu / elapsed, 2),
                "fsync_helper_cpu": round(helper_cpu / elapsed, 2),
            }
        )
    )


if __name__ == "__main__":
    main()
