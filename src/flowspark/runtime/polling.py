"""bytewax-style polling of a flow's inputs in the planning process (pure Python: no
pyspark; ``engine/source.py`` is the Spark adapter around it).

bytewax :class:`~flowspark.api.inputs.PartitionedInput` /
:class:`~flowspark.api.inputs.DynamicInput`: the planning process calls
``next_batch`` as bytewax 0.17 does — when ``next_awake()`` says so, ``None``
meaning at once (after 1 ms when the last batch was empty) — and ships the items
inside the partitions; ``StopIteration`` ends a part. Offsets hold the batch count
and ``snapshot()``, and a replayed batch is re-read from the snapshot it started at.
"""

from __future__ import annotations

import base64
import pickle
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import Any, NamedTuple

from flowspark.api.inputs import DynamicInput, PartitionedInput, Split
from flowspark.api.sources import AbortExecution
from flowspark.runtime import pickling
from flowspark.runtime.codec import decode_items, encode_items
from flowspark.runtime.input_offsets import (
    MAX_WAIT_SECONDS,
    InputSpec,
    call_input,
    upstream_id,
    wall_time,
)
from flowspark.runtime.source_watermark import MIN_WATERMARK, PartMarks

__all__ = ["DriverReadOffsets", "ItemsSplit", "wake_time"]

# A driver-read input spends at most this long gathering one micro-batch's items
# (seconds; at most DRIVER_READ_MAX_ITEMS of them, see runtime/input_offsets.py).
DRIVER_READ_MAX_SECONDS = 1.0
# bytewax's cooldown after an empty batch when ``next_awake()`` is None (seconds).
EMPTY_BATCH_COOLDOWN = 0.001
# While Spark runs a micro-batch, a live input that runs until it ends is polled
# in the background (as bytewax polls it between its own work), so an item is read
# when it is due rather than when the next batch is planned; at most this often
# per part (seconds), and at most this many items ahead of the batches.
BACKGROUND_POLL_SECONDS = 0.005
BACKGROUND_MAX_ITEMS = 1_000_000
# Items read within this long of a run's first read share its time (ms): the
# system time a clock judges them at (see :func:`stamp_runs`).
STAMP_QUANTUM_MS = 100


def wake_time(awake: datetime | None, had_items: bool) -> float:
    """When to call ``next_batch`` again, as bytewax 0.17 says: at ``next_awake()``
    (an aware datetime: wall clock), else at once, or after a 1 ms cooldown when
    the last batch was empty."""
    if awake is not None:
        return awake.timestamp()
    return 0.0 if had_items else wall_time() + EMPTY_BATCH_COOLDOWN


class ItemsSplit(Split):
    """Items read on the driver, shipped encoded inside the partition, with the wall
    time (ms) each run of them was read at: ``stamps`` is ``[(count, ms), ...]`` over
    the items in order (``None``: not known, the batch's time stands for them)."""

    def __init__(
        self, data: bytes, upstream: int | None = None, stamps: list[tuple[int, int]] | None = None
    ) -> None:
        self.data = data
        self.upstream = upstream
        self.stamps = stamps

    def read(self) -> Iterator[Any]:
        yield decode_items(self.data)

    def read_stamped(self) -> Iterator[tuple[int | None, Sequence[Any]]]:
        """``(read time in ms or None, items)`` runs, in order.

        >>> split = ItemsSplit(encode_items([1, 2, 3]), stamps=[(2, 10), (1, 250)])
        >>> [(ms, list(items)) for ms, items in split.read_stamped()]
        [(10, [1, 2]), (250, [3])]
        """
        items = decode_items(self.data)
        if not self.stamps:
            yield None, items
            return
        at = 0
        for count, ms in self.stamps:
            yield ms, items[at : at + count]
            at += count
        if at < len(items):
            yield None, items[at:]


def _b64(obj: Any) -> str:
    return base64.b64encode(pickling.dumps(obj)).decode("ascii")


def _unb64(text: str) -> Any:
    return pickle.loads(base64.b64decode(text))


