"""The inlined event-clock path of WindowLogic agrees with the general one."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from flowspark.runtime.keyed import KeyedCall
from flowspark.runtime.stateful import WindowLogic
from flowspark.runtime.windowing import EOF_MS, build_clock, build_windower
from flowspark.window import EventClockConfig, SlidingWindow, TumblingWindow

T0 = datetime(2024, 1, 1, tzinfo=UTC)


def _logic(kind: str, window, wait_s: int) -> WindowLogic:
    clock = build_clock(
        EventClockConfig(lambda v: T0 + timedelta(seconds=v), timedelta(seconds=wait_s))
    )
    fns = (
        {"builder": list, "folder": lambda acc, v: [*acc, v]}
        if kind == "fold_window"
        else {"reducer": lambda a, b: a + b}
    )
    return WindowLogic("w", kind, clock, build_windower(window), fns, with_window=True)


def _drive(logic: WindowLogic, batches: list[list[int]], general: bool) -> tuple[list, list]:
    state, emitted, late = None, [], []
    for n, values in enumerate(batches):
        if general:
            out = logic._on_values_general("k", state, values, now=1_000 * n)
        else:
            out = logic.on_values(KeyedCall("k", state, 1_000 * n, values))
        state, emitted, late = out.state, emitted + out.emitted, late + out.late
    out = logic.on_timer(KeyedCall("k", state, EOF_MS))
    return emitted + out.emitted, late


@settings(max_examples=200, deadline=None)
@given(
    batches=st.lists(st.lists(st.integers(-30, 60), max_size=12), max_size=5),
    kind=st.sampled_from(["reduce_window", "fold_window"]),
    window=st.sampled_from(
        [
            TumblingWindow(timedelta(seconds=10), T0),
            SlidingWindow(timedelta(seconds=10), timedelta(seconds=4), T0),
            SlidingWindow(timedelta(seconds=3), timedelta(seconds=5), T0),
        ]
    ),
    wait_s=st.integers(0, 6),
)
def test_fast_path_matches_general_path(batches, kind, window, wait_s):
    logic = _logic(kind, window, wait_s)
    assert logic.fast
    assert _drive(logic, batches, general=False) == _drive(logic, batches, general=True)
