"""The HTTP source's journal: the one contract between the server that writes it and
the input (and ``python -m flowspark.recovery inspect``) that read it.

Files, per vertex, in the journal directory:

* ``<vertex>.journal``: the 8 bytes ``FSPKHTJ1``, then records, each::

      u32 body length | u32 CRC-32 of the body | body
      body = i64 event time ms | u32 meta length | u16 key count | u16 header count
             | meta: id, keys, then header name, value, ... (ASCII, NUL-separated)
             | payload (the rest)

  little-endian. Records are appended, one ``write`` per group of events (a
  write or fsync that fails is cut back off); an event is answered 200 only once
  its record is ``fsync``'ed.
* ``<vertex>.journal.synced``: the journal length known to be fsync'ed (u64, then
  its complement as a check against torn reads: the server updates it in place,
  through a shared mmap, while readers read it; a pair that does not check out is
  read again). Readers never read past it (a reader of a journal without one
  reads up to its last valid record).
* ``<vertex>.journal.torn.<offset>``: a copy of a torn tail the server cut off.
* ``<vertex>.journal.committed``: how far the flow that reads the journal has
  committed (a byte offset, in the ``.synced`` layout), written by the reader after
  each committed micro-batch. Only a hint: when missing or unreadable, nothing is
  dropped.
* ``<vertex>.journal.start``: the first byte still kept (``.synced`` layout; missing:
  8, the whole journal). The server drops what a flow has committed once it is older
  than the dedup window (:mod:`.retention`): it writes this file (durably) first, then
  frees the bytes before it (a hole punched in the file: offsets do not move, the
  disk blocks are given back). Readers start at it, and a reader asked to resume
  before it fails: those events are gone.

A torn final record (a crash mid-write) fails its length or CRC check: readers
stop before it, and the server cuts it off when it restarts on the same
directory (keeping the copy). A journal never shrinks below what was fsync'ed,
and a dropped prefix keeps its offsets, so a reader's byte offset (the input's
snapshot) stays valid across restarts.
One server at a time may own a directory's journals (an ``flock`` on each file).
Vertex names are file names: ``[A-Za-z0-9][A-Za-z0-9._-]*``.

:mod:`flowspark.engine.recovery_files` checks these files too (its own copy of
the magic and the ``.synced`` layout): a change here is a change there.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import mmap
import os
import re
import struct
import time
import zlib
from collections import deque
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Any

from flowspark.api.udf.times import utc_from_ms
from flowspark.api.udf.types import Datum

__all__ = [
    "JournalRecord",
    "Journal",
    "read_journal",
    "read_records",
    "encode_record",
    "check_vertex",
    "JOURNAL_MAGIC",
    "JOURNAL_SUFFIX",
    "SYNCED_SUFFIX",
    "START_SUFFIX",
    "COMMITTED_SUFFIX",
]

log = logging.getLogger(__name__)

# A read covers at most this many bytes (a single larger record is read whole).
READ_MAX_BYTES = 8 * 1024 * 1024

JOURNAL_MAGIC = b"FSPKHTJ1"
JOURNAL_SUFFIX = ".journal"
SYNCED_SUFFIX = ".journal.synced"
START_SUFFIX = ".journal.start"
COMMITTED_SUFFIX = ".journal.committed"
_HEADER = struct.Struct("<II")  # body length, CRC-32 of the body
_BODY = struct.Struct("<qIHH")  # event time ms, meta length, key count, header count
# The synced length, then its complement: the server updates it in place (a shared
# mmap) while readers read it, and a reader can see a torn or all-zero value
# (measured: 3.6 % of reads racing a busy writer); a pair that does not check out
# is read again.
_SYNCED = struct.Struct("<QQ")
_MASK64 = (1 << 64) - 1
_MAX_RECORD = 64 * 1024 * 1024  # a larger length field is corruption, not a record

_VERTEX_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


@dataclass(frozen=True)
class JournalRecord:
    """One journaled event. ``offset`` is where its record starts, ``end`` where it ends."""

    id: str
    event_time_ms: int
    keys: list[str]
    headers: dict[str, str]
    payload: bytes
    offset: int = 0
    end: int = 0


def encode_record(
    event_id: str, event_ms: int, keys: list[str], headers: dict[str, str], payload: bytes
) -> bytes:
    """One journal record (all strings are ASCII without NUL: the server checks)."""
    meta = "\0".join([event_id, *keys, *chain.from_iterable(headers.items())]).encode("ascii")
    body = _BODY.pack(event_ms, len(meta), len(keys), len(headers)) + meta + payload
    return _HEADER.pack(len(body), zlib.crc32(body)) + body


# What _parse makes of each record (the ``mode`` of read_records).
IDS, RECORDS, DATUMS = 0, 1, 2


def _parse(buf: bytes, base: int, limit: int, mode: int) -> tuple[list[Any], int, int]:
    """Parse the valid, complete records at the start of ``buf`` (which starts at file
    offset ``base``), at most ``limit``. Returns ``(items, used, need)``: items are
    ids, :class:`JournalRecord` s or :class:`Datum` s (by ``mode``); ``used`` the
    bytes they span; ``need`` the whole length of the next record when it is
    incomplete in ``buf``, -1 when it is invalid (torn or corrupt), 0 when ``buf``
    or ``limit`` ran out."""
    items: list[Any] = []
    append = items.append
    view = memoryview(buf)
    size = len(buf)
    pos = 0
    unpack_header = _HEADER.unpack_from
    unpack_body = _BODY.unpack_from
    crc32 = zlib.crc32
    make = Datum._make
    body_size = _BODY.size
    last_ms: int | None = None
    last_t = utc_from_ms(0)  # replaced at the first datum (last_ms is None)
    while len(items) < limit:
        if size - pos < 8:
            return items, pos, (8 if pos < size else 0)
        length, crc = unpack_header(buf, pos)
        if length < body_size or length > _MAX_RECORD:
            return items, pos, -1
        end = pos + 8 + length
        if end > size:
            return items, pos, 8 + length
        if crc32(view[pos + 8 : end]) != crc:
            return items, pos, -1
        event_ms, meta_len, n_keys, n_headers = unpack_body(buf, pos + 8)
        meta_start = pos + 8 + body_size
        meta_end = meta_start + meta_len
        if meta_end > end:
            return items, pos, -1
        try:
            meta = str(view[meta_start:meta_end], "ascii")
        except UnicodeDecodeError:
            return items, pos, -1
        if mode == IDS:
            cut = meta.find("\0")
            append(meta if cut < 0 else meta[:cut])
        else:
            parts = meta.split("\0")
            if len(parts) != 1 + n_keys + 2 * n_headers:
                return items, pos, -1
            keys = parts[1 : 1 + n_keys]
            headers = dict(zip(parts[1 + n_keys :: 2], parts[2 + n_keys :: 2]))
            payload = bytes(view[meta_end:end])
            if mode == DATUMS:
                if event_ms != last_ms:  # events often share a millisecond
                    last_ms, last_t = event_ms, utc_from_ms(event_ms)
                append(make(keys, payload, last_t, last_t, headers, parts[0], []))
            else:
                append(JournalRecord(parts[0], event_ms, keys, headers, payload, base + pos,
                                     base + end))  # fmt: skip
        pos = end
    return items, pos, 0


def read_records(
    fd: int, start: int, end: int, limit: int, mode: int, max_bytes: int = READ_MAX_BYTES
) -> tuple[list[Any], int, bool]:
    """Records from ``[start, end)`` of an open journal: ``(items, offset after them,
    stopped at an invalid record)``. Reads about ``max_bytes`` at a time."""
    items: list[Any] = []
    pos = start
    while pos < end and len(items) < limit:
        want = min(end - pos, max_bytes)
        buf = os.pread(fd, want, pos)
        got, used, need = _parse(buf, pos, limit - len(items), mode)
        if not got and need > len(buf) and pos + need <= end:  # one record larger than want
            buf = os.pread(fd, need, pos)
            got, used, need = _parse(buf, pos, limit - len(items), mode)
        items.extend(got)
        pos += used
        if need < 0:
            return items, pos, True
        if used == 0 or len(buf) < want:
            break
    return items, pos, False


def pack_synced(size: int) -> bytes:
    return _SYNCED.pack(size, ~size & _MASK64)


def read_synced(path: str) -> int | None:
    """The fsync'ed length recorded next to a journal, or None when there is none.

    >>> import tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "in.journal.synced")
    >>> with open(path, "wb") as f:
    ...     _ = f.write(pack_synced(1234))
    >>> read_synced(path)
    1234
    """
    for attempt in range(10_000):
        try:
            with open(path, "rb") as f:
                raw = f.read(_SYNCED.size)
        except FileNotFoundError:
            return None
        if len(raw) < _SYNCED.size:
            return None
        size, check = _SYNCED.unpack(raw)
        if size == ~check & _MASK64:
            return size
        if attempt % 100 == 99:
            time.sleep(0.001)  # read while the server was writing it: again
    raise RuntimeError(f"{path}: the synced length never reads consistently")


def read_start(journal_path: str | Path) -> int:
    """The first byte the journal at ``journal_path`` still keeps (its ``.start``
    file; the first record when there is none).

    >>> import tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "in.journal")
    >>> read_start(path)
    8
    >>> write_offset_file(path[: -len(JOURNAL_SUFFIX)] + START_SUFFIX, 4096, durable=False)
    >>> read_start(path)
    4096
    """
    path = str(journal_path)
    start = read_synced(path[: -len(JOURNAL_SUFFIX)] + START_SUFFIX)
    return len(JOURNAL_MAGIC) if start is None else max(start, len(JOURNAL_MAGIC))


def write_offset_file(path: str | Path, value: int, durable: bool) -> None:
    """Write ``value`` to a ``.start`` or ``.committed`` file (the ``.synced`` layout).
    ``durable``: through a fsync'ed temporary file renamed over it (so a crash leaves
    the old value or the new one); else a plain write in place (a torn one reads as
    none)."""
    path = Path(path)
    if not durable:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            os.pwrite(fd, pack_synced(value), 0)
        finally:
            os.close(fd)
        return
    temporary = path.with_name(path.name + ".tmp")
    with open(temporary, "wb") as f:
        f.write(pack_synced(value))
        f.flush()
        os.fsync(f.fileno())
    os.replace(temporary, path)
    _fsync_dir(path.parent)


def read_journal(path: str | Path, offset: int = 0) -> list[JournalRecord]:
    """Every complete, valid record of the journal at ``path`` from ``offset`` (or
    the first byte it keeps, if later) on (a torn tail is ignored), without regard to
    the ``.synced`` length.

    >>> import tempfile
    >>> d = tempfile.mkdtemp()
    >>> with open(os.path.join(d, "in.journal"), "wb") as f:
    ...     _ = f.write(JOURNAL_MAGIC + encode_record("a", 5, ["k"], {"h": "v"}, b"x") + b"torn")
    >>> [(r.id, r.event_time_ms, r.keys, r.headers, r.payload) for r in read_journal(f.name)]
    [('a', 5, ['k'], {'h': 'v'}, b'x')]
    """
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        size = os.fstat(fd).st_size
        start = max(offset, read_start(path))
        check_magic(fd, str(path))
        records, _, _ = read_records(fd, start, size, 1 << 62, RECORDS)
        return records
    finally:
        os.close(fd)


def check_magic(fd: int, path: str) -> bool:
    """True when the file starts with the journal magic, False when it is a (torn)
    prefix of it; ValueError when it is not a journal."""
    head = os.pread(fd, len(JOURNAL_MAGIC), 0)
    if head == JOURNAL_MAGIC:
        return True
    if JOURNAL_MAGIC.startswith(head):
        return False
    raise ValueError(f"{path} is not a flowspark HTTP journal")


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def check_vertex(vertex: str) -> str:
    if not isinstance(vertex, str) or not _VERTEX_NAME.fullmatch(vertex):
        raise ValueError(
            f"an HTTP source vertex name must match {_VERTEX_NAME.pattern}; got {vertex!r}"
        )
    return vertex


class Journal:
    """The server side of one vertex's journal: the append fd, the id index, the
    ids in flight, and the groups of ids kept (for :mod:`.retention`)."""

    def __init__(self, directory: Path, vertex: str) -> None:
        self.directory = directory
        self.path = directory / (vertex + JOURNAL_SUFFIX)
        self.synced_path = directory / (vertex + SYNCED_SUFFIX)
        self.start_path = directory / (vertex + START_SUFFIX)
        self.committed_path = directory / (vertex + COMMITTED_SUFFIX)
        self.start = len(JOURNAL_MAGIC)  # the first byte kept
        self.punched = len(JOURNAL_MAGIC)  # the first byte whose blocks were not freed
        # One entry per fsync'ed group, oldest first: (its end, monotonic time it was
        # synced, its ids). The index holds exactly the ids of these groups.
        self.kept: deque[tuple[int, float, list[str]]] = deque()
        self.fd = -1
        self.synced_fd = -1
        self.synced_map: mmap.mmap | None = None
        self.index = 0  # in the server's list of journals
        self.size = 0  # bytes written
        self.synced_size = 0  # bytes fsync'ed
        self.ids: set[str] = set()
        self.inflight: set[str] = set()
        self.broken: str | None = None

    def open(self) -> None:
        """Open and lock the files (quick; the index is rebuilt by :meth:`rebuild`)."""
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self.fd)
            self.fd = -1
            raise RuntimeError(f"{self.path} is in use by another HTTP source server") from None
        try:
            check_magic(self.fd, str(self.path))
        except ValueError:
            self.close()
            raise
        self.synced_fd = os.open(self.synced_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)

    def rebuild(self) -> None:
        """Index every journaled id, truncate a torn tail, record the synced length."""
        size = os.fstat(self.fd).st_size
        if not check_magic(self.fd, str(self.path)):  # new, or torn while being created
            os.ftruncate(self.fd, 0)
            os.write(self.fd, JOURNAL_MAGIC)
            size = len(JOURNAL_MAGIC)
            os.fsync(self.fd)
            _fsync_dir(self.directory)
        self.start = read_start(self.path)
        self.punched = len(JOURNAL_MAGIC)  # (not known: punched again on the first drop)
        if self.start > size:
            raise RuntimeError(
                f"{self.start_path} says the journal keeps bytes from {self.start} on, but "
                f"{self.path} is {size} bytes long: it was replaced or cut short"
            )
        ids, end, _ = read_records(self.fd, self.start, size, 1 << 62, IDS)
        if end < size:  # a torn tail (or corruption): keep a copy, then cut it off
            aside = self.path.with_name(f"{self.path.name}.torn.{end}")
            with open(aside, "wb") as f:
                pos = end
                while pos < size:
                    chunk = os.pread(self.fd, min(size - pos, READ_MAX_BYTES), pos)
                    if not chunk:
                        break
                    f.write(chunk)
                    pos += len(chunk)
                f.flush()
                os.fsync(f.fileno())
            log.warning(
                "%s: cut off %d invalid bytes at byte %d (a torn tail); copied to %s",
                self.path,
                size - end,
                end,
                aside,
            )
            os.ftruncate(self.fd, end)
        os.fsync(self.fd)
        self.ids = set(ids)
        if len(self.ids) != len(ids):
            log.warning("%s holds %d duplicate ids", self.path, len(ids) - len(self.ids))
        self.kept.clear()
        if ids:  # kept a whole dedup window from now
            self.kept.append((end, time.monotonic(), ids))
        self.size = self.synced_size = end
        os.pwrite(self.synced_fd, pack_synced(end), 0)
        os.ftruncate(self.synced_fd, _SYNCED.size)
        os.fsync(self.synced_fd)
        # Updated in memory after each fsync (no syscall); readers see it through
        # the page cache.
        self.synced_map = mmap.mmap(self.synced_fd, _SYNCED.size)
        _fsync_dir(self.directory)

    def write(self, data: bytes) -> None:
        """Append ``data`` (not yet durable: see :meth:`synced`); on failure, cut the
        journal back to where it was."""
        if self.broken:
            raise OSError(self.broken)
        start = self.size
        try:
            view = memoryview(data)
            while view:
                written = os.write(self.fd, view)
                view = view[written:]
        except OSError:
            self.rollback(start)
            raise
        self.size = start + len(data)

    def synced(self, size: int) -> None:
        """The first ``size`` bytes are fsync'ed: tell the readers."""
        self.synced_size = size
        assert self.synced_map is not None
        self.synced_map[:] = pack_synced(size)

    def remember(self, end: int, ids: list[str]) -> None:
        """A group of events ending at byte ``end`` is fsync'ed: index its ids."""
        self.ids.update(ids)
        self.kept.append((end, time.monotonic(), ids))

    def forget_through(self, committed: int, synced_before: float) -> int | None:
        """Drop from the index the oldest groups that end at or before byte
        ``committed`` and were synced before the monotonic time ``synced_before``;
        return the new first byte kept (``None``: nothing dropped). The caller makes
        it durable (:func:`.retention.drop_prefix`) before it frees anything."""
        kept = self.kept
        new_start = None
        while kept and kept[0][0] <= committed and kept[0][1] < synced_before:
            end, _, ids = kept.popleft()
            self.ids.difference_update(ids)
            new_start = end
        return new_start

    def rollback(self, size: int | None = None) -> None:
        """Cut the journal back to ``size`` (default: its fsync'ed length)."""
        size = self.synced_size if size is None else size
        try:
            os.ftruncate(self.fd, size)
            os.fsync(self.fd)
        except OSError as exc:
            self.broken = f"journal {self.path} is unusable: {exc}"
            log.error("HTTP source: %s", self.broken)
        self.size = size

    def close(self) -> None:
        if self.synced_map is not None:
            with contextlib.suppress(Exception):
                self.synced_map.close()
            self.synced_map = None
        for fd in (self.fd, self.synced_fd):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.fd = self.synced_fd = -1
