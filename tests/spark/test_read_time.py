"""Lateness is judged at ingest: the system-time part of an event clock advances with
the time an item was read, so a slow micro-batch never makes an on-time item late.

A live input sends one item every 10 ms, its event time the moment it is made; an
event clock waits 1 s for late items. While the first micro-batch is held for
seconds by a slow step, the rest of the input arrives and is read in the background.
Judged at the time the next micro-batch starts, every one of those items would be
seconds behind the clock and dropped as late; judged at the time it was read, none
is, as in bytewax, where no step holds the input for seconds.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from flowspark.dataflow import Dataflow
from flowspark.inputs import DynamicInput, StatelessSource
from flowspark.testing import TestingOutput, run_main
from flowspark.window import EventClockConfig, SystemClockConfig, TumblingWindow

ITEMS = 150
ALIGN = datetime(2024, 1, 1, tzinfo=UTC)


class _Now(StatelessSource):
    """One item every 10 ms: ``("k", the time it was made)``."""

    def __init__(self) -> None:
        self.sent = 0
        self.due = datetime.now(UTC)

    def next_batch(self):
        if self.sent >= ITEMS:
            raise StopIteration
        self.sent += 1
        self.due = datetime.now(UTC) + timedelta(milliseconds=10)
        return [("k", datetime.now(UTC))]

    def next_awake(self):
        return self.due


class _NowInput(DynamicInput):
    def build(self, worker_index, worker_count):
        return _Now()


def _slow_once(marker: Path, seconds: float):
    """A step that holds its first call (in whichever worker) for ``seconds``."""

    def step(item):
        if seconds and not marker.exists():
            marker.touch()
            time.sleep(seconds)
        return item

    return step


def _counted(tmp_path: Path, slow_seconds: float, clock) -> tuple[int, int]:
    """What the windows counted, and how many items came late."""
    counts: list = []
    late: list = []
    flow = Dataflow()
    stream = flow.input("inp", _NowInput()).map(
        "slow", _slow_once(tmp_path / "slowed", slow_seconds)
    )
    windows = stream.fold_window(
        "count",
        clock,
        TumblingWindow(length=timedelta(seconds=1), align_to=ALIGN),
        lambda: 0,
        lambda n, _item: n + 1,
    )
    windows.output("out", TestingOutput(counts))
    windows.late.output("late", TestingOutput(late))
    run_main(flow)
    return sum(n for _key, n in counts), len(late)


@pytest.mark.parametrize(
    "clock",
    [
        EventClockConfig(lambda t: t, wait_for_system_duration=timedelta(seconds=1)),
        SystemClockConfig(),
    ],
    ids=["event_clock", "system_clock"],
)
def test_a_slow_first_micro_batch_makes_no_item_late(tmp_path: Path, clock) -> None:
    kept, late = _counted(tmp_path, slow_seconds=6.0, clock=clock)
    assert (kept, late) == (ITEMS, 0)
