"""flowspark's Spark source: a Python Data Source streaming reader per flow input.

Offsets live in Spark's checkpoint, so a restart resumes exactly where the last
committed micro-batch ended. The reader also runs level 0 of the flow — every
stateless step reachable from this input — inside the read task, so items make
a single Python pass before Spark sees them, packed in chunks.

Two ways to read, by input family:

* :class:`~flowspark.inputs.SeekableInput`: offsets are integers per part; the
  planning process computes them, executors read the data (in parallel splits).
* bytewax :class:`~flowspark.inputs.PartitionedInput` /
  :class:`~flowspark.inputs.DynamicInput`: the planning process calls
  ``next_batch`` and ships the items inside the partitions; offsets hold the
  batch count and ``snapshot()``, and a replayed batch is re-read from the
  snapshot it started at.
"""

from __future__ import annotations

import base64
import pickle
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import cloudpickle
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow

from flowspark.inputs import DynamicInput, Input, PartitionedInput, SeekableInput, Split
from flowspark.runtime.codec import (
    MARKER_PORT,
    ROW_SCHEMA,
    WHOLE_INPUT_MS,
    decode_items,
    encode_items,
)
from flowspark.runtime.windowing import EOF_MS

__all__ = ["FlowsparkSource", "SourceSpec", "whole_input_splits"]

# A driver-read input reads at most this many items into one micro-batch.
DRIVER_READ_MAX_ITEMS = 1_000_000
# ... and spends at most this long gathering them (seconds).
DRIVER_READ_MAX_SECONDS = 1.0


@dataclass
class SourceSpec:
    """What the reader needs, written by the engine to a file per input."""

    input: Input
    entry: int  # plan index of the input step
    program: bytes  # cloudpickled StageProgram of level 0 for this input
    per_batch_epochs: bool  # epoch_interval == 0: one source batch per micro-batch
    parallelism: int
    spread: int  # pieces per chunk bound for an exchange
    stateful: bool = False  # the flow keeps keyed state: announce the end, tick the clock
    tick_ms: int | None = None  # unbounded stateful runs: a clock tick at least this often
    sole_input: bool = False  # the flow has no other input: this input's end is the flow's


class _MarkerSplit(Split):
    """No items: the partition exists only to carry the batch's time."""

    def read(self) -> Iterator[Any]:
        return iter(())


