"""The HTTP source: its server (real HTTP over loopback, real files) and the input
that reads its journal. No Spark.

Every reply status of Numaflow's ``numaflow-http`` (with its exact bodies), the
header rules, TLS, the durable journal (200 only after fsync, replay, resume from
a snapshot, torn tails, dedup across restarts), concurrency, and a server killed
with SIGKILL under load: every id that got 200 is in the journal exactly once.
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import os
import pickle
import re
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from flowspark.api.udf.types import Datum
from flowspark.connectors.numaflow.http import (
    HttpInput,
    HttpRoute,
    HttpServer,
    read_journal,
    resolve_address,
)
from flowspark.connectors.numaflow.http import input as http_input
from flowspark.connectors.numaflow.http import journal as J
from flowspark.shared.times import aware_to_ms
from tests.waiting import wait_for

SRC = Path(__file__).resolve().parents[2] / "src"
EVENT_TIME = "Event time specified in header 'x-numaflow-event-time'"


# ------------------------------------------------------------------------------ helpers


def connect(
    server: HttpServer, context: ssl.SSLContext | None = None
) -> http.client.HTTPConnection:
    if server.scheme == "https":
        return http.client.HTTPSConnection("127.0.0.1", server.port, timeout=30, context=context)
    return http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)


def request(
    server: HttpServer,
    method: str = "POST",
    path: str = "/vertices/in",
    body: bytes = b"payload",
    headers: dict[str, Any] | None = None,
    conn: http.client.HTTPConnection | None = None,
) -> tuple[int, bytes, http.client.HTTPResponse]:
    own = conn is None
    conn = conn or connect(server)
    try:
        conn.request(method, path, body=body if method == "POST" else None, headers=headers or {})
        response = conn.getresponse()
        return response.status, response.read(), response
    finally:
        if own:
            conn.close()


def post(server: HttpServer, body: bytes = b"payload", vertex: str = "in", **headers: Any):
    """POST with headers given as keyword arguments (``x_numaflow_id`` ->
    ``x-numaflow-id``); returns (status, parsed JSON or text)."""
    status, data, _ = request(
        server,
        path=f"/vertices/{vertex}",
        body=body,
        headers={k.replace("_", "-"): v for k, v in headers.items()},
    )
    try:
        return status, json.loads(data)
    except ValueError:
        return status, data.decode()


def raw(server: HttpServer, data: bytes, wait: float = 5.0) -> bytes:
    """Send raw bytes; return everything received until the server closes (or
    ``wait`` seconds pass)."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=wait) as sock:
        sock.sendall(data)
        chunks = []
        try:
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
        except TimeoutError:
            pass
        return b"".join(chunks)


def journal_ids(directory: Path, vertex: str = "in") -> list[str]:
    return [r.id for r in read_journal(directory / f"{vertex}.journal")]


def read_all(directory: Path, vertex: str = "in", state: Any = None) -> tuple[list[Datum], Any]:
    part = HttpInput(directory, vertex).build_part(vertex, state)
    items: list[Datum] = []
    while True:
        batch = part.next_batch()
        if not batch:
            break
        items.extend(batch)
    state = part.snapshot()
    part.close()
    return items, state


@pytest.fixture
def make_server(tmp_path):
    servers: list[HttpServer] = []

    def make(routes=None, directory: Path | None = None, start: bool = True, **kwargs):
        server = HttpServer(
            routes or [HttpRoute("in")], directory or tmp_path / "journal", port=0, **kwargs
        )
        servers.append(server)
        return server.start() if start else server

    yield make
    for server in servers:
        helper = server._syncer.pid if server._syncer is not None else None
        if helper is not None and _alive(helper):  # a test may have stopped it
            os.kill(helper, signal.SIGCONT)
        server.stop()


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


# ------------------------------------------------------------------------- status paths


def test_post_200_is_journaled_before_the_reply(make_server, tmp_path):
    server = make_server()
    status, data, response = request(server, body=b"hello", headers={"x-numaflow-id": "id-1"})
    assert status == 200
    assert data == b'{"message":"Data received successfully","id":"id-1"}'
    assert response.getheader("content-type") == "application/json"
    # durable before the reply: the synced length already covers the record
    records = read_journal(tmp_path / "journal" / "in.journal")
    assert [(r.id, r.payload) for r in records] == [("id-1", b"hello")]
    synced = struct.unpack_from("<Q", (tmp_path / "journal" / "in.journal.synced").read_bytes())[0]
    assert synced == records[-1].end == (tmp_path / "journal" / "in.journal").stat().st_size


def test_default_id_is_a_time_ordered_uuid7(make_server):
    server = make_server()
    ids = [post(server)[1]["id"] for _ in range(20)]
    uuid7 = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")
    assert all(uuid7.fullmatch(i) for i in ids)
    assert ids == sorted(ids) and len(set(ids)) == 20
    ms = int(ids[0].replace("-", "")[:12], 16)
    assert abs(ms - time.time() * 1000) < 60_000


