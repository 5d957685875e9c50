"""One live run per recovery directory: an exclusive lock, taken before Spark starts.

Two runs on one recovery directory spoil each other's output: the second rebuilds
the file outputs from the sink snapshots (truncating what the first has written
since) while both append to Spark's logs. :func:`hold` makes the second run fail at
once with a :class:`~flowspark.engine.errors.RecoveryDirectoryError` that names the
directory and the run holding it (host, pid, start time).

* **A local directory** (a path or ``file://``): ``flock`` on ``<dir>/flowspark.lock``.
  The kernel drops it when the holding process ends, however it ends (``kill -9``
  too), so a killed run's lock is free at once. The file holds the holder's host, pid
  and start time for that message; it is never deleted. Deleting it under a live run
  would let another run lock a new file, so the holder checks before every
  micro-batch (:meth:`RecoveryLock.check`) that the file is still the one it locked.
* **Any other filesystem** (``s3a://``, ``gs://``, ``hdfs://``, ...): a lease, the file
  ``<dir>/flowspark.lease``, which holds the holder, a random token and an expiry
  ``LEASE_SECONDS`` ahead; a thread renews it every third of that. A run takes the
  lease when there is none, when it has expired, or when its holder was a process of
  this machine (same boot) that no longer exists. pyarrow's filesystems offer no
  compare-and-swap, so a take writes the lease, waits ``SETTLE_SECONDS`` and reads it
  back: of two runs that start together the later write wins and the other fails. A
  renewal that finds another run's token, or that lands after the expiry, marks the
  lease lost, and the run stops before it writes another micro-batch. Machines that
  share a directory need clocks within two thirds of ``LEASE_SECONDS`` of each other.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from flowspark.engine.errors import FlowRunError, RecoveryDirectoryError
from flowspark.runtime.storage import Location, StorageError, read_bytes, write_bytes_atomic

__all__ = [
    "LEASE_NAME",
    "LOCK_NAME",
    "FileLock",
    "Holder",
    "Lease",
    "RecoveryLock",
    "acquire",
    "hold",
]

LOCK_NAME = "flowspark.lock"
LEASE_NAME = "flowspark.lease"
LEASE_SECONDS = 30.0
SETTLE_SECONDS = 1.0
# How long a second run waits for a lock holder that has just taken the lock to
# write its name into the file (it is written right after the flock).
_HOLDER_WAIT_SECONDS = 1.0


def _boot_id() -> str:
    """This machine's boot id (Linux), so that a pid is compared within one boot only."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _when(epoch_seconds: float) -> str:
    local = datetime.fromtimestamp(epoch_seconds).astimezone()
    return local.isoformat(sep=" ", timespec="seconds")


@dataclass(frozen=True)
class Holder:
    """The run that holds a recovery directory: its host, pid and start time."""

    host: str
    pid: int
    started: float
    boot: str = ""

    @classmethod
    def me(cls) -> Holder:
        """This process, starting now."""
        return cls(socket.gethostname(), os.getpid(), time.time(), _boot_id())

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Holder:
        return cls(str(data["host"]), int(data["pid"]), float(data["started"]), str(data["boot"]))

    def describe(self) -> str:
        """``host H, pid P, started T`` for messages."""
        return f"host {self.host}, pid {self.pid}, started {_when(self.started)}"

    def is_gone(self) -> bool:
        """Whether this was a process of this machine, since its last boot, that no
        longer exists (a pid of another machine or boot proves nothing)."""
        if self.host != socket.gethostname() or not self.boot or self.boot != _boot_id():
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:  # alive, another user's
            return False
        return False


def _in_use(directory: Location, holder: Holder | None, hint: str) -> RecoveryDirectoryError:
    who = holder.describe() if holder is not None else "holder unknown"
    return RecoveryDirectoryError(
        f"recovery directory {directory.shown} is in use by another run ({who}): one run "
        f"at a time per directory; wait for that run to end or stop it{hint}"
    )


class RecoveryLock(ABC):
    """This run's hold on a recovery directory."""

    directory: Location
    holder: Holder

    @abstractmethod
    def check(self) -> None:
        """Raise :class:`~flowspark.engine.errors.FlowRunError` if this run no longer
        holds the directory alone (called before each micro-batch is written)."""

    @abstractmethod
    def release(self) -> None:
        """Give the directory up (idempotent)."""

    def __enter__(self) -> RecoveryLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class FileLock(RecoveryLock):
    """``flock`` on ``<directory>/flowspark.lock`` (a local directory)."""

    def __init__(self, directory: Location) -> None:
        self.directory = directory
        self.path = directory.local_path / LOCK_NAME
        self.holder = Holder.me()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise RecoveryDirectoryError(
                f"recovery directory {directory.shown}: cannot create its lock file "
                f"{self.path}: {exc.strerror or exc}"
            ) from None
        try:
            self._lock(fd)
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(asdict(self.holder)).encode(), 0)
        except BaseException:
            os.close(fd)
            raise
        self._fd: int | None = fd
        stat = os.fstat(fd)
        self._identity = (stat.st_dev, stat.st_ino)

    def _lock(self, fd: int) -> None:
        deadline = time.monotonic() + _HOLDER_WAIT_SECONDS
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                pass
            except OSError as exc:  # e.g. ENOLCK: a filesystem without locks
                raise RecoveryDirectoryError(
                    f"recovery directory {self.directory.shown}: cannot lock {self.path}: "
                    f"{exc.strerror or exc}"
                ) from None
            holder = _read_holder(fd)
            if holder is not None or time.monotonic() > deadline:
                raise _in_use(self.directory, holder, "")
            time.sleep(0.05)  # the holder has locked the file and not yet named itself

    def check(self) -> None:
        try:
            stat = os.stat(self.path)
            identity: tuple[int, int] | None = (stat.st_dev, stat.st_ino)
        except FileNotFoundError:
            identity = None
        if self._fd is not None and identity != self._identity:
            raise FlowRunError(
                f"the lock file {self.path} of the recovery directory was deleted or "
                "replaced during the run, so another run may be using the directory: "
                "this run stopped before writing another micro-batch"
            )

    def release(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)  # no holder named while nobody holds it
        os.close(fd)  # drops the flock


