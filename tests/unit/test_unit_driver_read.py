"""bytewax-style inputs read in the planning process: ``--max-batch-items`` cuts a
source's batch where it must, a replay after a restart reads exactly what the first
attempt handed out, and every run of items keeps the wall time it was read at."""

from __future__ import annotations

from flowspark.inputs import PartitionedInput, StatefulSource
from flowspark.runtime.input_offsets import InputSpec
from flowspark.runtime.polling import DriverReadOffsets, stamp_runs


class _Counting(StatefulSource):
    """``batches`` source batches of ``size`` items each: 0, 1, 2, ..."""

    def __init__(self, batches: int, size: int, resume: int | None) -> None:
        self.batches, self.size = batches, size
        self.i = resume or 0

    def next_batch(self):
        if self.i >= self.batches:
            raise StopIteration
        self.i += 1
        return list(range((self.i - 1) * self.size, self.i * self.size))

    def snapshot(self):
        return self.i


class _Counts(PartitionedInput):
    def __init__(self, batches: int = 4, size: int = 7) -> None:
        self.batches, self.size = batches, size

    def list_parts(self):
        return ["p"]

    def build_part(self, for_part, resume_state):
        return _Counting(self.batches, self.size, resume_state)


def _offsets(inp: PartitionedInput, cap: int | None) -> DriverReadOffsets:
    spec = InputSpec(inp, entry=0, step_id="inp", program=b"")
    return DriverReadOffsets(spec, per_batch_epochs=False, until_end=False, max_batch_items=cap)


def _items(offsets: DriverReadOffsets, start: dict, end: dict) -> list[int]:
    return [x for split in offsets.splits(start, end) for x in next(iter(split.read()))]


def _drain(offsets: DriverReadOffsets) -> list[tuple[dict, dict]]:
    """Every micro-batch's ``(start, end)`` offsets until nothing more comes."""
    batches, start = [], {}
    while True:
        end = offsets.latest(start, 1_000_000)
        if end["parts"] == start.get("parts"):
            return batches
        batches.append((start, end))
        offsets.commit(end)
        start = end


def test_a_cap_cuts_source_batches_and_every_item_comes_once() -> None:
    offsets = _offsets(_Counts(batches=4, size=7), cap=5)
    batches = _drain(offsets)
    sizes = []
    seen: list[int] = []
    for start, end in batches:
        items = _items(offsets, start, end)
        sizes.append(len(items))
        seen.extend(items)
    assert seen == list(range(28))
    assert sizes == [5, 5, 5, 5, 5, 3]


def test_a_replay_of_a_cut_batch_reads_the_same_items_from_the_snapshot() -> None:
    first = _offsets(_Counts(batches=4, size=7), cap=5)
    batches = _drain(first)
    expected = [_items(first, start, end) for start, end in batches]
    # A new process (a restart): nothing buffered, each batch is read again from
    # the snapshot its start offsets hold.
    for (start, end), items in zip(batches, expected, strict=True):
        again = _offsets(_Counts(batches=4, size=7), cap=5)
        assert _items(again, start, end) == items


def test_without_a_cap_one_micro_batch_takes_everything_read() -> None:
    offsets = _offsets(_Counts(batches=4, size=7), cap=None)
    batches = _drain(offsets)
    assert [len(_items(offsets, s, e)) for s, e in batches] == [28]


def test_read_times_travel_in_the_offsets_and_stamp_the_items() -> None:
    offsets = _offsets(_Counts(batches=3, size=2), cap=None)
    end = offsets.latest({}, 1_000_000)
    runs = end["parts"]["p"]["at"]
    assert runs and runs[0][0] == 1  # from the first batch on
    (split,) = offsets.splits({}, end)
    stamped = list(split.read_stamped())
    assert sum(len(items) for _, items in stamped) == 6
    assert all(ms is not None and ms == runs[0][1] for ms, _ in stamped[:1])
    # A replay stamps with the times the offsets kept, not with its own.
    again = _offsets(_Counts(batches=3, size=2), cap=None)
    (replayed,) = again.splits({}, end)
    assert [(ms, list(items)) for ms, items in replayed.read_stamped()] == [
        (ms, list(items)) for ms, items in stamped
    ]


def test_stamp_runs_keep_the_earliest_time_of_reads_close_together() -> None:
    from flowspark.runtime.polling import _Read

    reads = [_Read(n, [n], at, {}) for n, at in [(1, 0), (2, 99), (3, 100), (4, 150), (5, 400)]]
    assert stamp_runs(reads) == [[1, 0], [3, 100], [5, 400]]


def test_a_part_that_ended_with_reads_held_back_by_the_cap_is_read_again_after_a_restart():
    offsets = _offsets(_Counts(batches=3, size=2), cap=2)
    first = offsets.latest({}, 1_000_000)
    # The background poller reads the rest and the part's end meanwhile.
    offsets._pull("p", 100, deadline=float("inf"))
    assert offsets.eof == {"p"}
    second = offsets.latest(first, 1_000_000)
    # Only 2 more items are handed out: the offsets must not say the part ended, or
    # a restart would never read the rest.
    assert second["eof"] == []
    seen = _items(offsets, {}, first) + _items(offsets, first, second)
    again = _offsets(_Counts(batches=3, size=2), cap=2)  # a restart from ``second``
    start = second
    while True:
        end = again.latest(start, 1_000_000)
        if end == start:
            break
        seen.extend(_items(again, start, end))
        again.commit(end)
        start = end
    assert seen == list(range(6))
    assert start["eof"] == ["p"]