def test_health_200_when_ready(make_server):
    server = make_server()
    status, data, _ = request(server, "GET", "/health")
    assert (status, data) == (200, b"")
    assert request(server, "HEAD", "/health")[0] == 200
    assert request(server, "POST", "/health")[0] == 405


def test_health_503_and_post_503_before_ready(make_server):
    server = make_server(start=False)
    gate = threading.Event()
    server._ready_gate = gate
    server.start(wait_ready=False)
    assert not server.ready
    assert request(server, "GET", "/health")[0] == 503
    assert post(server) == (503, {"error": "Server is not ready"})
    gate.set()
    assert server.wait_ready(10)
    assert request(server, "GET", "/health")[0] == 200
    assert post(server)[0] == 200


@pytest.mark.parametrize(
    "value, error, details",
    [
        ("1é".encode(), "is not an ASCII string", None),
        ("abc", "is not a valid integer", "Specified value is abc"),
        ("1.5", "is not a valid integer", "Specified value is 1.5"),
        ("", "is not a valid integer", "Specified value is "),
        ("1_000", "is not a valid integer", "Specified value is 1_000"),
        ("9223372036854775808", "is not a valid integer", "Specified value is 9223372036854775808"),
        ("1" * 5000, "is not a valid integer", "Specified value is " + "1" * 5000),
        ("9223372036854775807", "is out of range", "Specified value is 9223372036854775807"),
        ("-62135596800001", "is out of range", "Specified value is -62135596800001"),
        ("253402300800000", "is out of range", "Specified value is 253402300800000"),
    ],
)
def test_event_time_400(make_server, value, error, details):
    server = make_server()
    status, body = post(server, x_numaflow_event_time=value)
    expected = {"error": f"{EVENT_TIME} {error}"}
    if details is not None:
        expected["details"] = details
    assert (status, body) == (400, expected)


def test_event_time_400_body_is_serde_json(make_server):
    server = make_server()
    status, data, _ = request(server, headers={"x-numaflow-event-time": "x"})
    assert data == (
        b'{"details":"Specified value is x","error":"' + EVENT_TIME.encode() + b" is not a "
        b'valid integer"}'
    )


def test_event_time_accepted_forms(make_server, tmp_path):
    server = make_server()
    for i, value in enumerate(["1663006726000", "+5", "-62135596800000", "0007", "-0"]):
        assert post(server, x_numaflow_event_time=value, x_numaflow_id=f"t{i}")[0] == 200
    items, _ = read_all(tmp_path / "journal")
    assert [aware_to_ms(d.event_time) for d in items] == [1663006726000, 5, -62135596800000, 7, 0]
    assert items[2].event_time == datetime(1, 1, 1, tzinfo=UTC)


def test_non_ascii_id_400(make_server, tmp_path):
    server = make_server()
    status, body = post(server, x_numaflow_id="né".encode())
    assert (status, body) == (
        400,
        {"error": "Value of 'x-numaflow-id' header contains non-printable ASCII characters"},
    )
    assert journal_ids(tmp_path / "journal") == []


def test_auth_401_and_bearer(make_server):
    server = make_server([HttpRoute("in", "s3cret"), HttpRoute("open")])
    assert post(server) == (401, "Unauthorized")
    assert post(server, authorization="Bearer wrong") == (401, "Unauthorized")
    assert post(server, authorization="s3cret") == (401, "Unauthorized")
    status, data, response = request(server, headers={})
    assert response.getheader("content-type") == "text/plain; charset=utf-8"
    assert post(server, authorization="Bearer s3cret")[0] == 200
    assert post(server, vertex="open")[0] == 200  # a route without a token is open
    # /health is open unless every route has a token
    assert request(server, "GET", "/health")[0] == 200


def test_health_needs_a_token_when_every_route_has_one(make_server):
    server = make_server([HttpRoute("a", "ta"), HttpRoute("b", "tb")])
    assert request(server, "GET", "/health")[:2] == (401, b"Unauthorized")
    auth = {"authorization": "Bearer tb"}
    assert request(server, "GET", "/health", headers=auth)[0] == 200
    assert request(server, "GET", "/health", headers={"authorization": "Bearer ta"})[0] == 200
    assert request(server, "GET", "/health", headers={"authorization": "Bearer x"})[0] == 401


def test_authorization_header_is_not_forwarded(make_server, tmp_path):
    server = make_server([HttpRoute("in", "tok")])
    assert post(server, authorization="Bearer tok", x_numaflow_id="a")[0] == 200
    (datum,), _ = read_all(tmp_path / "journal")
    assert "authorization" not in datum.headers