class _ItemsSplit(Split):
    """Items read on the driver, shipped encoded inside the partition."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def read(self) -> Iterator[Any]:
        yield decode_items(self.data)


def _b64(obj: Any) -> str:
    return base64.b64encode(cloudpickle.dumps(obj)).decode("ascii")


def _unb64(text: str) -> Any:
    return pickle.loads(base64.b64decode(text))


class _SeekableOffsets:
    """Offsets of a :class:`SeekableInput`: ``{"parts": {part: int}}``."""

    def __init__(self, inp: SeekableInput, per_batch_epochs: bool, parallelism: int) -> None:
        self.input = inp
        self.per_batch_epochs = per_batch_epochs
        self.parallelism = parallelism
        self.target: dict[str, int] | None = None

    def prepare_available_now(self) -> None:
        self.target = {p: self.input.end_offset(p) for p in self.input.list_parts()}

    def latest(self, start: dict) -> dict:
        begun = start.get("parts", {})
        parts = (
            self.target
            if self.target is not None
            else {p: self.input.end_offset(p) for p in self.input.list_parts()}
        )
        latest: dict[str, int] = {}
        for part, available in parts.items():
            s = begun.get(part, 0)
            e = max(s, available)
            if e > s:
                if self.per_batch_epochs:
                    e = self.input.offset_after(part, s, e, 1)
                else:
                    e = self.input.batch_limit(part, s, e)
            latest[part] = e
        for part, s in begun.items():
            latest.setdefault(part, s)
        return {"parts": latest}

    def splits(self, start: dict, end: dict) -> list[Split]:
        begun = start.get("parts", {})
        ranges = [
            (p, begun.get(p, 0), e) for p, e in end.get("parts", {}).items() if e > begun.get(p, 0)
        ]
        pieces = max(1, self.parallelism // max(1, len(ranges)))
        out: list[Split] = []
        for part, s, e in ranges:
            out.extend(self.input.splits(part, s, e, pieces))
        return out


def whole_input_splits(inp: Input, parallelism: int) -> list[Split] | None:
    """The splits of a fresh run's first micro-batch when it would hold ``inp`` whole.

    ``None`` when it would not (more data than one batch reads) or when ``inp`` is
    read in the planning process (bytewax's input families).
    """
    if not isinstance(inp, SeekableInput):
        return None
    offsets = _SeekableOffsets(inp, per_batch_epochs=False, parallelism=parallelism)
    first = offsets.latest({})
    if offsets.latest(first) != first:
        return None
    return offsets.splits({}, first)


class _DriverReadOffsets:
    """Offsets of a bytewax input read in the planning process.

    ``{"parts": {part: {"n": batches read, "state": snapshot}}, "eof": [parts]}``
    """

    def __init__(self, spec: SourceSpec) -> None:
        self.spec = spec
        self.sources: dict[str, Any] = {}
        self.states: dict[str, dict] = {}
        self.eof: set[str] = set()
        self.buffer: dict[str, list[tuple[int, list[Any]]]] = {}  # part -> [(n after, items)]
        self.wake: dict[str, float] = {}
        self.drain = False

    def prepare_available_now(self) -> None:
        self.drain = True

    def _parts(self) -> list[str]:
        inp = self.spec.input
        if isinstance(inp, PartitionedInput):
            return list(inp.list_parts())
        return ["dynamic"]

    def _build(self, part: str, state: Any) -> Any:
        inp = self.spec.input
        if isinstance(inp, PartitionedInput):
            return inp.build_part(part, state)
        assert isinstance(inp, DynamicInput)
        return inp.build(0, 1)

    def _open(self, start: dict) -> None:
        if self.sources:
            return
        begun = start.get("parts", {})
        self.eof = set(start.get("eof", []))
        for part in self._parts():
            pos = begun.get(part, {"n": 0, "state": None})
            self.states[part] = pos
            if part not in self.eof:
                state = _unb64(pos["state"]) if pos["state"] else None
                self.sources[part] = self._build(part, state)

    def _snapshot(self, part: str, n: int) -> dict:
        source = self.sources[part]
        state = source.snapshot() if hasattr(source, "snapshot") else None
        return {"n": n, "state": _b64(state) if state is not None else None}

    def _pull(self, part: str, budget: int, deadline: float) -> int:
        source = self.sources[part]
        got = 0
        while got < budget and time.monotonic() < deadline and part not in self.eof:
            if time.monotonic() < self.wake.get(part, 0.0):
                if not self.drain:
                    break
                time.sleep(min(0.05, self.wake[part] - time.monotonic()))
                continue
            try:
                items = list(source.next_batch())
            except StopIteration:
                self.eof.add(part)
                source.close()
                break
            awake = source.next_awake()
            self.wake[part] = awake.timestamp() if awake is not None else 0.0
            if not items:
                if awake is None:
                    self.wake[part] = time.monotonic() + 0.001
                if not self.drain:
                    break
                continue
            n = self.states[part]["n"] + 1
            self.states[part] = self._snapshot(part, n)
            self.buffer.setdefault(part, []).append((n, items))
            got += len(items)
            if self.spec.per_batch_epochs:
                break
        return got

    def latest(self, start: dict) -> dict:
        self._open(start)
        deadline = time.monotonic() + DRIVER_READ_MAX_SECONDS
        for part in list(self.sources):
            if part not in self.eof:
                self._pull(part, DRIVER_READ_MAX_ITEMS, deadline)
        return {"parts": dict(self.states), "eof": sorted(self.eof)}

    def splits(self, start: dict, end: dict) -> list[Split]:
        begun = start.get("parts", {})
        out: list[Split] = []
        for part, pos in end.get("parts", {}).items():
            lo = begun.get(part, {"n": 0})["n"]
            if pos["n"] <= lo:
                continue
            buffered = [items for n, items in self.buffer.get(part, []) if lo < n <= pos["n"]]
            if len(buffered) != pos["n"] - lo:  # a replay after a restart: read it again
                buffered = self._reread(part, begun.get(part), pos["n"] - lo)
            items = [x for chunk in buffered for x in chunk]
            out.append(_ItemsSplit(encode_items(items)))
        return out

    def _reread(self, part: str, pos: dict | None, batches: int) -> list[list[Any]]:
        state = _unb64(pos["state"]) if pos and pos.get("state") else None
        source = self._build(part, state)
        chunks: list[list[Any]] = []
        try:
            while len(chunks) < batches:
                try:
                    items = list(source.next_batch())
                except StopIteration:
                    break
                if items:
                    chunks.append(items)
        finally:
            source.close()
        return chunks

    def commit(self, end: dict) -> None:
        for part, pos in end.get("parts", {}).items():
            self.buffer[part] = [
                (n, items) for n, items in self.buffer.get(part, []) if n > pos["n"]
            ]


class _FlowsparkStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The stream reader; the planning process keeps one per query run."""

    def __init__(self, spec_path: str, spec: SourceSpec) -> None:
        self.spec_path = spec_path
        self.program = spec.program
        self.entry = spec.entry
        self.spread = spec.spread
        self.stateful = spec.stateful
        self.tick_ms = spec.tick_ms
        self.sole_input = spec.sole_input
        self._offsets: Any = None

    # -- planning process (driver side) ----------------------------------------

    def _manager(self) -> Any:
        if self._offsets is None:
            with open(self.spec_path, "rb") as f:
                spec: SourceSpec = pickle.load(f)
            if isinstance(spec.input, SeekableInput):
                self._offsets = _SeekableOffsets(
                    spec.input, spec.per_batch_epochs, spec.parallelism
                )
            else:
                self._offsets = _DriverReadOffsets(spec)
        return self._offsets

    def initialOffset(self) -> dict:
        return {"data": {"parts": {}}, "t": 0}

    def prepareForTriggerAvailableNow(self) -> None:
        self._available_now = True
        self._manager().prepare_available_now()

    def latestOffset(self, start: dict, limit: Any = None) -> dict:
        manager = self._manager()
        data = manager.latest(start["data"])
        now = time.time_ns() // 1_000_000
        if start.get("eof"):
            if data != start["data"]:
                raise RuntimeError(
                    "flowspark: this recovery directory holds a keyed flow whose bounded "
                    "input already ended (every window closed); new input cannot join it. "
                    "Run it with a new recovery directory."
                )
            return start
        ending = self.stateful and getattr(self, "_available_now", False)
        if data != start["data"]:
            if ending and manager.latest(data) == data:
                if self.sole_input and start["t"] == 0:
                    # The whole input in the first batch of a fresh run: keyed steps
                    # close everything within it (rows carry WHOLE_INPUT_MS).
                    return {"data": data, "t": now, "eof": True, "whole": True}
                # The last data: the same batch announces the end, so every timer
                # fires in the batch right after (one batch sooner).
                return {"data": data, "t": max(now, start["t"]), "eof": True}
            return {"data": data, "t": max(now, start["t"])}
        if not self.stateful:
            return start
        if ending:
            # Announce the end: the watermark jumps to the end of time, every timer fires.
            return {"data": data, "t": EOF_MS, "eof": True}
        if self.tick_ms is not None and now - start["t"] >= self.tick_ms:
            return {"data": data, "t": now}  # a clock tick: timers due by now fire
        return start

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        ts = WHOLE_INPUT_MS if end.get("whole") else end["t"]
        parts = [
            InputPartition((split, ts))
            for split in self._manager().splits(start["data"], end["data"])
        ]
        if end.get("eof") and not start.get("eof") and not end.get("whole"):
            parts.append(InputPartition((_MarkerSplit(), EOF_MS)))
        elif not parts and self.stateful:
            parts.append(InputPartition((_MarkerSplit(), ts)))
        return parts

    def commit(self, end: dict) -> None:
        manager = self._manager()
        if hasattr(manager, "commit"):
            manager.commit(end["data"])

    # -- executors ---------------------------------------------------------------

    def read(self, partition: InputPartition) -> Iterator[Any]:
        from flowspark.runtime.task import rows_to_batch, run_program, task_context

        split, ts = partition.value
        if isinstance(split, _MarkerSplit):
            yield rows_to_batch([MARKER_PORT], [None], [b""], ts)
            return
        program = pickle.loads(self.program)
        feeds = ((self.entry, items) for items in split.read())
        yield from run_program(program, feeds, task_context(), self.spread, ts)


class FlowsparkSource(DataSource):
    """``spark.readStream.format("flowspark").option("spec", path)``: one flow input."""

    @classmethod
    def name(cls) -> str:
        return "flowspark"

    def schema(self) -> str:
        return ROW_SCHEMA

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        path = self.options["spec"]
        with open(path, "rb") as f:
            spec: SourceSpec = pickle.load(f)
        return _FlowsparkStreamReader(path, spec)
