"""One listing of every file below a recovery directory, and reads of its files, for
``python -m flowspark.recovery inspect`` (see :mod:`flowspark.engine.recovery_inspect`).

A local directory is walked; another URI is listed through its pyarrow filesystem
(:mod:`flowspark.runtime.storage`).
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import IO, Any

from flowspark.engine.recovery_files import LogFileError, parse_log
from flowspark.runtime.storage import Location, StorageError, read_bytes

__all__ = ["Listing", "ListedFile", "listing_order"]


@dataclass(frozen=True)
class ListedFile:
    name: str  # relative to the directory, ``/``-separated
    size: int
    mtime: float | None  # seconds since the epoch


class Listing:
    """One listing of every file below a recovery directory, and reads of them."""

    def __init__(self, where: Location) -> None:
        self.where = where
        self.files = {f.name: f for f in self._list()}

    def _list(self) -> list[ListedFile]:
        if self.where.is_local:
            root = self.where.path
            found = []
            for folder, _, names in os.walk(root):
                for name in names:
                    path = os.path.join(folder, name)
                    with contextlib.suppress(OSError):  # removed while listed
                        st = os.stat(path)
                        rel = os.path.relpath(path, root).replace(os.sep, "/")
                        found.append(ListedFile(rel, st.st_size, st.st_mtime))
            return found
        import pyarrow.fs as pafs  # noqa: PLC0415 pyarrow.fs: remote storage only

        selector = pafs.FileSelector(self.where.path, recursive=True, allow_not_found=True)
        try:
            infos = self.where.filesystem().get_file_info(selector)
        except Exception as exc:
            raise StorageError(f"{self.where.shown}: cannot list it: {exc}") from exc
        base = self.where.path.rstrip("/") + "/"
        return [
            ListedFile(info.path[len(base) :], int(info.size or 0), _timestamp(info.mtime))
            for info in infos
            if info.type == pafs.FileType.File and info.path.startswith(base)
        ]

    def shown(self, name: str) -> str:
        """The file's path or URI, for messages."""
        return self.where.child(name).shown

    def read(self, name: str) -> bytes:
        return read_bytes(self.where.child(name)) or b""

    def parsed(self, name: str) -> tuple[str, list[Any]] | None:
        """A parsed Spark log file, or ``None`` when it does not parse."""
        with contextlib.suppress(LogFileError):
            return parse_log(self.read(name))
        return None

    @contextlib.contextmanager
    def open(self, name: str) -> Iterator[IO[bytes]]:
        with self.where.child(name).open_read() as f:
            yield f

    def under(self, prefix: str) -> list[ListedFile]:
        return sorted((f for n, f in self.files.items() if n.startswith(prefix)), key=listing_order)


def listing_order(f: ListedFile) -> tuple[Any, ...]:
    """Files in name order, numbers by value (``offsets/2`` before ``offsets/10``)."""
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"[/.]", f.name))


def _timestamp(value: Any) -> float | None:
    return value.timestamp() if isinstance(value, datetime) else None