class _Read(NamedTuple):
    """One non-empty ``next_batch`` read in the planning process: its number in the
    part, its items, the wall time it was read at (ms) and the part's position after
    it (``{"n", "state"[, "wm"]}``)."""

    n: int
    items: list[Any]
    at_ms: int
    pos: dict


def _position(pos: dict | None) -> tuple[int, int]:
    """``(batches, items of the next batch)`` an offset says were handed out."""
    return (pos["n"], pos.get("k", 0)) if pos else (0, 0)


def _read_state(pos: dict) -> dict:
    """A handed-out offset without what only the hand-out needs (stamps, a cut)."""
    return {k: v for k, v in pos.items() if k not in ("k", "at")}


def stamp_runs(reads: list[_Read]) -> list[list[int]]:
    """The read times of ``reads`` as ``[[n, ms], ...]``: from batch ``n`` on, items
    were read at ``ms``, until the next entry. Reads less than ``STAMP_QUANTUM_MS``
    after a run's first share its time (the earlier one: an item is never judged
    as read later than it was).

    >>> reads = [_Read(n, [n], at, {}) for n, at in [(1, 1000), (2, 1050), (3, 1300)]]
    >>> stamp_runs(reads)
    [[1, 1000], [3, 1300]]
    """
    runs: list[list[int]] = []
    for read in reads:
        if not runs or read.at_ms - runs[-1][1] >= STAMP_QUANTUM_MS:
            runs.append([read.n, read.at_ms])
    return runs


def stamp_of(runs: list[list[int]] | None, n: int) -> int | None:
    """The read time ``runs`` (see :func:`stamp_runs`) give batch ``n`` (``None``: none).

    >>> stamp_of([[1, 1000], [3, 1300]], 2), stamp_of([[1, 1000], [3, 1300]], 5)
    (1000, 1300)
    """
    found = None
    for first, ms in runs or []:
        if first > n:
            break
        found = ms
    return found


