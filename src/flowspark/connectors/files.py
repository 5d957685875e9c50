"""Text files: line inputs with byte offsets, exactly-once line outputs.

Inputs are :class:`~flowspark.api.inputs.SeekableInput` s: Spark's checkpoint keeps
byte offsets, executors read the bytes themselves, and a restart resumes at the
first unprocessed line. An input's path is a local path or a filesystem URI
(``s3a://bucket/logs/``, ``hdfs://nn/logs``, ``file:///data``): the driver lists and
sizes the files, the executors open them, both through
:mod:`flowspark.runtime.storage`, so on a cluster they need no shared disk.
Outputs truncate back to the last committed offset when Spark replays a
micro-batch, so every line is written exactly once. ``FileOutput`` writes a local
(or mounted) path; ``DirOutput`` also writes an object store's URI, where a file
cannot be appended to or cut back: each of its parts is a folder of objects written
once, one per write (see :class:`_SegmentSink`).

>>> import tempfile, pathlib
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> _ = (d / "a.txt").write_text("one\\ntwo\\n")
>>> inp = FileInput(d / "a.txt")
>>> [line for split in inp.splits(str(d / "a.txt"), 0, inp.end_offset(str(d / "a.txt")), 1)
...  for batch in split.read() for line in batch]
['one', 'two']
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from zlib import adler32

from flowspark.api.inputs import SeekableInput, Split
from flowspark.api.outputs import PartitionedOutput, StatefulSink, WritesOn
from flowspark.api.sinks import Sink
from flowspark.api.sources import Source
from flowspark.runtime.storage import Location, StorageError, write_bytes_atomic

__all__ = [
    "FileInput",
    "DirInput",
    "CSVInput",
    "FileOutput",
    "DirOutput",
    "FileSource",
    "DirSource",
    "CSVSource",
    "FileSink",
    "DirSink",
]

# The most bytes one micro-batch reads from one file (keeps driver memory flat).
MAX_BYTES_PER_BATCH = 64 << 20
_BLOCK = 4 << 20


def _next_line_start(path: str, pos: int, end: int) -> int:
    """The offset just after the first newline at or after ``pos`` (at most ``end``)."""
    if pos <= 0:
        return 0
    with Location.parse(path).open_read() as f:
        f.seek(pos - 1)
        while pos < end:
            block = f.read(65536)
            if not block:
                return end
            nl = block.find(b"\n")
            if nl >= 0:
                return min(end, pos + nl)
            pos += len(block)
    return end


def _lines_after(path: str, start: int, end: int, lines: int) -> tuple[int, int]:
    """The offset after at most ``lines`` lines from ``start`` (at most ``end``), and
    how many lines that is."""
    with Location.parse(path).open_read() as f:
        f.seek(start)
        pos, count = start, 0
        while count < lines and pos < end:
            line = f.readline()
            if not line:
                break
            pos += len(line)
            count += 1
        return min(pos, end), count


def _offset_after_lines(path: str, start: int, end: int, lines: int) -> int:
    """The offset after ``lines`` lines from ``start`` (at most ``end``)."""
    return _lines_after(path, start, end, lines)[0]


class _LineSplit(Split):
    """Bytes ``[start, end)`` of a text file, read as lines without their newline."""

    def __init__(self, path: str, start: int, end: int, batch_size: int) -> None:
        self.path, self.start, self.end, self.batch_size = path, start, end, batch_size

    def read(self) -> Iterator[list[str]]:
        with Location.parse(self.path).open_read() as f:
            f.seek(self.start)
            remaining = self.end - self.start
            tail = b""
            while remaining > 0:
                block = f.read(min(_BLOCK, remaining))
                if not block:
                    break
                remaining -= len(block)
                block = tail + block
                cut = block.rfind(b"\n") + 1 if remaining > 0 else len(block)
                tail = block[cut:]
                if cut == 0:
                    continue
                text = _decode(block[:cut], self.path, f.tell() - len(block))
                if "\r" in text:  # text mode reads "\r\n" as a line end, as bytewax does
                    text = text.replace("\r\n", "\n")
                lines = text.split("\n")
                if text.endswith("\n"):
                    lines.pop()
                if lines:
                    yield lines
            if tail:
                yield [_decode(tail, self.path, f.tell() - len(tail)).removesuffix("\r")]


def _decode(data: bytes, path: str, at: int) -> str:
    """``data`` (read from byte ``at`` of ``path``) as UTF-8; a bad byte names the
    file, its line and the byte offset."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        offset = at + exc.start
        raise ValueError(
            f"{path}, line {_line_number(path, offset)}: not UTF-8 text (byte "
            f"{data[exc.start : exc.start + 1]!r} at offset {offset}: {exc.reason})"
        ) from None


