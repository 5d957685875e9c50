"""Readers of the files a recovery directory holds, for ``python -m flowspark.recovery``.

Pure Python, no Spark: each function reads one kind of file far enough to say what
it holds or why it is damaged, and never runs code stored in it (a sink snapshot
is a pickle: :func:`peek_pickle` rebuilds it with stand-ins for every class that is
not a plain Python value).

The formats:

* Spark's offsets and commit logs (``offsets/N``, ``commits/N``): a version line
  (``v1``), then JSON lines. An offsets file has the batch's metadata
  (``batchWatermarkMs``, ``batchTimestampMs``, ``conf``), then one line per source
  (``-`` for a source without offsets).
* State-store files: ``N.delta``, ``N.snapshot``, ``N.changelog`` (state version
  ``N``, after batch ``N - 1``; LZ4 block streams, checked by
  :mod:`flowspark.engine.recovery_damage`), RocksDB checkpoints ``N.zip`` and tables
  ``*.sst`` (an 8-byte magic number ends each).
* The HTTP source's journal (see :mod:`flowspark.connectors.numaflow.http.journal`):
  ``FSPKHTJ1``, then records ``u32 length | u32 CRC-32 | body``.

>>> parse_log(b'v1\\n{"batchTimestampMs": 5}\\n-')
('v1', [{'batchTimestampMs': 5}, None])
"""

from __future__ import annotations

import io
import json
import pickle
import re
import struct
import zlib
from collections.abc import Iterable
from typing import IO, Any

__all__ = [
    "LogFileError",
    "Opaque",
    "journal_problem",
    "journal_synced",
    "numbered_files",
    "parse_log",
    "peek_pickle",
    "sst_problem",
    "state_file_version",
]


class LogFileError(ValueError):
    """A Spark log file (offsets, commits) that does not parse."""


def parse_log(data: bytes) -> tuple[str, list[Any]]:
    """A Spark metadata log file's version line and its JSON lines (``None`` for a
    ``-`` line); :class:`LogFileError` saying what is wrong otherwise.

    >>> parse_log(b'v1\\n{"nextBatchWatermarkMs":0}')
    ('v1', [{'nextBatchWatermarkMs': 0}])
    >>> try:
    ...     parse_log(b'v1\\n{"nextBatchWater')
    ... except LogFileError as exc:
    ...     print(exc)
    line 2 is not whole JSON (the file was cut short or changed)
    """
    if not data:
        raise LogFileError("it is empty")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise LogFileError("it is not text") from None
    lines = text.split("\n")
    version = lines[0]
    if not re.fullmatch(r"v[0-9]+", version):
        raise LogFileError("its first line is not a version (v1)")
    values: list[Any] = []
    for number, line in enumerate(lines[1:], start=2):
        if line == "-":
            values.append(None)
            continue
        if not line and number == len(lines):
            continue  # a trailing newline
        try:
            values.append(json.loads(line))
        except ValueError:
            raise LogFileError(
                f"line {number} is not whole JSON (the file was cut short or changed)"
            ) from None
    return version, values


_NUMBER = re.compile(r"\d+")
_DIGIT_RUNS = re.compile(r"(\d+)")


def numbered_files(names: Iterable[str], suffixed: bool = False) -> list[tuple[int, str]]:
    """The numbered files among ``names`` (``/``-separated, relative to the folder
    listed) as ``(number, name)``, in name order with runs of digits compared by value
    (``2`` before ``10``, ``0/1/7.delta`` before ``1/0/5.delta``).

    A name is numbered when it is a number (decimal digits), as Spark names the files
    of its offsets and commit logs (``7``; not ``.7.crc``, not ``sub/7``). With
    ``suffixed``, a name in any folder is numbered when its base name is a number,
    alone or before a dot and a suffix, as state-store files are named
    (``0/3/12.delta``; also ``7.tmp``, but not ``.7.crc`` nor ``12_<uuid>.changelog``).

    >>> numbered_files(["10", "2", "2.tmp", ".3.crc", "sub/4", "x"])
    [(2, '2'), (10, '10')]
    >>> numbered_files(["1/0/5.delta", "0/1/7.delta", "0/1/x.delta", "2.tmp"], suffixed=True)
    [(7, '0/1/7.delta'), (5, '1/0/5.delta'), (2, '2.tmp')]
    """
    found = []
    for name in names:
        number = name.rsplit("/", 1)[-1].split(".", 1)[0] if suffixed else name
        if _NUMBER.fullmatch(number):
            found.append((int(number), name))
    found.sort(key=lambda item: _natural_key(item[1]))
    return found


def _natural_key(name: str) -> list[Any]:
    """``name`` split into text and numbers (every other part is a run of digits)."""
    return [int(part) if i % 2 else part for i, part in enumerate(_DIGIT_RUNS.split(name))]


