"""Benchmark jobs on the real pynumaflow 0.14 gRPC server (runs with the spark python).

``run_mapstream(n)`` starts ``MapStreamAsyncServer(map_stream_handler)`` -- the
spec's handler, unchanged (``udfs/spec_handlers.py``) -- in a child process (this
file run as a script) listening on a UNIX socket in a temporary directory, and
drives it like Numaflow's data plane does: one bidirectional ``MapFn`` stream
through the generated client (``map_pb2_grpc.MapStub``), a handshake, then one
``MapRequest`` per datum, reading responses until every request id got its
``status.eot``.

``startup_s`` = importing grpc/pynumaflow (measured by ``harness.py``) + starting
the server child until its server-info file is written and ``IsReady`` answers.
``seconds`` = first data request sent -> last eot received (the requests are
built before the clock starts, as the other systems' inputs are). The server
child is terminated at the end, always.

``run_reorder(n)`` does the same with ``AccumulatorAsyncServer(StreamSorter)`` --
the spec page's sorter, with the page's loop bug fixed and the rest flushed after
the loop, the code ``flowspark_jobs`` runs (``udfs/spec_handlers.py``) -- driven through
``accumulator_pb2_grpc.AccumulatorStub``: one bidirectional ``AccumulateFn``
stream, each event an ``OPEN`` (a key's first) or ``APPEND`` request on the key's
global keyed window, carrying a watermark that trails the key's latest event time
by 3 s (as ``accumulate(watermark_delay=3 s)`` does in flowspark), then one
``CLOSE`` per key and the end of the stream. ``seconds`` = first request sent ->
the server ended the stream (every key's results and ``EOF`` received).

``run_batchmap(n)`` runs ``BatchMapAsyncServer(Flatmap())`` -- pynumaflow's batch-map
example (``udfs/spec_handlers.py``, the code ``flowspark_jobs`` runs) -- driven as
Numaflow drives a batch map: one bidirectional ``MapFn`` stream through
``map_pb2_grpc.MapStub``, a handshake, then batches of 500 ``MapRequest`` s (ids
``str(i)``), each followed by a ``status.eot`` request; the next batch is sent once
the server has answered every id of the previous one and sent its eot. Every id must
be answered exactly once, within its batch. ``seconds`` = first data request sent ->
the last batch's eot received.

Server by hand: ``PYTHON bench/pynumaflow_jobs.py SOCK_PATH SERVER_INFO_FILE [KIND]``
(``KIND``: ``mapstream``, the default, ``accumulator`` or ``batchmap``).
"""

from __future__ import annotations

import queue
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import grpc
import jobs
import pynumaflow.accumulator
import pynumaflow.batchmapper
import pynumaflow.mapstreamer
from google.protobuf.empty_pb2 import Empty
from google.protobuf.timestamp_pb2 import Timestamp
from pynumaflow.accumulator import AccumulatorAsyncServer
from pynumaflow.batchmapper import BatchMapAsyncServer
from pynumaflow.mapstreamer import MapStreamAsyncServer
from pynumaflow.proto.accumulator import accumulator_pb2, accumulator_pb2_grpc
from pynumaflow.proto.mapper import map_pb2, map_pb2_grpc
from udfs import spec_handlers

SERVER_START_TIMEOUT_S = 60.0
# An accumulator's keyed window is global: from the epoch to an open end (the
# largest timestamp pynumaflow can turn into a datetime, year 9999).
ACC_WINDOW_END_S = 253402300799
# pynumaflow.info.types.EOF: the server-info file is complete once it ends with this.
INFO_FILE_END = "U+005C__END__"


# The spec pages' handlers, on pynumaflow (the same code flowspark_jobs runs on flowspark).
map_stream_handler = spec_handlers.map_stream_handler(pynumaflow.mapstreamer)
StreamSorter = spec_handlers.stream_sorter(pynumaflow.accumulator)
Flatmap = spec_handlers.batch_flatmap(pynumaflow.batchmapper)


SERVER_KINDS = ("mapstream", "accumulator", "batchmap")


