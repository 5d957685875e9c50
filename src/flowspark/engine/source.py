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

Two ways to read, by input family:

* :class:`~flowspark.api.inputs.SeekableInput`: offsets are integers per part; the
  planning process computes them, executors read the data (in parallel splits).
  Such an input ends at the end offsets it has when the run first looks.
* bytewax :class:`~flowspark.api.inputs.PartitionedInput` /
  :class:`~flowspark.api.inputs.DynamicInput`: the planning process calls
  ``next_batch`` as bytewax 0.17 does — when ``next_awake()`` says so, ``None``
  meaning at once (after 1 ms when the last batch was empty) — and ships the
  items inside the partitions; ``StopIteration`` ends a part. Offsets hold the
  batch count and ``snapshot()``, and a replayed batch is re-read from the
  snapshot it started at.

Time base: the input path has ONE clock, the wall clock (``time.time()``,
seconds since the epoch, UTC). ``next_awake()`` datetimes, wake-ups, waits,
per-batch budgets and the rows' time are all on it.

The query always runs with Spark's ``availableNow`` trigger: it ends when a
``latestOffset`` call returns its start. That happens only when every input has
ended (``until_end``, bytewax's ``run``) or, for a run that stops at what is
available now (``--bounded``), when no input has anything more right now. While
an input that has not ended has nothing yet, the reader waits for its wake-up
(at most :data:`MAX_WAIT_SECONDS`, then a clock tick keeps the query alive).
"""

from __future__ import annotations

import base64
import pickle
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow

from flowspark.api.inputs import (
    DynamicInput,
    Input,
    PartitionedInput,
    SeekableInput,
    SourceWatermark,
    Split,
)
from flowspark.api.udf.times import to_ms
from flowspark.engine.vertex_marks import VertexMarks
from flowspark.runtime import pickling
from flowspark.runtime.codec import (
    MARKER_PORT,
    ROW_SCHEMA,
    WHOLE_INPUT_MS,
    decode_items,
    encode_items,
)
from flowspark.runtime.errors import step_failure
from flowspark.runtime.storage import Location
from flowspark.runtime.windowing import EOF_MS

__all__ = ["FlowsparkSource", "InputSpec", "SourceSpec", "whole_input_splits"]

# A driver-read input reads at most this many items into one micro-batch.
DRIVER_READ_MAX_ITEMS = 1_000_000
# ... and spends at most this long gathering them (seconds).
DRIVER_READ_MAX_SECONDS = 1.0
# bytewax's cooldown after an empty batch when ``next_awake()`` is None (seconds).
EMPTY_BATCH_COOLDOWN = 0.001
# The longest one ``latestOffset`` call waits for an input that has nothing yet
# (seconds); then a clock tick (a batch without data) keeps the query alive, so
# Ctrl-C and ``query.stop()`` never wait longer than this.
MAX_WAIT_SECONDS = 1.0
# While Spark runs a micro-batch, a live input that runs until it ends is polled
# in the background (as bytewax polls it between its own work), so an item is read
# when it is due rather than when the next batch is planned; at most this often
# per part (seconds), and at most this many items ahead of the batches.
BACKGROUND_POLL_SECONDS = 0.005
BACKGROUND_MAX_ITEMS = 1_000_000


@dataclass
class InputSpec:
    """One flow input as the reader needs it."""

    input: Input
    entry: int  # plan index of the input step
    step_id: str
    program: bytes  # cloudpickled StageProgram of level 0 for this input


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
    # inputs pause there instead of ending (see _SeekableOffsets).
    pause_live: bool = False
    # Every input has a Numaflow source watermark: rows carry the flow's watermark
    # (the least over every input part) as their time instead of the wall clock.
    event_time: bool = False
    # Or the flow runs on the vertex watermark of its datums' event times, kept by the
    # driver in this file (engine/vertex_marks.py); rows carry it as their time.
    vertex_marks: str | None = None


def _now() -> float:
    """The input path's one clock: wall time in seconds since the epoch (UTC)."""
    return time.time()


def _wake_time(awake: datetime | None, had_items: bool) -> float:
    """When to call ``next_batch`` again, as bytewax 0.17 says: at ``next_awake()``
    (an aware datetime: wall clock), else at once, or after a 1 ms cooldown when
    the last batch was empty."""
    if awake is not None:
        return awake.timestamp()
    return 0.0 if had_items else _now() + EMPTY_BATCH_COOLDOWN


def _ms(seconds: float) -> int:
    return int(seconds * 1000)


class _MarkerSplit(Split):
    """No items: the partition exists only to carry the batch's time."""

    def read(self) -> Iterator[Any]:
        return iter(())


def upstream_id(step_id: str, part: str, piece: int = 0) -> int:
    """A stable id of an input part (and piece of it) as the upstream of keyed steps.

    Keyed steps with a clock per key take the least over their upstreams; the id
    must not depend on which parts have data in a micro-batch (Spark's partition
    numbers do). Bit 62 set: never one of a keyed stage's partition numbers.

    >>> upstream_id("inp", "a") == upstream_id("inp", "a") != upstream_id("inp", "b")
    True
    """
    crc = zlib.crc32(f"{step_id}\0{part}".encode())
    return (1 << 30 | (crc & 0x3FFF_FFFF)) << 32 | (piece & 0xFFF) << 20


class _ItemsSplit(Split):
    """Items read on the driver, shipped encoded inside the partition."""

    def __init__(self, data: bytes, upstream: int | None = None) -> None:
        self.data = data
        self.upstream = upstream

    def read(self) -> Iterator[Any]:
        yield decode_items(self.data)


class _PartSplit(Split):
    """A seekable input's split, with the upstream id of the part it reads."""

    def __init__(self, split: Split, upstream: int) -> None:
        self.split = split
        self.upstream = upstream

    def read(self) -> Iterator[Any]:
        return self.split.read()


def _b64(obj: Any) -> str:
    return base64.b64encode(pickling.dumps(obj)).decode("ascii")


def _unb64(text: str) -> Any:
    return pickle.loads(base64.b64decode(text))


def _calling(step_id: str, what: str, fn: Callable[..., Any], *args: Any) -> Any:
    """Call the user's input code; a failure names the input step and the part."""
    try:
        return fn(*args)
    except StopIteration:
        raise
    except Exception as exc:
        raise step_failure(step_id, fn, what, exc) from exc


class _SeekableOffsets:
    """Offsets of a :class:`SeekableInput`: ``{"parts": {part: int}}``.

    The input ends at the end offsets it had when first asked (its target), unless
    it is ``live`` and the run goes on until its inputs end: then every call asks
    for the end offsets again, and the input never ends.
    """

    def __init__(
        self,
        spec: InputSpec,
        per_batch_epochs: bool,
        parallelism: int,
        max_batch_items: int | None = None,
        until_end: bool = True,
        pause_live: bool = False,
    ) -> None:
        self.spec = spec
        self.input: SeekableInput = spec.input  # type: ignore[assignment]
        self.max_batch_items = max_batch_items
        self.per_batch_epochs = per_batch_epochs
        self.parallelism = parallelism
        # A live input (a broker's stream) grows and never ends in a run that goes
        # on until its inputs end; a run that stops at what is available now stops
        # at the end offsets it saw first, as a finite input always does.
        live = bool(getattr(self.input, "live", False))
        self.growing = live and until_end
        # ... and a run that stops at what is available now with a recovery directory
        # only pauses there: it never announces the end, so open windows stay open
        # for the next run to continue. Without one the input ends there.
        self.pauses = live and pause_live
        self.never_ends = self.growing or self.pauses
        self.target: dict[str, int] | None = None

    def _target(self) -> dict[str, int]:
        if self.target is None or self.growing:
            inp = self.input
            parts = _calling(self.spec.step_id, "list_parts()", inp.list_parts)
            self.target = {
                p: _calling(self.spec.step_id, f"part {p!r}: end_offset()", inp.end_offset, p)
                for p in parts
            }
        return self.target

    def latest(self, start: dict, budget_items: int) -> dict:
        begun = start.get("parts", {})
        latest: dict[str, int] = {}
        for part, available in self._target().items():
            if part not in begun:
                first = self.input.start_offset(part)
                if first:
                    # Record where this part starts before reading it, so a replay
                    # of its first batch starts exactly there too.
                    latest[part] = first
                    continue
            s = begun.get(part, 0)
            e = max(s, available)
            if e > s:
                if self.per_batch_epochs:
                    e = self.input.offset_after(part, s, e, 1)
                else:
                    e = self.input.batch_limit(part, s, e)
                if self.max_batch_items is not None:
                    # A per-batch cap: whole source batches, as many as the items allow.
                    batches = max(1, budget_items // max(1, self.input.batch_size))
                    e = self.input.offset_after(part, s, e, batches)
                    budget_items = max(1, budget_items - (batches * self.input.batch_size))
            latest[part] = e
        for part, s in begun.items():
            latest.setdefault(part, s)
        return {"parts": latest}

    def ended(self, data: dict) -> bool:
        if self.never_ends:
            return False
        parts = data.get("parts", {})
        return all(parts.get(p, 0) >= e for p, e in self._target().items())

    def backlog(self, data: dict) -> int | None:
        """What a live input holds beyond ``data`` (in its offsets: a stream's messages),
        as of its last look; ``None`` for a finite input."""
        if not self.never_ends or self.target is None:
            return None
        parts = data.get("parts", {})
        return sum(max(0, e - parts.get(p, 0)) for p, e in self.target.items())

    def share_read(self, data: dict) -> float | None:
        """How much of a finite input ``data`` has read (0..1, by offsets: bytes of a
        file, items in memory); ``None`` for a live input."""
        if self.never_ends or self.target is None:
            return None
        total = sum(self.target.values())
        parts = data.get("parts", {})
        done = sum(min(e, parts.get(p, 0)) for p, e in self.target.items())
        return round(done / total, 4) if total else 1.0

    def next_wake(self) -> float | None:
        if self.growing:  # asks the live input again after its poll interval
            return _now() + self.input.poll_interval.total_seconds()
        return None  # never waits: its data is there

    def splits(self, start: dict, end: dict) -> list[Split]:
        begun = start.get("parts", {})
        first = self.input.start_offset
        ranges = [
            (p, s, e)
            for p, e in end.get("parts", {}).items()
            if e > (s := begun[p] if p in begun else first(p))
        ]
        pieces = max(1, self.parallelism // max(1, len(ranges)))
        out: list[Split] = []
        for part, s, e in ranges:
            for piece, split in enumerate(self.input.splits(part, s, e, pieces)):
                out.append(_PartSplit(split, upstream_id(self.spec.step_id, part, piece)))
        return out

    def commit(self, end: dict) -> None:
        pass


def whole_input_splits(
    inp: Input, parallelism: int, max_batch_items: int | None = None, until_end: bool = True
) -> list[Split] | None:
    """The splits of a fresh run's first micro-batch when it would hold ``inp`` whole.

    ``None`` when it would not (more data than one batch reads), when ``inp`` is
    read in the planning process (bytewax's input families), or when it is a live
    input that a run going on until its inputs end keeps reading.
    """
    if not isinstance(inp, SeekableInput) or (inp.live and until_end):
        return None
    spec = InputSpec(inp, entry=0, step_id="input", program=b"")
    offsets = _SeekableOffsets(spec, False, parallelism, max_batch_items, until_end)
    budget = max_batch_items or DRIVER_READ_MAX_ITEMS
    begin: dict = {}
    first = offsets.latest(begin, budget)
    if any(first["parts"][p] == inp.start_offset(p) != 0 for p in first["parts"]):
        begin, first = first, offsets.latest(first, budget)  # its start, then its data
    if not offsets.ended(first):
        return None
    return offsets.splits(begin, first)


# A part's watermark before it has read anything: Numaflow's -1 ms.
MIN_WATERMARK = -1
# The time of rows while the flow has no watermark yet (see partitions()).
NO_WATERMARK_MS = WHOLE_INPUT_MS + 1


class _PartMarks:
    """Numaflow's source watermark of each part of one input (see
    :class:`~flowspark.api.inputs.SourceWatermark`); times in ms on the input
    path's wall clock."""

    def __init__(self, policy: SourceWatermark) -> None:
        self.policy = policy
        self.delay_ms = _td_ms(policy.max_delay)
        self.wm: dict[str, int] = {}
        # Per micro-batch: the watermark when it began and the least event time read
        # in it so far. The datums of one micro-batch are read in one or more pulls;
        # the batch's watermark is (the least of ALL of them) - max delay, so that no
        # datum of the batch is behind the watermark it is handed with (unless late
        # on its own source), as if the micro-batch were one Numaflow read batch.
        self.base: dict[str, int] = {}
        self.batch_least: dict[str, int] = {}
        self.started: dict[str, int] = {}
        self.last_data: dict[str, int] = {}
        self.last_step: dict[str, int] = {}

    def open(self, part: str, wm: int) -> None:
        now = _ms(_now())
        self.wm[part] = self.base[part] = wm
        self.started[part] = self.last_data[part] = self.last_step[part] = now

    def read(self, part: str, items: list[Any], step_id: str) -> None:
        """A pull: the part's watermark is the least event time of its micro-batch so
        far - max delay (never below where the micro-batch began)."""
        try:
            least = min(to_ms(item.event_time) for item in items)
        except (AttributeError, TypeError, ValueError) as exc:
            raise TypeError(
                f"input {step_id!r} has a source watermark, so its items must be datums "
                f"with an event_time; got {type(items[0]).__name__}: {exc}"
            ) from None
        least = min(least, self.batch_least.get(part, least))
        self.batch_least[part] = least
        self.wm[part] = max(self.base[part], least - self.delay_ms)
        self.last_data[part] = _ms(_now())

    def seal(self) -> None:
        """A micro-batch's offsets were handed out: the next pulls make the next one."""
        self.base.update(self.wm)
        self.batch_least.clear()

    def idle_step(self, part: str) -> bool:
        """Move an idle part's watermark (Numaflow's idleSource rule); whether it moved."""
        policy = self.policy
        if policy.idle_threshold is None:
            return False
        now = _ms(_now())
        if now - self.last_data[part] < _td_ms(policy.idle_threshold):
            return False
        if now - self.last_step[part] < _td_ms(policy.idle_step):
            return False
        self.last_step[part] = now
        before = self.wm[part]
        if before == MIN_WATERMARK:
            delay = policy.init_source_delay
            if delay is not None and now - self.started[part] >= _td_ms(delay):
                self.wm[part] = now
        elif policy.idle_increment is not None:
            self.wm[part] = max(before, min(before + _td_ms(policy.idle_increment), now))
        if part not in self.batch_least:  # no datum in this micro-batch yet
            self.base[part] = self.wm[part]
        return self.wm[part] != before

    def next_idle_step(self) -> float:
        """The wall time (s) of the next possible idle step of any part."""
        policy = self.policy
        assert policy.idle_threshold is not None
        due = [
            max(self.last_data[p] + _td_ms(policy.idle_threshold), t + _td_ms(policy.idle_step))
            for p, t in self.last_step.items()
        ]
        return min(due) / 1000 if due else _now()


def _td_ms(value: timedelta) -> int:
    return value // timedelta(milliseconds=1)


class _DriverReadOffsets:
    """Offsets of a bytewax input read in the planning process.

    ``{"parts": {part: {"n": batches read, "state": snapshot}}, "eof": [parts]}``

    ``until_end``: a part is read until ``StopIteration``, when its ``next_awake``
    says. Otherwise (what is available now) a part is done for this run the first
    time it has nothing at once; it is not marked ended, so a later run reads on.
    """

    def __init__(self, spec: InputSpec, per_batch_epochs: bool, until_end: bool) -> None:
        self.spec = spec
        self.per_batch_epochs = per_batch_epochs
        self.until_end = until_end
        self.sources: dict[str, Any] = {}
        self.states: dict[str, dict] = {}
        self.eof: set[str] = set()
        self.drained: set[str] = set()  # nothing more available now (not until_end)
        self.buffer: dict[str, list[tuple[int, list[Any]]]] = {}  # part -> [(n after, items)]
        self.wake: dict[str, float] = {}  # part -> wall time it may be read again
        self.opened = False
        # Background polling (until_end, not per-batch epochs): one thread, one lock.
        self.lock = threading.RLock()
        self.poller: threading.Thread | None = None
        self.failure: BaseException | None = None
        self.read_ahead = 0  # items read since the last offsets were handed out
        # Numaflow's source watermark (see api/inputs.SourceWatermark), per part.
        policy = spec.input.watermark
        self.marks = _PartMarks(policy) if policy is not None else None

    def _call(self, what: str, fn: Callable[..., Any], *args: Any) -> Any:
        return _calling(self.spec.step_id, what, fn, *args)

    def _parts(self) -> list[str]:
        inp = self.spec.input
        if isinstance(inp, PartitionedInput):
            return list(self._call("list_parts()", inp.list_parts))
        return ["dynamic"]

    def _build(self, part: str, state: Any) -> Any:
        inp = self.spec.input
        if isinstance(inp, PartitionedInput):
            return self._call(f"build_part({part!r})", inp.build_part, part, state)
        assert isinstance(inp, DynamicInput)
        return self._call("build(0, 1)", inp.build, 0, 1)

    def _open(self, start: dict) -> None:
        if self.opened:
            return
        self.opened = True
        begun = start.get("parts", {})
        self.eof = set(start.get("eof", []))
        for part in self._parts():
            pos = begun.get(part, {"n": 0, "state": None})
            self.states[part] = pos
            if self.marks is not None:
                self.marks.open(part, pos.get("wm", MIN_WATERMARK))
            if part not in self.eof:
                state = _unb64(pos["state"]) if pos["state"] else None
                self.sources[part] = self._build(part, state)

    def _snapshot(self, part: str, n: int) -> dict:
        source = self.sources[part]
        snapshot = getattr(source, "snapshot", None)
        state = self._call(f"part {part!r}: snapshot()", snapshot) if snapshot else None
        pos = {"n": n, "state": _b64(state) if state is not None else None}
        if self.marks is not None:
            pos["wm"] = self.marks.wm[part]
        return pos

    def _end_part(self, part: str) -> None:
        self.eof.add(part)
        source = self.sources.pop(part)
        self._call(f"part {part!r}: close()", source.close)

    def _live(self) -> list[str]:
        return [p for p in self.sources if p not in self.drained]

    def _pull(self, part: str, budget: int, deadline: float) -> int:
        """Read ``part`` while it has items at once; never wait for a wake-up."""
        source = self.sources[part]
        got = 0
        while got < budget and _now() < deadline:
            if _now() < self.wake.get(part, 0.0):
                if not self.until_end:
                    self.drained.add(part)
                break
            try:
                items = list(self._call(f"part {part!r}: next_batch()", source.next_batch))
            except StopIteration:
                self._end_part(part)
                break
            awake = self._call(f"part {part!r}: next_awake()", source.next_awake)
            self.wake[part] = _wake_time(awake, bool(items))
            if not items:
                if not self.until_end:
                    self.drained.add(part)
                break
            if self.marks is not None:
                self.marks.read(part, items, self.spec.step_id)
            n = self.states[part]["n"] + 1
            self.states[part] = self._snapshot(part, n)
            self.buffer.setdefault(part, []).append((n, items))
            got += len(items)
            if self.per_batch_epochs:
                break
        return got

    def latest(self, start: dict, budget_items: int) -> dict:
        with self.lock:
            self._open(start)
            if self.failure is not None:
                if self.read_ahead:  # hand out what was read before the failure first
                    self.read_ahead = 0
                    return {"parts": dict(self.states), "eof": sorted(self.eof)}
                raise self.failure
            deadline = _now() + DRIVER_READ_MAX_SECONDS
            budget_items = max(1, budget_items - self.read_ahead)
            for part in self._live():
                got = self._pull(part, budget_items, deadline)
                budget_items = max(1, budget_items - got)
            if self.marks is not None:
                for part in self._live():
                    if self.marks.idle_step(part):
                        self.states[part] = {**self.states[part], "wm": self.marks.wm[part]}
            self.read_ahead = 0
            if self.marks is not None:
                self.marks.seal()
            if self.until_end and not self.per_batch_epochs and self.poller is None:
                self.poller = threading.Thread(target=self._poll, daemon=True)
                self.poller.start()
            return {"parts": dict(self.states), "eof": sorted(self.eof)}

    def _poll(self) -> None:
        """The background poller: read every part when its ``next_awake`` says."""
        while True:
            with self.lock:
                live = self._live()
                if not live or self.failure is not None:
                    return
                try:
                    for part in live:
                        room = BACKGROUND_MAX_ITEMS - self.read_ahead
                        if room > 0 and part in self.sources and _now() >= self.wake.get(part, 0):
                            self.read_ahead += self._pull(part, room, _now() + 0.05)
                except BaseException as exc:  # noqa: BLE001 - raised by the next latest()
                    self.failure = exc
                    return
                wake = self.next_wake()
            pause = (wake or 0.0) - _now()
            time.sleep(min(MAX_WAIT_SECONDS, max(BACKGROUND_POLL_SECONDS, pause)))

    def ended(self, data: dict) -> bool:
        with self.lock:
            return not self._live()

    def next_wake(self) -> float | None:
        """The earliest wall time a live part may have items (``None``: none live)."""
        with self.lock:
            wakes = [self.wake.get(p, 0.0) for p in self._live()]
        if wakes and self.marks is not None and self.marks.policy.idle_threshold is not None:
            wakes.append(self.marks.next_idle_step())
        return min(wakes) if wakes else None

    def watermark(self, data: dict) -> int | None:
        """The least watermark of the parts that have not ended (``None``: all ended)."""
        eof = set(data.get("eof", []))
        live = [
            pos.get("wm", MIN_WATERMARK) for p, pos in data.get("parts", {}).items() if p not in eof
        ]
        return min(live) if live else None

    def splits(self, start: dict, end: dict) -> list[Split]:
        begun = start.get("parts", {})
        out: list[Split] = []
        for part, pos in end.get("parts", {}).items():
            lo = begun.get(part, {"n": 0})["n"]
            if pos["n"] <= lo:
                continue
            with self.lock:
                buffered = [items for n, items in self.buffer.get(part, []) if lo < n <= pos["n"]]
            if len(buffered) != pos["n"] - lo:  # a replay after a restart: read it again
                buffered = self._reread(part, begun.get(part), pos, pos["n"] - lo)
            items = [x for chunk in buffered for x in chunk]
            out.append(_ItemsSplit(encode_items(items), upstream_id(self.spec.step_id, part)))
        return out

    def _reread(self, part: str, pos: dict | None, end: dict, batches: int) -> list[list[Any]]:
        """Read again from the snapshot at ``pos`` up to the one at ``end``: exactly
        to ``end``'s snapshot when the source has ``limit_to``, else ``batches``
        non-empty batches, honouring the source's pacing as the first read did."""
        state = _unb64(pos["state"]) if pos and pos.get("state") else None
        source = self._build(part, state)
        chunks: list[list[Any]] = []
        limit_to = getattr(source, "limit_to", None)
        end_state = _unb64(end["state"]) if limit_to and end.get("state") else None
        if end_state is not None:
            limit_to(end_state)
        try:
            while end_state is not None or len(chunks) < batches:
                if end_state is not None and source.snapshot() == end_state:
                    break
                try:
                    items = list(self._call(f"part {part!r}: next_batch()", source.next_batch))
                except StopIteration:
                    break
                if items:
                    chunks.append(items)
                    continue
                awake = self._call(f"part {part!r}: next_awake()", source.next_awake)
                wake = _wake_time(awake, had_items=False)
                time.sleep(min(MAX_WAIT_SECONDS, max(0.0, wake - _now())))
        finally:
            self._call(f"part {part!r}: close()", source.close)
        return chunks

    def commit(self, end: dict) -> None:
        with self.lock:
            for part, pos in end.get("parts", {}).items():
                self.buffer[part] = [
                    (n, items) for n, items in self.buffer.get(part, []) if n > pos["n"]
                ]


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
                    manager: Any = _SeekableOffsets(
                        inp,
                        spec.per_batch_epochs,
                        spec.parallelism,
                        spec.max_batch_items,
                        spec.until_end,
                        spec.pause_live,
                    )
                else:
                    manager = _DriverReadOffsets(inp, spec.per_batch_epochs, spec.until_end)
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
            now = _now()
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
            pause = (start["t"] + self.trigger_ms) / 1000 - _now()
            if pause > 0:
                time.sleep(pause)
        started = _now()
        data, ended = self._wait_for_data(begun, started)
        now = _ms(_now())
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
            if not isinstance(manager, _SeekableOffsets):
                continue
            step_id = manager.spec.step_id
            if (count := manager.backlog(data.get(entry, {}))) is not None:
                backlog[step_id] = count
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
        if "wm" in end and not end.get("whole"):
            # The flow's watermark; never at or below Spark's first watermark (0), or
            # Spark drops the rows as late, and never WHOLE_INPUT_MS (it means the
            # whole input): NO_WATERMARK_MS stands for "none yet".
            ts = max(end["wm"], NO_WATERMARK_MS)
        begun = start.get("inputs", {})
        parts = []
        for entry, manager in self._managers().items():
            for split in manager.splits(begun.get(entry, {}), end["inputs"].get(entry, {})):
                parts.append(InputPartition((entry, split, ts)))
        if end.get("eof") and not start.get("eof") and not end.get("whole"):
            parts.append(InputPartition((None, _MarkerSplit(), EOF_MS)))
        elif not parts and self.stateful:
            parts.append(InputPartition((None, _MarkerSplit(), ts)))
        return parts

    def commit(self, end: dict) -> None:
        for entry, manager in self._managers().items():
            manager.commit(end["inputs"].get(entry, {}))

    # -- executors ---------------------------------------------------------------

    def read(self, partition: InputPartition) -> Iterator[Any]:
        from flowspark.runtime.task import rows_to_batch, run_program, task_context

        entry, split, ts = partition.value
        if entry is None:
            yield rows_to_batch([MARKER_PORT], [None], [b""], ts)
            return
        program = pickle.loads(self.programs[entry])
        feeds = ((int(entry), items) for items in split.read())
        upstream = getattr(split, "upstream", None)
        yield from run_program(program, feeds, task_context(), self.spread, ts, upstream)


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
