"""How long the HTTP source keeps what it journaled: so a run that lasts for weeks
holds a bounded journal on disk and a bounded id index in memory.

An event is kept while either holds:

* the flow that reads the journal has not committed it yet (the reader writes its
  committed byte offset to ``<vertex>.journal.committed`` after each committed
  micro-batch: :func:`note_committed`);
* it was journaled less than the dedup window ago (default 120 s,
  ``$FLOWSPARK_HTTP_DEDUP_WINDOW`` in seconds): a client that retries an id within
  the window is answered 409, as before.

Past both, the server forgets the ids and drops the bytes (:func:`drop_prefix`):
it writes the new first byte to ``<vertex>.journal.start`` durably, then punches a
hole over the bytes before it (Linux ``fallocate``): the file keeps its length and
every offset, and the disk blocks are freed. Where holes cannot be punched (another
OS, a file system without them), the bytes stay on disk and a warning says so once;
the id index is bounded all the same.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import logging
import os
from pathlib import Path

from flowspark.connectors.numaflow.http.journal import (
    JOURNAL_MAGIC,
    read_synced,
    write_offset_file,
)

__all__ = [
    "DEDUP_WINDOW_ENV",
    "DEFAULT_DEDUP_WINDOW",
    "dedup_window",
    "drop_prefix",
    "note_committed",
    "punch_hole",
    "read_committed",
]

log = logging.getLogger(__name__)

DEDUP_WINDOW_ENV = "FLOWSPARK_HTTP_DEDUP_WINDOW"
DEFAULT_DEDUP_WINDOW = 120.0  # seconds

_FALLOC_FL_KEEP_SIZE = 0x01
_FALLOC_FL_PUNCH_HOLE = 0x02


def dedup_window(value: float | None = None) -> float:
    """The dedup window in seconds: ``value``, else ``$FLOWSPARK_HTTP_DEDUP_WINDOW``,
    else 120.

    >>> dedup_window(30)
    30.0
    """
    if value is None:
        raw = os.environ.get(DEDUP_WINDOW_ENV, "").strip()
        if not raw:
            return DEFAULT_DEDUP_WINDOW
        try:
            value = float(raw)
        except ValueError:
            raise ValueError(
                f"{DEDUP_WINDOW_ENV} must be a number of seconds; got {raw!r}"
            ) from None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ValueError(f"the HTTP dedup window must be a number of seconds > 0; got {value!r}")
    return float(value)


def note_committed(committed_path: str | Path, offset: int) -> None:
    """The reader's side: every event before byte ``offset`` is in a committed
    micro-batch. A plain write in place (a lost or torn one only delays a trim)."""
    write_offset_file(committed_path, offset, durable=False)


def read_committed(committed_path: str | Path) -> int:
    """The byte offset the reader last said is committed (0: none said)."""
    try:
        return read_synced(str(committed_path)) or 0
    except RuntimeError:  # torn: as if not said yet
        return 0


def _fallocate() -> object | None:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name, use_errno=True)
        call = libc.fallocate
    except (OSError, AttributeError):
        return None
    call.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    call.restype = ctypes.c_int
    return call


_FALLOCATE = _fallocate()
_warned = False


def punch_hole(fd: int, start: int, end: int) -> bool:
    """Free the disk blocks of bytes ``[start, end)`` of the open file ``fd``, keeping
    its length (they read as zeros). False when this system cannot.

    >>> import tempfile
    >>> with tempfile.TemporaryFile() as f:
    ...     _ = f.write(b"x" * 3 * 65536); f.flush()
    ...     punch_hole(f.fileno(), 0, 65536), os.fstat(f.fileno()).st_size
    (True, 196608)
    """
    if end <= start:
        return True
    if _FALLOCATE is None:
        return False
    mode = _FALLOC_FL_PUNCH_HOLE | _FALLOC_FL_KEEP_SIZE
    if _FALLOCATE(fd, mode, start, end - start) != 0:  # type: ignore[operator]
        code = ctypes.get_errno()
        if code in (errno.EOPNOTSUPP, errno.ENOSYS):
            return False
        raise OSError(code, f"punching a hole in a journal failed: {os.strerror(code)}")
    return True


def drop_prefix(start_path: str | Path, fd: int, punched: int, new_start: int) -> int:
    """Make ``new_start`` the journal's first kept byte (durably), then free the
    bytes from ``punched`` (the first not freed yet) to it. Returns the new first
    byte not freed. The journal's magic (its first 8 bytes) always stays."""
    write_offset_file(start_path, new_start, durable=True)
    # A hole frees only the blocks wholly inside it: start at the block that holds
    # ``punched`` (its dead head was zeroed, not freed, by the drop before), or a
    # block would stay behind at every drop.
    block = os.fstat(fd).st_blksize or 4096
    begin = max(punched - punched % block, len(JOURNAL_MAGIC))
    global _warned
    if not punch_hole(fd, begin, new_start):
        if not _warned:
            _warned = True
            log.warning(
                "HTTP source: this file system cannot punch holes; journals keep the "
                "bytes of events already delivered on disk (their ids are dropped all the same)"
            )
        return punched
    return new_start