# -- RocksDB ----------------------------------------------------------------------------

# The magic numbers that end an SST file (block-based, legacy block-based, plain table).
_SST_MAGICS = {0x88E241B785F4CFF7, 0xDB4775248B80FB57, 0x8242229663BF9564}


def sst_problem(f: IO[bytes], size: int) -> str | None:
    """Why a RocksDB table file is damaged (its footer's magic number is not at its
    end), or ``None``."""
    if size < 8:
        return f"truncated: {size} bytes"
    f.seek(size - 8)
    (magic,) = struct.unpack("<Q", f.read(8))
    return None if magic in _SST_MAGICS else "truncated: no table footer at its end"


_STATE_FILE = re.compile(r"([0-9]+)(?:_[0-9A-Za-z-]+)?\.(delta|snapshot|changelog|zip)")


def state_file_version(name: str) -> tuple[int, str] | None:
    """The state version and kind of a state-store file name (``5.delta``,
    ``12.zip``, ``7_<uuid>.changelog``), ``None`` for other files.

    >>> state_file_version("5.changelog"), state_file_version("000008-ab.sst")
    ((5, 'changelog'), None)
    """
    match = _STATE_FILE.fullmatch(name)
    return (int(match[1]), match[2]) if match else None


# -- pickles, without running what they name ----------------------------------------------


class Opaque:
    """Stands for an object of a class :func:`peek_pickle` does not rebuild."""

    qualname = "?"

    def __new__(cls, *args: Any, **kwargs: Any) -> Opaque:
        return object.__new__(cls)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.args = args

    def __setstate__(self, state: Any) -> None:
        self.state = state

    def __repr__(self) -> str:
        return f"<{self.qualname}>"


_PLAIN = {
    ("builtins", name)
    for name in ("set", "frozenset", "bytearray", "complex", "slice", "range", "object")
} | {("datetime", name) for name in ("datetime", "date", "time", "timedelta", "timezone")}


class _PeekUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _PLAIN:
            return super().find_class(module, name)
        return type(name, (Opaque,), {"qualname": f"{module}.{name}"})


def peek_pickle(data: bytes) -> Any:
    """The object pickled in ``data``, with an :class:`Opaque` stand-in for every
    object whose class is not a plain Python value (no user code runs); raises
    ``pickle.UnpicklingError`` (or ``EOFError``, ``ValueError``) on a damaged pickle.

    >>> import collections
    >>> peek_pickle(pickle.dumps({"last": (4, [10920])}))
    {'last': (4, [10920])}
    >>> peek_pickle(pickle.dumps(collections.Counter()))
    <collections.Counter>
    """
    return _PeekUnpickler(io.BytesIO(data)).load()


# -- the HTTP source's journal ----------------------------------------------------------------

_JOURNAL_MAGIC = b"FSPKHTJ1"
_JOURNAL_RECORD = struct.Struct("<II")  # body length, CRC-32 of the body
_JOURNAL_MIN_BODY = 16
_SYNCED = struct.Struct("<QQ")


def journal_synced(data: bytes | None) -> int | None:
    """The fsync'ed length in a journal's ``.synced`` file (``None``: none, or unreadable).

    >>> journal_synced(_SYNCED.pack(1234, ~1234 & (1 << 64) - 1))
    1234
    """
    if data is None or len(data) < _SYNCED.size:
        return None
    length, check = _SYNCED.unpack_from(data)
    return length if length == ~check & (1 << 64) - 1 else None


def journal_problem(
    f: IO[bytes], size: int, synced: int | None, start: int | None = None
) -> tuple[int, str | None]:
    """The number of complete, valid records of the HTTP source journal in ``f``
    (``size`` bytes) from byte ``start`` on (its ``.start`` file: what is before was
    dropped) and why it is damaged, or ``None``: a bad record before the ``synced``
    length, or not a journal (a torn tail past it is normal after a crash; the server
    cuts it off when it starts)."""
    f.seek(0)
    if f.read(len(_JOURNAL_MAGIC)) != _JOURNAL_MAGIC:
        return 0, "not an HTTP source journal (no FSPKHTJ1 header)"
    pos, records = max(start or 0, len(_JOURNAL_MAGIC)), 0
    if pos > size:
        return 0, f"cut short: its .start file says it keeps bytes from {pos} on"
    f.seek(pos)
    while pos + _JOURNAL_RECORD.size <= size:
        length, crc = _JOURNAL_RECORD.unpack(f.read(_JOURNAL_RECORD.size))
        if length < _JOURNAL_MIN_BODY or pos + _JOURNAL_RECORD.size + length > size:
            break
        if zlib.crc32(f.read(length)) != crc:
            break
        pos += _JOURNAL_RECORD.size + length
        records += 1
    if synced is not None and pos < synced:
        return records, f"damaged: valid records end at byte {pos}, but {synced} bytes were synced"
    return records, None
