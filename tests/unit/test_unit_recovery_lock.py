"""One live run per recovery directory (``flowspark.engine.recovery_lock``), without
Spark: the ``flock`` of a local directory against another process, and the renewed
lease of other filesystems, on a local path and on a real S3-compatible server
(moto's ``moto_server`` on loopback)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from flowspark.engine.errors import FlowRunError, RecoveryDirectoryError
from flowspark.engine.recovery_lock import (
    LEASE_NAME,
    LOCK_NAME,
    FileLock,
    Holder,
    Lease,
    _LeaseRecord,
    acquire,
    hold,
)
from flowspark.runtime.storage import Location, read_bytes, write_bytes_atomic
from tests.s3_server import S3Server

# A process that takes the lock of argv[1] and says so, then waits to be killed.
HOLDER = """
import sys, time
from flowspark.engine.recovery_lock import acquire
from flowspark.runtime.storage import Location

lock = acquire(Location.parse(sys.argv[1]))
print("held", flush=True)
time.sleep(600)
"""


def start_holder(directory: Path) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(directory)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = proc.stdout.readline() if proc.stdout else ""
    assert line == "held\n", proc.stderr.read() if proc.stderr else ""
    return proc


def one_line(exc: BaseException) -> str:
    message = str(exc)
    assert "\n" not in message, message
    return message


# -- flock (local directories) -----------------------------------------------------------


def test_a_lock_held_by_another_process_fails_naming_the_directory_and_holder(tmp_path):
    proc = start_holder(tmp_path / "rec")
    try:
        started = time.monotonic()
        with pytest.raises(RecoveryDirectoryError) as caught:
            acquire(Location.parse(tmp_path / "rec"))
        assert time.monotonic() - started < 1.0  # at once, no waiting
        message = one_line(caught.value)
        assert f"recovery directory {tmp_path / 'rec'} is in use by another run" in message
        assert f"pid {proc.pid}," in message
        assert f"host {os.uname().nodename}," in message
        assert "started 20" in message
    finally:
        proc.kill()
        proc.wait()


def test_the_lock_of_a_killed_process_is_taken_at_once(tmp_path):
    proc = start_holder(tmp_path / "rec")
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    left = json.loads((tmp_path / "rec" / LOCK_NAME).read_text())
    assert left["pid"] == proc.pid  # the file still names the dead holder
    with hold(Location.parse(tmp_path / "rec")) as lock:
        assert isinstance(lock, FileLock)
        assert json.loads((tmp_path / "rec" / LOCK_NAME).read_text())["pid"] == os.getpid()


def test_a_released_lock_names_nobody_and_can_be_taken_again(tmp_path):
    where = Location.parse(tmp_path / "rec")
    with hold(where), pytest.raises(RecoveryDirectoryError, match=f"pid {os.getpid()},"):
        acquire(where)  # a second run in the same process is refused too
    assert (tmp_path / "rec" / LOCK_NAME).read_text() == ""
    lock = acquire(where)
    lock.release()
    lock.release()  # idempotent


def test_a_deleted_lock_file_stops_the_run_at_its_next_check(tmp_path):
    with hold(Location.parse(tmp_path / "rec")) as lock:
        lock.check()
        (tmp_path / "rec" / LOCK_NAME).unlink()
        with pytest.raises(FlowRunError, match="was deleted or replaced during the run"):
            lock.check()


# -- leases ------------------------------------------------------------------------------


def write_lease(where: Location, holder: Holder, expires: float, token: str = "other") -> None:
    write_bytes_atomic(where.child(LEASE_NAME), _LeaseRecord(holder, token, expires).encode())


def lease_record(where: Location) -> _LeaseRecord | None:
    data = read_bytes(where.child(LEASE_NAME))
    return None if data is None else _LeaseRecord.decode(data)


def test_a_live_lease_of_another_machine_is_refused_naming_it_and_its_expiry(tmp_path):
    where = Location.parse(tmp_path / "rec")
    other = Holder("elsewhere", 4242, time.time() - 60, "another-boot")
    write_lease(where, other, time.time() + 30)
    with pytest.raises(RecoveryDirectoryError) as caught:
        Lease(where, seconds=3, settle=0.05)
    message = one_line(caught.value)
    assert "(host elsewhere, pid 4242, started " in message
    assert "a lease left by a killed run expires at" in message
    assert lease_record(where).token == "other"  # untouched


def test_an_expired_lease_is_taken_over(tmp_path):
    where = Location.parse(tmp_path / "rec")
    write_lease(where, Holder("elsewhere", 4242, time.time() - 90, "b"), time.time() - 1)
    lease = Lease(where, seconds=3, settle=0.05)
    try:
        record = lease_record(where)
        assert (record.token, record.holder.pid) == (lease.token, os.getpid())
        lease.check()
    finally:
        lease.release()
    assert lease_record(where) is None  # released: the file is gone


def test_a_lease_of_a_dead_process_of_this_machine_is_taken_at_once(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()  # a pid that no longer exists
    where = Location.parse(tmp_path / "rec")
    me = Holder.me()
    write_lease(where, Holder(me.host, proc.pid, time.time(), me.boot), time.time() + 30)
    with Lease(where, seconds=3, settle=0.05) as lease:
        assert lease_record(where).token == lease.token


def test_a_lease_is_renewed_while_held(tmp_path):
    where = Location.parse(tmp_path / "rec")
    with Lease(where, seconds=1.5, settle=0.05) as lease:
        first = lease_record(where).expires
        time.sleep(2.5)  # longer than the lease: held only if renewed
        lease.check()
        assert lease_record(where).expires > first + 0.9
        assert lease_record(where).token == lease.token


def test_a_lease_taken_by_another_run_is_lost_and_stops_the_run(tmp_path):
    where = Location.parse(tmp_path / "rec")
    with Lease(where, seconds=3, settle=0.05) as lease:
        write_lease(where, Holder("elsewhere", 7, time.time(), "b"), time.time() + 30)
        deadline = time.monotonic() + 2.5  # a renewal (every second) finds the other token
        with pytest.raises(FlowRunError) as caught:  # noqa: PT012 - polls until it raises
            while time.monotonic() < deadline:
                lease.check()
                time.sleep(0.05)
        message = one_line(caught.value)
        assert f"lost its lease on the recovery directory {where.shown}" in message
        assert "(taken by host elsewhere, pid 7, started " in message
    assert lease_record(where).token == "other"  # release leaves the other run's lease


def test_of_two_runs_taking_a_lease_together_exactly_one_wins(tmp_path):
    where = Location.parse(tmp_path / "rec")
    results: list[object] = []
    start = threading.Barrier(2)

    def take() -> None:
        start.wait()
        try:
            results.append(Lease(where, seconds=5, settle=0.5))
        except RecoveryDirectoryError as exc:
            results.append(exc)

    threads = [threading.Thread(target=take) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    won = [r for r in results if isinstance(r, Lease)]
    lost = [r for r in results if isinstance(r, RecoveryDirectoryError)]
    assert (len(won), len(lost)) == (1, 1), results
    assert lease_record(where).token == won[0].token
    won[0].release()


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    with S3Server(tmp_path_factory.mktemp("moto")) as server:
        server.make_bucket("rec")
        yield server


def test_an_s3_directory_is_held_by_a_lease_one_run_at_a_time(s3):
    where = Location.parse(s3.uri("rec", "flow1"))
    first = acquire(where)
    try:
        assert isinstance(first, Lease)
        assert lease_record(where).token == first.token
        with pytest.raises(RecoveryDirectoryError) as caught:
            acquire(where)
        message = one_line(caught.value)
        assert f"pid {os.getpid()}," in message and "expires at" in message
        assert "flowspark-test-secret" not in message  # the URI's keys are not shown
    finally:
        first.release()
    assert where.files("*") == []  # released: nothing left in the directory
    with hold(where) as second:
        second.check()


def test_an_expired_s3_lease_is_taken_over(s3):
    where = Location.parse(s3.uri("rec", "flow2"))
    write_lease(where, Holder("elsewhere", 4242, time.time() - 90, "b"), time.time() - 1)
    with hold(where) as lock:
        assert lease_record(where).token == lock.token