def test_unknown_vertex_404_and_wrong_method_405(make_server):
    server = make_server([HttpRoute("in", "tok")])
    assert post(server, vertex="nope")[0] == 404  # no auth asked of an unknown route
    assert request(server, path="/vertices/in/")[0] == 404
    assert request(server, path="/elsewhere")[0] == 404
    assert request(server, "GET", "/vertices/in")[0] == 405


def test_409_for_an_id_already_journaled(make_server, tmp_path):
    server = make_server()
    assert post(server, x_numaflow_id="dup")[0] == 200
    status, data, _ = request(server, headers={"x-numaflow-id": "dup"})
    assert (status, data) == (409, b'{"error":"Duplicate request ID","id":"dup"}')
    assert post(server, vertex="in", x_numaflow_id="other")[0] == 200
    assert journal_ids(tmp_path / "journal") == ["dup", "other"]


def test_dedup_is_per_vertex(make_server, tmp_path):
    server = make_server([HttpRoute("a"), HttpRoute("b")])
    assert post(server, vertex="a", x_numaflow_id="x")[0] == 200
    assert post(server, vertex="b", x_numaflow_id="x")[0] == 200
    assert journal_ids(tmp_path / "journal", "a") == journal_ids(tmp_path / "journal", "b")


def test_429_when_max_in_flight_is_zero(make_server, tmp_path):
    server = make_server(max_in_flight=0)
    status, data, _ = request(server)
    assert status == 429
    assert json.loads(data) == {
        "error": "Pipeline has stalled, buffer is full",
        "details": "Channel Full: 429",
    }
    assert journal_ids(tmp_path / "journal") == []


def test_stalled_fsync_gives_409_in_flight_then_429_then_200(make_server, tmp_path):
    server = make_server(max_in_flight=2)
    helper = server._syncer.pid
    assert helper is not None
    os.kill(helper, signal.SIGSTOP)  # the fsync helper stalls: nothing becomes durable
    try:
        with ThreadPoolExecutor(2) as pool:
            first = pool.submit(post, server, x_numaflow_id="A")
            wait_for(lambda: server._pending == 1)
            assert post(server, x_numaflow_id="A") == (
                409,
                {"error": "Duplicate request ID", "id": "A"},
            )
            second = pool.submit(post, server, x_numaflow_id="B")
            wait_for(lambda: server._pending == 2)
            assert post(server, x_numaflow_id="C")[0] == 429
            time.sleep(0.2)
            assert not first.done() and not second.done()  # no 200 before the fsync
            os.kill(helper, signal.SIGCONT)
            assert first.result(10)[0] == 200
            assert second.result(10)[0] == 200
    finally:
        os.kill(helper, signal.SIGCONT)
    assert post(server, x_numaflow_id="C")[0] == 200
    assert sorted(journal_ids(tmp_path / "journal")) == ["A", "B", "C"]


def test_stop_answers_500_to_requests_whose_fsync_does_not_end(make_server):
    server = make_server()
    helper = server._syncer.pid
    os.kill(helper, signal.SIGSTOP)
    try:
        with ThreadPoolExecutor(2) as pool:
            pending = pool.submit(post, server, x_numaflow_id="late")
            wait_for(lambda: server._pending == 1)
            stopping = pool.submit(server.stop, 0.3)
            assert pending.result(10) == (
                500,
                {"error": "Request processing failed", "id": "late"},
            )
            os.kill(helper, signal.SIGCONT)
            stopping.result(30)
    finally:
        if _alive(helper):
            os.kill(helper, signal.SIGCONT)
    wait_for(lambda: not _alive(helper))


def test_stop_completes_pending_requests_and_closes(make_server, tmp_path):
    server = make_server()
    conn = connect(server)
    assert request(server, conn=conn)[0] == 200
    server.stop()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", server.port), timeout=1).close()
    with pytest.raises((http.client.HTTPException, OSError)):
        request(server, conn=conn)
    server.stop()  # twice is fine
    assert len(journal_ids(tmp_path / "journal")) == 1


def test_a_failed_write_answers_500_and_forgets_the_id(make_server, tmp_path, monkeypatch):
    server = make_server()
    journal = server._journals["in"]
    real_write = J.Journal.write

    def failing(self, data):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(J.Journal, "write", failing)
    assert post(server, x_numaflow_id="w") == (
        500,
        {"error": "Request processing failed", "id": "w"},
    )
    monkeypatch.setattr(J.Journal, "write", real_write)
    assert post(server, x_numaflow_id="w")[0] == 200  # a retry is not a duplicate
    assert journal_ids(tmp_path / "journal") == ["w"]
    assert journal.size == (tmp_path / "journal" / "in.journal").stat().st_size


