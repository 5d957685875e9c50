"""flowspark's Spark source: ONE Python Data Source streaming reader for all of a
flow's inputs.

Offsets live in Spark's checkpoint, so a restart resumes exactly where the last
committed micro-batch ended. The reader also runs level 0 of the flow — every
stateless step reachable from an input — inside the read task, so items make a
single Python pass before Spark sees them, packed in chunks.

Why one source for every input: the flow's clock (the rows' time, which is
Spark's watermark) must reach the end of time only when *every* input has
ended, and while one input waits (a paced live source) the others must go on
being read. One reader sees all inputs at once, so it decides both for the
whole flow; separate sources each decided alone, and one input's end closed
windows the other inputs still had items for.

This module is only the Spark adapter; what it plans with is pure Python in the
runtime layer (no pyspark), one part per way to read, by input family:

* :class:`~flowspark.api.inputs.SeekableInput`: offsets are integers per part; the
  planning process computes them, executors read the data (in parallel splits):
  ``runtime/input_offsets.py``, which also holds the input path's ONE clock, the
  wall clock (``time.time()``, seconds since the epoch, UTC).
* bytewax :class:`~flowspark.api.inputs.PartitionedInput` /
  :class:`~flowspark.api.inputs.DynamicInput`: the planning process polls them as
  bytewax 0.17 does and ships the items inside the partitions:
  ``runtime/polling.py``; Numaflow's source watermark of their parts:
  ``runtime/source_watermark.py``.

The query always runs with Spark's ``availableNow`` trigger: it ends when a
``latestOffset`` call returns its start. That happens only when every input has
ended (``until_end``, bytewax's ``run``) or, for a run that stops at what is
available now (``--bounded``), when no input has anything more right now. While
an input that has not ended has nothing yet, the reader waits for its wake-up
(at most ``MAX_WAIT_SECONDS``, then a clock tick keeps the query alive).
"""

from __future__ import annotations

import base64
import pickle
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow

from flowspark.api.inputs import SeekableInput, Split
from flowspark.engine.vertex_marks import VertexMarks
from flowspark.runtime.codec import MARKER_PORT, ROW_SCHEMA, WHOLE_INPUT_MS
from flowspark.runtime.input_offsets import (
    DRIVER_READ_MAX_ITEMS,
    MAX_WAIT_SECONDS,
    InputSpec,
    SeekableOffsets,
    wall_time,
)
from flowspark.runtime.polling import DriverReadOffsets
from flowspark.runtime.source_watermark import MIN_WATERMARK, NO_WATERMARK_MS
from flowspark.runtime.storage import Location
from flowspark.runtime.windowing import EOF_MS
from flowspark.shared.times import seconds_to_ms

__all__ = ["FlowsparkSource", "SourceSpec"]


@dataclass
class SourceSpec:
    """What the reader needs, written by the engine to a file per query."""

    inputs: list[InputSpec]
    per_batch_epochs: bool  # epoch_interval == 0: one source batch per micro-batch
    parallelism: int
    spread: int  # pieces per chunk bound for an exchange
    stateful: bool = False  # the flow keeps keyed state: announce the end, tick the clock
    until_end: bool = True  # run until every input ends (else: what is available now)
    tick_ms: int | None = None  # stateful runs: a clock tick at least this often
    trigger_ms: int = 0  # the least time between two micro-batches' starts
    max_batch_items: int | None = None  # the most items one micro-batch reads per input
    # A run that stops at what is available now and has a recovery directory: live
    # inputs pause there instead of ending (see SeekableOffsets).
    pause_live: bool = False
    # Every input has a Numaflow source watermark: rows carry the flow's watermark
    # (the least over every input part) as their time instead of the wall clock.
    event_time: bool = False
    # Or the flow runs on the vertex watermark of its datums' event times, kept by the
    # driver in this file (engine/vertex_marks.py); rows carry it as their time.
    vertex_marks: str | None = None


class _MarkerSplit(Split):
    """No items: the partition exists only to carry the batch's time."""

    def read(self) -> Iterator[Any]:
        return iter(())


