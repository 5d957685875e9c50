"""The vertex watermark of a Python flow whose datums get their event times in the flow.

A Numaflow vertex has one watermark for all keys: the least, over the partitions
that feed it, of each partition's watermark, which is the least event time of
each batch it read and never goes back. A pipeline's sources compute it as they
read (:class:`~flowspark.api.inputs.SourceWatermark`). In a Python flow the event
times are often set later, by ``to_datums(event_time=...)`` or a map, so they are
known only where the datums leave for the keyed steps: the level-0 tasks report,
per input part, the least and latest event time they sent
(:data:`~flowspark.runtime.codec.EVENT_TIME_PORT` rows). The driver folds those
into :class:`VertexMarks` when it writes the micro-batch, and keeps them in a
small file in the run's directory; the planning process reads it when it plans
the next micro-batch, whose rows then carry the vertex watermark as their time.
Every datum so carries the watermark of before its batch, as a Numaflow datum
carries the watermark fetched when it was read. The file is written before Spark
commits the batch, and a replayed batch reports the same times, so a restart
resumes the same watermark.

>>> marks = VertexMarks()
>>> marks.add("inp", 1, 5_000, 9_000); marks.add("inp", 2, 7_000, 8_000)
>>> marks.end_batch(), marks.watermark(ended=set())
(True, 5000)
>>> marks.add("inp", 1, 4_000, 12_000); marks.end_batch()  # a late one: no going back
False
>>> marks.watermark(ended={"inp"}) is None
True
"""

from __future__ import annotations

import json
from typing import Any

from flowspark.runtime.storage import Location, read_bytes, write_bytes_atomic

__all__ = ["MARKS_FILE", "VertexMarks"]

# In the run's directory (the recovery directory when there is one).
MARKS_FILE = "flowspark-vertex-watermark.json"


class VertexMarks:
    """Per input step and part, the part's watermark (ms, before any delay)."""

    def __init__(self, parts: dict[str, dict[int, int]] | None = None) -> None:
        self.parts: dict[str, dict[int, int]] = parts if parts is not None else {}
        self._batch: dict[tuple[str, int], int] = {}

    def add(self, step_id: str, part: int, least: int, latest: int) -> None:
        """A task of this micro-batch sent datums of ``least``..``latest`` from ``part``
        of input ``step_id`` (a part read by several tasks reports once per task)."""
        key = (step_id, part)
        self._batch[key] = min(least, self._batch.get(key, least))

    def end_batch(self) -> bool:
        """Fold this micro-batch's reports in; whether any part's watermark moved."""
        moved = False
        for (step_id, part), least in self._batch.items():
            marks = self.parts.setdefault(step_id, {})
            if least > marks.get(part, least - 1):
                marks[part] = least
                moved = True
        self._batch.clear()
        return moved

    def watermark(self, ended: set[str]) -> int | None:
        """The least part watermark over the inputs not in ``ended`` (None: no part has
        sent a datum yet, or every one that did has ended)."""
        marks = [
            w for step, parts in self.parts.items() if step not in ended for w in parts.values()
        ]
        return min(marks) if marks else None

    # -- the file ------------------------------------------------------------------

    def save(self, location: Location) -> None:
        """Write the part watermarks to ``location`` (atomically)."""
        data = {step: {str(p): w for p, w in parts.items()} for step, parts in self.parts.items()}
        write_bytes_atomic(location, json.dumps(data, sort_keys=True).encode())

    @classmethod
    def load(cls, location: Location) -> VertexMarks:
        """The part watermarks kept at ``location`` (none if there is no file yet)."""
        raw = read_bytes(location)
        if raw is None:
            return cls()
        data: dict[str, Any] = json.loads(raw)
        return cls(
            {step: {int(p): int(w) for p, w in parts.items()} for step, parts in data.items()}
        )
