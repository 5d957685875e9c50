"""Name the damaged file when Spark cannot read a recovery directory.

Spark reports a truncated state-store file as ``CANNOT_LOAD_STATE_STORE`` with an
``EOFException`` and no file name, and a damaged offsets or commit log in its own
words. :func:`name_damage` turns such a failure into one line a user can act on:
which kind of file, its path, the batch, and the choices.

The state files are checked by their structure, without decompressing them: a
changelog, delta or snapshot file is a chain of LZ4 blocks (Spark's
``LZ4BlockOutputStream``: an 8-byte magic, a token byte, then the compressed length,
the decompressed length and a checksum, little-endian) that ends with an empty
block; a RocksDB snapshot is a zip file. A file cut short lacks its end block.

>>> end = b"LZ4Block" + bytes([0x15]) + bytes(12)
>>> block_stream_problem(b"LZ4Block" + bytes([0x25]) + (3).to_bytes(4, "little")
...                      + bytes(8) + b"abc" + end) is None
True
>>> block_stream_problem(end[:15])
'it is cut short (no end block)'
"""

from __future__ import annotations

import io
import re
import zipfile

from flowspark.engine.errors import FlowRunError
from flowspark.engine.recovery_files import LogFileError, numbered_files, parse_log
from flowspark.runtime.storage import Location, StorageError

__all__ = [
    "RecoveryDamageError",
    "block_stream_problem",
    "log_file_problem",
    "name_damage",
    "state_file_problem",
]

_MAGIC = b"LZ4Block"
_HEADER = len(_MAGIC) + 1 + 12
_BLOCK_FILES = (".changelog", ".delta", ".snapshot")
_LOG_FILE = re.compile(r"Failed to read log file (\S+?)\.?(?:\s|$)")
_INCOMPLETE = re.compile(r"[Ii]ncomplete log file")
_STATE_ERRORS = ("CANNOT_LOAD_STATE_STORE", "CANNOT_READ_STATE_STORE", "STATE_STORE_")
_CHOICES = (
    "restore the recovery directory from a copy, or start over with a new one "
    "(a new -r directory; the output is then written again from the start)"
)


class RecoveryDamageError(FlowRunError):
    """A file of the recovery directory is damaged; the run cannot go on (exit 1)."""


def block_stream_problem(data: bytes) -> str | None:
    """What is wrong with an LZ4 block stream (a state-store file), if anything."""
    at = 0
    while True:
        header = data[at : at + _HEADER]
        if len(header) < _HEADER:
            return "it is cut short (no end block)" if data else "it is empty"
        if header[: len(_MAGIC)] != _MAGIC:
            return f"it has no block header at byte {at}"
        compressed = int.from_bytes(header[9:13], "little")
        original = int.from_bytes(header[13:17], "little")
        at += _HEADER
        if compressed == 0 and original == 0:
            return None if at == len(data) else f"it has {len(data) - at} bytes after its end"
        if at + compressed > len(data):
            return "it is cut short (a block runs past the end of the file)"
        at += compressed


def state_file_problem(location: Location) -> str | None:
    """What is wrong with one state-store file, if anything (others: None)."""
    name = location.name
    if not name.endswith((*_BLOCK_FILES, ".zip")):
        return None
    try:
        with location.open_read() as f:
            data = f.read()
    except (OSError, StorageError) as exc:
        return f"it cannot be read ({exc})"
    if name.endswith(".zip"):
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                bad = archive.testzip()
        except (zipfile.BadZipFile, OSError, ValueError) as exc:
            return f"it is not a whole zip file ({exc})"
        return None if bad is None else f"its member {bad} is damaged"
    return block_stream_problem(data)


def log_file_problem(location: Location) -> str | None:
    """What is wrong with an offsets or commits log file, if anything: Spark writes a
    version line (``v1``) and then JSON lines (see
    :func:`~flowspark.engine.recovery_files.parse_log`), at least one."""
    try:
        with location.open_read() as f:
            _, values = parse_log(f.read())
    except LogFileError as exc:
        return str(exc)
    except (OSError, StorageError) as exc:
        return f"it cannot be read ({exc})"
    if not values:
        return "it is incomplete (a version line and nothing after it)"
    return None


def name_damage(text: str, checkpoint: Location) -> RecoveryDamageError | None:
    """The one-line error for a Spark failure (its message ``text``) caused by a
    damaged file of the recovery directory ``checkpoint``; None if none is found.

    Spark's own words for a damaged log vary (``Incomplete log file``, ``next on
    empty iterator``, a JSON parser's complaint), so the offsets and commit logs
    (Spark keeps about a hundred of each) are checked whenever Spark fails; the
    state files only when Spark says it could not load the state."""
    if any(marker in text for marker in _STATE_ERRORS):
        return _damaged_state(text, checkpoint)
    damaged = _damaged_log(checkpoint)
    if damaged is None and (found := _LOG_FILE.search(text) or _INCOMPLETE.search(text)):
        shown = found.group(1) if found.groups() else f"{checkpoint.shown}/offsets or commits"
        return RecoveryDamageError(
            f"the recovery directory is damaged: Spark cannot read its log file {shown}: {_CHOICES}"
        )
    return damaged


def _damaged_log(checkpoint: Location) -> RecoveryDamageError | None:
    for kind in ("offsets", "commits"):
        for batch, name in _listed(checkpoint.child(kind), "*", suffixed=False):
            where = checkpoint.child(kind, name)
            problem = log_file_problem(where)
            if problem is not None:
                return _error(f"the {_LOG_KIND[kind]} file", where, batch, problem)
    return None


_LOG_KIND = {"offsets": "offsets log", "commits": "commit log"}


def _damaged_state(text: str, checkpoint: Location) -> RecoveryDamageError:
    state = checkpoint.child("state")
    for version, name in _listed(state, "**/*", suffixed=True):
        where = state.child(*name.split("/"))
        problem = state_file_problem(where)
        if problem is not None:  # state version v: after batch v - 1
            return _error("a keyed-state file", where, version - 1, problem)
    first = next((line for line in text.splitlines() if "STATE_STORE" in line), "")
    return RecoveryDamageError(
        f"the recovery directory is damaged: Spark cannot load the keyed state in "
        f"{state.shown} ({first.strip()[:200]}): {_CHOICES}"
    )


def _listed(directory: Location, pattern: str, suffixed: bool) -> list[tuple[int, str]]:
    """The numbered files below ``directory`` whose names match ``pattern`` (see
    :func:`~flowspark.engine.recovery_files.numbered_files`: a log's ``5``, with
    ``suffixed`` a state file's ``5.delta``), in name order; none when it cannot be
    listed."""
    try:
        names = directory.files(pattern)
    except StorageError:
        return []
    return numbered_files(names, suffixed=suffixed)


def _error(kind: str, where: Location, batch: int | None, problem: str) -> RecoveryDamageError:
    of_batch = f" (batch {batch})" if batch is not None and batch >= 0 else ""
    return RecoveryDamageError(
        f"the recovery directory is damaged: {kind} {where.shown}{of_batch}: {problem}; {_CHOICES}"
    )