def test_a_failed_fsync_answers_500_and_cuts_the_journal_back(make_server, tmp_path):
    server = make_server()
    assert post(server, x_numaflow_id="ok")[0] == 200
    size = (tmp_path / "journal" / "in.journal").stat().st_size
    real = server._synced
    server._synced = lambda errors: real({i: 5 for i in errors})  # EIO
    assert post(server, x_numaflow_id="bad")[0] == 500
    server._synced = real
    assert (tmp_path / "journal" / "in.journal").stat().st_size == size
    assert post(server, x_numaflow_id="bad")[0] == 200
    assert journal_ids(tmp_path / "journal") == ["ok", "bad"]


def test_body_over_2_mib_is_413(make_server, tmp_path):
    server = make_server()
    assert post(server, b"x" * (2 * 1024 * 1024))[0] == 200
    reply = raw(server, b"POST /vertices/in HTTP/1.1\r\ncontent-length: 2097153\r\n\r\nxx")
    assert reply.startswith(b"HTTP/1.1 413 ")
    assert len(journal_ids(tmp_path / "journal")) == 1


# ------------------------------------------------------------------------ keys, headers


def test_keys_and_headers(make_server, tmp_path):
    server = make_server()
    status, _ = post(
        server,
        b"{}",
        x_numaflow_id="k1",
        x_numaflow_keys=" a, b,,c , ,",
        x_numaflow_event_time="1663006726000",
        X_Custom="Mixed Case Value",
        x_bin="é".encode("latin-1"),
        content_type="application/json",
    )
    assert status == 200
    (datum,), _ = read_all(tmp_path / "journal")
    assert datum.keys == ["a", "b", "c"]
    assert datum.value == b"{}"
    assert datum.id == "k1"
    assert datum.event_time == datum.watermark == datetime(2022, 9, 12, 18, 18, 46, tzinfo=UTC)
    headers = datum.headers
    assert headers["X-Numaflow-Id"] == "k1"
    assert headers["x-numaflow-id"] == "k1"
    assert headers["x-numaflow-keys"] == "a, b,,c , ,"
    assert headers["x-custom"] == "Mixed Case Value"
    assert headers["content-type"] == "application/json"
    assert "x-numaflow-event-time" not in headers
    assert "x-bin" not in headers  # not ASCII: not forwarded
    assert all(name == name.lower() for name in headers if name != "X-Numaflow-Id")


def test_no_keys_header_means_no_keys_and_arrival_event_time(make_server, tmp_path):
    server = make_server()
    before = datetime.now(UTC) - timedelta(milliseconds=1)
    assert post(server, x_numaflow_keys=" , ")[0] == 200
    assert post(server)[0] == 200
    after = datetime.now(UTC) + timedelta(milliseconds=1)
    items, _ = read_all(tmp_path / "journal")
    assert [d.keys for d in items] == [[], []]
    assert all(before <= d.event_time <= after for d in items)
    assert items[1].headers["X-Numaflow-Id"] == items[1].id


def test_duplicate_headers_first_id_last_forwarded(make_server, tmp_path):
    server = make_server()
    reply = raw(
        server,
        b"POST /vertices/in HTTP/1.1\r\nx-numaflow-id: first\r\nX-Numaflow-Id: second\r\n"
        b"x-numaflow-event-time: 5\r\nx-numaflow-event-time: 6\r\nx-a: 1\r\nx-a: 2\r\n"
        b"content-length: 1\r\nconnection: close\r\n\r\nz",
    )
    assert reply.startswith(b"HTTP/1.1 200 OK\r\n")
    (datum,), _ = read_all(tmp_path / "journal")
    assert datum.id == "first" and aware_to_ms(datum.event_time) == 5
    assert datum.headers["x-numaflow-id"] == "second" and datum.headers["x-a"] == "2"


# ------------------------------------------------------------------------ HTTP details


def test_pipelined_requests_are_answered_in_order(make_server, tmp_path):
    server = make_server()
    one = b"POST /vertices/in HTTP/1.1\r\nx-numaflow-id: p%d\r\ncontent-length: 1\r\n\r\nx"
    data = b"".join(one % i for i in range(50)) + b"GET /nope HTTP/1.1\r\n\r\n"
    data += b"GET /health HTTP/1.1\r\nconnection: close\r\n\r\n"
    reply = raw(server, data)
    statuses = re.findall(rb"HTTP/1.1 (\d+) ", reply)
    assert statuses == [b"200"] * 50 + [b"404", b"200"]
    ids = re.findall(rb'"id":"(p\d+)"', reply)
    assert ids == [b"p%d" % i for i in range(50)]
    assert journal_ids(tmp_path / "journal") == [f"p{i}" for i in range(50)]


