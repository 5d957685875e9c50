"""A keyed window step over known input, for the tests that watch a run: ``(key, hour)``
items counted per key in windows of 5 hours from ``T0``; items whose window has closed go
to the late output."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from flowspark.dataflow import Dataflow
from flowspark.testing import TestingInput, TestingOutput
from flowspark.window import EventClockConfig, TumblingWindow

T0 = datetime(2024, 1, 1, tzinfo=UTC)


def hourly_counts(
    name: str, items: list[tuple[str, int]], batch_size: int, out: list[Any], late: list[Any]
) -> Dataflow:
    """Flow ``name``: ``inp`` -> ``count`` (a fold_window) -> ``out``, and its late items
    -> ``late``."""
    flow = Dataflow(name)
    s = flow.input("inp", TestingInput(items, batch_size=batch_size))
    clock = EventClockConfig(
        lambda hour: T0 + timedelta(hours=hour), wait_for_system_duration=timedelta(0)
    )
    windows = TumblingWindow(length=timedelta(hours=5), align_to=T0)
    counted = s.fold_window("count", clock, windows, lambda: 0, lambda n, _: n + 1)
    counted.output("out", TestingOutput(out))
    counted.late.output("late", TestingOutput(late))
    return flow