class DriverReadOffsets:
    """Offsets of a bytewax input read in the planning process.

    ``{"parts": {part: {"n": batches, "state": snapshot[, "k": items, "at": stamps]}},
    "eof": [parts]}``: ``n`` whole source batches and the first ``k`` items of the
    next one were handed out (``k``: a batch cut by ``max_batch_items``), ``state``
    is the part's snapshot after batch ``n``, and ``at`` the read times of the
    batches this offset adds (:func:`stamp_runs`), kept so a replay stamps its items
    as the first attempt did.

    ``until_end``: a part is read until ``StopIteration``, when its ``next_awake``
    says. Otherwise (what is available now) a part is done for this run the first
    time it has nothing at once; it is not marked ended, so a later run reads on.
    """

    def __init__(
        self,
        spec: InputSpec,
        per_batch_epochs: bool,
        until_end: bool,
        max_batch_items: int | None = None,
    ) -> None:
        self.spec = spec
        self.per_batch_epochs = per_batch_epochs
        self.until_end = until_end
        self.cap = max_batch_items  # the most items one micro-batch takes from this input
        self.sources: dict[str, Any] = {}
        self.states: dict[str, dict] = {}  # part -> position after its last read
        self.eof: set[str] = set()
        self.drained: set[str] = set()  # nothing more available now (not until_end)
        self.buffer: dict[str, list[_Read]] = {}  # reads not yet committed
        self.wake: dict[str, float] = {}  # part -> wall time it may be read again
        self.opened = False
        # Background polling (until_end, not per-batch epochs): one thread, one lock.
        self.lock = threading.RLock()
        self.poller: threading.Thread | None = None
        self.failure: BaseException | None = None
        self.read_ahead = 0  # items read since the last offsets were handed out
        # Numaflow's source watermark (see api/inputs.SourceWatermark), per part.
        policy = spec.input.watermark
        self.marks = PartMarks(policy) if policy is not None else None

    def _call(self, what: str, fn: Callable[..., Any], *args: Any) -> Any:
        return call_input(self.spec.step_id, what, fn, *args)

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
            pos = _read_state(begun.get(part, {"n": 0, "state": None}))
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
        while got < budget and wall_time() < deadline:
            if wall_time() < self.wake.get(part, 0.0):
                if not self.until_end:
                    self.drained.add(part)
                break
            try:
                items = list(self._call(f"part {part!r}: next_batch()", source.next_batch))
            except StopIteration:
                self._end_part(part)
                break
            except Exception as exc:
                if not isinstance(exc.__cause__, AbortExecution):
                    raise
                # The part stops the run: what was read before is handed out (and
                # committed) first, then latest() raises it and the query ends.
                self.failure = exc
                break
            at_ms = int(wall_time() * 1000)  # when the item was read: its system time
            awake = self._call(f"part {part!r}: next_awake()", source.next_awake)
            self.wake[part] = wake_time(awake, bool(items))
            if not items:
                if not self.until_end:
                    self.drained.add(part)
                break
            if self.marks is not None:
                self.marks.read(part, items, self.spec.step_id)
            n = self.states[part]["n"] + 1
            self.states[part] = self._snapshot(part, n)
            self.buffer.setdefault(part, []).append(_Read(n, items, at_ms, self.states[part]))
            got += len(items)
            if self.per_batch_epochs:
                break
        return got

    def _pending(self, begun: dict) -> int:
        """Items read but not handed out by the offsets ``begun``."""
        total = 0
        for part, reads in self.buffer.items():
            n, k = _position(begun.get(part))
            total += sum(len(r.items) - (k if r.n == n + 1 else 0) for r in reads if r.n > n)
        return total

    def latest(self, start: dict, budget_items: int) -> dict:
        with self.lock:
            self._open(start)
            begun = start.get("parts", {})
            # Spark plans a batch only once the one before it is committed: what
            # ``start`` hands out is in committed micro-batches.
            self._acknowledge(begun)
            if self.failure is not None:
                if self._pending(begun):  # hand out what was read before the failure first
                    self.read_ahead = 0
                    return self._hand_out(begun)
                raise self.failure
            pending = self._pending(begun)
            if self.cap is None or pending < self.cap:
                deadline = wall_time() + DRIVER_READ_MAX_SECONDS
                wanted = budget_items if self.cap is None else self.cap
                budget_items = max(1, wanted - max(self.read_ahead, pending))
                for part in self._live():
                    got = self._pull(part, budget_items, deadline)
                    budget_items = max(1, budget_items - got)
                    if self.failure is not None:  # an abort: read no further
                        break
                if self.failure is not None and not self._pending(begun):
                    raise self.failure
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
            return self._hand_out(begun)

    def _hand_out(self, begun: dict) -> dict:
        """The offsets after what ``begun`` handed out: every read since, or as many
        items as the cap allows (cutting a source batch when it must)."""
        room = self.cap
        parts: dict[str, dict] = {}
        behind: set[str] = set()  # parts whose reads are not all handed out
        for part, state in self.states.items():
            known = begun.get(part)
            n, k = _position(known)
            beyond = [r for r in self.buffer.get(part, []) if r.n > n]
            if not beyond:
                # Nothing new: the offset handed out before, unless the part's own
                # position moved (a watermark step of an idle part).
                parts[part] = known if known and _read_state(known) == state else state
                continue
            initial = known or {"n": 0, "state": None}
            taken: list[_Read] = []
            end: dict = initial
            for read in beyond:
                skip = k if read.n == n + 1 else 0
                size = len(read.items) - skip
                if room is not None and size > room:
                    if room > 0:  # a cut: ``room`` more items of this batch
                        taken.append(read)
                        before = taken[-2].pos if len(taken) > 1 else initial
                        end = {**_read_state(before), "k": skip + room}
                        room = 0
                    break
                taken.append(read)
                end = read.pos
                if room is not None:
                    room -= size
            if not taken or taken[-1] is not beyond[-1] or "k" in end:
                behind.add(part)
            if not taken:  # no room left in this micro-batch
                parts[part] = initial
                continue
            parts[part] = {**end, "at": stamp_runs(taken)}
        # A part that ended is said to have ended once all it read is handed out: a
        # restart must build it again to read the rest.
        return {"parts": parts, "eof": sorted(self.eof - behind)}

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
                        if (
                            room > 0
                            and part in self.sources
                            and wall_time() >= self.wake.get(part, 0)
                        ):
                            self.read_ahead += self._pull(part, room, wall_time() + 0.05)
                except BaseException as exc:  # noqa: BLE001 - raised by the next latest()
                    self.failure = exc
                    return
                wake = self.next_wake()
            pause = (wake or 0.0) - wall_time()
            time.sleep(min(MAX_WAIT_SECONDS, max(BACKGROUND_POLL_SECONDS, pause)))

    def ended(self, data: dict) -> bool:
        """Whether every part has ended and ``data`` hands out all that was read."""
        with self.lock:
            if self._live():
                return False
            parts = data.get("parts", {})
            for part, reads in self.buffer.items():
                n, k = _position(parts.get(part))
                if any(r.n > n for r in reads):
                    return False
            return True

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
            n0, k0 = _position(begun.get(part))
            n1, k1 = _position(pos)
            if (n1, k1) <= (n0, k0):
                continue
            last = n1 + 1 if k1 else n1  # the last batch some of whose items are in
            with self.lock:
                buffered = [r.items for r in self.buffer.get(part, []) if n0 < r.n <= last]
            if len(buffered) != last - n0:  # a replay after a restart: read it again
                buffered = self._reread(part, begun.get(part), pos, last - n0, exact=not k1)
            items: list[Any] = []
            runs: list[tuple[int, int]] = []
            for n, chunk in enumerate(buffered, start=n0 + 1):
                piece = chunk[k0 if n == n0 + 1 else 0 : k1 if k1 and n == last else None]
                items.extend(piece)
                ms = stamp_of(pos.get("at"), n)
                if ms is None:
                    continue
                if runs and runs[-1][1] == ms:
                    runs[-1] = (runs[-1][0] + len(piece), ms)
                else:
                    runs.append((len(piece), ms))
            stamps = runs if runs and sum(c for c, _ in runs) == len(items) else None
            upstream = upstream_id(self.spec.step_id, part)
            out.append(ItemsSplit(encode_items(items), upstream, stamps))
        return out

    def _reread(
        self, part: str, pos: dict | None, end: dict, batches: int, exact: bool = True
    ) -> list[list[Any]]:
        """Read again from the snapshot at ``pos``: up to the one at ``end`` when the
        source has ``limit_to`` (and ``exact``: ``end`` is not within a batch), else
        ``batches`` non-empty batches, honouring the source's pacing as the first
        read did."""
        state = _unb64(pos["state"]) if pos and pos.get("state") else None
        source = self._build(part, state)
        chunks: list[list[Any]] = []
        limit_to = getattr(source, "limit_to", None) if exact else None
        end_state = _unb64(end["state"]) if limit_to and end.get("state") else None
        if end_state is not None and limit_to is not None:
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
                wake = wake_time(awake, had_items=False)
                time.sleep(min(MAX_WAIT_SECONDS, max(0.0, wake - wall_time())))
        finally:
            self._call(f"part {part!r}: close()", source.close)
        return chunks

    def commit(self, end: dict) -> None:
        with self.lock:
            for part, pos in end.get("parts", {}).items():
                self.buffer[part] = [r for r in self.buffer.get(part, []) if r.n > pos["n"]]
            self._acknowledge(end.get("parts", {}))

    def _acknowledge(self, positions: dict) -> None:
        """Tell each open part that has a ``committed`` hook (see
        :class:`~flowspark.api.inputs.StatefulSource`) that what it read up to its
        position in ``positions`` is committed."""
        for part, pos in positions.items():
            hook = getattr(self.sources.get(part), "committed", None)
            if hook is not None and pos.get("state"):
                self._call(f"part {part!r}: committed()", hook, _unb64(pos["state"]))

    def backlog(self, data: dict) -> int | None:
        """The items waiting at the source, summed over the parts that have a
        ``pending`` hook (``None``: no part knows)."""
        counts = []
        with self.lock:
            for part, source in self.sources.items():
                hook = getattr(source, "pending", None)
                if hook is not None:
                    counts.append(self._call(f"part {part!r}: pending()", hook))
        known = [c for c in counts if c is not None]
        return sum(known) if known else None
