"""The Spark Connect delivery channel (``engine/delivery.py``) without Spark: a
forwarder sends an Arrow table over TCP to the client's server, which hands it to
the dispatcher's ``deliver`` and replies; an error in the client fails the
forwarder (so Spark would not commit the batch); a wrong token is ignored."""

from __future__ import annotations

import pyarrow as pa
import pytest

from flowspark.engine.delivery import BatchForwarder, DeliveryServer, client_address
from flowspark.engine.session import remote_url


class _Collected:
    """What ``foreachBatch`` gets on the server, as far as the forwarder uses it."""

    def __init__(self, table: pa.Table) -> None:
        self.table = table

    def toArrow(self) -> pa.Table:  # noqa: N802 - Spark's name
        return self.table


def test_batches_reach_the_client_in_order_with_their_ids():
    got: list[tuple[int, list]] = []

    def deliver(table: pa.Table, batch_id: int) -> None:
        got.append((batch_id, table.column("x").to_pylist()))

    with DeliveryServer(deliver, "127.0.0.1") as srv:
        forward = srv.forwarder("127.0.0.1")
        for batch in range(3):
            forward(_Collected(pa.table({"x": list(range(batch * 2, batch * 2 + 2))})), batch)
    assert got == [(0, [0, 1]), (1, [2, 3]), (2, [4, 5])]


def test_an_error_in_the_client_fails_the_batch_on_the_server():
    def deliver(table, batch_id):
        raise ValueError("sink refused")

    with DeliveryServer(deliver, "127.0.0.1") as srv:
        with pytest.raises(RuntimeError, match="flowspark client: sink refused"):
            srv.forwarder("127.0.0.1")(_Collected(pa.table({"x": [1]})), 0)
        assert isinstance(srv.error, ValueError)


def test_a_forwarder_with_another_token_delivers_nothing():
    got: list = []
    with DeliveryServer(lambda t, b: got.append(b), "127.0.0.1") as srv:
        stranger = BatchForwarder("127.0.0.1", srv.port, b"x" * 16)
        with pytest.raises(ConnectionError):
            stranger(_Collected(pa.table({"x": [1]})), 0)
    assert got == []


def test_remote_addresses(monkeypatch):
    monkeypatch.delenv("FLOWSPARK_REMOTE", raising=False)
    monkeypatch.delenv("SPARK_REMOTE", raising=False)
    assert remote_url() is None
    monkeypatch.setenv("SPARK_REMOTE", "sc://h:1")
    assert remote_url() == "sc://h:1"
    assert remote_url("sc://other:2") == "sc://other:2"
    with pytest.raises(ValueError, match="sc://HOST:PORT"):
        remote_url("http://h:1")
    assert client_address("sc://127.0.0.1:15002/;user_id=x") == "127.0.0.1"
    monkeypatch.setenv("FLOWSPARK_CLIENT_HOST", "10.1.2.3")
    assert client_address("sc://127.0.0.1:15002") == "10.1.2.3"