class _FlowsparkStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The stream reader; the planning process keeps one per query run.

    Offsets: ``{"inputs": {entry: input offsets}, "t": batch time (ms), "eof":
    the end was announced, "whole": the whole input is in this first batch,
    "steps": {entry: step id}}``.
    """

    def __init__(self, spec_option: tuple[str, str], spec: SourceSpec) -> None:
        self.spec_option = spec_option
        self.programs = {str(i.entry): i.program for i in spec.inputs}
        self.spread = spec.spread
        self.stateful = spec.stateful
        self.until_end = spec.until_end
        self.tick_ms = spec.tick_ms
        self.trigger_ms = spec.trigger_ms
        self.max_batch_items = spec.max_batch_items
        self.event_time = spec.event_time
        self.vertex_marks = spec.vertex_marks
        self._offsets: dict[str, Any] | None = None

    # -- planning process (driver side) ----------------------------------------

    def _managers(self) -> dict[str, Any]:
        if self._offsets is None:
            spec = _load_spec(*self.spec_option)
            managers: dict[str, Any] = {}
            for inp in spec.inputs:
                if isinstance(inp.input, SeekableInput):
                    manager: Any = SeekableOffsets(
                        inp,
                        spec.per_batch_epochs,
                        spec.parallelism,
                        spec.max_batch_items,
                        spec.until_end,
                        spec.pause_live,
                    )
                else:
                    manager = DriverReadOffsets(
                        inp, spec.per_batch_epochs, spec.until_end, spec.max_batch_items
                    )
                managers[str(inp.entry)] = manager
            self._offsets = managers
        return self._offsets

    def initialOffset(self) -> dict:
        return {"inputs": {}, "t": 0}

    def prepareForTriggerAvailableNow(self) -> None:
        self._managers()

    def _gather(self, begun: dict) -> tuple[dict, bool]:
        """Every input's latest offsets and whether every input has ended."""
        data = {}
        budget = self.max_batch_items or DRIVER_READ_MAX_ITEMS
        for entry, manager in self._managers().items():
            data[entry] = manager.latest(begun.get(entry, {}), budget)
        ended = all(m.ended(data[e]) for e, m in self._managers().items())
        return data, ended

    def _wait_for_data(self, begun: dict, started: float) -> tuple[dict, bool]:
        """Gather; while nothing came and some input may still send, wait for the
        earliest wake-up (never past :data:`MAX_WAIT_SECONDS`, or the clock tick
        a keyed flow needs) and gather again."""
        limit = MAX_WAIT_SECONDS
        if self.tick_ms is not None:
            limit = min(limit, self.tick_ms / 1000)
        while True:
            data, ended = self._gather(begun)
            if data != begun or ended or not self.until_end:
                return data, ended
            wakes = [w for m in self._managers().values() if (w := m.next_wake()) is not None]
            now = wall_time()
            give_up = started + limit
            if now >= give_up:
                return data, ended
            wake = min(wakes) if wakes else give_up
            time.sleep(max(0.0, min(wake, give_up) - now))

    def latestOffset(self, start: dict, limit: Any = None) -> dict:
        begun = start.get("inputs", {})
        if start.get("eof"):
            data, _ = self._gather(begun)
            if data != begun:
                raise RuntimeError(
                    "flowspark: this recovery directory holds a keyed flow whose input "
                    "already ended (every window closed); new input cannot join it. "
                    "Run it with a new recovery directory."
                )
            return start
        if self.until_end and self.trigger_ms and start["t"]:
            # A trigger interval: the next batch starts no sooner than this.
            pause = (start["t"] + self.trigger_ms) / 1000 - wall_time()
            if pause > 0:
                time.sleep(pause)
        started = wall_time()
        data, ended = self._wait_for_data(begun, started)
        now = seconds_to_ms(wall_time())
        t = max(now, start["t"])
        offsets = self._next_offsets(start, begun, data, ended, t)
        if offsets is not start and offsets["t"] != EOF_MS:
            if self.event_time:
                offsets["wm"] = self._flow_watermark(data, start)
            elif self.vertex_marks is not None:
                offsets["wm"] = self._vertex_watermark(data, start)
        if offsets is not start:
            self._note_input_figures(offsets, data)
        return offsets

    def _note_input_figures(self, offsets: dict, data: dict) -> None:
        """Record in the offsets what each live input holds beyond them, and how much of
        each finite input they have read (Spark's query progress carries the end
        offsets to the run's progress display), and each input's step id (for
        ``python -m flowspark.recovery inspect``)."""
        offsets["steps"] = {entry: m.spec.step_id for entry, m in self._managers().items()}
        backlog, read = {}, {}
        for entry, manager in self._managers().items():
            step_id = manager.spec.step_id
            if (count := manager.backlog(data.get(entry, {}))) is not None:
                backlog[step_id] = count
            if not isinstance(manager, SeekableOffsets):
                continue
            if (share := manager.share_read(data.get(entry, {}))) is not None:
                read[step_id] = share
        if backlog:
            offsets["backlog"] = backlog
        if read:  # a finite input's share read: a progress bar
            offsets["read"] = read

    def _next_offsets(self, start: dict, begun: dict, data: dict, ended: bool, t: int) -> dict:
        """The end offsets of the next batch (``start`` itself: the query ends)."""
        if data != begun:
            if self.stateful and ended:
                if start["t"] == 0:
                    # The whole input in the first batch of a fresh run: keyed steps
                    # close everything within it (rows carry WHOLE_INPUT_MS).
                    return {"inputs": data, "t": t, "eof": True, "whole": True}
                # The last data: the same batch announces the end, so every timer
                # fires in the batch right after (one batch sooner).
                return {"inputs": data, "t": t, "eof": True}
            return {"inputs": data, "t": t}
        if ended:
            if self.stateful:
                # Announce the end: the watermark jumps to the end of time, every timer fires.
                return {"inputs": data, "t": EOF_MS, "eof": True}
            return start  # nothing more will come: the query ends
        if not self.until_end:
            return start  # nothing more available now: the query ends
        # Still waiting for an input that has not ended: a clock tick keeps the
        # query alive (and lets keyed steps' system-time timers fire).
        return {"inputs": data, "t": t}

    def _flow_watermark(self, data: dict, start: dict) -> int:
        """The flow's event-time watermark after ``data``: the least over every part of
        every input that has not ended; it never goes back."""
        marks = [m.watermark(data[e]) for e, m in self._managers().items() if e in data]
        live = [w for w in marks if w is not None]
        before = start.get("wm", MIN_WATERMARK)
        return max(min(live), before) if live else before

    def _vertex_watermark(self, data: dict, start: dict) -> int:
        """The vertex watermark the driver last kept (see engine/vertex_marks.py), over
        the inputs that have not ended; it never goes back."""
        assert self.vertex_marks is not None
        marks = VertexMarks.load(Location.parse(self.vertex_marks))
        managers = self._managers().items()
        ended = {m.spec.step_id for e, m in managers if e in data and m.ended(data[e])}
        mark = marks.watermark(ended)
        before = start.get("wm", MIN_WATERMARK)
        return before if mark is None else max(mark, before)

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        ts = WHOLE_INPUT_MS if end.get("whole") else end["t"]
        # The rows' time is the system time items were read at: the batch's, or each
        # run's own where the input knows it (see ItemsSplit), kept after the last
        # batch's time (Spark's watermark) -- unless it stands for the whole input or
        # the flow's watermark (then ``floor`` is None).
        floor = None if end.get("whole") or "wm" in end else min(start.get("t", 0) + 1, ts)
        if "wm" in end and not end.get("whole"):
            # The flow's watermark; never at or below Spark's first watermark (0), or
            # Spark drops the rows as late, and never WHOLE_INPUT_MS (it means the
            # whole input): NO_WATERMARK_MS stands for "none yet".
            ts = max(end["wm"], NO_WATERMARK_MS)
        begun = start.get("inputs", {})
        parts = []
        for entry, manager in self._managers().items():
            for split in manager.splits(begun.get(entry, {}), end["inputs"].get(entry, {})):
                parts.append(InputPartition((entry, split, ts, floor)))
        if end.get("eof") and not start.get("eof") and not end.get("whole"):
            parts.append(InputPartition((None, _MarkerSplit(), EOF_MS, None)))
        elif not parts and self.stateful:
            parts.append(InputPartition((None, _MarkerSplit(), ts, None)))
        return parts

    def commit(self, end: dict) -> None:
        for entry, manager in self._managers().items():
            manager.commit(end["inputs"].get(entry, {}))

    # -- executors ---------------------------------------------------------------

    def read(self, partition: InputPartition) -> Iterator[Any]:
        from flowspark.runtime.task import rows_to_batch, run_program, task_context, task_end  # noqa: PLC0415 pyarrow: tasks only

        entry, split, ts, floor = partition.value
        if entry is None:
            yield rows_to_batch([MARKER_PORT], [None], [b""], ts)
            return
        program = pickle.loads(self.programs[entry])
        stamped = getattr(split, "read_stamped", None)
        feeds: Iterator[tuple[int, Any] | tuple[int, Any, int]]
        if floor is not None and stamped is not None:  # each run at the time it was read
            feeds = (
                (int(entry), items, ts if ms is None else min(ts, max(floor, ms)))
                for ms, items in stamped()
            )
        else:
            feeds = ((int(entry), items) for items in split.read())
        upstream = getattr(split, "upstream", None)
        yield from run_program(program, feeds, task_context(), self.spread, ts, upstream)
        yield from task_end(program, ts)


class FlowsparkSource(DataSource):
    """``spark.readStream.format("flowspark").option("spec", path)``: a flow's inputs."""

    @classmethod
    def name(cls) -> str:
        return "flowspark"

    def schema(self) -> str:
        return ROW_SCHEMA

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        option = (
            ("spec", self.options["spec"])
            if "spec" in self.options
            else ("spec_b64", self.options["spec_b64"])
        )
        return _FlowsparkStreamReader(option, _load_spec(*option))


def _load_spec(kind: str, value: str) -> SourceSpec:
    """The run's :class:`SourceSpec`: from a file (``spec``: a path on the machine
    that plans the query) or inline (``spec_b64``: on Spark Connect, where that
    machine is the server)."""
    if kind == "spec_b64":
        return pickle.loads(base64.b64decode(value))
    with open(value, "rb") as f:
        return pickle.load(f)
