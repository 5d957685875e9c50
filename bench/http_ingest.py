"""``python bench/run.py http_ingest``: Numaflow pipelines fed over HTTP, checkpointed.

Runs ``python -m flowspark.run PIPELINE.yaml -r RECOVERY_DIR`` (the streaming path,
checkpointing on), waits for the HTTP source's ``/health``, then C concurrent
keep-alive clients on loopback POST events for ``--duration`` seconds, each event
stamped with its send time (``x-numaflow-event-time``) and a unique
``x-numaflow-id``. The pipeline's sink is a ``udsink`` stopwatch
(``bench/udfs/stopwatch_sink.py``): a blackhole that notes, per event id, the time
it reached the sink. Printed (one JSON line per pipeline):

* ``acked_per_s``: events answered 200 per second of load;
* ``ack_p50_ms``/``ack_p99_ms``: request to 200 (the journal's group-committed fsync);
* ``sink_p50_ms``/``sink_p99_ms``: request to sink (event time to the sink's clock);
* ``lost``: acknowledged events that never reached the sink (must be 0).

Pipelines (``bench/pipelines/http-<name>.yaml``): ``map`` (http -> map-cat -> sink) and
``accumulator`` (the accumulator page's: two http sources -> stream sorter, 10 s timeout
-> sink). The sorter
releases a key's events only when a datum with a later watermark arrives, so after
the load each source gets one later event per key (``_release``), as a live feed
would send; without it the last events stay kept by the sorter's own rule.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from ports import free_port

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent

# Each pipeline's HTTP source vertices and the UDF files of its vertices besides the sink.
PIPELINES = {
    "map": (["in"], {}),
    "accumulator": (
        ["http-one", "http-two"],
        {"accum": ROOT / "examples" / "numaflow" / "udfs" / "stream_sorter.py"},
    ),
}


def log(msg: str) -> None:
    print(f"[http_ingest] {msg}", file=sys.stderr, flush=True)


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)


class ResponseReader(asyncio.Protocol):
    """A keep-alive HTTP/1.1 client connection with one request in flight (no
    pipelining): ``on_response(status)`` once each response is complete."""

    buf = b""

    def data_received(self, data: bytes) -> None:
        self.buf += data
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            return
        length = 0
        for line in self.buf[:end].split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        if len(self.buf) < end + 4 + length:
            return
        status = int(self.buf[9:12])
        self.buf = self.buf[end + 4 + length :]
        self.on_response(status)

    def on_response(self, status: int) -> None:
        raise NotImplementedError


class _Client(ResponseReader):
    """One connection of the load: a plain asyncio protocol, so that the load generator
    takes as little of the machine's two cores as it can (aiohttp took about twice the
    CPU per request)."""

    def __init__(self, load: _Load, n: int, vertex: str) -> None:
        self.load = load
        self.n = n
        self.path = b"/vertices/" + vertex.encode()
        self.i = 0
        self.event_id = ""
        self.sent_ms = 0
        self.sent = 0.0
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.transport: Any = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def send(self) -> None:
        if time.time() >= self.load.until:
            self.transport.close()
            return
        self.i += 1
        self.event_id = f"c{self.n}-{self.i}-{self.load.prefix}"
        self.sent = time.time()
        self.sent_ms = int(self.sent * 1000)
        body = b'{"n": %d}' % self.i
        self.transport.write(
            b"POST %s HTTP/1.1\r\nhost: 127.0.0.1\r\nx-numaflow-id: %s\r\n"
            b"x-numaflow-event-time: %d\r\nx-numaflow-keys: key-%d\r\n"
            b"content-length: %d\r\n\r\n%s"
            % (self.path, self.event_id.encode(), self.sent_ms, self.i % 16, len(body), body)
        )

    def on_response(self, status: int) -> None:
        if status == 200:
            self.load.acked[self.event_id] = self.sent_ms
            self.load.waits.append((time.time() - self.sent) * 1000)
        else:
            self.load.other[str(status)] += 1
        self.send()

    def connection_lost(self, exc: Exception | None) -> None:
        if exc is not None or time.time() < self.load.until:  # not acknowledged
            self.load.other[type(exc).__name__ if exc else "closed"] += 1
        if not self.done.done():
            self.done.set_result(None)


class _Load:
    def __init__(self, seconds: float) -> None:
        self.acked: dict[str, int] = {}
        self.waits: list[float] = []
        self.other: Counter[str] = Counter()
        self.prefix = uuid.uuid4().hex[:8]
        self.until = time.time() + seconds


async def _load(
    port: int, vertices: list[str], clients: int, seconds: float
) -> tuple[dict[str, int], list[float], dict[str, int], float]:
    loop = asyncio.get_running_loop()
    load = _Load(seconds)
    conns = []
    for n in range(clients):
        vertex = vertices[n % len(vertices)]
        _, client = await loop.create_connection(
            lambda n=n, vertex=vertex: _Client(load, n, vertex), "127.0.0.1", port
        )
        conns.append(client)
    started = time.time()
    load.until = started + seconds
    for client in conns:
        client.send()
    await asyncio.gather(*(c.done for c in conns))
    return load.acked, load.waits, dict(load.other), time.time() - started


def _release(base: str, vertices: list[str], last_ms: int) -> None:
    """The stream sorter releases a key's kept events when a datum with a later
    watermark arrives, and drops what it still keeps when the key times out (as
    Numaflow's example does). Once the backlog is through, post one later event
    per key to every source, twice, with event times within the 10 s timeout of
    the last event sent, so every acknowledged event leaves by the sorter's rule."""
    import urllib.request

    for round_ in range(2):
        now = last_ms + 3000 * (round_ + 1)
        for vertex in vertices:
            for key in range(16):
                request = urllib.request.Request(
                    f"{base}/vertices/{vertex}",
                    data=b"release",
                    method="POST",
                    headers={
                        "x-numaflow-id": f"release-{round_}-{vertex}-{key}",
                        "x-numaflow-event-time": str(now),
                        "x-numaflow-keys": f"key-{key}",
                    },
                )
                urllib.request.urlopen(request, timeout=30).read()
        time.sleep(3)


def _wait_healthy(base: str, proc: subprocess.Popen, timeout: float) -> None:
    import urllib.request

    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the pipeline run exited early (code {proc.returncode})")
        try:
            with urllib.request.urlopen(f"{base}/health", timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit("the HTTP source never became healthy")


def _read_sink(path: Path) -> dict[str, int]:
    seen: dict[str, int] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            event_id, _, at = line.partition(" ")
            if at:
                seen.setdefault(event_id, int(at))
    return seen


def run_pipeline(name: str, clients: int, seconds: float, drain_s: float) -> dict[str, Any]:
    vertices, udfs = PIPELINES[name]
    work = Path(tempfile.mkdtemp(prefix=f"flowspark-http-{name}-"))
    sink_file = work / "sink.txt"
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    udf_flags = [f"--udf=out={BENCH_DIR / 'udfs' / 'stopwatch_sink.py'}"]
    udf_flags += [f"--udf={v}={p}" for v, p in udfs.items()]
    cmd = [
        sys.executable,
        "-m",
        "flowspark.run",
        str(BENCH_DIR / "pipelines" / f"http-{name}.yaml"),
        "-r",
        str(work / "recovery"),
        "--http-port",
        str(port),
        *udf_flags,
    ]
    env = {
        **os.environ,
        "STOPWATCH_FILE": str(sink_file),
        "FLOWSPARK_PROGRESS_LOG": os.environ.get("FLOWSPARK_PROGRESS_LOG")
        or str(work / "progress.jsonl"),
    }
    log(f"{name}: {' '.join(cmd)}")
    stderr = work / "stderr.txt"  # a file: an unread pipe would block the run when full
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=stderr.open("w"))
    try:
        _wait_healthy(base, proc, 180)
        log(f"{name}: healthy; {clients} clients for {seconds:g} s")
        acked, waits, other, load_s = asyncio.run(_load(port, vertices, clients, seconds))
        log(f"{name}: {len(acked)} acknowledged; draining")
        if name == "accumulator":  # wait for the backlog, then release what is kept
            seen, stable_since = _read_sink(sink_file), time.time()
            give_up = time.time() + drain_s
            while time.time() - stable_since < 5 and time.time() < give_up:
                time.sleep(1)
                now_seen = _read_sink(sink_file)
                if len(now_seen) != len(seen):
                    seen, stable_since = now_seen, time.time()
            _release(base, vertices, max(acked.values(), default=0))
        deadline = time.time() + drain_s
        seen = _read_sink(sink_file)
        while time.time() < deadline and not set(acked) <= set(seen):
            time.sleep(0.5)
            seen = _read_sink(sink_file)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
    to_sink = [seen[i] - t for i, t in acked.items() if i in seen]
    start_ms = min(acked.values(), default=0)
    buckets: dict[int, list[int]] = {}
    for i, t in acked.items():
        if i in seen:
            buckets.setdefault(int((t - start_ms) // 5000), []).append(seen[i] - t)
    for b, values in sorted(buckets.items()):
        log(
            f"{name}: sent {b * 5}-{b * 5 + 5} s: {len(values)} events, request to sink "
            f"p50 {_percentile(values, 0.5)} ms, p99 {_percentile(values, 0.99)} ms"
        )
    return {
        "job": "http_ingest",
        "pipeline": name,
        "clients": clients,
        "seconds": round(load_s, 1),
        "acked": len(acked),
        "acked_per_s": round(len(acked) / load_s),
        "not_acked": other,
        "ack_p50_ms": _percentile(waits, 0.50),
        "ack_p99_ms": _percentile(waits, 0.99),
        "sink_p50_ms": _percentile(to_sink, 0.50),
        "sink_p99_ms": _percentile(to_sink, 0.99),
        "lost": len(set(acked) - set(seen)),
        "ok": not (set(acked) - set(seen)),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench/run.py http_ingest", description=__doc__)
    ap.add_argument("--pipeline", choices=[*PIPELINES, "all"], default="all")
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--duration", type=float, default=60.0)
    ap.add_argument("--drain", type=float, default=120.0, help="seconds to wait for the sink")
    args = ap.parse_args(argv)
    names = list(PIPELINES) if args.pipeline == "all" else [args.pipeline]
    ok = True
    for name in names:
        result = run_pipeline(name, args.clients, args.duration, args.drain)
        print(json.dumps(result), flush=True)
        ok = ok and result["ok"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
