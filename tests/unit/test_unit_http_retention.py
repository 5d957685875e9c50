"""The HTTP source keeps a bounded journal and id index however long it runs: what
the flow committed and is older than the dedup window is dropped (its ids
forgotten, its disk blocks freed), and nothing else. Real server over loopback,
real files, the real reader; no Spark."""

from __future__ import annotations

import http.client
import logging
import os
import time
from pathlib import Path

import pytest

from flowspark.connectors.numaflow.http import (
    HttpInput,
    HttpRoute,
    HttpServer,
    read_journal,
    retention,
)
from flowspark.connectors.numaflow.http import journal as J
from flowspark.engine.recovery_files import journal_problem, journal_synced
from tests.waiting import wait_for

PAYLOAD = b"p" * 2000  # ~2 kB a record: a few hundred records span many disk blocks


def post(server: HttpServer, event_id: str, body: bytes = PAYLOAD) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        conn.request("POST", "/vertices/in", body=body, headers={"x-numaflow-id": event_id})
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


def read_from(directory: Path, state: int | None) -> tuple[list[str], int]:
    """Every event the reader gets from byte ``state`` on, and its offset after them;
    then, as after a committed micro-batch, it says that offset is committed."""
    part = HttpInput(directory, "in").build_part("in", state)
    ids: list[str] = []
    try:
        while batch := part.next_batch():
            ids.extend(d.id for d in batch)
        offset = part.snapshot()
        part.committed(offset)
    finally:
        part.close()
    return ids, offset


def post_deliver_and_drop(server: HttpServer, directory: Path, ids: list[str]) -> int:
    """Post ``ids``, read and commit them as a flow would, and wait until the server
    dropped them; the offset after them."""
    assert [post(server, event_id) for event_id in ids] == [200] * len(ids)
    _, offset = read_from(directory, None)
    wait_for(lambda: J.read_start(directory / "in.journal") == offset)
    return offset


def allocated(path: Path) -> int:
    return os.stat(path).st_blocks * 512


@pytest.fixture
def make_server(tmp_path):
    servers: list[HttpServer] = []

    def make(window: float) -> HttpServer:
        server = HttpServer([HttpRoute("in")], tmp_path, port=0, dedup_window=window)
        servers.append(server)
        return server.start()

    yield make
    for server in servers:
        server.stop()


