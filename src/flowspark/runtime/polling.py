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
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

from flowspark.api.inputs import DynamicInput, PartitionedInput, Split
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


def wake_time(awake: datetime | None, had_items: bool) -> float:
    """When to call ``next_batch`` again, as bytewax 0.17 says: at ``next_awake()``
    (an aware datetime: wall clock), else at once, or after a 1 ms cooldown when
    the last batch was empty."""
    if awake is not None:
        return awake.timestamp()
    return 0.0 if had_items else wall_time() + EMPTY_BATCH_COOLDOWN


class ItemsSplit(Split):
    """Items read on the driver, shipped encoded inside the partition."""

    def __init__(self, data: bytes, upstream: int | None = None) -> None:
        self.data = data
        self.upstream = upstream

    def read(self) -> Iterator[Any]:
        yield decode_items(self.data)


def _b64(obj: Any) -> str:
    return base64.b64encode(pickling.dumps(obj)).decode("ascii")


def _unb64(text: str) -> Any:
    return pickle.loads(base64.b64decode(text))


class DriverReadOffsets:
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
            deadline = wall_time() + DRIVER_READ_MAX_SECONDS
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
            out.append(ItemsSplit(encode_items(items), upstream_id(self.spec.step_id, part)))
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
                self.buffer[part] = [
                    (n, items) for n, items in self.buffer.get(part, []) if n > pos["n"]
                ]