def test_chunked_body_and_expect_100_continue(make_server, tmp_path):
    server = make_server()
    conn = connect(server)
    conn.request(
        "POST",
        "/vertices/in",
        body=iter([b"hel", b"lo ", b"world"]),
        headers={"x-numaflow-id": "c"},
        encode_chunked=True,
    )
    assert conn.getresponse().status == 200
    conn.close()
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(
            b"POST /vertices/in HTTP/1.1\r\nx-numaflow-id: e\r\nexpect: 100-continue\r\n"
            b"content-length: 4\r\nconnection: close\r\n\r\n"
        )
        assert sock.recv(100) == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(b"body")
        assert sock.recv(1000).startswith(b"HTTP/1.1 200 OK")
    assert [(r.id, r.payload) for r in read_journal(tmp_path / "journal" / "in.journal")] == [
        ("c", b"hello world"),
        ("e", b"body"),
    ]


def test_http_10_and_connection_close(make_server):
    server = make_server()
    reply = raw(server, b"POST /vertices/in HTTP/1.0\r\ncontent-length: 1\r\n\r\nx")
    assert reply.startswith(b"HTTP/1.0 200 OK\r\n") and b"connection: close" in reply
    reply = raw(server, b"GET /health HTTP/1.1\r\nConnection: close\r\n\r\n")
    assert reply.startswith(b"HTTP/1.1 200 OK\r\n") and b"connection: close" in reply


@pytest.mark.parametrize(
    "head",
    [
        b"POST /vertices/in HTTP/1.1\r\nbad header: x\r\n\r\n",
        b"POST /vertices/in HTTP/1.1\r\n folded: x\r\n\r\n",
        b"POST /vertices/in HTTP/1.1\r\nnocolon\r\n\r\n",
        b"POST /vertices/in HTTP/1.1\r\nx: a\x01b\r\n\r\n",
        b"POST /vertices/in HTTP/1.1\r\ncontent-length: -1\r\n\r\n",
        b"POST /vertices/in HTTP/1.1\r\ncontent-length: 1\r\ncontent-length: 2\r\n\r\n",
        b"POST  /vertices/in HTTP/1.1\r\n\r\n",
        b"garbage\r\n\r\n",
    ],
)
def test_malformed_requests_400_and_close(make_server, head, tmp_path):
    server = make_server()
    reply = raw(server, head)
    assert reply.startswith(b"HTTP/1.1 400 Bad Request\r\n")
    assert b"connection: close" in reply
    assert journal_ids(tmp_path / "journal") == []


def test_tls(make_server, tmp_path):
    certfile, keyfile = self_signed(tmp_path)
    server = make_server(certfile=str(certfile), keyfile=str(keyfile))
    assert server.url == f"https://127.0.0.1:{server.port}"
    context = ssl.create_default_context(cafile=str(certfile))
    conn = connect(server, context)
    assert request(server, "GET", "/health", conn=conn)[0] == 200
    status, data, _ = request(server, body=b"secure", headers={"x-numaflow-id": "t"}, conn=conn)
    assert (status, json.loads(data)) == (200, {"message": "Data received successfully", "id": "t"})
    conn.close()
    (datum,), _ = read_all(tmp_path / "journal")
    assert datum.value == b"secure"
    with pytest.raises(ssl.SSLError):  # an untrusting client
        request(server, "GET", "/health", conn=connect(server, ssl.create_default_context()))


def test_tls_needs_both_files(tmp_path):
    with pytest.raises(ValueError, match="certfile and keyfile"):
        HttpServer([HttpRoute("in")], tmp_path, certfile="c.pem")


