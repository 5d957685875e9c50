"""Late items are counted and reported when no step consumes them."""

from __future__ import annotations

import warnings
from datetime import UTC, datetime, timedelta

import pytest

from flowspark.dataflow import Dataflow
from flowspark.engine.query import LateItemsWarning
from flowspark.testing import TestingInput, TestingOutput, run_main
from flowspark.window import EventClockConfig, TumblingWindow

T0 = datetime(2022, 1, 1, tzinfo=UTC)
EVENTS = [("k", T0 + timedelta(seconds=t)) for t in [0, 12, 3, 25, 1]]


def _window(stream):
    clock = EventClockConfig(lambda t: t, timedelta(0))
    return stream.collect_window("win", clock, TumblingWindow(timedelta(seconds=10), T0))


def test_unrouted_late_items_are_reported():
    flow = Dataflow()
    out: list = []
    _window(flow.input("inp", TestingInput(EVENTS))).output("out", TestingOutput(out))
    with pytest.warns(LateItemsWarning, match="'win' dropped 2 late item"):
        run_main(flow)
    assert sorted(len(values) for _, values in out) == [1, 1, 1]


def test_routed_late_items_are_not_warned_about():
    flow = Dataflow()
    out: list = []
    late: list = []
    windows = _window(flow.input("inp", TestingInput(EVENTS)))
    windows.output("out", TestingOutput(out))
    windows.late.output("late", TestingOutput(late))
    with warnings.catch_warnings():
        warnings.simplefilter("error", LateItemsWarning)
        run_main(flow)
    assert sorted(t for _, t in late) == [T0 + timedelta(seconds=1), T0 + timedelta(seconds=3)]
