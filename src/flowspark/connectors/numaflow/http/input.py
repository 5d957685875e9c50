"""The flowspark side of the HTTP source: :class:`HttpInput` reads a vertex's journal
(see :mod:`.journal`) in Spark's Python workers, never the server.
"""

from __future__ import annotations

import contextlib
import logging
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from flowspark.api.inputs import PartitionedInput, StatefulSource
from flowspark.api.udf.types import Datum
from flowspark.connectors.numaflow.http.journal import (
    COMMITTED_SUFFIX,
    DATUMS,
    JOURNAL_MAGIC,
    JOURNAL_SUFFIX,
    SYNCED_SUFFIX,
    check_magic,
    check_vertex,
    read_records,
    read_start,
    read_synced,
)
from flowspark.connectors.numaflow.http.retention import note_committed

__all__ = ["HttpInput"]

log = logging.getLogger(__name__)

# A reader returns at most this many events per ``next_batch`` (read about
# ``journal.READ_MAX_BYTES`` at a time).
READ_MAX_ITEMS = 10_000
# A reader with nothing new asks again after this long.
READ_IDLE_WAIT = timedelta(milliseconds=10)


class HttpInput(PartitionedInput):
    """The events an :class:`~.server.HttpServer` journaled for ``vertex`` under ``journal_dir``.

    One part, named after the vertex; its state is the journal byte offset after the
    last event read, so a restarted flow resumes exactly after the last committed
    snapshot; after each committed micro-batch it tells the server how far that is
    (so the server may drop what is delivered: see :mod:`.retention`). Items are
    :class:`~flowspark.api.udf.types.Datum` s: keys, payload, event time (header or
    arrival), watermark = event time, headers, id. Live: it never ends. Picklable
    (two strings); it reads the files and never the server.
    """

    is_live = True

    def __init__(self, journal_dir: str | Path, vertex: str) -> None:
        self.journal_dir = str(journal_dir)
        self.vertex = check_vertex(vertex)

    def list_parts(self) -> list[str]:
        return [self.vertex]

    def build_part(self, for_part: str, resume_state: Any | None) -> StatefulSource:
        if for_part != self.vertex:
            raise ValueError(f"HttpInput({self.vertex!r}) has no part {for_part!r}")
        return _JournalPart(
            os.path.join(self.journal_dir, self.vertex + JOURNAL_SUFFIX),
            os.path.join(self.journal_dir, self.vertex + SYNCED_SUFFIX),
            int(resume_state or 0),
        )

    def __repr__(self) -> str:
        return f"HttpInput({self.journal_dir!r}, {self.vertex!r})"


class _JournalPart(StatefulSource):
    """Reads one journal from a byte offset, up to its fsync'ed length."""

    def __init__(
        self, path: str, synced_path: str, offset: int, max_items: int = READ_MAX_ITEMS
    ) -> None:
        self.path = path
        self.synced_path = synced_path
        self.offset = offset
        self.max_items = max_items
        self._fd = -1
        self._got = True  # (so the first read is at once)
        self._warned_at = -1
        self._limit: int | None = None
        self._started = False  # checked that the journal still keeps ``offset``

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_fd"] = -1
        return state

    def _available(self) -> int:
        synced = read_synced(self.synced_path)
        return os.fstat(self._fd).st_size if synced is None else synced

    def next_batch(self) -> list[Datum]:
        self._got = False
        if self._fd < 0:
            try:
                self._fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:
                return []
        if self.offset < len(JOURNAL_MAGIC):
            if not check_magic(self._fd, self.path):
                return []  # not created yet
            self.offset = len(JOURNAL_MAGIC)
        if not self._started:
            self._check_start()
        end = self._available()
        if self._limit is not None:
            end = min(end, self._limit)
        if end < self.offset:
            raise RuntimeError(
                f"{self.path} is {end} bytes long but this flow already read up to byte "
                f"{self.offset}: the journal was replaced or lost (a flow's checkpoint "
                "must keep its HTTP journal directory)"
            )
        if end == self.offset:
            return []
        items, pos, invalid = read_records(self._fd, self.offset, end, self.max_items, DATUMS)
        if invalid and not items and self._warned_at != pos:
            self._warned_at = pos
            log.warning(
                "%s: invalid record at byte %d; waiting for the server to repair it", self.path, pos
            )
        self.offset = pos
        self._got = bool(items)
        return items

    def _check_start(self) -> None:
        """The server drops only what this reader committed, so the journal keeps
        every byte from ``offset`` on -- unless the flow's checkpoint is older than
        its journal (restored apart from it)."""
        start = read_start(self.path)
        if self.offset < start:
            raise RuntimeError(
                f"{self.path} keeps events from byte {start} on (those before were "
                f"delivered and dropped), but this flow resumes at byte {self.offset}: "
                "its checkpoint is older than the journal (a flow's checkpoint and its "
                "HTTP journal directory must be kept, copied and restored together)"
            )
        self._started = True

    def committed(self, snapshot: Any) -> None:
        """Every event before byte ``snapshot`` is in a committed micro-batch."""
        if snapshot:
            note_committed(self.path[: -len(JOURNAL_SUFFIX)] + COMMITTED_SUFFIX, int(snapshot))

    def next_awake(self) -> datetime | None:
        if self._got:
            return None
        return datetime.now(UTC) + READ_IDLE_WAIT

    def snapshot(self) -> int:
        return self.offset

    def limit_to(self, snapshot: Any) -> None:
        """Read no further than byte ``snapshot`` (a replayed micro-batch)."""
        self._limit = int(snapshot)

    def close(self) -> None:
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = -1