def serve(sock_path: str, server_info_file: str, kind: str = "mapstream") -> None:
    """Run the map-stream, accumulator or batch-map server until terminated (the child
    process)."""
    if kind == "accumulator":
        server: Any = AccumulatorAsyncServer(
            StreamSorter, sock_path=sock_path, server_info_file=server_info_file
        )
    elif kind == "batchmap":
        server = BatchMapAsyncServer(
            Flatmap(), sock_path=sock_path, server_info_file=server_info_file
        )
    else:
        server = MapStreamAsyncServer(
            map_stream_handler, sock_path=sock_path, server_info_file=server_info_file
        )
    server.start()


def _start_server(tmp: Path, kind: str = "mapstream") -> subprocess.Popen[bytes]:
    """Start the server child on ``tmp/KIND.sock`` (info file in ``tmp`` too)."""
    # Same process group as this run: run.py's timeout kill reaches it too.
    return subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), *map(str, _paths(tmp, kind)), kind],
        stdout=sys.stderr,
    )


def _paths(tmp: Path, kind: str = "mapstream") -> tuple[Path, Path]:
    return tmp / f"{kind}.sock", tmp / f"{kind}-server-info"


def _wait_ready(proc: subprocess.Popen[bytes], tmp: Path, kind: str = "mapstream") -> str:
    """Wait for the socket, the complete server-info file and ``IsReady``; return the address."""
    sock, info = _paths(tmp, kind)
    deadline = time.monotonic() + SERVER_START_TIMEOUT_S
    while not (sock.exists() and info.exists() and info.read_text().endswith(INFO_FILE_END)):
        if proc.poll() is not None:
            raise RuntimeError(f"pynumaflow server exited with {proc.returncode} before ready")
        if time.monotonic() > deadline:
            raise RuntimeError(f"pynumaflow server not ready after {SERVER_START_TIMEOUT_S:.0f} s")
        time.sleep(0.01)
    address = f"unix://{sock}"
    accumulator = kind == "accumulator"
    stub_class = accumulator_pb2_grpc.AccumulatorStub if accumulator else map_pb2_grpc.MapStub
    with grpc.insecure_channel(address) as channel:
        ready = stub_class(channel).IsReady(Empty(), timeout=SERVER_START_TIMEOUT_S)
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


def _on_server(kind: str, drive: Callable[[str], dict[str, Any]]) -> tuple[float, dict[str, Any]]:
    """Start a ``kind`` server in a temporary directory, ``drive(address)`` it, stop it
    (always); the seconds until it was ready, and what ``drive`` returned."""
    with tempfile.TemporaryDirectory(prefix="bench-pynumaflow-") as tmp:
        t0 = time.perf_counter()
        proc = _start_server(Path(tmp), kind)
        try:
            address = _wait_ready(proc, Path(tmp), kind)
            startup = time.perf_counter() - t0
            return startup, drive(address)
        finally:
            _stop_server(proc)


def _result(
    seconds: float, startup: float, ok: bool, outputs: int, note: str, **extra: Any
) -> dict[str, Any]:
    """A job's result (see ``harness.py``): its outputs, ``extra`` and the ``note``
    saying what ran."""
    return {
        "seconds": seconds,
        "startup_s": startup,
        "ok": ok,
        "outputs": outputs,
        **extra,
        "note": note,
    }


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
    startup, res = _on_server(kind="mapstream", drive=lambda address: _drive(address, requests))
    ok = res["per_id_ok"] and jobs.mapstream_check(n, res["count"], res["total"])
    note = "pynumaflow 0.14 MapStreamAsyncServer over a UNIX socket, one bidi MapFn stream"
    return _result(res["seconds"], startup, ok, res["count"], note, eots=res["eots"])


