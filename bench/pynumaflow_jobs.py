"""Benchmark jobs on the real pynumaflow 0.14 gRPC server (runs with the spark python).

``run_mapstream(n)`` starts ``MapStreamAsyncServer(map_stream_handler)`` -- the
spec's handler, unchanged -- in a child process (this file run as a script)
listening on a UNIX socket in a temporary directory, and drives it like
Numaflow's data plane does: one bidirectional ``MapFn`` stream through the
generated client (``map_pb2_grpc.MapStub``), a handshake, then one
``MapRequest`` per datum, reading responses until every request id got its
``status.eot``.

``startup_s`` = importing grpc/pynumaflow (measured by ``harness.py``) + starting
the server child until its server-info file is written and ``IsReady`` answers.
``seconds`` = first data request sent -> last eot received (the requests are
built before the clock starts, as the other systems' inputs are). The server
child is terminated at the end, always.

Server by hand: ``PYTHON bench/pynumaflow_jobs.py SOCK_PATH SERVER_INFO_FILE``.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterable, Iterator
from pathlib import Path
from typing import Any

import grpc
import jobs
from google.protobuf.empty_pb2 import Empty
from google.protobuf.timestamp_pb2 import Timestamp
from pynumaflow.mapstreamer import Datum, MapStreamAsyncServer, Message
from pynumaflow.proto.mapper import map_pb2, map_pb2_grpc

SERVER_START_TIMEOUT_S = 60.0
# pynumaflow.info.types.EOF: the server-info file is complete once it ends with this.
INFO_FILE_END = "U+005C__END__"


async def map_stream_handler(_: list[str], datum: Datum) -> AsyncIterable[Message]:
    """The spec's handler: split the value on commas, one message per part."""
    val = datum.value
    _ = datum.event_time
    _ = datum.watermark
    strs = val.decode("utf-8").split(",")

    if len(strs) == 0:
        yield Message.to_drop()
        return
    for s in strs:
        yield Message(str.encode(s))


def serve(sock_path: str, server_info_file: str) -> None:
    """Run the map-stream server until terminated (the child process)."""
    server = MapStreamAsyncServer(
        map_stream_handler, sock_path=sock_path, server_info_file=server_info_file
    )
    server.start()


def _start_server(tmp: Path) -> subprocess.Popen[bytes]:
    """Start the server child on ``tmp/mapstream.sock`` (info file in ``tmp`` too)."""
    # Same process group as this run: run.py's timeout kill reaches it too.
    return subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), *map(str, _paths(tmp))],
        stdout=sys.stderr,
    )


def _paths(tmp: Path) -> tuple[Path, Path]:
    return tmp / "mapstream.sock", tmp / "mapstream-server-info"


def _wait_ready(proc: subprocess.Popen[bytes], tmp: Path) -> str:
    """Wait for the socket, the complete server-info file and ``IsReady``; return the address."""
    sock, info = _paths(tmp)
    deadline = time.monotonic() + SERVER_START_TIMEOUT_S
    while not (sock.exists() and info.exists() and info.read_text().endswith(INFO_FILE_END)):
        if proc.poll() is not None:
            raise RuntimeError(f"pynumaflow server exited with {proc.returncode} before ready")
        if time.monotonic() > deadline:
            raise RuntimeError(f"pynumaflow server not ready after {SERVER_START_TIMEOUT_S:.0f} s")
        time.sleep(0.01)
    address = f"unix://{sock}"
    with grpc.insecure_channel(address) as channel:
        ready = map_pb2_grpc.MapStub(channel).IsReady(Empty(), timeout=SERVER_START_TIMEOUT_S)
    if not ready.ready:
        raise RuntimeError("pynumaflow server answered IsReady with ready=false")
    return address


def _stop_server(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the server (graceful gRPC stop), SIGKILL it if it lingers."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _requests(n: int) -> list[map_pb2.MapRequest]:
    """One ``MapRequest`` per datum: no keys, value ``b"i,i+1,i+2"``, id ``str(i)``."""
    ts = Timestamp(seconds=jobs.ALIGN_TO_EPOCH_S)
    return [
        map_pb2.MapRequest(
            request=map_pb2.MapRequest.Request(keys=[], value=v, event_time=ts, watermark=ts),
            id=str(i),
        )
        for i, v in enumerate(jobs.mapstream_input(n))
    ]


def _drive(address: str, requests: list[map_pb2.MapRequest]) -> dict[str, Any]:
    """One bidi ``MapFn`` stream: handshake, all requests, every response until all eots."""
    n = len(requests)
    handshake_acked = threading.Event()
    t_first: list[float] = []

    def request_stream() -> Iterator[map_pb2.MapRequest]:
        # Consumed by gRPC's own thread; the data starts once the handshake is acked.
        yield map_pb2.MapRequest(handshake=map_pb2.Handshake(sot=True))
        handshake_acked.wait()
        t_first.append(time.perf_counter())
        yield from requests

    results_per_id = [0] * n
    eot_per_id = bytearray(n)
    count = total = eots = 0
    t_last = None
    with grpc.insecure_channel(address) as channel:
        responses = map_pb2_grpc.MapStub(channel).MapFn(request_stream())
        first = next(responses)
        if not (first.HasField("handshake") and first.handshake.sot):
            raise RuntimeError(f"expected a handshake response first, got {first!r:.200}")
        handshake_acked.set()
        for resp in responses:
            idx = int(resp.id)
            if resp.HasField("status") and resp.status.eot:
                eot_per_id[idx] += 1
                eots += 1
                if eots == n:
                    t_last = time.perf_counter()
                    break
                continue
            for result in resp.results:
                results_per_id[idx] += 1
                count += 1
                total += int(result.value)
        # Half-closed by our generator ending: the server ends the stream after
        # its last task; drain whatever is left (nothing is expected).
        for resp in responses:
            raise RuntimeError(f"unexpected response after the last eot: {resp!r:.200}")
    if t_last is None or not t_first:
        raise RuntimeError(f"stream ended after {eots} of {n} eots")
    per_id_ok = all(e == 1 for e in eot_per_id) and all(
        r == jobs.MAPSTREAM_PARTS for r in results_per_id
    )
    return {
        "seconds": t_last - t_first[0],
        "count": count,
        "total": total,
        "per_id_ok": per_id_ok,
        "eots": eots,
    }


def run_mapstream(n: int) -> dict[str, Any]:
    """The spec's ``map_stream_handler`` on pynumaflow's ``MapStreamAsyncServer``."""
    requests = _requests(n)
    jobs.log(f"pynumaflow mapstream: built {len(requests)} requests")
    with tempfile.TemporaryDirectory(prefix="bench-pynumaflow-") as tmp:
        t0 = time.perf_counter()
        proc = _start_server(Path(tmp))
        try:
            address = _wait_ready(proc, Path(tmp))
            startup = time.perf_counter() - t0
            res = _drive(address, requests)
        finally:
            _stop_server(proc)
    ok = res["per_id_ok"] and jobs.mapstream_check(n, res["count"], res["total"])
    return {
        "seconds": res["seconds"],
        "startup_s": startup,
        "ok": ok,
        "outputs": res["count"],
        "eots": res["eots"],
        "note": "pynumaflow 0.14 MapStreamAsyncServer over a UNIX socket, one bidi MapFn stream",
    }


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print(f"usage: {sys.argv[0]} SOCK_PATH SERVER_INFO_FILE", file=sys.stderr)
        sys.exit(2)
    serve(sys.argv[1], sys.argv[2])
