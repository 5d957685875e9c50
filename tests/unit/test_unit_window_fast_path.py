"""The inlined event-clock paths agree with the general ones: 0.17's WindowLogic, and
0.21's WindowRun folding straight into accumulators."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowspark.api import windowing as w021
from flowspark.operators.windowing import FoldWindowBuilder
from flowspark.runtime.errors import RemoteStepFailure, find_step_error
from flowspark.runtime.keyed import KeyedCall
from flowspark.runtime.stateful import WindowLogic
from flowspark.runtime.window_run import WindowRun
from flowspark.runtime.windowing import EOF_MS, build_clock, build_windower
from flowspark.window import EventClockConfig, SlidingWindow, TumblingWindow

T0 = datetime(2024, 1, 1, tzinfo=UTC)
NOW_MS = 1_717_200_000_000


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


# -- bytewax 0.21's window kind: WindowRun's one-pass fold agrees with its logics ------


class _AsLogics:
    """A fold builder without ``fold_fns``: WindowRun takes its general path."""

    def __init__(self, builder: FoldWindowBuilder) -> None:
        self.builder = builder

    def __call__(self, resume: Any) -> Any:
        return self.builder(resume)


def _drive_run(run: WindowRun, calls: list[tuple[str, int, list[int]]]) -> list[Any]:
    """Feed ``("values" | "timer", seconds since start, values)`` calls, then the end;
    every outcome as plain data."""
    seen: list[Any] = []
    state = None
    for what, second, values in calls:
        now = NOW_MS + 1_000 * second
        if what == "values":
            out = run.on_values(KeyedCall("k", state, now, [(v, n) for n, v in enumerate(values)]))
        else:
            out = run.on_timer(KeyedCall("k", state, now))
        # a copy: the next call may change the state in place, as the engine allows
        seen.append(copy.deepcopy((out.emitted, out.late, out.wake, out.state)))
        state = out.state
    out = run.on_timer(KeyedCall("k", state, EOF_MS))
    seen.append((out.emitted, out.late, out.wake, out.state))
    return seen


@settings(max_examples=200, deadline=None)
@given(
    calls=st.lists(
        st.tuples(
            st.sampled_from(["values", "values", "timer"]),
            st.integers(0, 40),
            st.lists(st.integers(-30, 60), max_size=10),
        ).map(lambda c: (c[0], c[1], c[2] if c[0] == "values" else [])),
        max_size=6,
    ).map(lambda calls: sorted(calls, key=lambda c: c[1])),
    windower=st.sampled_from(
        [
            w021.TumblingWindower(timedelta(seconds=10), T0),
            w021.SlidingWindower(timedelta(seconds=10), timedelta(seconds=4), T0),
            w021.SlidingWindower(
                timedelta(seconds=6), timedelta(seconds=6), T0 + timedelta(seconds=1)
            ),
        ]
    ),
    wait_s=st.integers(-2, 6),
    how=st.sampled_from(["list", "sum", "reduce"]),
)
def test_window_run_one_pass_fold_matches_its_window_logics(calls, windower, wait_s, how):
    clock = w021.EventClock(lambda v: T0 + timedelta(seconds=v[0]), timedelta(seconds=wait_s))
    builder = {
        "list": FoldWindowBuilder(list, lambda acc, v: [*acc, v], list.__add__),
        "sum": FoldWindowBuilder(int, lambda acc, v: acc + v[0], int.__add__),
        # reduce_window's: None until the first value
        "reduce": FoldWindowBuilder(lambda: None, lambda acc, v: v if acc is None else acc, max),
    }[how]
    fast = WindowRun("w", clock, windower, builder, False)
    general = WindowRun("w", clock, windower, _AsLogics(builder), False)
    assert fast.fold_fns is not None and general.fold_fns is None
    assert _drive_run(fast, calls) == _drive_run(general, calls)


def test_window_run_one_pass_fold_only_where_it_is_the_same() -> None:
    builder = FoldWindowBuilder(int, lambda acc, _v: acc + 1, int.__add__)
    clock = w021.EventClock(lambda v: v, timedelta(0))
    tumbling = w021.TumblingWindower(timedelta(seconds=10), T0)
    assert WindowRun("w", clock, tumbling, builder, False).fold_fns is not None
    assert WindowRun("w", clock, tumbling, builder, True).fold_fns is None  # ordered: queued
    sessions = w021.SessionWindower(timedelta(seconds=10))
    assert WindowRun("w", clock, sessions, builder, False).fold_fns is None  # merges
    assert WindowRun("w", w021.SystemClock(), tumbling, builder, False).fold_fns is None


# -- a failure on the fast paths names the step, the getter and the item -------------


def _event_time(v: Any) -> datetime:
    return {"late": T0, "naive": datetime(2024, 1, 1)}[v]  # KeyError for anything else


@pytest.mark.parametrize(
    ("bad", "cause"), [("broken", KeyError), ("naive", ValueError), ({"t": 1}, TypeError)]
)
@pytest.mark.parametrize("runner", ["0.17 fold_window", "0.21 fold_window"])
def test_fast_path_event_time_failure_names_the_getter_and_the_item(runner, bad, cause):
    values = ["late", bad, "late"]
    if runner == "0.17 fold_window":
        window = TumblingWindow(timedelta(seconds=10), T0)
        fns = {"builder": list, "folder": lambda acc, v: [*acc, v]}
        logic: Any = WindowLogic(
            "w",
            "fold_window",
            build_clock(EventClockConfig(_event_time, timedelta(0))),
            build_windower(window),
            fns,
            with_window=True,
        )
        assert logic.fast
    else:
        builder = FoldWindowBuilder(list, lambda acc, v: [*acc, v], list.__add__)
        clock = w021.EventClock(lambda v: _event_time(v[0]), timedelta(0))
        logic = WindowRun(
            "w", clock, w021.TumblingWindower(timedelta(seconds=10), T0), builder, False
        )
        assert logic.fold_fns is not None
        values = [(v, n) for n, v in enumerate(values)]
    with pytest.raises(RemoteStepFailure) as info:
        logic.on_values(KeyedCall("k", None, NOW_MS, values))
    error = find_step_error(str(info.value))
    assert error is not None
    assert error.step_id == "w"
    assert ("_event_time" if runner.startswith("0.17") else "<lambda>") in error.function
    assert repr(bad)[:20] in error.item
    assert isinstance(error.__cause__, cause)
