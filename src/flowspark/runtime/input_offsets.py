"""Offsets of a flow's inputs, planned in the planning process (pure Python: it
runs in Spark's planning process but needs no pyspark; ``engine/source.py`` is the
Spark adapter around it).

A :class:`~flowspark.api.inputs.SeekableInput` has integer offsets per part: the
planning process computes them (:class:`SeekableOffsets`), executors read the
data in parallel splits. Such an input ends at the end offsets it has when the run
first looks. bytewax's inputs are polled in the planning process instead
(``runtime/polling.py``).

Time base: the input path has ONE clock, the wall clock (:func:`wall_time`:
``time.time()``, seconds since the epoch, UTC). ``next_awake()`` datetimes,
wake-ups, waits, per-batch budgets and the rows' time are all on it.
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from flowspark.api.inputs import Input, SeekableInput, Split
from flowspark.runtime.errors import step_failure

__all__ = [
    "DRIVER_READ_MAX_ITEMS",
    "MAX_WAIT_SECONDS",
    "InputSpec",
    "PartSplit",
    "SeekableOffsets",
    "call_input",
    "wall_time",
    "upstream_id",
    "whole_input_splits",
]

# A driver-read input reads at most this many items into one micro-batch.
DRIVER_READ_MAX_ITEMS = 1_000_000
# The longest one ``latestOffset`` call waits for an input that has nothing yet
# (seconds); then a clock tick (a batch without data) keeps the query alive, so
# Ctrl-C and ``query.stop()`` never wait longer than this.
MAX_WAIT_SECONDS = 1.0


@dataclass
class InputSpec:
    """One flow input as the reader needs it."""

    input: Input
    entry: int  # plan index of the input step
    step_id: str
    program: bytes  # cloudpickled StageProgram of level 0 for this input


def wall_time() -> float:
    """The input path's one clock: wall time in seconds since the epoch (UTC)."""
    return time.time()


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


class PartSplit(Split):
    """A seekable input's split, with the upstream id of the part it reads."""

    def __init__(self, split: Split, upstream: int) -> None:
        self.split = split
        self.upstream = upstream

    def read(self) -> Iterator[Any]:
        return self.split.read()


def call_input(step_id: str, what: str, fn: Callable[..., Any], *args: Any) -> Any:
    """Call the user's input code; a failure names the input step and the part."""
    try:
        return fn(*args)
    except StopIteration:
        raise
    except Exception as exc:
        raise step_failure(step_id, fn, what, exc) from exc


class SeekableOffsets:
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
            parts = call_input(self.spec.step_id, "list_parts()", inp.list_parts)
            self.target = {
                p: call_input(self.spec.step_id, f"part {p!r}: end_offset()", inp.end_offset, p)
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
                    # A per-batch cap over all parts: at most ``budget_items`` more.
                    if budget_items <= 0:
                        e = s
                    else:
                        e, taken = self.input.offset_after_items(part, s, e, budget_items)
                        budget_items -= taken
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
            return wall_time() + self.input.poll_interval.total_seconds()
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
                out.append(PartSplit(split, upstream_id(self.spec.step_id, part, piece)))
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
    offsets = SeekableOffsets(spec, False, parallelism, max_batch_items, until_end)
    budget = max_batch_items or DRIVER_READ_MAX_ITEMS
    begin: dict = {}
    first = offsets.latest(begin, budget)
    if any(first["parts"][p] == inp.start_offset(p) != 0 for p in first["parts"]):
        begin, first = first, offsets.latest(first, budget)  # its start, then its data
    if not offsets.ended(first):
        return None
    return offsets.splits(begin, first)