def _line_number(path: str, offset: int) -> int:
    """The 1-based line of ``path`` holding byte ``offset``."""
    lines, pos = 1, 0
    with Location.parse(path).open_read() as f:
        while pos < offset:
            block = f.read(min(1 << 20, offset - pos))
            if not block:
                break
            lines += block.count(b"\n")
            pos += len(block)
    return lines


def _as_given(path: str | Path, location: Location) -> Path | str:
    """A local path as the user gave it (relative ones stay relative, so that part
    names in existing recovery directories still match); a URI in full."""
    if not location.is_local:
        return location.spec
    return location.local_path if "://" in str(path) else Path(path)


class _LineFiles(SeekableInput):
    """Shared logic of line-based file inputs: each file is a part."""

    def __init__(self, batch_size: int) -> None:
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive int; got {batch_size!r}")
        self.batch_size = batch_size

    def _path(self, part: str) -> str:
        raise NotImplementedError

    def end_offset(self, part: str) -> int:
        return Location.parse(self._path(part)).size()

    def offset_after(self, part: str, start: int, end: int, batches: int) -> int:
        return _offset_after_lines(self._path(part), start, end, batches * self.batch_size)

    def offset_after_items(self, part: str, start: int, end: int, items: int) -> tuple[int, int]:
        return _lines_after(self._path(part), start, end, items)

    def batch_limit(self, part: str, start: int, end: int) -> int:
        if end - start <= MAX_BYTES_PER_BATCH:
            return end
        return _next_line_start(self._path(part), start + MAX_BYTES_PER_BATCH, end)

    def splits(self, part: str, start: int, end: int, pieces: int) -> list[Split]:
        path = self._path(part)
        bounds = [start]
        for k in range(1, pieces):
            cut = _next_line_start(path, start + (end - start) * k // pieces, end)
            if bounds[-1] < cut < end:
                bounds.append(cut)
        bounds.append(end)
        return [_LineSplit(path, a, b, self.batch_size) for a, b in zip(bounds, bounds[1:])]


class FileInput(_LineFiles):
    """Read one text file line by line (lines without their ``\\n``)."""

    def __init__(self, path: str | Path, batch_size: int = 1000) -> None:
        super().__init__(batch_size)
        self.location = Location.parse(path)
        self.path = _as_given(path, self.location)

    def list_parts(self) -> list[str]:
        if not self.location.is_file():
            raise ValueError(f"input file `{self.location}` does not exist or is not a file")
        return [str(self.path)]

    def _path(self, part: str) -> str:
        return part


class DirInput(_LineFiles):
    """Read every file matching ``glob_pat`` in a directory; each file is a part."""

    def __init__(self, dir_path: str | Path, glob_pat: str = "*", batch_size: int = 1000) -> None:
        super().__init__(batch_size)
        self.location = Location.parse(dir_path)
        if self.location.is_local:  # a remote one is checked when listed (before Spark)
            self._check_dir()
        self.dir_path = _as_given(dir_path, self.location)
        self.glob_pat = glob_pat

    def _check_dir(self) -> None:
        if not self.location.exists():
            raise ValueError(f"input directory `{self.location}` does not exist")
        if not self.location.is_dir():
            raise ValueError(f"input directory `{self.location}` is not a directory")

    def list_parts(self) -> list[str]:
        if not self.location.is_local:
            self._check_dir()
        return self.location.files(self.glob_pat)

    def _path(self, part: str) -> str:
        if isinstance(self.dir_path, Path):
            return str(self.dir_path / part)
        return self.location.child(part).spec


def _lines_with_end(f: io.BufferedReader, end: int, path: str) -> Iterator[str]:
    while f.tell() < end:
        line = f.readline()
        if not line:
            return
        yield _decode(line, path, f.tell() - len(line))


class _CSVSplit(Split):
    """Records of a CSV file from byte ``start`` to ``end``, as dicts keyed by header."""

    def __init__(self, path: str, start: int, end: int, batch_size: int, fmtparams: dict) -> None:
        self.path, self.start, self.end = path, start, end
        self.batch_size, self.fmtparams = batch_size, fmtparams

    def read(self) -> Iterator[list[dict[str, str]]]:
        with Location.parse(self.path).open_read() as f:
            header_end, fieldnames = _csv_header(f, self.fmtparams, self.path)
            f.seek(max(self.start, header_end))
            reader = csv.DictReader(
                _lines_with_end(f, self.end, self.path), fieldnames, **self.fmtparams
            )
            rows: list[dict[str, str]] = []
            for row in reader:
                rows.append(row)
                if len(rows) >= 65536:
                    yield rows
                    rows = []
            if rows:
                yield rows


def _csv_header(f: io.BufferedReader, fmtparams: dict, path: str) -> tuple[int, list[str]]:
    f.seek(0)
    reader = csv.reader(_lines_with_end(f, 1 << 62, path), **fmtparams)
    fieldnames = next(reader, [])
    return f.tell(), fieldnames


class CSVInput(FileInput):
    """Read a CSV file row by row as dicts keyed by the header row.

    ``fmtparams`` are passed to :func:`csv.reader` (``delimiter=";"`` …).
    Offsets are byte offsets of record starts, so quoted newlines are safe.
    """

    def __init__(self, path: str | Path, batch_size: int = 1000, **fmtparams: Any) -> None:
        super().__init__(path, batch_size)
        self.fmtparams = fmtparams

    def _record_ends(self, start: int, end: int, limit_records: int | None, limit_pos: int) -> int:
        with self.location.open_read() as f:
            where = str(self.path)
            header_end, _ = _csv_header(f, self.fmtparams, where)
            pos = max(start, header_end)
            f.seek(pos)
            reader = csv.reader(_lines_with_end(f, end, where), **self.fmtparams)
            count = 0
            for row in reader:
                pos = f.tell()
                count += 1 if row else 0  # DictReader skips blank lines
                if (limit_records is not None and count >= limit_records) or pos >= limit_pos:
                    break
            return min(pos, end)

    def offset_after(self, part: str, start: int, end: int, batches: int) -> int:
        return self._record_ends(start, end, batches * self.batch_size, end)

    def offset_after_items(self, part: str, start: int, end: int, items: int) -> tuple[int, int]:
        return _lines_after(self._path(part), start, end, items)

    def batch_limit(self, part: str, start: int, end: int) -> int:
        if end - start <= MAX_BYTES_PER_BATCH:
            return end
        return self._record_ends(start, end, None, start + MAX_BYTES_PER_BATCH)

    def splits(self, part: str, start: int, end: int, pieces: int) -> list[Split]:
        return [_CSVSplit(part, start, end, self.batch_size, self.fmtparams)]


class _FileSink(StatefulSink):
    """Appends ``value + end`` per item; resumes by truncating to a byte offset.

    A file shorter than that offset was cut, replaced or deleted after the run
    wrote it: resuming would pad it with NUL bytes, so it fails, naming the file,
    and leaves it as it is.
    """

    def __init__(self, path: Path, resume_state: int | None, end: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._f = open(path, "ab")  # noqa: SIM115 - lives as long as the sink
        size = self._f.seek(0, os.SEEK_END)
        if resume_state is not None and size < resume_state:
            self._f.close()
            raise ValueError(
                f"output file {path} holds {size} bytes, but the recovery directory says "
                f"the run had written {resume_state}: the file was cut, replaced or deleted "
                "since; restore it, or start over with a new recovery directory"
            )
        self._f.truncate(resume_state or 0)
        self._f.seek(0, os.SEEK_END)
        self._end = end

    def write_batch(self, values: list[Any]) -> None:
        self._f.write(_lines(values, self._end))
        self._f.flush()
        os.fsync(self._f.fileno())

    def snapshot(self) -> int:
        return self._f.tell()

    def close(self) -> None:
        self._f.close()


def _lines(values: list[Any], end: str) -> bytes:
    """The bytes an output file gets for ``values``: each ``str()``-ed, then ``end``."""
    return "".join(f"{v if isinstance(v, str) else str(v)}{end}" for v in values).encode()


class _SegmentSink(StatefulSink):
    """A part of a :class:`DirOutput` on an object store: a folder holding one object
    per ``write_batch``, named by the part's count of writes (``000000000000``,
    ``000000000001``, …), so the part's lines are its objects' lines in name order.

    Its snapshot is that count. Built from it, the part first removes the objects
    numbered from it on (an interrupted attempt's writes), as a local file is cut back
    to its offset, so a replayed micro-batch writes the same names again, once. A
    folder with fewer objects than the count was cut after the run wrote it: it
    fails, naming the folder.
    """

    NAME = "{:012d}"

    def __init__(self, folder: Location, resume_state: int | None, end: str) -> None:
        self.folder, self.count, self.end = folder, resume_state or 0, end
        numbers = sorted(int(name) for name in folder.files("*") if name.isdigit())
        kept = sum(n < self.count for n in numbers)
        if kept != self.count:
            raise ValueError(
                f"output folder {folder.shown} holds {kept} objects, but the recovery "
                f"directory says the run had written {self.count}: "
                "it was cut or replaced since; restore it, or start over with a new "
                "recovery directory"
            )
        for number in numbers:
            if number >= self.count:  # written by an attempt that did not commit
                folder.child(self.NAME.format(number)).delete_file()

    def write_batch(self, values: list[Any]) -> None:
        if values:
            write_bytes_atomic(
                self.folder.child(self.NAME.format(self.count)), _lines(values, self.end)
            )
            self.count += 1

    def snapshot(self) -> int:
        return self.count


def _local_output_path(path: str | Path, kind: str) -> Path:
    """An output's path on this machine (a plain path or a ``file://`` URI)."""
    try:
        where = Location.parse(path)
    except StorageError as exc:
        raise ValueError(f"{kind}: {exc}") from None
    if not where.is_local:
        raise ValueError(
            f"{kind}: {where.shown}: file outputs append to a file and truncate it back "
            "when Spark replays a micro-batch, which an object store or HDFS cannot do: "
            "give a local path (or one on storage mounted here)"
        )
    return Path(_as_given(path, where))


class FileOutput(PartitionedOutput):
    """Write items line by line to one file, exactly once across restarts.

    Items may be ``(key, value)`` (``value`` is written, as in bytewax) or a
    plain value; non-strings are written with ``str()``. ``writes_on="executors"``
    (a flowspark extension) writes the file from the Spark task that owns it (see
    :class:`~flowspark.outputs.PartitionedOutput`).
    """

    def __init__(self, path: str | Path, end: str = "\n", writes_on: WritesOn = "driver") -> None:
        self.path = _local_output_path(path, "FileOutput")
        self.end = end
        self.writes_on = writes_on

    def list_parts(self) -> list[str]:
        return [str(self.path)]

    def part_fn(self, item_key: str) -> int:
        return 0

    def build_part(self, for_part: str, resume_state: Any | None) -> StatefulSink:
        return _FileSink(Path(for_part), resume_state, self.end)


def _default_namer(i: int, _n: int) -> str:
    return f"part_{i}"


def _default_assign(key: str) -> int:
    return adler32(key.encode())


class DirOutput(PartitionedOutput):
    """Write ``(key, value)`` items to ``file_count`` files in a directory.

    ``assign_file(key)`` picks the file (modulo ``file_count``);
    ``file_namer(i, file_count)`` names it. Exactly once across restarts.
    ``dir_path`` is a local path or a URI; on an object store (``s3a://…``) each file
    is a folder of objects written once, one per micro-batch that wrote to it, read
    in name order (an object store cannot append to a file or cut one back).
    ``writes_on="executors"`` (a flowspark extension) writes each file from the
    Spark task that owns it (see :class:`~flowspark.outputs.PartitionedOutput`), so
    the files are written side by side.
    """

    def __init__(
        self,
        dir_path: str | Path,
        file_count: int,
        file_namer: Callable[[int, int], str] = _default_namer,
        assign_file: Callable[[str], int] = _default_assign,
        end: str = "\n",
        writes_on: WritesOn = "driver",
    ) -> None:
        if not isinstance(file_count, int) or file_count < 1:
            raise ValueError(f"file_count must be a positive int; got {file_count!r}")
        try:
            where = Location.parse(dir_path)
        except StorageError as exc:
            raise ValueError(f"DirOutput: {exc}") from None
        self.dir_path = Path(_as_given(dir_path, where)) if where.is_local else where.spec
        self.file_count = file_count
        self.file_namer = file_namer
        self.assign_file = assign_file
        self.end = end
        self.writes_on = writes_on

    def list_parts(self) -> list[str]:
        return [self.file_namer(i, self.file_count) for i in range(self.file_count)]

    def part_fn(self, item_key: str) -> int:
        return self.assign_file(item_key)

    def build_part(self, for_part: str, resume_state: Any | None) -> StatefulSink:
        if isinstance(self.dir_path, Path):
            return _FileSink(self.dir_path / for_part, resume_state, self.end)
        return _SegmentSink(Location.parse(self.dir_path).child(for_part), resume_state, self.end)


# -- bytewax 0.21's names -------------------------------------------------------------


def _get_path_dev(path: Path) -> str:
    """bytewax's default filesystem id of a path: its device number."""
    return hex(Path(path).stat().st_dev)


class FileSource(FileInput, Source[str]):
    """bytewax 0.21's ``FileSource``: :class:`FileInput` under its 0.21 name.

    ``get_fs_id`` is accepted and not called: bytewax uses it to read a file
    once when several workers see it; flowspark reads each path once anyway.
    """

    def __init__(
        self,
        path: str | Path,
        batch_size: int = 1000,
        get_fs_id: Callable[[Path], str] = _get_path_dev,
    ) -> None:
        super().__init__(path, batch_size)
        self.get_fs_id = get_fs_id


class DirSource(DirInput, Source[str]):
    """bytewax 0.21's ``DirSource``: :class:`DirInput` under its 0.21 name
    (``get_fs_id`` is accepted, see :class:`FileSource`)."""

    def __init__(
        self,
        dir_path: str | Path,
        glob_pat: str = "*",
        batch_size: int = 1000,
        get_fs_id: Callable[[Path], str] = _get_path_dev,
    ) -> None:
        super().__init__(dir_path, glob_pat, batch_size)
        self.get_fs_id = get_fs_id


class CSVSource(CSVInput, Source[dict[str, str]]):
    """bytewax 0.21's ``CSVSource``: :class:`CSVInput` under its 0.21 name
    (``get_fs_id`` is accepted, see :class:`FileSource`)."""

    def __init__(
        self,
        path: str | Path,
        batch_size: int = 1000,
        get_fs_id: Callable[[Path], str] = _get_path_dev,
        **fmtparams: Any,
    ) -> None:
        super().__init__(path, batch_size, **fmtparams)
        self.get_fs_id = get_fs_id


class FileSink(FileOutput, Sink[tuple[str, str]]):
    """bytewax 0.21's ``FileSink``: :class:`FileOutput` under its 0.21 name."""


class DirSink(DirOutput, Sink[tuple[str, str]]):
    """bytewax 0.21's ``DirSink``: :class:`DirOutput` under its 0.21 name."""