def self_signed(directory: Path) -> tuple[Path, Path]:
    certfile, keyfile = directory / "cert.pem", directory / "key.pem"
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID
    except ImportError:
        if shutil.which("openssl") is None:
            pytest.skip("neither the cryptography package nor the openssl CLI")
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
             "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1", "-subj", "/CN=localhost",
             "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
             "-keyout", str(keyfile), "-out", str(certfile)],
            check=True,
            capture_output=True,
        )  # fmt: skip
        return certfile, keyfile
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(days=1))
        .not_valid_after(now + timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    certfile.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    keyfile.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return certfile, keyfile


# ------------------------------------------------------------------------------- address


def test_resolve_address(monkeypatch):
    monkeypatch.delenv("FLOWSPARK_HTTP_HOST", raising=False)
    monkeypatch.delenv("FLOWSPARK_HTTP_PORT", raising=False)
    assert resolve_address(None, None) == ("127.0.0.1", 8443)
    monkeypatch.setenv("FLOWSPARK_HTTP_HOST", "0.0.0.0")
    monkeypatch.setenv("FLOWSPARK_HTTP_PORT", "9001")
    assert resolve_address(None, None) == ("0.0.0.0", 9001)
    assert resolve_address("10.0.0.1", 7000) == ("10.0.0.1", 7000)
    assert resolve_address(None, 0) == ("0.0.0.0", 0)
    monkeypatch.setenv("FLOWSPARK_HTTP_PORT", "http")
    with pytest.raises(ValueError, match="FLOWSPARK_HTTP_PORT"):
        resolve_address(None, None)
    with pytest.raises(ValueError):
        resolve_address("h", 70000)


def test_url_and_port_zero(make_server):
    server = make_server()
    assert server.port != 0 and server.url == f"http://127.0.0.1:{server.port}"


def test_bad_routes(tmp_path):
    with pytest.raises(ValueError):
        HttpServer([], tmp_path)
    with pytest.raises(ValueError, match="duplicate"):
        HttpServer([HttpRoute("a"), HttpRoute("a")], tmp_path)
    with pytest.raises(ValueError):
        HttpServer([HttpRoute("../etc")], tmp_path)


def test_one_server_per_journal_dir(make_server, tmp_path):
    make_server()
    other = HttpServer([HttpRoute("in")], tmp_path / "journal", port=0)
    with pytest.raises(RuntimeError, match="in use"):
        other.start()


def test_context_manager(tmp_path):
    with HttpServer([HttpRoute("in")], tmp_path, port=0) as server:
        assert post(server)[0] == 200
        helper = server._syncer.pid
    wait_for(lambda: not _alive(helper))
    assert len(journal_ids(tmp_path)) == 1


# ------------------------------------------------------------------------ journal reading


def test_input_replays_the_journal_in_order(make_server, tmp_path):
    server = make_server()
    for i in range(50):
        assert post(server, b"v%d" % i, x_numaflow_id=f"e{i}", x_numaflow_keys=f"k{i % 3}",
                    x_numaflow_event_time=str(1_700_000_000_000 + i))[0] == 200  # fmt: skip
    inp = HttpInput(tmp_path / "journal", "in")
    assert inp.list_parts() == ["in"] and inp.is_live
    part = inp.build_part("in", None)
    batch = part.next_batch()
    assert part.next_awake() is None  # more may follow at once
    assert [d.id for d in batch] == [f"e{i}" for i in range(50)]
    assert [d.value for d in batch] == [b"v%d" % i for i in range(50)]
    assert [d.keys for d in batch] == [[f"k{i % 3}"] for i in range(50)]
    assert [aware_to_ms(d.event_time) for d in batch] == [1_700_000_000_000 + i for i in range(50)]
    assert all(d.watermark == d.event_time and type(d) is Datum for d in batch)
    assert part.next_batch() == []
    awake = part.next_awake()
    assert awake is not None and awake.tzinfo is not None
    assert timedelta(0) < awake - datetime.now(UTC) <= timedelta(milliseconds=10)
    assert part.snapshot() == (tmp_path / "journal" / "in.journal").stat().st_size
    part.close()


def test_input_caps_a_batch(make_server, tmp_path):
    server = make_server()
    for i in range(25):
        assert post(server, x_numaflow_id=str(i))[0] == 200
    part = http_input._JournalPart(
        str(tmp_path / "journal" / "in.journal"),
        str(tmp_path / "journal" / "in.journal.synced"),
        0,
        max_items=10,
    )
    sizes = [len(part.next_batch()) for _ in range(4)]
    assert sizes == [10, 10, 5, 0]


def test_snapshot_resume_reads_exactly_the_rest(make_server, tmp_path):
    server = make_server()
    for i in range(30):
        assert post(server, x_numaflow_id=f"a{i}")[0] == 200
    first, state = read_all(tmp_path / "journal")
    assert len(first) == 30
    for i in range(20):
        assert post(server, x_numaflow_id=f"b{i}")[0] == 200
    inp = pickle.loads(pickle.dumps(HttpInput(tmp_path / "journal", "in")))  # shipped to Spark
    part = inp.build_part("in", state)
    rest = part.next_batch()
    assert [d.id for d in rest] == [f"b{i}" for i in range(20)]
    part2 = pickle.loads(pickle.dumps(part))  # a part pickles too (without its file)
    assert part2.snapshot() == part.snapshot() and part2.next_batch() == []
    again, _ = read_all(tmp_path / "journal", state=state)  # a replayed batch re-reads
    assert [d.id for d in again] == [d.id for d in rest]


def test_input_before_the_server_made_the_journal(tmp_path):
    part = HttpInput(tmp_path / "none", "in").build_part("in", None)
    assert part.next_batch() == [] and part.snapshot() == 0
    assert part.next_awake() is not None


def test_input_refuses_a_journal_shorter_than_its_state(make_server, tmp_path):
    server = make_server()
    assert post(server)[0] == 200
    part = HttpInput(tmp_path / "journal", "in").build_part("in", 10_000)
    with pytest.raises(RuntimeError, match="replaced or lost"):
        part.next_batch()


def test_torn_tail_ignored_then_truncated_on_restart(make_server, tmp_path):
    directory = tmp_path / "journal"
    server = make_server(directory=directory)
    for i in range(10):
        assert post(server, x_numaflow_id=f"x{i}")[0] == 200
    server.stop()
    journal = directory / "in.journal"
    good = journal.stat().st_size
    record = J.encode_record("torn", 1, [], {"X-Numaflow-Id": "torn"}, b"p" * 100)
    for tail in (record[:5], record[:30], record[:-1], record[:-5] + b"\0\0\0\0\0"):
        with open(journal, "r+b") as f:
            f.truncate(good)
            f.seek(good)
            f.write(tail)
        # a crash may leave the synced length behind or missing: both are fine
        for synced in (True, False):
            if not synced:
                (directory / "in.journal.synced").unlink(missing_ok=True)
            items, state = read_all(directory)
            assert [d.id for d in items] == [f"x{i}" for i in range(10)]
            assert state == good
    restarted = make_server(directory=directory)
    assert journal.stat().st_size == good  # the torn tail is gone, a copy kept
    assert (directory / f"in.journal.torn.{good}").read_bytes() == tail
    assert post(restarted, x_numaflow_id="x3") == (
        409,
        {"error": "Duplicate request ID", "id": "x3"},
    )
    assert post(restarted, x_numaflow_id="torn")[0] == 200
    rest, _ = read_all(directory, state=good)
    assert [d.id for d in rest] == ["torn"]


def test_restart_rebuilds_dedup(make_server, tmp_path):
    directory = tmp_path / "journal"
    server = make_server([HttpRoute("a"), HttpRoute("b")], directory=directory)
    assert post(server, vertex="a", x_numaflow_id="old")[0] == 200
    server.stop()
    server = make_server([HttpRoute("a"), HttpRoute("b")], directory=directory)
    assert post(server, vertex="a", x_numaflow_id="old")[0] == 409
    assert post(server, vertex="b", x_numaflow_id="old")[0] == 200


def test_not_a_journal(tmp_path):
    (tmp_path / "in.journal").write_bytes(b"something else entirely")
    with pytest.raises(ValueError, match="not a flowspark HTTP journal"):
        HttpServer([HttpRoute("in")], tmp_path, port=0).start()
    with pytest.raises(ValueError):
        HttpInput(tmp_path, "in").build_part("in", None).next_batch()


def test_corrupt_record_is_not_read(make_server, tmp_path):
    server = make_server()
    for i in range(3):
        assert post(server, x_numaflow_id=f"c{i}")[0] == 200
    server.stop()
    records = read_journal(tmp_path / "journal" / "in.journal")
    with open(tmp_path / "journal" / "in.journal", "r+b") as f:
        f.seek(records[1].end - 1)
        f.write(b"\xff")  # flip the last payload byte of the second record
    items, state = read_all(tmp_path / "journal")
    assert [d.id for d in items] == ["c0"] and state == records[1].offset


# ---------------------------------------------------------------- fsync in a thread


def test_thread_fsync_when_there_is_no_helper(make_server, tmp_path):
    server = make_server(start=False)
    server._fsync_helper = False
    server.start()
    assert server._syncer.pid is None
    for i in range(20):
        assert post(server, x_numaflow_id=str(i))[0] == 200
    assert len(journal_ids(tmp_path / "journal")) == 20


def test_helper_death_falls_back_to_a_thread(make_server, tmp_path):
    server = make_server()
    helper = server._syncer.pid
    assert post(server, x_numaflow_id="before")[0] == 200
    os.kill(helper, signal.SIGKILL)
    wait_for(lambda: server._syncer.pid is None)
    assert post(server, x_numaflow_id="after")[0] == 200
    assert journal_ids(tmp_path / "journal") == ["before", "after"]


def test_helper_death_mid_fsync_still_answers(make_server, tmp_path):
    server = make_server()
    helper = server._syncer.pid
    os.kill(helper, signal.SIGSTOP)
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(post, server, x_numaflow_id="mid")
        wait_for(lambda: server._pending == 1)
        os.kill(helper, signal.SIGKILL)
        assert pending.result(10)[0] == 200
    assert journal_ids(tmp_path / "journal") == ["mid"]


# --------------------------------------------------------------------------- concurrency


def test_32_keep_alive_clients(make_server, tmp_path):
    server = make_server()

    def client(c: int) -> list[tuple[str, int]]:
        conn = connect(server)
        out = []
        for i in range(200):
            event_id = f"c{c}-{i}"
            status = request(server, body=b"%d" % i, headers={"x-numaflow-id": event_id},
                             conn=conn)[0]  # fmt: skip
            out.append((event_id, status))
        conn.close()
        return out

    with ThreadPoolExecutor(32) as pool:
        results = [r for rs in pool.map(client, range(32)) for r in rs]
    acked = [event_id for event_id, status in results if status == 200]
    assert len(acked) == 32 * 200
    ids = journal_ids(tmp_path / "journal")
    assert sorted(ids) == sorted(acked)  # each exactly once
    for c in range(32):  # per connection, in order
        mine = [i for i in ids if i.startswith(f"c{c}-")]
        assert mine == [f"c{c}-{i}" for i in range(200)]
    items, _ = read_all(tmp_path / "journal")
    assert [d.id for d in items] == ids


KILL_SERVER = """
import sys, time
from flowspark.connectors.numaflow.http import HttpRoute, HttpServer
server = HttpServer([HttpRoute("in")], sys.argv[1], port=0).start()
print(server.port, server._syncer.pid, flush=True)
time.sleep(600)
"""


def test_sigkill_under_load_loses_no_acknowledged_event(tmp_path):
    directory = tmp_path / "journal"
    env = dict(os.environ, PYTHONPATH=str(SRC))
    proc = subprocess.Popen(
        [sys.executable, "-c", KILL_SERVER, str(directory)], stdout=subprocess.PIPE, env=env
    )
    try:
        assert proc.stdout is not None
        port, helper = map(int, proc.stdout.readline().split())
        acked: list[str] = []
        answered: list[str] = []
        stop = threading.Event()

        def client(c: int) -> None:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            i = 0
            while not stop.is_set():
                event_id = f"k{c}-{i}"
                i += 1
                try:
                    conn.request("POST", "/vertices/in", body=b"x" * (i % 300),
                                 headers={"x-numaflow-id": event_id})  # fmt: skip
                    response = conn.getresponse()
                    response.read()
                except (OSError, http.client.HTTPException):
                    return
                answered.append(event_id)
                if response.status == 200:
                    acked.append(event_id)

        threads = [threading.Thread(target=client, args=(c,)) for c in range(8)]
        for t in threads:
            t.start()
        wait_for(lambda: len(acked) >= 1500, timeout=60)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        stop.set()
        for t in threads:
            t.join(15)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert len(acked) >= 1500 and set(acked) == set(answered)
    wait_for(lambda: not _alive(helper))  # the fsync helper follows its server
    ids = journal_ids(directory)
    assert len(ids) == len(set(ids))  # nothing twice
    assert set(acked) <= set(ids)  # every 200 is there
    items, state = read_all(directory)  # the input (up to the fsync'ed length) too
    read = [d.id for d in items]
    assert set(acked) <= set(read) and len(read) == len(set(read))
    # a restart repairs any torn tail and keeps deduplicating
    server = HttpServer([HttpRoute("in")], directory, port=0).start()
    try:
        size = (directory / "in.journal").stat().st_size
        assert size == (read_journal(directory / "in.journal") or [None])[-1].end
        assert post(server, x_numaflow_id=acked[0])[0] == 409
        assert post(server, x_numaflow_id=acked[-1])[0] == 409
        assert post(server, x_numaflow_id="after-crash")[0] == 200
    finally:
        server.stop()
    rest, _ = read_all(directory, state=state)
    assert [d.id for d in rest][-1] == "after-crash"


def test_a_busy_port_fails_start_and_releases_the_journal(make_server, tmp_path):
    first = make_server()
    second = HttpServer([HttpRoute("in")], tmp_path / "other", port=first.port)
    with pytest.raises(OSError):
        second.start()
    third = make_server(directory=tmp_path / "other")  # the journal lock was released
    assert post(third)[0] == 200


def _hammer_synced(path: str, stop: Any) -> None:
    import mmap as _mmap

    from flowspark.connectors.numaflow.http.journal import pack_synced

    fd = os.open(path, os.O_RDWR)
    view = _mmap.mmap(fd, len(pack_synced(0)))
    size = 116_710_281
    while not stop.is_set():
        size += 12_345
        view[:] = pack_synced(size)


def test_a_reader_never_sees_a_torn_synced_length(tmp_path):
    # The server updates the synced length in place while readers read it; a torn
    # read once gave a reader 0 and stopped a run ("the journal was replaced or lost").
    import multiprocessing

    from flowspark.connectors.numaflow.http.journal import pack_synced, read_synced

    path = str(tmp_path / "in.journal.synced")
    with open(path, "wb") as f:
        f.write(pack_synced(116_710_281))
    ctx = multiprocessing.get_context("fork")
    stop = ctx.Event()
    writer = ctx.Process(target=_hammer_synced, args=(path, stop))
    writer.start()
    try:
        last, reads, until = 0, 0, time.monotonic() + 1.5
        while time.monotonic() < until:
            size = read_synced(path)
            assert size is not None and size >= max(last, 116_710_281)
            last, reads = size, reads + 1
    finally:
        stop.set()
        writer.join(10)
    assert reads > 1000