def _drive_batches(
    address: str, requests: list[map_pb2.MapRequest], batch_size: int
) -> dict[str, Any]:
    """One bidi ``MapFn`` stream as Numaflow drives a batch map: handshake, then per
    batch its requests and a ``status.eot`` request; the next batch goes once every id
    of this one was answered (once) and its eot came back."""
    batches = [requests[i : i + batch_size] for i in range(0, len(requests), batch_size)]
    eot = map_pb2.MapRequest(status=map_pb2.TransmissionStatus(eot=True))
    go: queue.Queue[bool] = queue.Queue()  # True: send the next batch; False: stop
    t_first: list[float] = []

    def request_stream() -> Iterator[map_pb2.MapRequest]:
        # Consumed by gRPC's own thread; each batch waits for the previous one's answers.
        yield map_pb2.MapRequest(handshake=map_pb2.Handshake(sot=True))
        for batch in batches:
            if not go.get():
                return
            if not t_first:
                t_first.append(time.perf_counter())
            yield from batch
            yield eot

    count = total = eots = 0
    with grpc.insecure_channel(address) as channel:
        responses = map_pb2_grpc.MapStub(channel).MapFn(request_stream())
        try:
            first = next(responses)
            if not (first.HasField("handshake") and first.handshake.sot):
                raise RuntimeError(f"expected a handshake response first, got {first!r:.200}")
            for number, batch in enumerate(batches):
                go.put(True)
                waiting = {request.id for request in batch}
                for resp in responses:
                    if resp.HasField("status") and resp.status.eot:
                        break
                    if resp.id not in waiting:
                        raise RuntimeError(f"batch {number}: unexpected or repeated id {resp.id!r}")
                    waiting.discard(resp.id)
                    if len(resp.results) != jobs.MAPSTREAM_PARTS:
                        raise RuntimeError(f"id {resp.id}: {len(resp.results)} results")
                    count += len(resp.results)
                    total += sum(int(result.value) for result in resp.results)
                else:
                    raise RuntimeError(f"the stream ended in batch {number} before its eot")
                if waiting:
                    raise RuntimeError(f"batch {number}: {len(waiting)} ids got no response")
                eots += 1
            t_last = time.perf_counter()
        finally:
            go.put(False)  # the request stream ends (half-close) in any case
        # The server ends the stream once it read the half-close: nothing else may come.
        for resp in responses:
            raise RuntimeError(f"unexpected response after the last eot: {resp!r:.200}")
    if not t_first:
        raise RuntimeError("no batch was sent")
    return {"seconds": t_last - t_first[0], "count": count, "total": total, "eots": eots}


