"""Numaflow's source watermark per input part (runtime/source_watermark.PartMarks), on a
fake clock; no pyspark."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from flowspark.api.inputs import SourceWatermark
from flowspark.api.udf.types import Datum
from flowspark.runtime import source_watermark
from flowspark.runtime.source_watermark import MIN_WATERMARK, PartMarks

T0 = datetime(2024, 1, 1, tzinfo=UTC)
T0_MS = int(T0.timestamp() * 1000)
SEC = timedelta(seconds=1)


@pytest.fixture
def clock(monkeypatch):
    now = [T0.timestamp() + 1000.0]
    monkeypatch.setattr(source_watermark, "wall_time", lambda: now[0])
    return now


def opened(part: str, **policy: timedelta) -> PartMarks:
    """The marks of ``SourceWatermark(**policy)`` with ``part`` open, without a watermark yet."""
    marks = PartMarks(SourceWatermark(**policy))
    marks.open(part, MIN_WATERMARK)
    return marks


def _at(seconds: float) -> Datum:
    at = T0 + timedelta(seconds=seconds)
    return Datum(["k"], b"v", at, at, {}, id=str(seconds))


def test_a_part_watermark_is_the_least_event_time_of_each_batch_minus_max_delay(clock):
    marks = opened("p", max_delay=timedelta(seconds=2))
    marks.read("p", [_at(10), _at(7), _at(12)], "inp")
    assert marks.wm["p"] == T0_MS + 5_000
    marks.seal()
    marks.read("p", [_at(3)], "inp")  # never goes back
    assert marks.wm["p"] == T0_MS + 5_000
    marks.seal()
    marks.read("p", [_at(20), _at(30)], "inp")
    assert marks.wm["p"] == T0_MS + 18_000


def test_every_pull_of_one_micro_batch_counts_for_its_watermark(clock):
    # Two pulls make one micro-batch: its watermark is the least over both, so no
    # datum of the batch is behind the watermark the batch is handed with.
    marks = opened("p")
    marks.read("p", [_at(1), _at(3)], "inp")
    marks.read("p", [_at(5), _at(9)], "inp")
    assert marks.wm["p"] == T0_MS + 1_000
    marks.seal()  # the next micro-batch
    marks.read("p", [_at(5), _at(9)], "inp")
    assert marks.wm["p"] == T0_MS + 5_000
    marks.read("p", [_at(7)], "inp")
    assert marks.wm["p"] == T0_MS + 5_000


def test_items_without_event_time_are_refused_naming_the_input(clock):
    marks = opened("p")
    with pytest.raises(TypeError, match="input 'inp' has a source watermark"):
        marks.read("p", [("k", 1)], "inp")


def test_an_idle_part_moves_by_increment_every_step_never_past_now(clock):
    marks = opened("p", idle_threshold=SEC, idle_step=SEC / 10, idle_increment=5 * SEC)
    start = clock[0]
    marks.read("p", [_at(0)], "inp")
    clock[0] = start + 0.5
    assert not marks.idle_step("p")  # not idle yet
    clock[0] = start + 1.0
    assert marks.idle_step("p") and marks.wm["p"] == T0_MS + 5_000
    clock[0] = start + 1.05
    assert not marks.idle_step("p")  # within the step interval
    clock[0] = start + 1.2
    assert marks.idle_step("p") and marks.wm["p"] == T0_MS + 10_000
    marks.wm["p"] = int(clock[0] * 1000) - 1_000  # close to now: capped at now
    clock[0] += 0.2
    assert marks.idle_step("p") and marks.wm["p"] == int(clock[0] * 1000)


def test_a_part_that_never_had_data_takes_now_after_the_init_source_delay(clock):
    marks = opened("q", idle_threshold=SEC, idle_increment=SEC, init_source_delay=2 * SEC)
    start = clock[0]
    clock[0] = start + 1.5
    assert not marks.idle_step("q") and marks.wm["q"] == MIN_WATERMARK
    clock[0] = start + 2.0
    assert marks.idle_step("q") and marks.wm["q"] == int(clock[0] * 1000)
    without = opened("q", idle_threshold=SEC)
    clock[0] += 100
    assert not without.idle_step("q") and without.wm["q"] == MIN_WATERMARK