def _read_holder(fd: int) -> Holder | None:
    try:
        data = os.pread(fd, 4096, 0)
        return Holder.from_dict(json.loads(data))
    except (OSError, ValueError, KeyError, TypeError):
        return None


@dataclass(frozen=True)
class _LeaseRecord:
    holder: Holder
    token: str
    expires: float

    def encode(self) -> bytes:
        fields = {**asdict(self.holder), "token": self.token, "expires": self.expires}
        return json.dumps(fields).encode()

    @classmethod
    def decode(cls, data: bytes) -> _LeaseRecord | None:
        try:
            fields = json.loads(data)
            return cls(Holder.from_dict(fields), str(fields["token"]), float(fields["expires"]))
        except (ValueError, KeyError, TypeError):
            return None  # not a lease: nobody can be holding it

    def is_free(self) -> bool:
        return time.time() >= self.expires or self.holder.is_gone()


class Lease(RecoveryLock):
    """A renewed lease in ``<directory>/flowspark.lease`` (object stores, HDFS, ...)."""

    def __init__(
        self,
        directory: Location,
        seconds: float = LEASE_SECONDS,
        settle: float = SETTLE_SECONDS,
    ) -> None:
        self.directory = directory
        self.where = directory.child(LEASE_NAME)
        self.holder = Holder.me()
        self.seconds = seconds
        self.token = os.urandom(8).hex()
        self.expires = 0.0
        self._lost: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        current = self._read()
        if current is not None and not current.is_free():
            raise _in_use(directory, current.holder, self._expiry_hint(current))
        self._write()
        time.sleep(settle)
        current = self._read()
        if current is None or current.token != self.token:  # another run's write came later
            raise _in_use(directory, current.holder if current else None, "")
        self._thread = threading.Thread(target=self._renew, name="flowspark-lease", daemon=True)
        self._thread.start()

    @staticmethod
    def _expiry_hint(current: _LeaseRecord) -> str:
        return f" (a lease left by a killed run expires at {_when(current.expires)})"

    def _read(self) -> _LeaseRecord | None:
        try:
            data = read_bytes(self.where)
        except StorageError:
            raise
        except Exception as exc:
            raise StorageError(f"{self.where.shown}: cannot read it: {exc}") from exc
        return None if data is None else _LeaseRecord.decode(data)

    def _write(self) -> None:
        expires = time.time() + self.seconds
        write_bytes_atomic(self.where, _LeaseRecord(self.holder, self.token, expires).encode())
        self.expires = expires

    def _renew(self) -> None:
        while not self._stop.wait(self.seconds / 3):
            try:
                current = self._read()
                if current is None or current.token != self.token:
                    taken = current.holder.describe() if current is not None else None
                    self._lost = f"taken by {taken}" if taken else "deleted"
                    return
                before = self.expires
                if time.time() >= before:
                    self._lost = f"it expired at {_when(before)} before it was renewed"
                    return
                self._write()
                if time.time() >= before:  # the renewal landed too late to count
                    self._lost = f"it expired at {_when(before)} while it was renewed"
                    return
            except Exception as exc:  # storage out of reach: try again until it expires
                if time.time() >= self.expires:
                    self._lost = f"it could not be renewed before it expired: {exc}"
                    return

    def check(self) -> None:
        lost = self._lost
        if lost is None and self._thread is not None and time.time() >= self.expires:
            lost = f"it expired at {_when(self.expires)} before it was renewed"
        if lost is not None:
            raise FlowRunError(
                f"this run lost its lease on the recovery directory {self.directory.shown} "
                f"({lost}), so another run may be using the directory: it stopped before "
                "writing another micro-batch"
            )

    def release(self) -> None:
        if self._thread is None:
            return
        thread, self._thread = self._thread, None
        self._stop.set()
        thread.join(timeout=60)
        with contextlib.suppress(Exception):
            current = self._read()
            if current is not None and current.token == self.token:
                self.where.filesystem().delete_file(self.where.path)


def acquire(directory: Location) -> RecoveryLock:
    """Take ``directory`` for this run: a ``flock`` for a local directory, a lease
    elsewhere; raises :class:`~flowspark.engine.errors.RecoveryDirectoryError` when
    another run holds it or it cannot be locked."""
    if directory.is_local:
        return FileLock(directory)
    try:
        return Lease(directory)
    except StorageError as exc:
        raise RecoveryDirectoryError(
            f"recovery directory {directory.shown}: cannot take its lease: {exc}"
        ) from None


@contextlib.contextmanager
def hold(directory: Location) -> Iterator[RecoveryLock]:
    """:func:`acquire` ``directory`` for the ``with`` block, then release it."""
    lock = acquire(directory)
    try:
        yield lock
    finally:
        lock.release()