def run_batchmap(n: int) -> dict[str, Any]:
    """pynumaflow's batch-map example ``Flatmap`` on its ``BatchMapAsyncServer``."""
    requests = _requests(n)
    jobs.log(f"pynumaflow batchmap: built {len(requests)} requests")
    startup, res = _on_server(
        kind="batchmap",
        drive=lambda address: _drive_batches(address, requests, jobs.BATCHMAP_BATCH_SIZE),
    )
    batches = -(-n // jobs.BATCHMAP_BATCH_SIZE)
    ok = res["eots"] == batches and jobs.mapstream_check(n, res["count"], res["total"])
    note = (
        "pynumaflow 0.14 BatchMapAsyncServer over a UNIX socket, one bidi MapFn "
        "stream, batches of 500 requests + eot in lockstep"
    )
    return _result(
        res["seconds"],
        startup,
        ok,
        res["count"],
        note,
        eots=res["eots"],
        batch_size=jobs.BATCHMAP_BATCH_SIZE,
    )


_WindowOp = accumulator_pb2.AccumulatorRequest.WindowOperation


def _timestamp(ts: datetime) -> Timestamp:
    out = Timestamp()
    out.FromDatetime(ts)
    return out


def _reorder_requests(n: int) -> tuple[list[accumulator_pb2.AccumulatorRequest], int]:
    """The ``reorder`` events as ``AccumulateFn`` requests, and the number of keys.

    Event ``i``: ``OPEN`` (the key's first event) or ``APPEND`` on the key's global
    window, payload keys ``[key]``, empty value, its event time, id ``str(i)`` and a
    watermark of the key's latest event time so far - 3 s; then a ``CLOSE`` per key.
    """
    delay = timedelta(seconds=jobs.REORDER_DELAY_S)
    start, end = Timestamp(seconds=0), Timestamp(seconds=ACC_WINDOW_END_S)
    windows: dict[str, accumulator_pb2.KeyedWindow] = {}
    latest: dict[str, datetime] = {}
    requests: list[accumulator_pb2.AccumulatorRequest] = []
    for key, ts, i in jobs.reorder_input(n):
        window = windows.get(key)
        event = _WindowOp.APPEND
        if window is None:
            window = accumulator_pb2.KeyedWindow(start=start, end=end, slot="slot-0", keys=[key])
            windows[key] = window
            event = _WindowOp.OPEN
        if key not in latest or ts > latest[key]:
            latest[key] = ts
        payload = accumulator_pb2.Payload(
            keys=[key],
            value=b"",
            event_time=_timestamp(ts),
            watermark=_timestamp(latest[key] - delay),
            id=str(i),
        )
        operation = _WindowOp(event=event, keyedWindow=window)
        requests.append(accumulator_pb2.AccumulatorRequest(payload=payload, operation=operation))
    for window in windows.values():
        operation = _WindowOp(event=_WindowOp.CLOSE, keyedWindow=window)
        requests.append(accumulator_pb2.AccumulatorRequest(operation=operation))
    return requests, len(windows)


def _drive_accumulator(
    address: str, requests: list[accumulator_pb2.AccumulatorRequest]
) -> dict[str, Any]:
    """One bidi ``AccumulateFn`` stream: every request, then every response until the
    server ends the stream (after each key's results and ``EOF``)."""
    t_first: list[float] = []

    def request_stream() -> Iterator[accumulator_pb2.AccumulatorRequest]:
        # Consumed by gRPC's own thread.
        t_first.append(time.perf_counter())
        yield from requests

    raw: list[tuple[str, int, int, str]] = []
    eof_keys: list[str] = []
    with grpc.insecure_channel(address) as channel:
        for resp in accumulator_pb2_grpc.AccumulatorStub(channel).AccumulateFn(request_stream()):
            if resp.EOF:
                eof_keys.extend(resp.window.keys)
                continue
            p = resp.payload
            raw.append((p.keys[0], p.event_time.seconds, p.event_time.nanos, p.id))
        t_last = time.perf_counter()
    if not t_first:
        raise RuntimeError("the server ended the stream before reading any request")
    epoch = datetime.fromtimestamp(0, UTC)
    triples = [
        (key, epoch + timedelta(seconds=secs, microseconds=nanos // 1000), int(id_))
        for key, secs, nanos, id_ in raw
    ]
    return {"seconds": t_last - t_first[0], "triples": triples, "eof_keys": eof_keys}


def run_reorder(n: int) -> dict[str, Any]:
    """The spec's ``StreamSorter`` on pynumaflow's ``AccumulatorAsyncServer``."""
    requests, n_keys = _reorder_requests(n)
    jobs.log(f"pynumaflow reorder: built {len(requests)} requests ({n_keys} keys)")
    startup, res = _on_server(
        kind="accumulator", drive=lambda address: _drive_accumulator(address, requests)
    )
    triples = res["triples"]
    # One EOF per key, for that key's window (each CLOSE is answered once).
    eofs_ok = sorted(res["eof_keys"]) == sorted(f"k{k}" for k in range(n_keys))
    ok = eofs_ok and jobs.reorder_check(n, triples)
    note = (
        "pynumaflow 0.14 AccumulatorAsyncServer(StreamSorter) over a UNIX socket, "
        "one bidi AccumulateFn stream"
    )
    return _result(
        res["seconds"],
        startup,
        ok,
        len(triples),
        note,
        inversions=jobs.reorder_inversions(triples),
        eofs=len(res["eof_keys"]),
    )


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4) or sys.argv[3:] and sys.argv[3] not in SERVER_KINDS:
        print(
            f"usage: {sys.argv[0]} SOCK_PATH SERVER_INFO_FILE [{'|'.join(SERVER_KINDS)}]",
            file=sys.stderr,
        )
        sys.exit(2)
    serve(*sys.argv[1:])