def test_committed_events_past_the_window_are_dropped_from_disk_and_the_index(
    make_server, tmp_path
):
    server = make_server(0.2)
    assert [post(server, f"a{i}") for i in range(300)] == [200] * 300
    journal = tmp_path / "in.journal"
    before = allocated(journal)
    ids, offset = read_from(tmp_path, None)
    assert ids == [f"a{i}" for i in range(300)]
    wait_for(lambda: J.read_start(journal) == offset)
    wait_for(lambda: allocated(journal) < before // 4)  # the blocks are given back
    assert os.stat(journal).st_size == offset  # ... and every offset stays where it was
    assert read_journal(journal) == []
    # Forgotten: the same id is a new event now (the window is over) ...
    assert post(server, "a0") == 200
    # ... and the reader goes on from its offset: the new events, once.
    assert post(server, "b1") == 200
    ids, _ = read_from(tmp_path, offset)
    assert ids == ["a0", "b1"]


def test_many_small_drops_leave_no_block_behind(make_server, tmp_path):
    # Each drop ends inside a disk block; the next one must free that block too.
    server = make_server(0.05)
    journal = tmp_path / "in.journal"
    offset = None
    for round_ in range(40):
        for i in range(3):
            assert post(server, f"r{round_}-{i}", b"x" * 1000) == 200
        _, offset = read_from(tmp_path, offset)
        wait_for(lambda o=offset: J.read_start(journal) == o)
    block = os.stat(journal).st_blksize
    assert os.stat(journal).st_size > 25 * block  # 40 rounds of ~3.3 kB
    assert allocated(journal) <= 3 * block  # the magic's block, the one being written


def test_nothing_is_dropped_until_the_flow_commits_it(make_server, tmp_path):
    server = make_server(0.1)
    assert [post(server, f"a{i}") for i in range(50)] == [200] * 50
    part = HttpInput(tmp_path, "in").build_part("in", None)
    assert len(part.next_batch()) == 50  # read, not committed
    time.sleep(0.6)  # several trims' time, the window long past
    assert J.read_start(tmp_path / "in.journal") == len(J.JOURNAL_MAGIC)
    assert post(server, "a7") == 409  # still in the index
    assert len(read_journal(tmp_path / "in.journal")) == 50
    # Committed up to the 20th event only: those go, the other 30 stay.
    twentieth = read_journal(tmp_path / "in.journal")[19].end
    part.committed(twentieth)
    part.close()
    # The server forgets whole groups: each of these posts was a group of its own.
    wait_for(lambda: J.read_start(tmp_path / "in.journal") == twentieth)
    assert [r.id for r in read_journal(tmp_path / "in.journal")] == [f"a{i}" for i in range(20, 50)]
    assert post(server, "a25") == 409
    assert post(server, "a5") == 200


def test_a_committed_event_within_the_window_is_still_a_duplicate(make_server, tmp_path):
    server = make_server(60.0)
    assert post(server, "x") == 200
    read_from(tmp_path, None)  # read and committed
    time.sleep(0.3)
    assert post(server, "x") == 409
    assert J.read_start(tmp_path / "in.journal") == len(J.JOURNAL_MAGIC)


def test_a_restarted_server_keeps_the_start_and_indexes_what_is_kept(make_server, tmp_path):
    server = make_server(0.2)
    offset = post_deliver_and_drop(server, tmp_path, [f"a{i}" for i in range(40)])
    for i in range(5):
        assert post(server, f"b{i}") == 200
    server.stop()
    again = make_server(60.0)  # rebuilds its index from the first byte kept
    assert post(again, "b3") == 409
    assert post(again, "a3") == 200  # dropped before the restart: not a duplicate
    ids, _ = read_from(tmp_path, offset)
    assert ids == [*(f"b{i}" for i in range(5)), "a3"]


def test_a_checkpoint_older_than_the_journal_is_refused_in_one_line(make_server, tmp_path):
    server = make_server(0.2)
    offset = post_deliver_and_drop(server, tmp_path, [f"a{i}" for i in range(10)])
    part = HttpInput(tmp_path, "in").build_part("in", None)  # a fresh checkpoint
    with pytest.raises(RuntimeError, match=r"checkpoint is older than the journal") as caught:
        part.next_batch()
    assert f"byte {offset} on" in str(caught.value)
    part.close()


def test_the_recovery_check_reads_a_dropped_journal_from_its_start(make_server, tmp_path):
    server = make_server(0.2)
    post_deliver_and_drop(server, tmp_path, [f"a{i}" for i in range(30)])
    assert post(server, "late") == 200
    journal = tmp_path / "in.journal"
    synced = journal_synced((tmp_path / "in.journal.synced").read_bytes())
    start = journal_synced((tmp_path / "in.journal.start").read_bytes())
    with open(journal, "rb") as f:
        assert journal_problem(f, os.stat(journal).st_size, synced, start) == (1, None)
        # Read from byte 8 instead, the zeros of the hole are not a record: damage.
        records, why = journal_problem(f, os.stat(journal).st_size, synced)
    assert records == 0 and why is not None and "damaged" in why


def test_without_holes_the_bytes_stay_and_a_warning_says_so_once(
    make_server, tmp_path, monkeypatch, caplog
):
    monkeypatch.setattr(retention, "_FALLOCATE", None)
    monkeypatch.setattr(retention, "_warned", False)
    caplog.set_level(logging.WARNING, logger=retention.__name__)
    server = make_server(0.1)
    offset = None
    for _ in range(2):
        assert post(server, "again") == 200  # the id index is bounded all the same
        _, offset = read_from(tmp_path, offset)
        wait_for(lambda o=offset: J.read_start(tmp_path / "in.journal") == o)
    warnings = [r for r in caplog.records if "cannot punch holes" in r.getMessage()]
    assert len(warnings) == 1
    assert allocated(tmp_path / "in.journal") >= 2 * len(PAYLOAD)


def test_a_torn_committed_file_drops_nothing(make_server, tmp_path):
    server = make_server(0.1)
    assert post(server, "a") == 200
    (tmp_path / "in.journal.committed").write_bytes(b"\x01" * 16)  # fails its check
    time.sleep(0.5)
    assert J.read_start(tmp_path / "in.journal") == len(J.JOURNAL_MAGIC)
    assert post(server, "a") == 409


def test_the_dedup_window_comes_from_the_argument_or_the_environment(monkeypatch):
    monkeypatch.delenv(retention.DEDUP_WINDOW_ENV, raising=False)
    assert retention.dedup_window() == 120.0
    monkeypatch.setenv(retention.DEDUP_WINDOW_ENV, "2.5")
    assert retention.dedup_window() == 2.5
    assert retention.dedup_window(7) == 7.0
    monkeypatch.setenv(retention.DEDUP_WINDOW_ENV, "soon")
    with pytest.raises(ValueError, match="FLOWSPARK_HTTP_DEDUP_WINDOW must be a number"):
        retention.dedup_window()
    for bad in (0, -1, True, "5"):
        with pytest.raises(ValueError, match="> 0"):
            retention.dedup_window(bad)  # type: ignore[arg-type]
